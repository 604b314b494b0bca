"""openai-responses importer: handed case H11 (a single function_call item, and a list of them), text-only output
as zero calls, and a file of 3 conversations that imports and scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.datasets import handed_cases
from tests.support.importers import read_jsonl, score, write_lines
from tooleval.errors import InputFileError
from tooleval.importers import import_openai_responses

H11 = next(case for case in handed_cases("import") if case["id"] == "H11")
ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}


def _observed(row: dict) -> list[dict]:
    return [{"name": c["name"], "args": c["args_json"]} for c in row["observed_calls"] or []]


def test_h11_single_item_and_list_of_items(tmp_path: Path) -> None:
    # One line is the bare item of H11, one a list holding it twice, one a wrapper with case fields.
    item = H11["input"]
    src = write_lines(tmp_path / "r.jsonl", [item, [item, {**item, "call_id": "fc_2"}]])
    refs = write_lines(tmp_path / "refs.jsonl", [{"case_id": "line-1", "expected_calls": [ORDER]},
                                                 {"case_id": "line-2", "expected_calls": [ORDER, ORDER]}])
    report = import_openai_responses(src, tmp_path / "out", references=refs)
    assert (report.converted, report.calls) == (2, 3)
    rows = {row["case_id"]: row for row in score(tmp_path / "out")}
    want = [{"name": c["name"], "args": '{"order_id":"A-104"}'} for c in H11["right"]["observed_calls"]]
    assert _observed(rows["line-1"]) == want
    assert _observed(rows["line-2"]) == want * 2
    assert rows["line-1"]["exact_match"] and rows["line-2"]["exact_match"]
    (first, second) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
    assert len(second["messages"]) == 1 and [c["id"] for c in second["messages"][0]["tool_calls"]] == ["fc_1", "fc_2"]


def test_three_conversations_import_and_score(tmp_path: Path) -> None:
    lookup = {"type": "function_call", "call_id": "a", "name": "get_order", "arguments": '{"order_id": "A-104"}'}
    broken = {"type": "function_call", "call_id": "b", "name": "refund", "arguments": '{"amount": 5'}
    records = [
        {"case_id": "lookup", "expected_calls": [ORDER], "input": "Where is A-104?",
         "output": [{"type": "reasoning", "summary": []}, lookup,
                    {"type": "function_call_output", "call_id": "a", "output": "shipped"},
                    {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "It "}, {"type": "output_text", "text": "shipped."}]}]},
        {"case_id": "chat", "expected_calls": [], "response": {"id": "resp_1", "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]}]}},
        {"case_id": "refund", "expected_calls": [{"name": "refund", "args": {"amount": 5}}], "output": [broken]},
    ]
    report = import_openai_responses(write_lines(tmp_path / "r.jsonl", records), tmp_path / "out")
    assert (report.read, report.converted, report.skipped_total, report.calls, report.malformed_calls) == (3, 3, 0, 2, 1)
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert traces["lookup"]["messages"][0] == {"role": "user", "content": "Where is A-104?"}
    assert traces["lookup"]["messages"][-1]["content"] == "It shipped."
    # Position 1: the request's input (one text item) comes first.
    assert traces["lookup"]["metadata"]["other_items"] == [{"position": 1, "item": {"type": "reasoning", "summary": []}}]
    assert traces["chat"]["response_id"] == "resp_1"
    rows = {row["case_id"]: row for row in score(tmp_path / "out")}
    assert rows["lookup"]["exact_match"] and rows["lookup"]["f1"] == 1.0
    # Text only: zero calls, nothing expected -> the correct abstention (f1 1.0).
    assert rows["chat"]["observed_calls"] == [] and rows["chat"]["f1"] == 1.0
    # The truncated argument text stays raw: one malformed call, tp 0, fp 1, fn 1.
    assert (rows["refund"]["malformed_calls"], rows["refund"]["fp"], rows["refund"]["fn"]) == (1, 1, 1)
    assert rows["refund"]["observed_calls"][0]["args_raw"] == '{"amount": 5'


def test_records_without_items_are_skipped(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "r.jsonl", [{"case_id": "x", "expected_calls": []}, 3,
                                             [{"type": "function_call", "arguments": "{}"}]])
    # Nothing to import at all: a file error naming the reasons, and nothing written.
    with pytest.raises(InputFileError, match=r"no case could be imported: .*no output items \(1\)"):
        import_openai_responses(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    src = write_lines(tmp_path / "r.jsonl", [{"case_id": "x", "expected_calls": []}, 3,
                                             [{"type": "function_call", "arguments": "{}"}],
                                             {"case_id": "y", "expected_calls": [], "output": []}])
    report = import_openai_responses(src, tmp_path / "out")
    assert report.skipped == {"no output items": 1, "not a JSON object or list": 1, "a function_call has no name": 1}
