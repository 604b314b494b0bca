"""openai-chat importer: record shapes, every call kept, malformed text kept raw, counts and skip reasons,
references, and the handed scoring cases H09a-c imported from chat-completions form and scored."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.support.datasets import handed_cases
from tests.support.importers import read_jsonl, score, write_lines
from tooleval.errors import InputFileError, UnsafeRevisionError
from tooleval.importers import import_openai_chat

ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}


def _call(name: str, arguments, call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _record(case_id: str, calls: list[dict], **extra) -> dict:
    messages = [{"role": "user", "content": f"help with {case_id}"},
                {"role": "assistant", "content": None, "tool_calls": calls}]
    return {"case_id": case_id, "messages": messages, **extra}


class TestCalls:
    def test_every_argument_form_and_every_call_is_kept(self, tmp_path: Path) -> None:
        calls = [_call("get_order", '{"order_id": "A-104"}'), _call("handoff", ""), _call("handoff", None),
                 _call("refund", '{"amount": 1'), _call("lookup", "[1, 2]")]
        src = write_lines(tmp_path / "chat.jsonl", [_record("A", calls, expected_calls=[ORDER])])
        report = import_openai_chat(src, tmp_path / "out")
        assert (report.read, report.converted, report.calls, report.malformed_calls) == (1, 1, 5, 2)
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert [c["function"]["arguments"] for c in trace["messages"][1]["tool_calls"]] == [
            '{"order_id": "A-104"}', "", None, '{"amount": 1', "[1, 2]"]
        (row,) = score(tmp_path / "out")
        # 5 observed: get_order matches; two handoff {} and two malformed are extra -> tp 1, fp 4, fn 0.
        assert (row["tp"], row["fp"], row["fn"], row["malformed_calls"]) == (1, 4, 0, 2)
        raw = sorted(c["args_raw"] for c in row["observed_calls"] if c["parse_error"])
        assert raw == ['[1, 2]', '{"amount": 1']

    def test_legacy_function_call_becomes_a_tool_call(self, tmp_path: Path) -> None:
        record = {"case_id": "L", "expected_calls": [ORDER], "messages": [
            {"role": "user", "content": "order?"},
            {"role": "assistant", "content": None,
             "function_call": {"name": "get_order", "arguments": '{"order_id": "A-104"}'}},
            {"role": "function", "name": "get_order", "content": "{}"}]}
        import_openai_chat(write_lines(tmp_path / "c.jsonl", [record]), tmp_path / "out")
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert "function_call" not in trace["messages"][1]
        assert trace["messages"][1]["tool_calls"][0]["function"]["name"] == "get_order"
        assert trace["messages"][2]["role"] == "tool"
        assert score(tmp_path / "out")[0]["exact_match"] is True

    def test_a_completion_response_object_is_the_reply(self, tmp_path: Path) -> None:
        record = {"case_id": "R", "expected_calls": [ORDER], "id": "chatcmpl-1",
                  "messages": [{"role": "user", "content": "order?"}],
                  "choices": [{"message": {"role": "assistant", "content": None,
                                           "tool_calls": [_call("get_order", '{"order_id":"A-104"}')]}}]}
        import_openai_chat(write_lines(tmp_path / "c.jsonl", [record]), tmp_path / "out")
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert trace["response_id"] == "chatcmpl-1" and len(trace["messages"]) == 2

    # H09a-c are the handed cases about argument text as a chat-completions file carries it.
    @pytest.mark.parametrize("case", [c for c in handed_cases("scoring") if c["id"].startswith("H09")],
                             ids=lambda c: c["id"])
    def test_handed_scoring_cases_survive_the_import(self, tmp_path: Path, case: dict) -> None:
        record = {"case_id": case["id"], "expected_calls": case["expected_calls"],
                  "messages": [{"role": "assistant", "content": None, "tool_calls": case["observed_tool_calls"]}]}
        import_openai_chat(write_lines(tmp_path / "c.jsonl", [record]), tmp_path / "out")
        (row,) = score(tmp_path / "out")
        right = case["right"]
        for key in ("f1", "fp", "fn", "malformed_calls"):
            if key in right:
                assert row[key] == right[key], key
        if "observed_calls" in right:
            assert len(row["observed_calls"]) == len(right["observed_calls"])  # zip below would hide a missing call
        for want, got in zip(right.get("observed_calls", []), row["observed_calls"]):
            assert got["args_raw"] == want["args_raw"]


class TestCasesAndCounts:
    def test_skips_are_counted_with_reasons_and_places(self, tmp_path: Path) -> None:
        src = write_lines(tmp_path / "c.jsonl", [
            _record("A", [_call("get_order", "{}")], expected_calls=[ORDER]),
            "{not json",
            _record("B", []),  # no reference anywhere
            {"case_id": "C", "expected_calls": []},  # no messages
            _record("A", [_call("get_order", "{}")], trial=0),  # repeats (A, 0)
            _record("D", [{"type": "function", "function": {"arguments": "{}"}}], expected_calls=[]),
            "",
            _record("A", [], expected_calls=[{"name": "other", "args": {}}]),  # disagrees with A's case
        ])
        report = import_openai_chat(src, tmp_path / "out")
        assert (report.read, report.converted, report.skipped_total) == (7, 1, 6)
        assert report.skipped == {
            "not valid JSON (Expecting property name enclosed in double quotes)": 1,
            "no reference (no expected_calls and no --references)": 1,
            "no messages": 1,
            "repeats a (case_id, trial)": 1,
            "a tool call has no name": 1,
            "case fields differ from the case's first record": 1,
        }
        assert report.examples["repeats a (case_id, trial)"] == ["c.jsonl:5"]
        assert [c["case_id"] for c in read_jsonl(tmp_path / "out" / "cases.jsonl")] == ["A"]

    def test_trials_count_up_per_case_and_input_is_the_opening(self, tmp_path: Path) -> None:
        src = write_lines(tmp_path / "c.jsonl", [
            _record("A", [], expected_calls=[ORDER]), _record("A", []), _record(7, [], expected_calls=[])])
        import_openai_chat(src, tmp_path / "out")
        traces = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert [(t["case_id"], t["trial"]) for t in traces] == [("A", 0), ("A", 1), ("7", 0)]
        cases = read_jsonl(tmp_path / "out" / "cases.jsonl")
        assert cases[0]["input"] == [{"role": "user", "content": "help with A"}]

    def test_references_file_gives_the_cases(self, tmp_path: Path) -> None:
        refs = write_lines(tmp_path / "refs.jsonl", [
            {"case_id": "A", "expected_calls": [ORDER], "slice": "orders"},
            {"case_id": "B", "input": "given", "expected_calls": []}])
        src = write_lines(tmp_path / "c.jsonl", [
            _record("A", [_call("get_order", '{"order_id": "A-104"}')]), _record("B", []), _record("Z", [])])
        report = import_openai_chat(src, tmp_path / "out", references=refs)
        assert report.skipped == {"case_id not in --references": 1}
        cases = {c["case_id"]: c for c in read_jsonl(tmp_path / "out" / "cases.jsonl")}
        assert cases["A"]["input"] == [{"role": "user", "content": "help with A"}] and cases["B"]["input"] == "given"
        assert [r["exact_match"] for r in score(tmp_path / "out")] == [True, True]

    def test_references_that_no_record_names_are_a_file_error(self, tmp_path: Path) -> None:
        # Reference cases alone are no dataset: with no record converted, nothing is written (exit 2 on the CLI).
        refs = write_lines(tmp_path / "refs.jsonl", [{"case_id": "A", "expected_calls": [ORDER]}])
        src = write_lines(tmp_path / "c.jsonl", [_record("Z", [])])
        with pytest.raises(InputFileError, match="no case could be imported: case_id not in --references"):
            import_openai_chat(src, tmp_path / "out", references=refs)
        assert not (tmp_path / "out").exists()

    def test_reward_and_agent_reach_the_trace(self, tmp_path: Path) -> None:
        src = write_lines(tmp_path / "c.jsonl", [
            _record("A", [], expected_calls=[], reward=1.0, agent={"name": "bot", "version": "3"}, team="x")])
        import_openai_chat(src, tmp_path / "out")
        (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
        assert trace["agent"] == {"name": "bot", "version": "3"}
        assert trace["metadata"] == {"reward": 1.0, "team": "x", "source": "c.jsonl:1"}
        assert score(tmp_path / "out")[0]["recorded_reward"] == 1.0

    def test_gzip_source_default_revision_and_determinism(self, tmp_path: Path) -> None:
        data = json.dumps(_record("A", [], expected_calls=[])) + "\n"
        (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(data.encode(), mtime=0))
        first = import_openai_chat(tmp_path / "c.jsonl.gz", tmp_path / "one").datasets[0]
        second = import_openai_chat(tmp_path / "c.jsonl.gz", tmp_path / "two").datasets[0]
        manifest = json.loads((first / "dataset.json").read_text())
        assert manifest["name"] == "one" and manifest["revision"].startswith("src-")
        for name in ("cases.jsonl", "traces.jsonl.gz"):
            assert (first / name).read_bytes() == (second / name).read_bytes()

    def test_unsafe_revision_writes_nothing(self, tmp_path: Path) -> None:
        src = write_lines(tmp_path / "c.jsonl", [_record("A", [], expected_calls=[])])
        with pytest.raises(UnsafeRevisionError):
            import_openai_chat(src, tmp_path / "out", revision="../x")
        assert not (tmp_path / "out").exists()


def test_later_records_may_repeat_some_case_fields_but_not_change_them(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "c.jsonl", [
        _record("A", [], expected_calls=[ORDER], slice="orders"),
        _record("A", [], expected_calls=[ORDER]),  # repeats one field, same value: fine
        _record("A", [], slice="refunds"),  # changes one
        _record("A", [], risk="high"),  # adds one the case does not have
    ])
    report = import_openai_chat(src, tmp_path / "out")
    assert (report.converted, report.skipped) == (2, {"case fields differ from the case's first record": 2})
