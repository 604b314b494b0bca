"""Issue 11 section 4: input is never rewritten silently, and one bad row never costs the batch.

Parsing rules are pinned as behaviour (what a call or a line becomes), not as the parser that implements them.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, tool_call, trace, write_dataset
from tests.support.profiles import examples
from tooleval.canonical import MAX_DEPTH, json_value_problem, parse_arguments, reject_duplicate_keys
from tooleval.cli import app
from tooleval.dataset import load_dataset
from tooleval.errors import InputFileError
from tooleval.models import Call

runner = CliRunner()


class TestDuplicateKeys:
    def test_repeated_key_makes_the_call_malformed_and_keeps_the_raw_text(self):
        raw = '{"amount": 1, "amount": 49.99}'
        call = Call.from_raw("refund", raw)
        assert call.malformed
        assert call.args_raw == raw
        assert call.parse_error == "invalid JSON: duplicate key 'amount'"

    def test_repeated_key_never_scores_as_the_last_value(self):
        # Python's json keeps the last value (49.99): the reference {"amount": 49.99} must NOT be matched.
        reference = Call.from_raw("refund", {"amount": 49.99})
        observed = Call.from_raw("refund", '{"amount": 1, "amount": 49.99}')
        assert reference.key != observed.key

    def test_nested_repeated_key_is_malformed_too(self):
        assert parse_arguments('{"a": {"b": 1, "b": 1}}') == (None, "invalid JSON: duplicate key 'b'")

    def test_same_key_in_sibling_objects_is_fine(self):
        assert parse_arguments('{"a": {"k": 1}, "b": {"k": 2}}') == ({"a": {"k": 1}, "b": {"k": 2}}, None)

    def test_hook_on_its_own(self):
        assert reject_duplicate_keys([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
        with pytest.raises(ValueError, match="duplicate key 'a'"):
            reject_duplicate_keys([("a", 1), ("a", 1)])


class TestValueProblems:
    def test_a_value_nested_100000_deep_is_answered_not_a_recursion_error(self):
        value: list = []
        for _ in range(100_000):
            value = [value]
        problem = json_value_problem({"x": value})
        assert problem == f"x{'[0]' * (MAX_DEPTH - 1)}: nested deeper than {MAX_DEPTH} levels"

    def test_depth_at_the_limit_is_accepted(self):
        value: dict = {}
        for _ in range(MAX_DEPTH - 1):
            value = {"a": value}
        assert json_value_problem(value) is None

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ({"metadata": {"reward": float("inf")}}, "metadata.reward: inf is not a JSON number"),
            ({"a": [1, float("nan")]}, "a[1]: nan is not a JSON number"),
            ({"content": "x\ud800y"}, "content: text holds a lone surrogate"),
            ({"a\udfff": 1}, "(top level): a key holds a lone surrogate"),
        ],
    )
    def test_problems_name_their_path(self, value, expected):
        assert json_value_problem(value).startswith(expected)

    def test_escaped_lone_surrogate_in_argument_text_is_a_malformed_call(self):
        # The argument text itself is valid UTF-8 (the escape is six ASCII characters); its value is not.
        args, error = parse_arguments('{"note": "\\ud800"}')
        assert args is None and error == "not representable: note: text holds a lone surrogate (not valid UTF-8)"

    def test_deep_argument_text_is_a_malformed_call(self):
        args, error = parse_arguments("{\"a\": " + "[" * 100_000 + "]" * 100_000 + "}")
        assert args is None and "nested deeper than" in error


class TestReferencesThatCannotBeRepresented:
    @pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
    def test_non_finite_expected_argument_is_a_file_error_naming_the_line(self, tmp_path, literal):
        folder = write_dataset(tmp_path / "d", TINY_CASES, None)
        bad = ('{"case_id": "X", "input": "x", "expected_calls": [{"name": "refund", "args": {"amount": '
               + literal + "}}]}\n")
        with (folder / "cases.jsonl").open("a") as handle:
            handle.write(bad)
        with pytest.raises(InputFileError) as info:
            load_dataset(folder)
        assert info.value.line == 4  # three TINY_CASES lines, then this one
        assert "expected_calls[0].args.amount" in str(info.value)
        assert "cases.jsonl" in str(info.value)

    def test_run_exits_2_and_writes_nothing(self, tmp_path):
        folder = write_dataset(tmp_path / "d", [dict(TINY_CASES[0], expected_calls=[
            {"name": "refund", "args": {"amount": 1}}])], TINY_TRACES[:1])
        cases = folder / "cases.jsonl"
        cases.write_text(cases.read_text().replace('"amount": 1', '"amount": NaN'))
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "nan"])
        assert result.exit_code == 2, result.output
        assert "cases.jsonl:1:" in result.output and "nan is not a JSON number" in " ".join(result.output.split())
        assert not (out / "rows").exists()


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _bad_lines() -> dict[str, str]:
    """One bad trace line per kind, as text (case id -> line); each for a case of its own."""
    surrogate_args = trace("S1", 0, [tool_call("get_order", '{"id": "\ud800"}')])
    surrogate_text = trace("S2", 0, [])
    surrogate_text["messages"][0]["content"] = "refund \ud800 please"
    reward = json.dumps(trace("R", 0, [], 1.0)).replace('"reward": 1.0', '"reward": Infinity')
    deep_args = json.dumps(trace("D1", 0, [tool_call("get_order", "{}")]))
    deep_args = deep_args.replace('"arguments": "{}"', '"arguments": ' + _deep(100_000))
    deep_messages = json.dumps(trace("D2", 0, [])).replace('"content": "hi"', '"content": ' + _deep(100_000))
    return {"S1": json.dumps(surrogate_args), "S2": json.dumps(surrogate_text), "R": reward, "D1": deep_args,
            "D2": deep_messages}


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_each_bad_trace_line_costs_only_its_row(tmp_path):
    bad = _bad_lines()
    cases = TINY_CASES + [{"case_id": case_id, "input": "hi", "expected_calls": []} for case_id in bad]
    folder = write_dataset(tmp_path / "d", cases, TINY_TRACES)
    with (folder / "traces.jsonl").open("a", encoding="utf-8") as handle:
        for line in bad.values():
            handle.write(line + "\n")
    for redaction in ([], ["--no-redaction"]):
        out = tmp_path / f"results{len(redaction)}"
        result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "bad",
                                     *redaction], env={"COLUMNS": "300"})
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        table = [r for part in sorted((out / "rows").rglob("*.parquet")) for r in pq.read_table(part).to_pylist()]
        rows = {r["case_id"]: r for r in table}
        # the four good rows are scored exactly as without the bad lines (TINY_TRACES: exact, wrong amount,
        # malformed, abstention)
        assert sorted((r["case_id"], r["trial"], r["f1"]) for r in table if r["error_kind"] is None) == [
            ("A", 0, 1.0), ("A", 1, 0.5), ("B", 0, 0.0), ("C", 0, 1.0)]
        errors = {case_id: f'{rows[case_id]["error_kind"]}: {rows[case_id]["error_message"]}' for case_id in bad}
        assert errors["S1"].startswith("bad_trace: case 'S1' trial 0: messages[1].tool_calls[0].function"
                                       ".arguments: text holds a lone surrogate")
        assert "messages[0].content: text holds a lone surrogate" in errors["S2"]
        assert "metadata.reward: inf is not a JSON number" in errors["R"]
        assert "nested too deep" in errors["D1"] and "nested too deep" in errors["D2"]
        for case_id in bad:
            assert rows[case_id]["f1"] is None and rows[case_id]["trial"] == 0
        summary = json.loads((out / "runs" / "bad" / "summary.json").read_text())
        assert summary["rows"] == 4 + len(bad)


def _traces(path, lines: list) -> None:
    """Write a traces file: dicts as JSON lines, text and bytes as they are."""
    with path.open("wb") as handle:
        for line in lines:
            data = line if isinstance(line, bytes) else (line if isinstance(line, str) else json.dumps(line)).encode()
            handle.write(data + b"\n")


class TestTraceKeysInRange:
    """A trace line's key — ``case_id`` and ``trial`` — is checked where it is read: a trial is an integer in
    0..2**31 - 1 (the int32 column), never a boolean or a float; a line whose key cannot be read is an errors.json
    entry naming the file and the line, and every other line is still indexed."""

    @pytest.mark.parametrize(("trial", "shown"), [
        (2**63, "9223372036854775808"), (10**30, "1" + "0" * 30), (True, "true"), (2**31, "2147483648"),
        (-1, "-1"), (1.0, "1.0"), ("0", '"0"'), (None, "null"),
    ])
    def test_a_trial_out_of_range_is_an_entry_naming_the_file_and_line(self, tmp_path, trial, shown):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 0, []), trace("A", trial, []), trace("B", 0, [])])
        index = index_traces(path)
        assert index.keys == {("A", 0): 1, ("B", 0): 3}
        (error,) = index.errors
        assert (error.kind, error.case_id, error.trial, error.path, error.line) == (
            "bad_trace", "A", None, str(path), 2)
        assert error.message == ("which row the line answers cannot be read: trial must be an integer in "
                                 f"0..2147483647, not {shown}")

    def test_the_largest_trial_is_a_key(self, tmp_path):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 2**31 - 1, [])])
        assert index_traces(path).keys == {("A", 2**31 - 1): 1}

    @pytest.mark.parametrize(("case_id", "problem"), [
        (None, "case_id must be a non-empty string, not null"), ("", 'case_id must be a non-empty string, not ""'),
        (True, "case_id must be a non-empty string, not true"), (["A"], 'case_id must be a non-empty string, not ["A"]'),
    ])
    def test_a_case_id_that_names_no_case(self, tmp_path, case_id, problem):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 0, []), dict(trace("A", 0, []), case_id=case_id)])
        (error,) = index_traces(path).errors
        assert (error.kind, error.case_id, error.line, error.message) == (
            "bad_trace", None, 2, f"which row the line answers cannot be read: {problem}")

    def test_a_line_too_deep_to_parse_keeps_the_trial_check(self, tmp_path):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        deep = '{"case_id": "A", "trial": TRIAL, "messages": ' + _deep(100_000) + "}"
        _traces(path, [deep.replace("TRIAL", str(2**63)), deep.replace("TRIAL", "1.5"), deep.replace("TRIAL", "3")])
        index = index_traces(path)
        assert index.keys == {("A", 3): 3}  # that line's row is written with its depth error
        assert [(e.kind, e.case_id, e.line, e.message) for e in index.errors] == [
            ("bad_trace", "A", 1, "which row the line answers cannot be read: trial must be an integer in "
                                  "0..2147483647, not 9223372036854775808"),
            ("bad_trace", "A", 2, "which row the line answers cannot be read: trial must be an integer in "
                                  "0..2147483647, not 1.5"),
        ]


class TestTraceLinesThatAreNotObjects:
    """A traces-file line that is not a JSON object names no row: an ``unreadable_trace`` entry with the file and
    line, every other line indexed (cases, tools and the manifest stay file errors)."""

    @pytest.mark.parametrize(("line", "problem"), [
        ("[1, 2]", "a JSON array, not an object"),
        ('"hello"', "a JSON string, not an object"),
        ("null", "a JSON null, not an object"),
        ("42", "a JSON number, not an object"),
        ('{"case_id": "A", "tri', "not valid JSON (Unterminated string starting at column 18)"),
        ("{'case_id': 'A'}", "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        (b'{"case_id": "\xe9"}', "not UTF-8 text (byte 14 of the line: b'\\xe9')"),
    ])
    def test_an_entry_naming_the_file_and_line(self, tmp_path, line, problem):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 0, []), line, "", trace("B", 0, [])])
        index = index_traces(path)
        assert index.keys == {("A", 0): 1, ("B", 0): 4}  # the blank line 3 is counted, not reported
        (error,) = index.errors
        assert (error.kind, error.case_id, error.trial, error.path, error.line) == (
            "unreadable_trace", None, None, str(path), 2)
        assert error.message == f"{problem}; a trace line must be one JSON object: repair or remove it"

    def test_a_gzip_file_too(self, tmp_path):
        import gzip

        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl.gz"
        path.write_bytes(gzip.compress(b'[]\n{"case_id": "A", "trial": 0, "messages": []}\n'))
        index = index_traces(path)
        assert index.keys == {("A", 0): 2} and [(e.kind, e.line) for e in index.errors] == [("unreadable_trace", 1)]

    def test_readers_outside_a_run_still_refuse_the_file(self, tmp_path):
        from tooleval.capture.recorded import iter_trace_lines

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 0, []), "null"])
        with pytest.raises(InputFileError) as info:
            list(iter_trace_lines(path))
        assert (info.value.path, info.value.line) == (str(path), 2)
        assert info.value.problem == "a JSON null, not an object: a trace line must be a JSON object."


class TestRepeatedKeys:
    """An object that repeats a key says two things at once (Python's ``json`` keeps the last silently): in a trace
    it is a ``duplicate_key`` row naming the key; in cases.jsonl, tools.json and dataset.json a file error naming
    the line."""

    def test_a_trace_object_keeps_its_row_with_the_error(self, tmp_path):
        from tooleval.capture.recorded import index_traces, iter_trace_lines, trace_line_problem

        path = tmp_path / "traces.jsonl"
        _traces(path, [trace("A", 0, []), '{"case_id": "B", "trial": 0, "messages": [], "messages": [{}]}'])
        assert index_traces(path).keys == {("A", 0): 1, ("B", 0): 2} and index_traces(path).errors == []
        line = list(iter_trace_lines(path))[1]
        assert line.kind == "duplicate_key"
        assert trace_line_problem(line) == ("an object repeats the key 'messages' (JSON readers differ on which "
                                            "value counts: keep one)")

    def test_a_nested_repeat_is_found_too(self):
        from tooleval.capture.recorded import read_trace_line

        line = read_trace_line(1, '{"case_id": "A", "trial": 0, "messages": [{"role": "user", "role": "system"}]}')
        assert (line.kind, line.data["case_id"]) == ("duplicate_key", "A") and "'role'" in line.problem

    @pytest.mark.parametrize("key", ["case_id", "trial"])
    def test_a_repeated_key_field_names_no_row(self, tmp_path, key):
        from tooleval.capture.recorded import index_traces

        path = tmp_path / "traces.jsonl"
        text = '{"case_id": "A", "trial": 0, "messages": []}'.replace(f'"{key}"', f'"{key}": "x", "{key}"', 1)
        _traces(path, [text])
        index = index_traces(path)
        assert index.keys == {}
        (error,) = index.errors
        assert (error.kind, error.case_id, error.line) == ("duplicate_key", "A" if key == "trial" else None, 1)
        assert error.message.startswith(f"an object repeats the key '{key}'")

    @pytest.mark.parametrize(("name", "text", "line", "key"), [
        ("cases.jsonl", TINY_CASES[:2] + ['{"case_id": "C", "input": "x", "expected_calls": [], "input": "y"}'],
         3, "input"),
        ("tools.json", '[\n{"name": "a"},\n{"name": "b",\n "side_effect": "read", "side_effect": "write"}\n]\n', 4,
         "side_effect"),
        ("dataset.json", '{"name": "t",\n "revision": "r1",\n "schema_version": 1,\n "revision": "r2"}', 4,
         "revision"),
    ])
    def test_in_a_dataset_file_it_is_a_file_error_naming_the_line(self, tmp_path, name, text, line, key):
        folder = write_dataset(tmp_path / "d", TINY_CASES, None)
        if isinstance(text, list):
            text = "".join((t if isinstance(t, str) else json.dumps(t)) + "\n" for t in text)
        (folder / name).write_text(text)
        with pytest.raises(InputFileError) as info:
            load_dataset(folder)
        assert (info.value.path, info.value.line) == (str(folder / name), line)
        assert info.value.problem.startswith(f"an object repeats the key {key!r}")
        assert info.value.fix == "keep one of the two."

    def test_two_tools_of_one_name(self, tmp_path):
        folder = write_dataset(tmp_path / "d", TINY_CASES, None)
        (folder / "tools.json").write_text('[\n{"name": "get_order"},\n{"name": "refund"},\n{"name": "get_order"}\n]')
        with pytest.raises(InputFileError) as info:
            load_dataset(folder)
        assert (info.value.line, info.value.problem) == (
            4, "tool #2: the name 'get_order' is already the name of the tool on line 2.")

    @pytest.mark.parametrize(("message", "problem"), [
        ({"content": "hi"}, "input[1] has no 'role'"),
        ({"role": "", "content": "hi"}, "input[1] has no 'role'"),
        ("hi", "input[1] must be a chat message object"),
    ])
    def test_a_case_message_without_a_role(self, tmp_path, message, problem):
        case = {"case_id": "D", "input": [{"role": "system", "content": "be brief"}, message], "expected_calls": []}
        folder = write_dataset(tmp_path / "d", TINY_CASES + [case], None)
        with pytest.raises(InputFileError) as info:
            load_dataset(folder)
        assert info.value.line == 4 and problem in info.value.problem

    @settings(max_examples=examples(300), deadline=None, derandomize=True)
    @given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.lists(st.tuples(st.sampled_from(["a", "b", 'c"', "d\\", "é", ":"]), inner), max_size=4),
                        max_leaves=15),
           st.sampled_from([(", ", ": "), (",", ":"), (" ,\n", " :\n ")]))
    def test_every_repeat_is_found_and_placed(self, value, separators):
        """Objects drawn as lists of pairs, so keys may repeat, written with any separators: the traces reader marks
        exactly the lines that repeat a key, and a dataset file is refused exactly then, on the repeated key's line."""
        import ast
        from pathlib import Path

        from tooleval.capture.recorded import load_unique_json, read_trace_line
        from tooleval.canonical import repeated_keys

        text = _pairs_json(value, separators)
        expected = _repeats(text)
        assert repeated_keys(text)[0] == expected
        line = read_trace_line(1, '{"case_id": "A", "trial": 0, "messages": [], "x": ' + text + "}")
        assert (line.kind == "duplicate_key") is bool(expected)
        if not expected:
            assert load_unique_json(Path("f.json"), text) == json.loads(text)
            return
        with pytest.raises(InputFileError) as info:
            load_unique_json(Path("f.json"), text)
        key = info.value.problem.split("repeats the key ", 1)[1].split(" (", 1)[0]
        assert ast.literal_eval(key) in expected  # the repr of a drawn key
        # the line named is one where that key is written (as _pairs_json wrote it)
        named = text.split("\n")[info.value.line - 1]
        assert json.dumps(ast.literal_eval(key)) in named


def _pairs_json(value, separators) -> str:
    """JSON text of a drawn value where a list of (key, value) tuples is an object (keys may repeat)."""
    comma, colon = separators
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + comma.join(json.dumps(k) + colon + _pairs_json(v, separators) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + comma.join(_pairs_json(v, separators) for v in value) + "]"
    return json.dumps(value)


def _repeats(text: str) -> list[str]:
    found: list[str] = []

    def hook(pairs):
        keys = [k for k, _ in pairs]
        found.extend(k for i, k in enumerate(keys) if k in keys[:i] and k not in found)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return found


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_no_trace_line_stops_the_run(tmp_path):
    """Every kind of bad traces-file line at once: the run completes (exit 1, no traceback), the good rows are scored
    as without them, each unusable line is an errors.json entry with its file and line, and the line that repeats a
    key is its case's error row."""
    lines = [
        json.dumps(trace("A", 2**63, [])), json.dumps(trace("A", 10**30, [])), json.dumps(trace("C", True, [])),
        json.dumps(trace("C", 2**31, [])), json.dumps(dict(trace("A", 5, []), case_id=None)),
        "[1, 2]", '"text"', "null", '{"case_id": "C", "tri',
        '{"case_id": "D", "trial": 0, "messages": [], "messages": []}',
    ]
    cases = TINY_CASES + [{"case_id": "D", "input": "hi", "expected_calls": []}]
    folder = write_dataset(tmp_path / "d", cases, TINY_TRACES)
    with (folder / "traces.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    out = tmp_path / "results"
    result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "bad"],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    table = [r for part in sorted((out / "rows").rglob("*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert sorted((r["case_id"], r["trial"], r["f1"]) for r in table if r["error_kind"] is None) == [
        ("A", 0, 1.0), ("A", 1, 0.5), ("B", 0, 0.0), ("C", 0, 1.0)]
    (row,) = [r for r in table if r["error_kind"] is not None]
    assert (row["case_id"], row["trial"], row["error_kind"], row["f1"]) == ("D", 0, "duplicate_key", None)
    assert "repeats the key 'messages'" in row["error_message"]
    errors = json.loads((out / "runs" / "bad" / "errors.json").read_text())
    traces_file = str(folder / "traces.jsonl")
    listed = [(e["kind"], e["line"]) for e in errors if e["path"] == traces_file]
    assert listed == [("bad_trace", 5), ("bad_trace", 6), ("bad_trace", 7), ("bad_trace", 8), ("bad_trace", 9),
                      ("unreadable_trace", 10), ("unreadable_trace", 11), ("unreadable_trace", 12),
                      ("unreadable_trace", 13)]
    assert [(e["kind"], e["case_id"], e["trial"]) for e in errors if e["path"] is None] == [
        ("duplicate_key", "D", 0)]
    summary = json.loads((out / "runs" / "bad" / "summary.json").read_text())
    assert (summary["rows"], summary["errors"]) == (5, 10)


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_a_bad_non_key_field_is_an_error_row_for_its_case(tmp_path):
    """A line whose case id and trial are readable but another field has the wrong type or range answers its case
    with an error row naming the field, the file and the line; every other row is scored as without it (exit 1)."""
    bad = {  # case id -> (the line's fields changed, the field the message names)
        "D": ({"messages": 5}, "field messages: Input should be a valid list"),
        "E": ({"metadata": {"reward": "x"}}, "field metadata: Value error, metadata.reward must be a number or "
                                             "null (the recorded outcome), not a JSON string"),
        "F": ({"agent": 3}, "field agent: Input should be a valid dictionary"),
        "G": ({"executor_calls": [{"name": "refund", "args": {}, "executions": 2**40}]},
              "executor_calls[0].executions must be an integer in 0..2147483647"),
    }
    cases = TINY_CASES + [{"case_id": case_id, "input": "hi", "expected_calls": []} for case_id in bad]
    folder = write_dataset(tmp_path / "d", cases, TINY_TRACES + [dict(trace(case_id, 0, []), **fields)
                                                                 for case_id, (fields, _) in bad.items()])
    out = tmp_path / "results"
    result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "fields"],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    table = [r for part in sorted((out / "rows").rglob("*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert sorted((r["case_id"], r["trial"], r["f1"]) for r in table if r["error_kind"] is None) == [
        ("A", 0, 1.0), ("A", 1, 0.5), ("B", 0, 0.0), ("C", 0, 1.0)]  # TINY_TRACES' rows, as ever
    errors = {r["case_id"]: r for r in table if r["error_kind"] is not None}
    assert sorted(errors) == sorted(bad)
    traces_file = folder / "traces.jsonl"
    for number, (case_id, (_, named)) in enumerate(bad.items(), start=len(TINY_TRACES) + 1):
        row = errors[case_id]
        assert (row["trial"], row["error_kind"], row["f1"]) == (0, "bad_trace", None)
        assert named in row["error_message"]
        assert row["error_message"].endswith(f"(line {number} of {traces_file})")
    listed = json.loads((out / "runs" / "fields" / "errors.json").read_text())
    assert sorted((e["kind"], e["case_id"], e["trial"]) for e in listed) == [("bad_trace", c, 0) for c in sorted(bad)]
    summary = json.loads((out / "runs" / "fields" / "summary.json").read_text())
    assert (summary["rows"], summary["errors"], summary["unscored_cases"]) == (8, 4, 0)
