"""langchain importer: handed case H10 (calls only in ``.tool_calls``), calls only in ``additional_kwargs``, both
(kept once), ``invalid_tool_calls`` as malformed calls, content blocks flattened, the three serialised shapes, and
a file of 3 conversations that imports and scores."""

from __future__ import annotations

from pathlib import Path

from tests.support.datasets import handed_cases
from tests.support.importers import read_jsonl, score, write_lines
from tooleval.importers import import_langchain

H10 = next(case for case in handed_cases("import") if case["id"] == "H10")
ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}
RAW = {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "A-104"}'}}


def _import(tmp_path: Path, records: list) -> dict[str, dict]:
    import_langchain(write_lines(tmp_path / "lc.jsonl", records), tmp_path / "out")
    return {row["case_id"]: row for row in score(tmp_path / "out")}


def test_h10_calls_only_in_tool_calls(tmp_path: Path) -> None:
    rows = _import(tmp_path, [{"case_id": "H10", "expected_calls": [ORDER], "messages": [H10["input"]]}])
    want = H10["right"]["observed_calls"]
    got = [{"name": c["name"], "args": c["args_json"]} for c in rows["H10"]["observed_calls"]]
    assert got == [{"name": w["name"], "args": '{"order_id":"A-104"}'} for w in want]
    assert rows["H10"]["f1"] == 1.0


def test_three_conversations_import_and_score(tmp_path: Path) -> None:
    human = {"type": "human", "content": "Where is A-104?"}
    records = [
        # messages_to_dict shape, calls only in additional_kwargs (OpenAI wire form).
        {"case_id": "kwargs", "expected_calls": [ORDER], "messages": [
            {"type": "human", "data": {"content": "Where is A-104?"}},
            {"type": "ai", "data": {"content": "", "additional_kwargs": {"tool_calls": [RAW]}}}]},
        # dumpd shape, the same call in both places (kept once), a second call only in tool_calls,
        # content as a list of blocks.
        {"case_id": "both", "expected_calls": [ORDER, {"name": "refund", "args": {"amount": 5}}], "messages": [
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
             "kwargs": {"content": "Refund A-104"}},
            {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"], "kwargs": {
                "content": [{"type": "text", "text": "Looking "}, {"type": "tool_use", "id": "c1"},
                            {"type": "text", "text": "it up."}],
                "additional_kwargs": {"tool_calls": [RAW]},
                "tool_calls": [{"name": "get_order", "args": {"order_id": "A-104"}, "id": "c1"},
                               {"name": "refund", "args": {"amount": 5}, "id": "c2"}]}},
            {"type": "tool", "content": "done", "tool_call_id": "c2"}]},
        # invalid_tool_calls: the raw text LangChain could not parse.
        {"case_id": "invalid", "expected_calls": [ORDER], "messages": [human, {
            "type": "ai", "content": "",
            "invalid_tool_calls": [{"name": "get_order", "args": '{"order_id": "A-10', "id": "c9",
                                    "error": "Function get_order arguments are not valid JSON."}]}]},
    ]
    rows = _import(tmp_path, records)
    assert rows["kwargs"]["exact_match"] is True
    assert rows["both"]["exact_match"] is True and len(rows["both"]["observed_calls"]) == 2
    assert (rows["invalid"]["malformed_calls"], rows["invalid"]["fn"], rows["invalid"]["fp"]) == (1, 1, 1)
    assert rows["invalid"]["observed_calls"][0]["args_raw"] == '{"order_id": "A-10'
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    reply = traces["both"]["messages"][1]
    assert reply["role"] == "assistant" and reply["content"] == "Looking it up."
    assert len(reply["content_blocks"]) == 3
    assert traces["both"]["messages"][2] == {"role": "tool", "content": "done", "tool_call_id": "c2"}
    assert [m["role"] for m in traces["kwargs"]["messages"]] == ["user", "assistant"]


def test_unknown_message_type_is_skipped_with_its_reason(tmp_path: Path) -> None:
    report = import_langchain(
        write_lines(tmp_path / "lc.jsonl", [{"case_id": "x", "expected_calls": [], "messages": [{"type": "robot"}]},
                                            {"case_id": "y", "expected_calls": [], "messages": []}]),
        tmp_path / "out")
    assert report.skipped == {"unknown message type 'robot'": 1} and report.converted == 1
