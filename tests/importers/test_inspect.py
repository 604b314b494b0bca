"""inspect importer on ``.eval`` logs built in Inspect AI's log layout (a zip of ``header.json`` and
``samples/<id>_epoch_<n>.json``; inspect_ai itself asks for rich >= 15 beside the CLI's pin of 13.9.4, so the logs
are written here to its documented shape): calls, a parse error, the executor's tool events, letter-grade
rewards, epochs as trials, and a truncated log refused."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from import_helpers import read_jsonl, score
from tooleval.errors import InputFileError
from tooleval.importers import import_inspect

ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}


def _sample(sample_id, epoch: int, order_id: str, grade: str, *, parse_error: str | None = None) -> dict:
    call = {"id": "call_1", "function": "get_order", "arguments": {} if parse_error else {"order_id": order_id},
            "type": "function", "parse_error": parse_error}
    return {"id": sample_id, "epoch": epoch, "uuid": f"u-{sample_id}-{epoch}", "input": "Where is A-104?",
            "target": "shipped", "metadata": {"expected_calls": [ORDER]},
            "messages": [{"role": "user", "content": "Where is A-104?", "source": "input"},
                         {"role": "assistant", "content": [{"type": "text", "text": "Checking."}],
                          "tool_calls": [call], "model": "mockllm/model"},
                         {"role": "tool", "content": "shipped", "tool_call_id": "call_1", "function": "get_order",
                          "error": None if not parse_error else {"type": "parsing", "message": parse_error}},
                         {"role": "assistant", "content": "It shipped."}],
            "scores": {"match": {"value": grade, "answer": "It shipped."}},
            "events": [{"event": "model", "model": "mockllm/model"},
                       {"event": "tool", "id": "call_1", "function": "get_order",
                        "arguments": {"order_id": order_id}, "result": "shipped"}]}


def _log(path: Path, samples: list[dict]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as log:
        log.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {
            "task": "orders", "task_id": "t1", "run_id": "r1", "eval_id": "e1", "model": "mockllm/model"}}))
        for sample in samples:
            log.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        log.writestr("summaries.json", "[]")
    return path


def test_samples_epochs_rewards_and_the_executor_boundary(tmp_path: Path) -> None:
    src = _log(tmp_path / "orders.eval", [_sample(1, 1, "A-104", "C"), _sample(1, 2, "B-7", "I"),
                                           _sample("two", 1, "A-104", "P", parse_error="Expecting ',' delimiter")])
    report = import_inspect(src, tmp_path / "out")
    assert (report.read, report.converted, report.calls, report.malformed_calls) == (3, 3, 3, 1)
    traces = {(t["case_id"], t["trial"]): t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    first = traces[("1", 0)]
    assert first["agent"] == {"name": "orders", "model": "mockllm/model"}
    assert first["executor_calls"] == [{"name": "get_order", "executions": 1, "args": '{"order_id": "A-104"}',
                                        "call_id": "call_1"}]
    assert first["metadata"]["inspect"]["uuid"] == "u-1-1" and first["messages"][1]["content"] == "Checking."
    rows = {(r["case_id"], r["trial"]): r for r in score(tmp_path / "out")}
    assert (rows[("1", 0)]["exact_match"], rows[("1", 0)]["recorded_reward"]) == (True, 1.0)
    assert (rows[("1", 1)]["exact_match"], rows[("1", 1)]["recorded_reward"]) == (False, 0.0)
    broken = rows[("two", 0)]
    # the parse error is a malformed call, never the {} Inspect stores beside it
    assert (broken["malformed_calls"], broken["tp"], broken["recorded_reward"]) == (1, 0, 0.5)


def test_a_bad_sample_is_skipped_and_a_truncated_log_refused(tmp_path: Path) -> None:
    src = tmp_path / "mixed.eval"
    with zipfile.ZipFile(src, "w") as log:
        log.writestr("header.json", json.dumps({"eval": {"task": "orders", "model": "m"}}))
        log.writestr("samples/1_epoch_1.json", json.dumps(_sample(1, 1, "A-104", "C")))
        log.writestr("samples/2_epoch_1.json", '{"id": 2, "epoch": 1, "messages": [')
        log.writestr("samples/3_epoch_1.json", json.dumps({"id": 3, "epoch": 1}))
    report = import_inspect(src, tmp_path / "out")
    assert (report.read, report.converted) == (3, 1)
    assert report.skipped == {"a sample cannot be read (JSONDecodeError)": 1,
                              "not an Inspect sample (no messages list)": 1}
    assert report.examples["not an Inspect sample (no messages list)"] == ["mixed.eval:samples/3_epoch_1.json"]
    cut = tmp_path / "cut.eval"
    cut.write_bytes(_log(tmp_path / "whole.eval", [_sample(1, 1, "A-104", "C")]).read_bytes()[:-60])
    with pytest.raises(InputFileError, match="not a readable .eval log") as info:
        import_inspect(cut, tmp_path / "out2")
    assert "cut.eval" in str(info.value) and not (tmp_path / "out2").exists()
