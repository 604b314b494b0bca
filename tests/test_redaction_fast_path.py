"""The redactor's fast path (issue 9): a line redaction provably leaves alone is passed through without the walk;
every line must come out exactly as the full walk makes it (escaped keys, other letter cases, secrets in text,
numbers written with an exponent go the slow way)."""

from __future__ import annotations

import json

import pytest

from conftest import BUNDLED
from tooleval.capture.recorded import iter_trace_lines
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
