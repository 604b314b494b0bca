"""The traces reader decides from a line's text when its values cannot hold a problem (issue 9: the walk of
:func:`json_value_problem` cost ~110 µs per bfcl line, and a regular expression over the text ~60 µs: non-finite
numbers are now refused by the reading itself); whatever the text, the answer equals the walk's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.canonical import MAX_DEPTH, json_value_problem
from tooleval.capture.recorded import read_trace_line, trace_line_problem


def _line(value: str) -> str:
    return '{"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "hi"}], "metadata": {"v": ' \
        + value + "}}"


@pytest.mark.parametrize(("value", "plain", "problem"), [
    ('"plain text"', True, None),
    ("0.25", True, None),
    ("NaN", False, "metadata.v: nan is not a JSON number (NaN, Infinity or out of a float's range)"),
    ("-Infinity", False, "metadata.v: -inf is not a JSON number (NaN, Infinity or out of a float's range)"),
    ("1e999", False, "metadata.v: inf is not a JSON number (NaN, Infinity or out of a float's range)"),
    ("1" * 320 + ".0", False, "metadata.v: inf is not a JSON number (NaN, Infinity or out of a float's range)"),
    ('"\\ud800 lone"', False, "metadata.v: text holds a lone surrogate (not valid UTF-8)"),
    ('"\\ud83d\\ude00 a pair"', True, None),  # orjson reads the pair (it refuses a lone half): no walk needed
    ('"NaN as text"', True, None),  # the reader refuses NaN as a number, not as text: no walk
    ('"1e999 and Infinity as text"', True, None),
    ("1e308", True, None),  # finite
    ("[1, 2.5, -0.0, 1E2]", True, None),
    # the line opens 4 brackets of its own: 195 + 4 < MAX_DEPTH brackets in all prove the depth; 196 + 4 do not,
    # and the nesting is then counted: top object 1, metadata 2, the lists 3..198 (or 3..200), within MAX_DEPTH
    ("[" * (MAX_DEPTH - 5) + "]" * (MAX_DEPTH - 5), True, None),
    ("[" * (MAX_DEPTH - 4) + "]" * (MAX_DEPTH - 4), True, None),
    ("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2), True, None),
    ("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1), False, f"metadata.v{'[0]' * (MAX_DEPTH - 2)}: nested deeper "
                                                           f"than {MAX_DEPTH} levels"),
    # top object depth 1, metadata 2, v 3: the list at depth 201 is the 198th nested one
    ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), False, f"metadata.v{'[0]' * (MAX_DEPTH - 2)}: nested deeper "
                                                           f"than {MAX_DEPTH} levels"),
])
def test_the_text_check_agrees_with_the_walk(value, plain, problem):
    text = _line(value)
    line = read_trace_line(1, text)
    assert line.plain is plain
    assert trace_line_problem(line) == json_value_problem(json.loads(text)) == problem


@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=25,
))
def test_generated_lines_read_as_json_loads_reads_them(value):
    text = _line(json.dumps(value))  # NaN/Infinity as Python writes them
    line = read_trace_line(1, text)
    assert json.dumps(line.data) == json.dumps(json.loads(text))  # same values (NaN compares unequal to itself)
    assert trace_line_problem(line) == json_value_problem(json.loads(text))


def _pairs_text(pairs: list[tuple[str, object]], escape_colons: bool) -> str:
    """A JSON object written member by member (so that keys may repeat), colons in keys and strings escaped as
    ``\\u003a`` when asked."""
    def text(value: object) -> str:
        written = json.dumps(value)
        return written.replace(":", "\\u003a") if escape_colons and isinstance(value, str) else written
    return "{" + ", ".join(f"{text(key)}: {json.dumps(value)}" for key, value in pairs) + "}"


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "a:b", ":", "b\\"]),
                       st.none() | st.integers() | st.text(alphabet="ab:\\\"{}", max_size=5)
                       | st.lists(st.text(alphabet=":ab", max_size=3), max_size=2)),
             max_size=5),
    st.booleans(),
)
def test_a_repeated_key_is_found_however_the_line_is_read(pairs, escape_colons):
    # reference: what the standard library reads, and whether some key repeats (the fast reading drops the first
    # member of a repeated key silently: its problem must still be named)
    members = [("case_id", "c1"), ("trial", 0), ("metadata", None)]
    inner = _pairs_text(pairs, escape_colons)
    text = _pairs_text(members[:2], False)[:-1] + ', "metadata": ' + inner + "}"
    repeats = len({key for key, _ in pairs}) != len(pairs)
    line = read_trace_line(1, text)
    if repeats:
        assert line.kind == "duplicate_key" and "repeats the key" in line.problem
    else:
        assert line.problem is None
        assert json.dumps(line.data) == json.dumps(json.loads(text))


# The plan's index reads each line's bytes with orjson first and judges a plain line's shape without the pydantic
# validation; both give what the text reading and the validation give.

_FIELD_VALUES = {
    "case_id": st.one_of(st.text(max_size=3), st.integers(-3, 3), st.booleans(), st.none(), st.floats(0, 2)),
    "trial": st.one_of(st.integers(-2, 2), st.just(2 ** 31 - 1), st.just(2 ** 31), st.booleans(), st.just(1.0),
                       st.text(max_size=2)),
    "agent": st.one_of(st.none(), st.text(max_size=2),
                       st.fixed_dictionaries({}, optional={"name": st.one_of(st.text(max_size=3), st.integers(),
                                                                             st.none()),
                                                           "version": st.one_of(st.none(), st.text(max_size=2),
                                                                                st.integers()),
                                                           "model": st.one_of(st.none(), st.text(max_size=2),
                                                                              st.floats(0, 1)),
                                                           "extra": st.integers()})),
    "messages": st.one_of(st.none(), st.text(max_size=2),
                          st.lists(st.one_of(st.fixed_dictionaries({"role": st.text(max_size=3)}), st.text(max_size=2),
                                             st.integers(), st.lists(st.integers(), max_size=2)), max_size=3)),
    "request_id": st.one_of(st.none(), st.text(max_size=2), st.integers()),
    "response_id": st.one_of(st.none(), st.text(max_size=2), st.booleans()),
    "prompt_version": st.one_of(st.none(), st.text(max_size=2), st.floats(0, 1)),
    "tool_schema_version": st.one_of(st.none(), st.text(max_size=2), st.lists(st.text(max_size=1), max_size=1)),
    "metadata": st.one_of(st.none(), st.text(max_size=2), st.lists(st.integers(), max_size=1),
                          st.fixed_dictionaries({}, optional={"reward": st.one_of(st.none(), st.integers(), st.floats(
                              allow_nan=False, allow_infinity=False), st.booleans(), st.text(max_size=2))})),
    "request": st.one_of(st.none(), st.text(max_size=2), st.fixed_dictionaries({}, optional={
        "messages": st.lists(st.integers(), max_size=2)})),
    "adapter_calls": st.one_of(st.none(), st.text(max_size=1), st.lists(st.one_of(st.fixed_dictionaries(
        {"name": st.text(max_size=2)}), st.integers()), max_size=2)),
    "executor_calls": st.one_of(st.none(), st.integers(), st.lists(st.one_of(st.fixed_dictionaries({}, optional={
        "executions": st.one_of(st.none(), st.integers(-1, 3), st.just(2 ** 31), st.booleans(), st.just(2.0))}),
        st.text(max_size=1)), max_size=2)),
    "generation_started_at": st.one_of(st.none(), st.just("2026-01-01T00:00:00Z"), st.just("not a date")),
    "generation_finished_at": st.one_of(st.none(), st.just("2026-01-01T00:00:01+00:00"), st.integers(0, 5)),
    "extra_field": st.one_of(st.integers(), st.text(max_size=2)),
}


_VALID = {"case_id": st.just("c1"), "trial": st.just(0), "messages": st.just([{"role": "user", "content": "hi"}])}


@st.composite
def _trace_objects(draw):
    """A valid trace with a few fields drawn from :data:`_FIELD_VALUES` (valid or not) over it."""
    value = dict(_VALID)
    for name in draw(st.lists(st.sampled_from(sorted(_FIELD_VALUES)), max_size=4, unique=True)):
        value[name] = _FIELD_VALUES[name]
    return draw(st.fixed_dictionaries(value))


@settings(max_examples=examples(600), deadline=None)
@given(_trace_objects())
def test_a_plainly_valid_line_is_valid(value):
    from pydantic import ValidationError

    from tooleval.capture.recorded import plainly_recorded_trace
    from tooleval.models import RecordedTrace

    line = read_trace_line(1, json.dumps(value))
    if not plainly_recorded_trace(line):
        return
    try:
        trace = RecordedTrace.model_validate(value)
    except ValidationError as exc:  # pragma: no cover - the failure this test exists to catch
        raise AssertionError(f"judged valid, but {exc}") from None
    assert (trace.request is not None) == (value.get("request") is not None)


@pytest.mark.parametrize(("fields", "plain"), [
    ({}, True),
    ({"case_id": 7}, True),  # an integer case id is read as its text
    ({"case_id": ""}, False), ({"case_id": True}, False), ({"trial": True}, False), ({"trial": 2 ** 31}, False),
    ({"agent": {"name": "a", "version": None, "model": "m", "other": 1}}, True),
    ({"agent": {"name": None}}, False),  # the validation refuses it
    ({"messages": [{"role": "user"}, "text"]}, False),
    ({"metadata": {"reward": 1.0}}, True), ({"metadata": {"reward": "1"}}, False),
    ({"metadata": {"reward": True}}, False),
    ({"executor_calls": [{"executions": 3}]}, True), ({"executor_calls": [{"executions": -1}]}, False),
    ({"generation_started_at": "2026-01-01T00:00:00Z"}, False),  # valid, but the validation parses the date
    ({"request": {"messages": []}}, True), ({"request": []}, False),
])
def test_plainly_valid_by_hand(fields, plain):
    from tooleval.capture.recorded import plainly_recorded_trace

    value = {"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "hi"}], **fields}
    assert plainly_recorded_trace(read_trace_line(1, json.dumps(value))) is plain


def test_a_line_that_is_not_plain_is_left_to_the_validation():
    from tooleval.capture.recorded import plainly_recorded_trace

    deep = _line("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert not plainly_recorded_trace(read_trace_line(1, deep))


@pytest.mark.parametrize("raw", [
    b'{"case_id": "c1", "trial": 0, "messages": []}\r\n',
    b'{"case_id": "c1", "trial": 0, "messages": [], "t": "caf\xc3\xa9"}  \n',
    b'{"case_id": "c1", "trial": 0, "messages": [], "t": "caf\xe9"}\n',  # not UTF-8: the byte is named
    b'{"case_id": "c1", "trial": 0, "messages": []}\xc2\xa0\n',  # a no-break space after the object
    b'{"case_id": "c1", "trial": 0, "messages": []}\x1c\n',  # str.rstrip takes this away, bytes.rstrip does not
    b'{"case_id": "c1", "case_id": "c2", "trial": 0, "messages": []}\n',
    b'{"case_id": "c1", "trial": 0, "n": 123456789012345678901234567890, "messages": []}\n',
    b'{"case_id": "c1", "trial": 0, "messages": [], "v": NaN}\n',
    b'   \n', b'[1, 2]\n', b'{"case_id": \n',
])
def test_bytes_read_as_their_text_is_read(raw):
    from tooleval.capture.recorded import _read_trace_bytes

    got = _read_trace_bytes(3, raw)
    try:
        text = raw.decode("utf-8").rstrip()
    except UnicodeDecodeError:
        assert got.kind == "unreadable_trace" and "not UTF-8" in got.problem
        return
    want = read_trace_line(3, text) if text else None
    if want is None:
        assert got is None
        return
    assert (got.line, got.problem, got.kind, got.plain) == (want.line, want.problem, want.kind, want.plain)
    assert json.dumps(got.data, sort_keys=True) == json.dumps(want.data, sort_keys=True)


def test_synthetic_corpora_replayed_alike_with_and_without_the_shape_check(tmp_path, monkeypatch):
    # trace capture's one validation of a line: the shape check answers for the pydantic validation when it can
    from tooleval.agents import replay_generate
    from tooleval.capture import recorded
    from tooleval.runs.plan import plan_run
    from tooleval.runs.spec import RunSpec
    from tooleval.synth import write_synth

    for profile in ("bfcl", "tau"):
        folder = write_synth(400, 0, profile, tmp_path / profile).path
        plan = plan_run(RunSpec(dataset=folder, traces=None, out=tmp_path / f"out-{profile}", run_id="r1",
                                redaction=False))

        def records():
            found = []
            for shard in plan.index.shards():
                items, offsets = plan.shard_items(shard)
                found += list(replay_generate(plan.agent, items, offsets))
            return found

        fast = records()
        with monkeypatch.context() as patched:
            patched.setattr(recorded, "plainly_recorded_trace", lambda line: False)
            slow = records()
        assert fast == slow and len(fast) == 400 and all(record["error"] is None for record in fast)


@settings(max_examples=examples(500), deadline=None)
@given(st.binary(max_size=12) | st.text(alphabet="0123456789e+-.E a", max_size=12).map(str.encode))
def test_the_exponent_search_is_the_expression(written):
    # the one-byte search from each "+" finds what the expression [0-9]e\+[0-9] finds, wherever it stands
    import re

    from tooleval.capture.recorded import _has_exponent

    assert _has_exponent(written) is (re.search(rb"[0-9]e\+[0-9]", written) is not None)


@pytest.mark.parametrize("value", [
    "18446744073709551616",  # 2**64: orjson reads it as the float 1.8446744073709552e+19, the strict way as an int
    "-9223372036854775809",  # below -2**63 likewise
    "18446744073709551615",  # 2**64 - 1: orjson holds it as an integer
    '"+1 555 0100, 2e+5 as text"',  # a "+" and an exponent in a string are no number
    "[1e+300, 2.5, 12345678901234567890123]",  # floats orjson writes with "e+", beside a wide integer
])
def test_wide_integers_and_plus_signs(value):
    text = _line(value)
    line = read_trace_line(1, text)
    assert line.problem is None
    # the values and their types are the standard library's (an int beyond 64 bits stays an int: 2**64 == its
    # float in Python, so the texts are compared)
    assert json.dumps(line.data) == json.dumps(json.loads(text))
