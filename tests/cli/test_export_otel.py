"""``tooleval export otel``: one ``gen_ai.evaluation.result`` span event per row, read back with tooleval's own OTLP
reader, with OpenTelemetry's OTLP JSON codec (opentelemetry-proto-json) and with the protobuf messages of
opentelemetry-proto; the bundled run's round trip (every row once, with the gate's verdict); and an MLflow store
written by MLflow itself, imported, run and exported, whose verdicts land in MLflow's own traces under their root
spans."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooleval.cli import app
from tooleval.importers import import_mlflow
from tooleval.importers._span_source import Span, iter_spans

runner = CliRunner()
EVENT = "gen_ai.evaluation.result"


def _published_rows(out: Path, run_id: str) -> dict[tuple[str, int], dict]:
    """The run's rows as ``tooleval sql`` reads them (DuckDB over the committed Parquet)."""
    result = runner.invoke(app, ["sql", f"select case_id, trial, f1, failure_owner, response_id from rows where "
                                 f"run_id = '{run_id}'", "--out", str(out), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return {(r["case_id"], int(r["trial"])): r for r in rows}


def _gate_failing(out: Path, run_id: str) -> dict[tuple[str, int], list[str]]:
    """The failing rows of ``tooleval gate`` (its own streaming judge over the Parquet columns) with their rules."""
    result = runner.invoke(app, ["gate", "--run-id", run_id, "--out", str(out), "--format", "json",
                                 "--listed-rows", "100000"])
    assert result.exit_code in (0, 1), result.output
    verdict = json.loads(result.stdout.splitlines()[-1])
    return {(o["case_id"], o["trial"]): o["rules"] for o in verdict["failing_rows"]}


def _events_by_tooleval(path: Path) -> list[tuple[Span, dict]]:
    spans = [s for s in iter_spans([path], hashlib.sha256()) if isinstance(s, Span)]
    return [(span, event["attributes"]) for span in spans for event in span.events if event["name"] == EVENT]


def _events_by_opentelemetry(path: Path) -> list[tuple[object, dict]]:
    """Each event with its span, parsed by OpenTelemetry's OTLP JSON codec; each line also parsed into
    opentelemetry-proto's protobuf request (ids turned from OTLP JSON's hex into protobuf JSON's base64)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as Proto
    from opentelemetry.proto_json.collector.trace.v1.trace_service import ExportTraceServiceRequest

    found = []
    for line in path.read_text().splitlines():
        request = ExportTraceServiceRequest.from_json(line)
        document = json.loads(line)
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        proto = json_format.ParseDict(document, Proto())
        assert sum(len(s.spans) for r in proto.resource_spans for s in r.scope_spans) == sum(
            len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    for event in span.events:
                        if event.name == EVENT:
                            found.append((span, {kv.key: _plain(kv.value) for kv in event.attributes}))
    return found


def _plain(value) -> object:
    for name in ("string_value", "bool_value", "int_value", "double_value"):
        if getattr(value, name) is not None:
            return getattr(value, name)
    if value.array_value is not None:
        return [_plain(v) for v in value.array_value.values]
    return None


def _export(out: Path, run_id: str, to: Path) -> str:
    result = runner.invoke(app, ["export", "otel", "--run-id", run_id, "--out", str(out), "--to", str(to)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_the_bundled_run_round_trips_one_event_per_row_with_its_verdict(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = runner.invoke(app, ["run", "--out", str(out), "--run-id", "base"])
    assert result.exit_code in (0, 1), result.output
    rows = _published_rows(out, "base")
    failing = _gate_failing(out, "base")
    to = tmp_path / "verdicts.otlp.jsonl"
    printed = _export(out, "base", to)
    assert f"wrote {len(rows)} gen_ai.evaluation.result events" in printed
    assert f"0 on the source's spans, {len(rows)} on spans of their own" in printed  # the bundled traces are not spans

    ours = _events_by_tooleval(to)
    theirs = _events_by_opentelemetry(to)
    assert len(ours) == len(theirs) == len(rows)  # one event per row
    keys = [(attrs["tooleval.case_id"], attrs["tooleval.trial"]) for _, attrs in ours]
    assert len(set(keys)) == len(keys) and set(keys) == set(rows)
    assert {(a["tooleval.case_id"], a["tooleval.trial"]) for _, a in theirs} == set(rows)
    for (span, attrs), (their_span, their_attrs) in zip(ours, theirs):
        key = (attrs["tooleval.case_id"], attrs["tooleval.trial"])
        row = rows[key]
        assert attrs["gen_ai.evaluation.name"] == "tooleval.tool_calls"
        assert attrs["gen_ai.evaluation.score.label"] == ("fail" if key in failing else "pass")
        assert attrs["tooleval.failing_rules"] == failing.get(key, [])
        assert attrs.get("gen_ai.evaluation.score.value") == row["f1"]
        assert attrs.get("tooleval.failure_owner") == row["failure_owner"]
        assert span.parent_id is None  # a span of its own: a root span in a trace of its own
        assert their_span.trace_id.hex() == span.trace_id and their_span.span_id.hex() == span.span_id
        assert their_attrs == attrs
    # the gate's own count of failing rows, found again in the labels
    assert sum(a["gen_ai.evaluation.score.label"] == "fail" for _, a in ours) == len(failing) > 0

    again = tmp_path / "again.otlp.jsonl"
    _export(out, "base", again)
    assert again.read_text() == to.read_text()  # the ids derive from the run: a re-export is the same file


def _producer():
    name = "tooleval_tests_mlflow_producer"
    if name not in sys.modules:
        folder = Path(__file__).resolve().parents[1] / "importers"
        spec = importlib.util.spec_from_file_location(name, folder / "mlflow_producer.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_verdicts_of_an_mlflow_store_land_under_mlflows_own_spans(tmp_path: Path) -> None:
    truth_path = _producer().produce(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "truth.json")
    truth = json.loads(truth_path.read_text())
    references = tmp_path / "refs.jsonl"
    references.write_text("".join(json.dumps({"case_id": c, "input": f"{c}: please help", "expected_calls": [
        {"name": n, "args": json.loads(a)} for n, a in calls]}) + "\n" for c, calls in
        {**_producer().CALLS, "case-2": [("get_order", '{"order_id": "A-2"}')]}.items()))
    import_mlflow(tmp_path / "mlflow.db", tmp_path / "dataset", references=references)
    out = tmp_path / "results"
    result = runner.invoke(app, ["run", "--dataset", str(tmp_path / "dataset"), "--out", str(out), "--run-id", "m"])
    assert result.exit_code in (0, 1), result.output
    to = tmp_path / "verdicts.otlp.jsonl"
    assert "4 on the source's spans, 0 on spans of their own" in _export(out, "m", to)

    events = {attrs["tooleval.case_id"]: (span, attrs) for span, attrs in _events_by_tooleval(to)}
    assert sorted(events) == ["case-0", "case-1", "case-2", "case-3"]
    for case, (span, attrs) in events.items():
        # MLflow's trace id is "tr-" + the OpenTelemetry trace id; the parent is the trace's root span
        assert span.trace_id == truth[case]["trace_id"].removeprefix("tr-")
        assert span.parent_id == next(s["span_id"] for s in truth[case]["spans"] if s["parent_id"] is None)
    # case-2's only call is malformed text: it matches nothing, f1 = 2*0 / (0 + 1 + 1) = 0.0, and the default gate
    # (calls must match) fails it; the other three emitted exactly their references
    assert [events[c][1]["gen_ai.evaluation.score.label"] for c in sorted(events)] == ["pass", "pass", "fail", "pass"]
    assert events["case-2"][1]["gen_ai.evaluation.score.value"] == 0.0
    assert events["case-2"][1]["tooleval.failing_rules"] == ["reference_mismatch"]
    assert events["case-1"][1]["gen_ai.evaluation.score.value"] == 1.0
    assert events["case-0"][1]["gen_ai.response.id"] == "chatcmpl-case-0-b"


def test_an_unknown_run_or_a_folder_as_target_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    to = tmp_path / "verdicts.jsonl"
    result = runner.invoke(app, ["export", "otel", "--run-id", "nope", "--out", str(tmp_path / "results"),
                                 "--to", str(to)])
    assert result.exit_code == 2 and "no run 'nope'" in result.output
    assert list(tmp_path.iterdir()) == [tmp_path / "results"]
