"""Every string a trace can hold — a lone surrogate decoded from an escape, NUL, CESU-8 bytes, JSON text nested past
Python's recursion limit — is redacted, or at worst costs its own row: one hostile line never stops a batch.

The unit tests drive the real redactor on each kind of string in each place a secret is looked for (a tool result,
argument text, a user message, JSON encoded twice, the dataset's own input); the end-to-end test runs
``tooleval run`` in a process of its own on a dataset holding every kind at once, next to good rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.support.datasets import TINY_CASES, tool_call, trace, write_dataset
from tests.support.paths import REPO, USER_CACHE
from tests.support.prefect_home import seeded_home
from tooleval.capture.redaction import RedactionConfig, Redactor
from tooleval.models import Case

KEY = b"hostile-strings-test-key-0000001"

HOSTILE = {
    "lone high surrogate": '{"email": "\\udbff"}',
    "lone low surrogate": '{"email": "x\\udc00y", "id": "A"}',
    "surrogate beside a redacted field": '{"email": "a@b.c", "note": "\\ud83d"}',
    "NUL": '{"email": "a\\u0000b"}',
    "JSON encoded twice": '"{\\"email\\": \\"\\\\udbff\\"}"',
    "pair in plain text": 'email: "\\udbff"',
    "nested 900 deep": '{"email": "a@b.c", "x": ' + "[" * 900 + "]" * 900 + "}",
    "secret nested 900 deep": '{"email": ' + "[" * 900 + '"a@b.c"' + "]" * 900 + "}",
}


def _redactor(cases=()) -> Redactor:
    redactor = Redactor(RedactionConfig(), KEY)
    redactor.seed([value for case in cases for value in (case.input,)])
    return redactor


def _places(text: str) -> dict[str, dict]:
    """A trace holding ``text`` as a tool result, as argument text and as a user message."""
    return {
        "tool result": {"case_id": "A", "trial": 0, "messages": [
            {"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c", "content": text}]},
        "arguments": trace("A", 0, [tool_call("get_order", text)]),
        "user message": {"case_id": "A", "trial": 0, "messages": [{"role": "user", "content": text}]},
    }


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("place", ["tool result", "arguments", "user message"])
def test_each_hostile_string_is_redacted_into_valid_utf8(kind, place):
    redactor = _redactor()
    line = _places(HOSTILE[kind])[place]
    text = redactor.redact_trace_text(line)  # raised UnicodeEncodeError / RecursionError before
    text.encode("utf-8")  # what a Parquet file can hold
    assert "redacted:" in text
    assert json.loads(text)["case_id"] == "A"
    assert "a@b.c" not in text  # a secret too deep to walk is not left behind either


def test_a_lone_surrogate_secret_gets_one_stable_token_of_its_own():
    redactor = _redactor()
    token = redactor.token("\udbff")
    assert token == redactor.token("\udbff") and token.startswith("redacted:") and len(token) == 25
    assert token not in (redactor.token("\udbfe"), redactor.token(""), redactor.token("\\udbff"))
    # the token in the tool result is the token of the decoded value, as under any other field
    text = redactor.redact_trace_text(_places('{"email": "\\udbff"}')["tool result"])
    assert token in text


def test_a_case_whose_input_holds_a_lone_surrogate_secret_seeds_and_redacts():
    case = Case.model_validate({"case_id": "A", "input": '{"email": "\\udbff", "note": "\\udfff"}',
                                "expected_calls": []})
    redactor = _redactor([case])  # seeding raised UnicodeEncodeError before
    redacted = redactor.redact_messages(case.input)
    redacted.encode("utf-8")
    assert redactor.token("\udbff") in redacted


def _hostile_dataset(tmp_path):
    traces = [
        trace("A", 0, [tool_call("get_order", '{"id": "A"}'), tool_call("refund", '{"cents": 9800, "id": "A"}')]),
        # a redacted field under a key decoded from a lone-surrogate escape too: its recorded path stopped the run
        trace("A", 1, [tool_call("get_order", '{"id": "A", "email": "\\udbff", "\\udbff": {"email": "a@b.c"}}')]),
        {"case_id": "B", "trial": 0, "agent": {"name": "a", "version": "1", "model": "m"}, "messages": [
            {"role": "user", "content": HOSTILE["lone high surrogate"]},
            {"role": "assistant", "content": "", "tool_calls": [tool_call("get_order", '{"id": "B"}')]},
            {"role": "tool", "tool_call_id": "c", "content": HOSTILE["surrogate beside a redacted field"]}]},
        {"case_id": "B", "trial": 1, "agent": {"name": "a", "version": "1", "model": "m"}, "messages": [
            {"role": "user", "content": HOSTILE["secret nested 900 deep"]},
            {"role": "tool", "tool_call_id": "c", "content": HOSTILE["JSON encoded twice"]}]},
        trace("C", 0, [], 1.0),
        # a case id holding a lone surrogate names no case: its error row stopped the run
        {**trace("A\udbff", 0, []), "case_id": "A\udbff"},
    ]
    folder = write_dataset(tmp_path / "hostile", TINY_CASES, traces)
    with (folder / "traces.jsonl").open("ab") as handle:  # CESU-8: a surrogate pair encoded as two 3-byte units
        handle.write(b'{"case_id": "C", "trial": 1, "messages": [{"role": "user", "content": "\xed\xa0\xbd\xed\xb8\x80"}]}\n')
    return folder


@pytest.mark.slow  # `tooleval run` in a process of its own
def test_a_run_over_hostile_lines_publishes_every_row(tmp_path):
    dataset = _hostile_dataset(tmp_path)
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="250", PREFECT_SERVER_ANALYTICS_ENABLED="false", TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", TOOLEVAL_REDACTION_KEY=KEY.decode(),
               XDG_CACHE_HOME=str(USER_CACHE), TOOLEVAL_PREFECT_HOME=str(seeded_home(tmp_path / "prefect-home")))
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out", str(out),
                           "--run-id", "h1"], env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed and "UnicodeEncodeError" not in printed, printed[-4000:]
    assert done.returncode == 1, printed[-4000:]  # completed; some rows had errors (the CESU-8 line)
    summary = json.loads((out / "runs/h1/summary.json").read_text())
    rows = pq.read_table(out / "rows/dataset_revision=r1/run_id=h1").to_pylist()
    by_row = {(r["case_id"], r["trial"]): r for r in rows}
    # every hostile line redacted and scored; the CESU-8 line (not UTF-8) is its line's typed error
    assert {k for k, r in by_row.items() if r["error_kind"] is None} == {("A", 0), ("A", 1), ("B", 0), ("B", 1),
                                                                           ("C", 0)}
    assert by_row[("A", 0)]["exact_match"] and by_row[("C", 0)]["exact_match"]
    errors = json.loads((out / "runs/h1/errors.json").read_text())
    assert sorted((e["kind"], e["line"], e["case_id"]) for e in errors) == [
        ("unknown_case", 6, "A\\udbff"), ("unreadable_trace", 7, None)] and summary["errors"] == 2
    assert "UTF-8" in next(e for e in errors if e["kind"] == "unreadable_trace")["message"]
    envelopes = {(e["case_id"], e["trial"]): e for e in pq.read_table(
        out / "traces/dataset_revision=r1/run_id=h1").to_pylist()}
    assert envelopes[("A", 1)]["redacted_fields"] == ["\\udbff.email", "email"]  # the escape, as text
    # no secret is left: the lone surrogate values and the e-mail address are tokens (only A 1's key holds one)
    text = json.dumps(list(envelopes.values()), default=str)
    assert "a@b.c" not in text and "redacted:" in text
    assert "\\udbff" not in json.dumps([e for k, e in envelopes.items() if k != ("A", 1)], default=str)
    arguments = json.loads(json.loads(envelopes[("A", 1)]["messages_json"])[1]["tool_calls"][0]["function"][
        "arguments"])
    assert arguments["email"].startswith("redacted:") and arguments["\udbff"]["email"].startswith("redacted:")


@pytest.mark.parametrize(("value", "fix"), [
    ('"x\\udbff"', "a whole surrogate pair"), ("NaN", "write a finite JSON number")])
def test_a_case_line_that_cannot_be_kept_names_the_fix_for_its_kind(tmp_path, value, fix):
    from tooleval.dataset import load_dataset
    from tooleval.errors import InputFileError

    folder = write_dataset(tmp_path / "d", TINY_CASES, None)
    with (folder / "cases.jsonl").open("a") as handle:
        handle.write('{"case_id": "Z", "input": "hi", "expected_calls": [], "metadata": {"v": %s}}\n' % value)
    with pytest.raises(InputFileError) as caught:
        load_dataset(folder)
    assert caught.value.line == 4 and fix in str(caught.value)  # a lone surrogate was told to write a number
