"""Issue 11 section 4: input is never rewritten silently, and one bad row never costs the batch.

Parsing rules are pinned as behaviour (what a call or a line becomes), not as the parser that implements them.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import TINY_CASES, TINY_TRACES, tool_call, trace, write_dataset
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
