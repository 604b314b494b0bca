"""The redactor's fast path (issue 9): a line redaction provably leaves alone is passed through without the walk;
every line must come out exactly as the full walk makes it (escaped keys, other letter cases, secrets in text,
numbers written with an exponent go the slow way)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.paths import BUNDLED
from tests.support.profiles import examples
from tooleval.capture.recorded import iter_trace_lines, read_trace_bytes
from tooleval.capture.redaction import RedactionConfig, Redactor, case_reference_values
from tooleval.dataset import find_traces_file, load_dataset
from tooleval.synth import write_synth


def _redactor(seed: list) -> Redactor:
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    redactor.seed(seed)
    return redactor


def _both(seed: list, trace: dict) -> tuple[dict, dict, bool]:
    """(fast-path result, full-walk result, whether the fast path was taken), each from a fresh redactor."""
    redactor = _redactor(seed)
    taken = redactor._untouched({k: v for k, v in trace.items() if k not in ("case_id", "trial", "agent")})
    fast = redactor.redact_trace(json.loads(json.dumps(trace)))
    walker = _redactor(seed)
    walker._base_plain = False  # forces the walk
    return fast, walker.redact_trace(json.loads(json.dumps(trace))), taken


def _trace(content: str, args: str = '{"city": "Paris"}') -> dict:
    return {"case_id": "c1", "trial": 0, "messages": [
        {"role": "user", "content": content},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": args}}]}]}


SEED = [{"email": "ACC-778899", "card_number": 4111111111111111}]


@pytest.mark.parametrize(("content", "args", "fast"), [
    ("what is the weather", '{"city": "Paris"}', True),  # nothing to redact: passed through
    ("mail me at EMAIL: ana@x.org", '{"city": "Paris"}', False),  # another letter case, in text
    ("hello", '{"em\\u0061il": "ana@x.org"}', False),  # an escaped key inside argument text
    ("hello", '{"Phone": "555-0100"}', False),
    ("account ACC-778899 please", '{"city": "Paris"}', False),  # a base secret in text
    ("pay", '{"n": 4.111111111111111e15}', False),  # a base number spelled with an exponent
    ("pay", '{"n": 4111111111111111}', False),
])
def test_fast_path_equals_the_walk(content, args, fast):
    got, want, taken = _both(SEED, _trace(content, args))
    assert got == want
    assert taken is fast


def test_an_escaped_key_in_the_line_itself_is_redacted():
    # the line spells the key "em\u0061il": decoded, it is "email", and the value must be replaced
    line = '{"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "x"}], "metadata": {"em\\u0061il": "ana@x.org"}}'
    redactor = _redactor(SEED)
    out = redactor.redact_trace(json.loads(line))
    assert out["metadata"]["email"].startswith("redacted:")
    assert out["redacted_fields"] == ["metadata.email"]


def _seed(folder) -> tuple[list, list]:
    loaded = load_dataset(folder)
    seed = [value for case in loaded.cases.values() for value in case_reference_values(case)]
    return seed, [line.data for line in iter_trace_lines(find_traces_file(folder))]


def test_bundled_lines_alike():
    # the airline traces hold e-mails and phone numbers: every line goes the slow way
    seed, lines = _seed(BUNDLED)
    for trace in lines[:40]:
        got, want, fast = _both(seed, trace)
        assert got == want, trace["case_id"]
        assert not fast


def test_synthetic_bfcl_lines_take_the_fast_path_alike(tmp_path):
    write_synth(300, 0, "bfcl", tmp_path)
    seed, lines = _seed(tmp_path)
    taken = 0
    for trace in lines:
        got, want, fast = _both(seed, trace)
        assert got == want, trace["case_id"]
        taken += fast
    assert len(lines) == 300
    assert taken == 300  # no synthetic bfcl line holds a redacted field name


# -- part by part: the messages that hold no redacted field name are passed over ---------------------------------

_SECRETS = ["ana@x.org", "sk-test-1", "4111111111111111", 4111111111111111, 1.2896620064407295e-05, "ab/cd"]
"""Secret values: an e-mail, a key, a card number as text and as a number, a float that orjson writes without an
exponent (``0.000012896620064407295``), a value holding a slash."""
_PIECES = ["email", "EMAIL", "\u212aey", "key", "phone", "note", ": ", "=", " ", ", ", "'", "ana@x.org", "ana@x.or",
           "4111111111111111", "1.2896620064407295e-05", "0.000012896620064407295", "ab/cd", "\\/", "\\\"", "é",
           "\n", "7", "AKIAZ7QX2LMNOPQRSTUV", "Authorization: Bearer ", "mF_9.B5f-4.1JqM"]
_texts = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)
_leaves = st.one_of(_texts, st.sampled_from(_SECRETS + [1e16, 7, 2.5, True, None]))
_objects = st.recursive(_leaves, lambda c: st.one_of(
    st.lists(c, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(["email", "Phone", "note", "key", "to"]), _texts), c, max_size=3)),
    max_leaves=10)
_contents = st.one_of(
    _texts, _objects.map(json.dumps), _objects.map(lambda v: json.dumps(v, ensure_ascii=False)),
    # nested JSON that spells a key or a value with escapes: only its decoded text names a field
    _objects.map(lambda v: json.dumps(v).replace("email", "em\\u0061il").replace("/", "\\/")))
_messages = st.builds(lambda role, content, extra: {"role": role, "content": content, **extra},
                      st.sampled_from(["user", "assistant", "tool"]), _contents,
                      st.dictionaries(st.sampled_from(["name", "data", "email"]), _objects, max_size=1))
_seeds = st.lists(st.dictionaries(st.sampled_from(["email", "card_number", "note", "key"]),
                                  st.one_of(st.sampled_from(_SECRETS), _leaves), max_size=2), max_size=3)


@settings(max_examples=examples(400), deadline=None)
@example([], [{"role": "tool", "content": '{"em\\u0061il": "ana@x.org"}'}], {}, None)  # the key decoded is email
@example([{"email": "ana@x.org"}], [{"role": "user", "content": "mail ana@x.org"}], {}, None)  # a base secret
@example([{"card_number": 1.2896620064407295e-05}],
         [{"role": "tool", "content": "{}", "data": [1.2896620064407295e-05]}],
         {"email": "x@y.org"}, None)  # orjson writes this number 0.000012896620064407295
@given(_seeds, st.lists(_messages, max_size=6), st.dictionaries(st.sampled_from(["reward", "email", "info"]), _objects,
                                                                max_size=2),
       st.sampled_from([None, ["key"], ["email", "to"]]))
def test_passing_over_quiet_messages_equals_the_walk(seed, messages, metadata, fields):
    config = RedactionConfig() if fields is None else RedactionConfig(fields=fields)
    trace = {"case_id": "c1", "trial": 0, "messages": messages, "metadata": metadata}
    redactor, walker = Redactor(config, b"k" * 32), Redactor(config, b"k" * 32)
    redactor.seed(seed)
    walker.seed(seed)
    walker._names_spelled_alike = False  # walks every part (the whole-line test is the same on both sides)
    got = redactor.redact_trace(json.loads(json.dumps(trace)))
    want = walker.redact_trace(json.loads(json.dumps(trace)))
    assert json.dumps(got) == json.dumps(want)


def test_a_name_a_json_text_may_spell_otherwise_turns_passing_over_off():
    # nested JSON text may write this name e\/mail: no text proves it absent
    assert Redactor(RedactionConfig(fields=["e/mail"]), b"k")._quiet_parts({"messages": [{"a": 1}]}) == []
    body = {"messages": [{"a": 1}, {"email": 2}]}  # each message is a part; the one naming a field is walked
    assert Redactor(RedactionConfig(), b"k")._quiet_parts(body) == [({"a": 1}, '{"a":1}')]


@pytest.mark.parametrize("secret", [1.2896620064407295e-05, 1e-05, 9.5e-05])
def test_a_small_float_secret_on_an_otherwise_quiet_line_is_redacted(secret):
    # orjson writes floats in [1e-05, 1e-04) without an exponent (0.000012896620064407295), Python's json with one
    # (1.2896620064407295e-05): the whole-line test looks for orjson's spelling too, so the line is walked
    seed = [{"card_number": secret}]
    got, want, fast = _both(seed, {"case_id": "c1", "trial": 0, "metadata": {"amount": secret}})
    assert got == want
    assert got["metadata"]["amount"] == _redactor(seed).token(secret)  # the number became its token
    assert not fast


def test_a_remembered_verdict_is_the_redactor_s_own():
    # verdicts on parts are remembered by their text: a part that is quiet for a redactor of e-mail fields is not
    # quiet for one of phone fields, and a part judged a second time gets the first verdict
    part = {"role": "tool", "content": "phone: 555-0100"}
    emails = Redactor(RedactionConfig(fields=["email"]), b"k" * 32)
    phones = Redactor(RedactionConfig(fields=["phone"]), b"k" * 32)
    for _ in range(2):
        assert emails._quiet_parts({"messages": [part]}) == [(part, '{"role":"tool","content":"phone: 555-0100"}')]
        assert phones._quiet_parts({"messages": [part]}) == []
    redacted = phones.redact_trace({"case_id": "c1", "trial": 0, "messages": [part]})
    assert "555-0100" not in json.dumps(redacted)
    assert redacted["messages"][0]["content"] == "phone: " + json.dumps(phones.token("555-0100"))


def test_remembered_verdicts_are_bounded_by_their_characters():
    from tooleval.capture.redaction import _TextCache

    cache = _TextCache(10)
    cache.keep("abcdef", True)  # 6 characters kept
    cache.keep("ghij", False)  # 10: still within the bound
    assert (cache.get("abcdef"), cache.get("ghij")) == (True, False)
    cache.keep("k", True)  # 11 would pass it: the cache starts afresh with this text alone
    assert (cache.get("abcdef"), cache.get("ghij"), cache.get("k")) == (None, None, True)


def test_the_credentials_of_a_long_text_are_found_again():
    # a long string's credentials are remembered by its text: the second trace holding it is redacted alike
    text = "please note " * 25 + "my key is AKIAZ7QX2LMNOPQRSTUV, thanks"  # 337 characters
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    want = text.replace("AKIAZ7QX2LMNOPQRSTUV", redactor.token("AKIAZ7QX2LMNOPQRSTUV"))
    for trial in range(2):
        out = redactor.redact_trace({"case_id": "c1", "trial": trial, "messages": [{"role": "user", "content": text}]})
        assert out["messages"][0]["content"] == want


@pytest.mark.parametrize(("content", "args", "fast"), [
    ("what is the weather", '{"city": "Paris"}', True),
    ("mail me at EMAIL: ana@x.org", '{"city": "Paris"}', False),
    ("hello", '{"em\\u0061il": "ana@x.org"}', False),
    ("hello", '{"Phone": "555-0100"}', False),
    ("account ACC-778899 please", '{"city": "Paris"}', False),
    ("pay", '{"n": 4.111111111111111e15}', False),
    ("pay", '{"n": 4111111111111111}', False),
])
def test_the_whole_line_screen_judges_as_the_body_s(content, args, fast):
    # trace capture screens the writing its reading of the line checked (case id, trial and agent included)
    trace = _trace(content, args)
    line = read_trace_bytes(1, json.dumps(trace).encode())
    assert line.written is not None
    assert _redactor(SEED).untouched_text(line.written) is fast
    walker = _redactor(SEED)
    walker._base_plain = False
    if fast:
        assert walker.redact_trace(trace) == {**trace, "redacted_fields": []}


def test_the_whole_line_screen_also_reads_the_key_fields():
    # a name in the agent's name (never redacted) makes the whole line's screen send it the slow way: stricter
    # than the body's screen, never looser
    trace = {**_trace("what is the weather"), "agent": {"name": "email-bot"}}
    line = read_trace_bytes(1, json.dumps(trace).encode())
    redactor = _redactor(SEED)
    assert redactor._untouched({"messages": trace["messages"]}) is True
    assert redactor.untouched_text(line.written) is False
