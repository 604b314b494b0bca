"""inspect importer on ``.eval`` logs: one written by inspect_ai itself (a real task run against its scripted
``mockllm`` model, see inspect_producer.py; Zstandard members), imported and run from the command line; and logs
built here in Inspect AI's log layout (a zip of ``header.json`` and ``samples/<id>_epoch_<n>.json``, deflated):
calls, a parse error, the executor's tool events, letter-grade rewards (``P`` too), epochs as trials, and what no
producer writes on purpose: a sample that cannot be read, one that is no sample, a truncated log."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.support.importers import read_jsonl, score
from tests.importers.inspect_producer import EPOCHS, EXPECTED, GARBLED, produce
from tooleval.cli import app
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


def test_a_sample_that_ended_with_an_error_fails_with_it(tmp_path: Path) -> None:
    """Inspect keeps a sample whose model call raised, with the messages it had so far (here only the user's) and
    an ``error``. Scored as it stands it would be an answer without calls (f1 0, the agent's fault); it is a
    generation error instead, counted in the import's notes."""
    crashed = {"id": "3", "epoch": 1, "uuid": "u-3", "input": "Where is A-104?",
               "metadata": {"expected_calls": [ORDER]},
               "messages": [{"role": "user", "content": "Where is A-104?", "source": "input"}],
               "error": {"message": "ConnectionError: the model API refused the connection\nsecond line",
                         "traceback": "Traceback (most recent call last): ..."}}
    src = _log(tmp_path / "orders.eval", [_sample(1, 1, "A-104", "C"), crashed])
    report = import_inspect(src, tmp_path / "out")
    assert (report.read, report.converted) == (2, 2)
    assert report.notes == ["1 samples ended with an Inspect error (orders.eval:samples/3_epoch_1.json); their "
                            "rows fail with it (generation_error), never scored as answers without calls."]
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert traces["3"]["error"] == "Inspect sample error: ConnectionError: the model API refused the connection"
    assert "error" not in traces["1"]
    rows = {r["case_id"]: r for r in score(tmp_path / "out")}
    assert rows["3"]["error_kind"] == "generation_error" and rows["3"]["f1"] is None
    assert "refused the connection" in rows["3"]["error_message"]
    assert (rows["1"]["error_kind"], rows["1"]["exact_match"]) == (None, True)


@pytest.mark.slow  # inspect_ai's eval() in a child process, then `tooleval run`
def test_a_log_inspect_ai_wrote_is_imported_and_run_end_to_end(tmp_path: Path) -> None:
    log = produce(tmp_path / "logs", tmp_path / "truth.json")
    truth = json.loads((tmp_path / "truth.json").read_text())
    # Inspect writes its members with Zstandard, which this Python's zipfile cannot read unaided
    assert {info.compress_type for info in zipfile.ZipFile(log).infolist()} == {93}
    runner = CliRunner()
    result = runner.invoke(app, ["import", "inspect", str(log), "--out", str(tmp_path / "ds")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # 3 samples x 2 epochs; calls per sample 1 + 1 + 2, of which sample 3's refund is the garbled one
    samples, calls = 3 * EPOCHS, (1 + 1 + 2) * EPOCHS
    assert f"read {samples}, converted {samples}, skipped 0; {calls} tool calls written ({EPOCHS} with malformed" \
           in result.output

    traces = {(t["case_id"], t["trial"]): t for t in read_jsonl(tmp_path / "ds" / "traces.jsonl.gz")}
    assert set(traces) == {(case, trial) for case in ("1", "two", "3") for trial in range(EPOCHS)}
    for (case, trial), trace in traces.items():
        seen = truth["samples"][f"{case}/{trial + 1}"]
        assert trace["agent"] == {"name": "orders", "model": "mockllm/model"}
        assert trace["metadata"]["inspect"] == {"task": "orders", "run_id": truth["run_id"],
                                                "eval_id": truth["eval_id"], "sample_id": int(case) if
                                                case.isdigit() else case, "epoch": trial + 1, "uuid": seen["uuid"]}
        emitted = [c for m in trace["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        # the calls as Inspect's own reader sees them, arguments as JSON text; a parse error kept as the text
        assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in emitted] == [
            (c["id"], c["function"], c["parse_error"] or json.dumps(c["arguments"])) for c in seen["calls"]]
    assert traces[("3", 0)]["messages"][1]["tool_calls"][1]["function"]["arguments"] == \
        f"Expecting ',' delimiter: {GARBLED}"
    # the executor ran the calls it could parse; the garbled one reached it as a parsing error
    assert traces[("two", 1)]["executor_calls"] == [{"name": "get_order", "executions": 1, "status": "error",
                                                     "args": '{"order_id": "B-8"}', "call_id": "call_1"}]
    assert [(c["name"], c.get("status")) for c in traces[("3", 0)]["executor_calls"]] == [
        ("get_order", None), ("refund", "error")]
    assert traces[("two", 0)]["messages"][2]["is_error"] is True

    result = runner.invoke(app, ["run", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "res"),
                                 "--run-id", "inspect"], env={"COLUMNS": "200"})
    assert result.exit_code in (0, 1), result.output  # the gate fails on the wrong answers; the run completes
    rows = {(r["case_id"], r["trial"]): r for part in sorted((tmp_path / "res" / "rows").rglob("*.parquet"))
            for r in pq.read_table(part).to_pylist()}
    # per sample, against its expected calls: 1 all right; two asked for B-8, not B-7 (one extra, one missing);
    # 3 got get_order right and garbled the refund (malformed: extra, and the expected refund missing).
    # recorded_reward is Inspect's includes() grade: C (1.0) only where the answer holds the target.
    want = {"1": (1, 0, 0, 0, True, 1.0, 1.0), "two": (0, 1, 1, 0, False, 0.0, 0.0),
            "3": (1, 1, 1, 1, False, 0.5, 0.0)}
    assert {key: (r["tp"], r["fp"], r["fn"], r["malformed_calls"], r["exact_match"], r["f1"], r["recorded_reward"])
            for key, r in rows.items()} == {(case, trial): figures for case, figures in want.items()
                                            for trial in range(EPOCHS)}
    assert {truth["samples"][f"{case}/{trial + 1}"]["score"] for (case, trial) in rows if case == "1"} == {"C"}
    summary = json.loads((tmp_path / "res" / "runs" / "inspect" / "summary.json").read_text())
    expected_calls = sum(len(e) for e in EXPECTED.values()) * EPOCHS
    assert (summary["rows"], summary["exact_match_rows"], summary["expected_calls"], summary["observed_calls"],
            summary["tp"], summary["fp"], summary["fn"], summary["rows_with_malformed"]) == (
        samples, EPOCHS, expected_calls, calls, 2 * EPOCHS, 2 * EPOCHS, 2 * EPOCHS, EPOCHS)
    assert summary["mean_f1"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)

    # one Zstandard member damaged in the middle of its compressed bytes: that sample is skipped, the rest imported
    damaged = tmp_path / "damaged.eval"
    raw = bytearray(log.read_bytes())
    info = zipfile.ZipFile(log).getinfo("samples/two_epoch_1.json")
    name_length, extra_length = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    raw[info.header_offset + 30 + name_length + extra_length + info.compress_size // 2] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    report = import_inspect(damaged, tmp_path / "damaged")
    assert (report.read, report.converted) == (samples, samples - 1)
    assert report.skipped == {"a sample cannot be read (BadZipFile)": 1}
    assert report.examples["a sample cannot be read (BadZipFile)"] == ["damaged.eval:samples/two_epoch_1.json"]
