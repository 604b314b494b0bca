"""mlflow importer on stores MLflow itself wrote (mlflow-skinny's tracing, openai autologging, log_feedback; see
mlflow_producer.py): its SQLite store and its ./mlruns file store, imported, scored, and compared with what MLflow's
own client reads back; and damaged stores refused with the file, the place and the fix, nothing written."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.importers import read_jsonl, score, write_lines
from tests.importers.mlflow_producer import CALLS, produce
from tooleval.cli import app
from tooleval.errors import InputFileError
from tooleval.importers import import_mlflow

NO_MODEL = "no model span in the trace (no GenAI, OpenInference or MLflow model span)"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """``sqlite`` and ``file``: (the store, MLflow's own reading of it)."""
    out = {}
    sqlite_dir = tmp_path_factory.mktemp("sqlite")
    produce(f"sqlite:///{sqlite_dir / 'mlflow.db'}", sqlite_dir / "truth.json")
    out["sqlite"] = (sqlite_dir / "mlflow.db", json.loads((sqlite_dir / "truth.json").read_text()))
    file_dir = tmp_path_factory.mktemp("file")
    produce(f"file://{file_dir / 'mlruns'}", file_dir / "truth.json")
    out["file"] = (file_dir / "mlruns", json.loads((file_dir / "truth.json").read_text()))
    return out


def _refs(tmp_path: Path) -> Path:
    """Each case expects the calls its model emitted (case-2's malformed text expected as the intended object)."""
    expected = {"case-0": [{"name": "get_order", "args": {"order_id": "A-0"}}],
                "case-1": [{"name": "get_order", "args": {"order_id": "A-1"}},
                           {"name": "refund", "args": {"order_id": "A-1", "amount_cents": 251}}],
                "case-2": [{"name": "get_order", "args": {"order_id": "A-2"}}],
                "case-3": [{"name": "get_order", "args": {"order_id": "A-3"}}]}
    return write_lines(tmp_path / "refs.jsonl", [{"case_id": c, "input": f"{c}: please help", "expected_calls": e}
                                                 for c, e in expected.items()])


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_a_real_mlflow_store_is_imported_with_its_ids_and_feedback(tmp_path: Path, stores, kind: str) -> None:
    store, truth = stores[kind]
    report = import_mlflow(store, tmp_path / "out", references=_refs(tmp_path))
    # five traces: four agent runs and one without a model call
    assert (report.read, report.converted) == (5, 4)
    assert report.skipped == {NO_MODEL: 1}
    # 1 + 2 + 1 + 1 calls in the model's replies (CALLS)
    assert report.calls == 5 and report.malformed_calls == 1
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert sorted(traces) == ["case-0", "case-1", "case-2", "case-3"]
    for case, trace in traces.items():
        spans = truth[case]["spans"]
        ids = trace["metadata"]["spans"]
        assert ids["mlflow_trace_id"] == truth[case]["trace_id"]
        assert ids["trace_id"] == truth[case]["trace_id"].removeprefix("tr-")  # MLflow's id is tr- + the OTel id
        assert ids["root_span_id"] == next(s["span_id"] for s in spans if s["parent_id"] is None)
        by_time = sorted(spans, key=lambda s: s["start_ns"])
        assert ids["model_span_ids"] == [s["span_id"] for s in by_time if s["type"] == "CHAT_MODEL"]
        assert ids["tool_span_ids"] == [s["span_id"] for s in by_time if s["type"] == "TOOL"]
        emitted = [(c["function"]["name"], c["function"]["arguments"])
                   for m in trace["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert emitted == CALLS[case]
    assert traces["case-0"]["metadata"]["spans"]["session_id"] == "s-0"
    assert "session_id" not in traces["case-1"]["metadata"]["spans"]
    # feedback: 1.0 as logged; the judge's "no" is 0.0; no feedback, no reward
    assert traces["case-0"]["metadata"]["reward"] == 1.0
    assert traces["case-1"]["metadata"]["reward"] == 0.0
    assert [a["name"] for a in traces["case-1"]["metadata"]["spans"]["assessments"]] == ["tool_use_ok"]
    assert "reward" not in traces["case-2"]["metadata"]
    # the executor's side: what the TOOL spans received, in the order they ran
    assert [(c["name"], json.loads(c["args"])) for c in traces["case-1"]["executor_calls"]] == [
        ("get_order", {"order_id": "A-1"}), ("refund", {"order_id": "A-1", "amount_cents": 251})]
    assert "executor_calls" not in traces["case-2"]  # no tool ran
    assert "executor_calls" not in traces["case-3"]  # its TOOL span recorded no inputs: not captured
    assert traces["case-0"]["response_id"] == "chatcmpl-case-0-b"
    assert traces["case-0"]["agent"]["model"] == "scripted"  # the model the server answered as

    rows = {r["case_id"]: r for r in score(tmp_path / "out")}
    assert (rows["case-0"]["exact_match"], rows["case-1"]["exact_match"], rows["case-3"]["exact_match"]) == (
        True, True, True)
    assert rows["case-0"]["recorded_reward"] == 1.0 and rows["case-1"]["recorded_reward"] == 0.0
    # case-2's text is not JSON: one malformed call, which matches nothing (fp 1, fn 1)
    assert (rows["case-2"]["exact_match"], rows["case-2"]["fp"], rows["case-2"]["fn"]) == (False, 1, 1)
    assert rows["case-3"]["recorded_reward"] is None


def test_the_cli_prints_the_counts_and_exits_1_on_a_skip(tmp_path: Path, stores) -> None:
    store, _ = stores["sqlite"]
    result = CliRunner().invoke(app, ["import", "mlflow", str(store.parent), "--out", str(tmp_path / "out"),
                                      "--references", str(_refs(tmp_path))])
    assert result.exit_code == 1, result.output
    assert "read 5, converted 4, skipped 1" in " ".join(result.output.split())


def _refused(tmp_path: Path, src: Path) -> InputFileError:
    with pytest.raises(InputFileError) as info:
        import_mlflow(src, tmp_path / "out", references=_refs(tmp_path))
    assert not (tmp_path / "out").exists()
    return info.value


def test_a_truncated_database_is_refused(tmp_path: Path, stores) -> None:
    store, _ = stores["sqlite"]
    cut = tmp_path / "mlflow.db"
    cut.write_bytes(store.read_bytes()[: store.stat().st_size // 3])
    error = _refused(tmp_path, cut)
    assert error.path == str(cut) and "cannot be read" in error.problem and "integrity_check" in error.fix


def test_a_file_that_is_not_a_database_or_not_mlflows_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "mlflow.db"
    text.write_text("{}")
    assert "not an SQLite database" in _refused(tmp_path, text).problem
    result = CliRunner().invoke(app, ["import", "mlflow", str(text), "--out", str(tmp_path / "out")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2 and f"{text}: not an SQLite database" in result.output
    assert "Nothing was written" in result.output and not (tmp_path / "out").exists()
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE runs (id TEXT)").connection.commit()
    error = _refused(tmp_path, other)
    assert "trace_info" in error.problem and "sqlite:///mlflow.db" in error.fix


def test_an_unknown_trace_schema_version_is_refused(tmp_path: Path, stores) -> None:
    store, truth = stores["sqlite"]
    copy = tmp_path / "mlflow.db"
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE trace_request_metadata SET value = '9' WHERE key = 'mlflow.trace_schema.version' AND "
                   "request_id = ?", (truth["case-1"]["trace_id"],))
    error = _refused(tmp_path, copy)
    assert f"trace {truth['case-1']['trace_id']}" in error.problem and "'9'" in error.problem


def test_a_truncated_trace_file_in_the_file_store_is_refused(tmp_path: Path, stores) -> None:
    store, truth = stores["file"]
    copy = tmp_path / "mlruns"
    shutil.copytree(store, copy)
    data = next(copy.glob(f"*/traces/{truth['case-0']['trace_id']}/artifacts/traces.json"))
    data.write_text(data.read_text()[:-40])
    error = _refused(tmp_path, copy)
    assert error.path == str(data) and "not a complete JSON document" in error.problem


def test_a_folder_without_a_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "no mlflow.db" in _refused(tmp_path, tmp_path / "empty").problem


def _v2_span(span: dict) -> dict:
    """MLflow 2's span dict (``Span.to_dict`` before 3.0): ids as ``0x`` hex under ``context``."""
    hexed = {k: base64.b64decode(span[k]).hex() if span.get(k) else None for k in ("trace_id", "span_id",
                                                                                 "parent_span_id")}
    return {"name": span["name"], "context": {"trace_id": "0x" + hexed["trace_id"], "span_id": "0x" + hexed["span_id"]},
            "parent_id": "0x" + hexed["parent_span_id"] if hexed["parent_span_id"] else None,
            "start_time": span["start_time_unix_nano"], "end_time": span["end_time_unix_nano"],
            "status_code": "OK", "status_message": "", "attributes": span["attributes"], "events": []}


def _v35_span(span: dict) -> dict:
    """MLflow 3.5's span dict: the trace id as MLflow's ``tr-`` id, the span ids as hex."""
    hexed = {k: base64.b64decode(span[k]).hex() if span.get(k) else "" for k in ("trace_id", "span_id",
                                                                               "parent_span_id")}
    return {**span, "trace_id": "tr-" + hexed["trace_id"], "span_id": hexed["span_id"],
            "parent_span_id": hexed["parent_span_id"]}


@pytest.mark.parametrize("shape", [_v2_span, _v35_span], ids=["mlflow-2", "mlflow-3.5"])
def test_older_mlflow_span_shapes_read_as_the_current_one(tmp_path: Path, stores, shape) -> None:
    """The file store's spans rewritten in the shapes older MLflow releases wrote, each checked first by MLflow's own
    reader (``Span.from_dict`` reads them back to the same ids), then imported: the same traces as the original."""
    from mlflow.entities import Span as MlflowSpan

    store, _ = stores["file"]
    copy = tmp_path / "mlruns"
    shutil.copytree(store, copy)
    for data in copy.glob("*/traces/*/artifacts/traces.json"):
        document = json.loads(data.read_text())
        for original, rewritten in zip(document["spans"], [shape(s) for s in document["spans"]]):
            theirs, ours = MlflowSpan.from_dict(original), MlflowSpan.from_dict(rewritten)
            assert (ours.span_id, ours.parent_id) == (theirs.span_id, theirs.parent_id)
        document["spans"] = [shape(s) for s in document["spans"]]
        data.write_text(json.dumps(document))
    before = import_mlflow(store, tmp_path / "before", references=_refs(tmp_path))
    after = import_mlflow(copy, tmp_path / "after", references=_refs(tmp_path))
    assert (after.read, after.converted, after.skipped) == (before.read, before.converted, before.skipped) == (
        5, 4, {NO_MODEL: 1})
    old = {t["case_id"]: t for t in read_jsonl(tmp_path / "before" / "traces.jsonl.gz")}
    new = {t["case_id"]: t for t in read_jsonl(tmp_path / "after" / "traces.jsonl.gz")}
    for case in old:
        for trace in (old[case], new[case]):
            trace["metadata"].pop("source")
        assert new[case] == old[case]


def test_a_base64_trace_id_that_begins_like_mlflow_2s_hex_is_read_whole(tmp_path: Path, stores) -> None:
    """A trace id whose bytes begin d3 1x encodes in base64 as "0x...", the prefix of MLflow 2's hex ids (one
    trace in 4,096): found by the 20,000-trace store of bench/make_big_mlflow_store.py."""
    from mlflow.entities import Span as MlflowSpan

    store, truth = stores["file"]
    copy = tmp_path / "mlruns"
    shutil.copytree(store, copy)
    data = next(copy.glob(f"*/traces/{truth['case-0']['trace_id']}/artifacts/traces.json"))
    document = json.loads(data.read_text())
    hex_id = "d31b" + truth["case-0"]["trace_id"].removeprefix("tr-")[4:]
    encoded = base64.b64encode(bytes.fromhex(hex_id)).decode()
    assert encoded.startswith("0x")
    for span in document["spans"]:
        span["trace_id"] = encoded
    read = MlflowSpan.from_dict(document["spans"][0])._span.context.trace_id  # MLflow's reading: the OTel id
    assert f"{read:032x}" == hex_id
    data.write_text(json.dumps(document))
    report = import_mlflow(copy, tmp_path / "out", references=_refs(tmp_path))
    assert (report.converted, report.skipped) == (4, {NO_MODEL: 1})
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert traces["case-0"]["metadata"]["spans"]["trace_id"] == hex_id


def test_trial_and_reward_tags_are_read_as_numbers_and_the_feedback_wins(tmp_path: Path, stores) -> None:
    store, truth = stores["file"]
    copy = tmp_path / "mlruns"
    shutil.copytree(store, copy)
    for case, trial, reward in (("case-0", "3", "0.25"), ("case-2", "1", "0.5")):
        tags = next(copy.glob(f"*/traces/{truth[case]['trace_id']}/tags"))
        (tags / "tooleval.trial").write_text(trial)
        (tags / "tooleval.reward").write_text(reward)
    import_mlflow(copy, tmp_path / "out", references=_refs(tmp_path))
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert (traces["case-0"]["trial"], traces["case-2"]["trial"]) == (3, 1)
    # case-0's logged feedback (1.0) is the recorded reward, not its tag; case-2 has no feedback: its tag counts
    assert (traces["case-0"]["metadata"]["reward"], traces["case-2"]["metadata"]["reward"]) == (1.0, 0.5)
