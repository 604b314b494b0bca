"""The traces reader decides from a line's text when its values cannot hold a problem (issue 9: the walk of
:func:`json_value_problem` cost ~110 µs per bfcl line, and a regular expression over the text ~60 µs: non-finite
numbers are now refused by the reading itself); whatever the text, the answer equals the walk's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples
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
