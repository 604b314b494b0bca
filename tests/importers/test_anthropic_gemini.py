"""anthropic and gemini importers, on records built with the providers' own SDK types (anthropic 2.16,
google-genai 3.6) and serialised as the SDKs do (``Message.to_dict()``, ``model_dump(mode="json")``): parallel
calls, a tool error, a malformed argument, counts and skips, and an imported file through ``tooleval run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from anthropic.types import Message, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from google.genai import types as gt
from typer.testing import CliRunner

from tests.support.importers import read_jsonl, score, write_lines
from tooleval.cli import app
from tooleval.errors import InputFileError
from tooleval.importers import import_anthropic, import_gemini

ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}
SHIP = {"name": "get_shipping", "args": {"order_id": "A-104"}}


def _message(*blocks, message_id: str = "msg_01") -> dict:
    return Message(id=message_id, type="message", role="assistant", model="claude-sonnet-4-5", content=list(blocks),
                   stop_reason="tool_use", stop_sequence=None, usage=Usage(input_tokens=10, output_tokens=5)).to_dict()


def _use(call_id: str, name: str, arguments: dict) -> ToolUseBlock:
    return ToolUseBlock(type="tool_use", id=call_id, name=name, input=arguments)


def _as_text(dumped: dict, path: tuple, text: str) -> dict:
    """The SDKs type arguments as an object; a raw log can hold text there (a broken stream's accumulated
    ``input_json_delta`` or ``args``): put the text in place of the dumped object."""
    target = dumped
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = text
    return dumped


class TestAnthropic:
    def test_parallel_calls_a_tool_error_and_the_reply(self, tmp_path: Path) -> None:
        first = _message(ThinkingBlock(type="thinking", thinking="look up both", signature="sig"),
                         TextBlock(type="text", text="Checking."),
                         _use("toolu_1", "get_order", {"order_id": "A-104"}),
                         _use("toolu_2", "get_shipping", {"order_id": "A-104"}))
        history = [{"role": "user", "content": "Where is A-104?"},
                   {"role": first["role"], "content": first["content"]},
                   {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}]},
                       {"type": "tool_result", "tool_use_id": "toolu_2", "content": "carrier down",
                        "is_error": True}]}]
        reply = _message(_use("toolu_3", "get_shipping", {"order_id": "A-104"}), message_id="msg_02")
        record = {"case_id": "A", "expected_calls": [ORDER, SHIP], "reward": 0.5, "system": "Be brief.",
                  "model": "claude-sonnet-4-5", "max_tokens": 512, "messages": history, "response": reply}
        report = import_anthropic(write_lines(tmp_path / "a.jsonl", [record]), tmp_path / "out")
        assert (report.read, report.converted, report.calls, report.malformed_calls) == (1, 1, 3, 0)
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        roles = [m["role"] for m in trace["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
        assert [c["id"] for c in trace["messages"][2]["tool_calls"]] == ["toolu_1", "toolu_2"]
        assert trace["messages"][2]["content"] == "Checking."
        assert trace["messages"][4] == {"role": "tool", "tool_call_id": "toolu_2", "content": "carrier down",
                                        "is_error": True}
        assert trace["response_id"] == "msg_02"
        assert trace["metadata"]["reward"] == 0.5 and trace["metadata"]["stop_reason"] == "tool_use"
        assert trace["metadata"]["other_blocks"][0]["item"]["type"] == "thinking"
        (row,) = score(tmp_path / "out")
        # expected get_order, get_shipping; observed get_order, get_shipping, get_shipping -> tp 2, fp 1.
        assert (row["tp"], row["fp"], row["fn"], row["recorded_reward"]) == (2, 1, 0, 0.5)

    def test_malformed_input_text_is_kept_raw_and_a_missing_input_is_not_captured(self, tmp_path: Path) -> None:
        broken = _as_text(_message(_use("t1", "get_order", {})), ("content", 0, "input"), '{"order_id": "A-1')
        records = [{"case_id": "M", "expected_calls": [ORDER], **broken},
                   {"case_id": "N", "expected_calls": [ORDER], "messages": [
                       {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "get_order"}]}]}]
        report = import_anthropic(write_lines(tmp_path / "a.jsonl", records), tmp_path / "out")
        assert (report.converted, report.calls, report.malformed_calls) == (2, 2, 1)
        traces = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert traces[0]["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"order_id": "A-1'
        assert traces[0]["response_id"] == "msg_01"
        assert traces[1]["messages"][0]["tool_calls"][0]["arguments_captured"] is False
        rows = {r["case_id"]: r for r in score(tmp_path / "out")}
        assert (rows["M"]["malformed_calls"], rows["M"]["tp"]) == (1, 0)
        assert rows["N"]["name_only"] is True and rows["N"]["fp"] == 0  # never scored as a wrong {} call

    def test_batch_results_and_skips_are_counted(self, tmp_path: Path) -> None:
        good = {"custom_id": "B1", "result": {"type": "succeeded",
                                              "message": _message(_use("t", "get_order", {"order_id": "A-104"}))}}
        src = write_lines(tmp_path / "batch.jsonl", [
            good, {"custom_id": "B2", "result": {"type": "errored", "error": {"type": "overloaded_error"}}},
            "{trunc", {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "x"}]}]},
            {"hello": 1}])
        refs = write_lines(tmp_path / "refs.jsonl", [{"case_id": "B1", "input": "go", "expected_calls": [ORDER]}])
        report = import_anthropic(src, tmp_path / "out", references=refs)
        assert (report.read, report.converted, report.skipped_total) == (5, 1, 4)
        assert set(report.skipped) == {"batch result is 'errored', not succeeded",
                                       "not valid JSON (Expecting property name enclosed in double quotes)",
                                       "a tool_use block has no name",
                                       "no messages (no messages list, Message object or batch result)"}
        assert report.examples["a tool_use block has no name"] == ["batch.jsonl:4"]
        assert score(tmp_path / "out")[0]["exact_match"] is True

    def test_a_file_with_nothing_importable_is_refused_and_nothing_written(self, tmp_path: Path) -> None:
        src = write_lines(tmp_path / "a.jsonl", [{"role": "user"}, [1, 2]])
        with pytest.raises(InputFileError, match="no case could be imported") as info:
            import_anthropic(src, tmp_path / "out")
        assert "a.jsonl" in str(info.value) and not (tmp_path / "out").exists()


def _response(*parts: gt.Part, finish: str = "STOP", message: str | None = None) -> gt.GenerateContentResponse:
    return gt.GenerateContentResponse(
        candidates=[gt.Candidate(content=gt.Content(role="model", parts=list(parts)), finish_reason=finish,
                                 finish_message=message)],
        response_id="resp-1", model_version="gemini-2.5-flash")


def _call(name: str, args: dict | None) -> gt.Part:
    return gt.Part(function_call=gt.FunctionCall(name=name, args=args))


class TestGemini:
    @pytest.mark.parametrize("by_alias", [True, False], ids=["camelCase", "snake_case"])
    def test_parallel_calls_a_tool_error_and_the_reply(self, tmp_path: Path, by_alias: bool) -> None:
        dump = {"mode": "json", "exclude_none": True, "by_alias": by_alias}
        contents = [gt.Content(role="user", parts=[gt.Part(text="Where is A-104?")]),
                    gt.Content(role="model", parts=[gt.Part(text="plan", thought=True),
                                                    _call("get_order", {"order_id": "A-104"}),
                                                    _call("get_shipping", {"order_id": "A-104"})]),
                    gt.Content(role="user", parts=[
                        gt.Part.from_function_response(name="get_shipping", response={"error": "carrier down"}),
                        gt.Part.from_function_response(name="get_order", response={"output": "shipped"})])]
        request = gt.GenerateContentConfig(system_instruction="Be brief.").model_dump(**dump)
        record = {"case_id": "G", "expected_calls": [ORDER, SHIP], "reward": 1.0,
                  "contents": [c.model_dump(**dump) for c in contents],
                  "systemInstruction" if by_alias else "system_instruction": request["systemInstruction" if by_alias
                                                                                    else "system_instruction"],
                  "response": _response(gt.Part(text="Shipped.")).model_dump(**dump)}
        report = import_gemini(write_lines(tmp_path / "g.jsonl", [record]), tmp_path / "out")
        assert (report.read, report.converted, report.calls) == (1, 1, 2)
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert [m["role"] for m in trace["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant"]
        calls = trace["messages"][2]["tool_calls"]
        assert [(c["id"], c["function"]["name"]) for c in calls] == [("gemini-1-1", "get_order"),
                                                                     ("gemini-1-2", "get_shipping")]
        # each response answers the call of its name, whatever the order it came back in
        assert [(m["tool_call_id"], m.get("is_error")) for m in trace["messages"][3:5]] == [
            ("gemini-1-2", True), ("gemini-1-1", None)]
        assert trace["messages"][5]["content"] == "Shipped."
        assert trace["response_id"] == "resp-1" and trace["metadata"]["model"] == "gemini-2.5-flash"
        assert trace["metadata"]["other_parts"][0]["item"]["thought"] is True
        (row,) = score(tmp_path / "out")
        assert (row["exact_match"], row["recorded_reward"]) == (True, 1.0)

    def test_malformed_arguments_and_a_malformed_function_call_finish(self, tmp_path: Path) -> None:
        dump = {"mode": "json", "exclude_none": True, "by_alias": True}
        records = [{"case_id": "M", "expected_calls": [ORDER],
                    **_as_text(_response(_call("get_order", {})).model_dump(**dump),
                               ("candidates", 0, "content", "parts", 0, "functionCall", "args"), '{"order_id": "A-1')},
                   {"case_id": "F", "expected_calls": [ORDER],
                    **_response(finish="MALFORMED_FUNCTION_CALL",
                                message="Malformed function call: get_order(order_id=A-104").model_dump(**dump)},
                   {"case_id": "Z", "expected_calls": [{"name": "now", "args": {}}],
                    **_response(_call("now", None)).model_dump(**dump)}]
        report = import_gemini(write_lines(tmp_path / "g.jsonl", records), tmp_path / "out")
        assert (report.converted, report.calls, report.malformed_calls) == (3, 2, 1)
        traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
        assert traces["F"]["metadata"]["finish_reason"] == "MALFORMED_FUNCTION_CALL"
        rows = {r["case_id"]: r for r in score(tmp_path / "out")}
        assert (rows["M"]["malformed_calls"], rows["M"]["fp"], rows["M"]["fn"]) == (1, 1, 1)
        assert (rows["F"]["tp"], rows["F"]["fn"]) == (0, 1)
        assert rows["Z"]["exact_match"] is True  # a call without parameters: no args key, scored as {}

    def test_batch_lines_and_skips(self, tmp_path: Path) -> None:
        dump = {"mode": "json", "exclude_none": True, "by_alias": True}
        vertex = {"request": {"contents": [{"role": "user", "parts": [{"text": "go"}]}]},
                  "response": _response(_call("get_order", {"order_id": "A-104"})).model_dump(**dump)}
        gemini_batch = {"key": "K2", "response": _response(_call("get_order", {"order_id": "A-104"})).model_dump(**dump)}
        blocked = {"key": "K3", "response": {"candidates": [], "promptFeedback": {"blockReason": "SAFETY"}}}
        src = write_lines(tmp_path / "batch.jsonl", [{**vertex, "case_id": "K1"}, gemini_batch, blocked,
                                                     {"contents": [{"role": "model", "parts": [{"functionCall": {}}]}]}])
        refs = write_lines(tmp_path / "refs.jsonl", [{"case_id": k, "input": "go", "expected_calls": [ORDER]}
                                                      for k in ("K1", "K2", "K3")])
        report = import_gemini(src, tmp_path / "out", references=refs)
        assert (report.read, report.converted, report.skipped_total) == (4, 2, 2)
        assert set(report.skipped) == {"response has no candidate (prompt blocked: SAFETY)",
                                       "a functionCall part has no name"}
        assert {r["case_id"]: r["exact_match"] for r in score(tmp_path / "out")} == {"K1": True, "K2": True}


def test_both_formats_run_end_to_end_from_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    anthropic_src = write_lines(tmp_path / "claude.jsonl", [
        {"case_id": "one", "expected_calls": [ORDER], "messages": [{"role": "user", "content": "A-104?"}],
         "response": _message(_use("t1", "get_order", {"order_id": "A-104"}))},
        "not json"])
    gemini_src = write_lines(tmp_path / "gemini.jsonl", [
        {"case_id": "one", "expected_calls": [ORDER], "contents": [{"role": "user", "parts": [{"text": "A-104?"}]}],
         "response": _response(_call("get_order", {"order_id": "B"})).model_dump(mode="json", exclude_none=True)}])
    result = runner.invoke(app, ["import", "anthropic", str(anthropic_src), "--out", str(tmp_path / "a")])
    assert result.exit_code == 1, result.output  # one line skipped, the rest written
    assert "read 2, converted 1, skipped 1; 1 tool calls written" in result.output
    result = runner.invoke(app, ["import", "gemini", str(gemini_src), "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert "read 1, converted 1, skipped 0; 1 tool calls written" in result.output
    for folder, exact in (("a", 1), ("g", 0)):
        result = runner.invoke(app, ["run", "--dataset", str(tmp_path / folder), "--out", str(tmp_path / f"res-{folder}"),
                                     "--run-id", folder], env={"COLUMNS": "200"})
        assert result.exit_code in (0, 1), result.output
        summary = json.loads((tmp_path / f"res-{folder}" / "runs" / folder / "summary.json").read_text())
        assert (summary["rows"], summary["exact_match_rows"]) == (1, exact)
