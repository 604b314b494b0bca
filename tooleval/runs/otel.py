"""A run's verdicts as OpenTelemetry spans: one ``gen_ai.evaluation.result`` event per row (``tooleval export otel``).

**What is written.** OTLP JSON lines (one ``ExportTraceServiceRequest`` a line, at most :data:`SPANS_PER_LINE`
spans each: what the OpenTelemetry SDK's file exporter writes and a collector's ``otlpjsonfile`` receiver reads).
Each row of the run becomes one span named ``evaluate tooleval.tool_calls`` carrying one span event
``gen_ai.evaluation.result`` with the GenAI semantic conventions' attributes:

* ``gen_ai.evaluation.name`` = ``tooleval.tool_calls``;
* ``gen_ai.evaluation.score.value`` = the row's F1 (omitted when the row could not be scored);
* ``gen_ai.evaluation.score.label`` = the gate's verdict of the row: ``pass``, ``fail``, or ``quarantined`` (a
  failing row of a quarantined case);
* ``gen_ai.evaluation.explanation`` = the failing rules, what keeps the calls from matching, and the owner, in words;
* ``gen_ai.response.id`` = the row's response id when it has one; ``error.type`` = the row's error kind, if any;
* tooleval's own: ``tooleval.failing_rules`` (array), ``tooleval.failure_owner``,
  ``tooleval.first_divergent_boundary``, ``tooleval.exact_match``, ``tooleval.case_id``, ``tooleval.trial``,
  ``tooleval.run_id``, ``tooleval.dataset_revision``.

**Where it is attached.** The conventions ask that the event be parented to the span it evaluates. A row whose
trace came from spans (``metadata.spans`` of the envelope, kept by the ``otlp``, ``openinference`` and ``mlflow``
importers) gets its span in the *source's* trace (same ``traceId``), as a child of the source's root span (the
agent run the row judges; the first model span when no root was recorded), so a collector or Phoenix shows the
verdict under the judged span. A row without span ids gets a trace of its own. The new span and trace ids are
derived from (run id, case id, trial) with SHA-256: exporting the same run twice writes the same ids (a backend
that receives both keeps one span). The events are span events, not log records: Phoenix and tooleval's own OTLP
reader read traces, not logs.

**Reading.** Rows are read one committed part file at a time (the commit marker names them), with only the
columns used; the span ids of the envelopes are read first (``case_id``, ``trial``, ``metadata_json``), and only
those of rows that came from spans are kept in memory. Each row's verdict is the release gate's
(:mod:`tooleval.runs.gate`: the dataset's ``gate.toml`` or the defaults, waivers as of today, UTC).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator

from tooleval.errors import InputFileError
from tooleval.runs.gate import GATE_COLUMNS, gate_config_for
from tooleval.runs.published import PublishedRun
from tooleval.rules import GateTally

__all__ = ["EVALUATION_NAME", "EVENT_NAME", "SPANS_PER_LINE", "ExportCounts", "export_otel", "span_ids_of"]

EVENT_NAME = "gen_ai.evaluation.result"
EVALUATION_NAME = "tooleval.tool_calls"
SPAN_NAME = f"evaluate {EVALUATION_NAME}"
SPANS_PER_LINE = 1000
"""Spans per ``ExportTraceServiceRequest`` line (a bounded line, whatever the run's size)."""

_ROW_COLUMNS = list(dict.fromkeys([*GATE_COLUMNS, "response_id", "failure_owner", "first_divergent_boundary",
                                   "recorded_reward", "dataset_revision", "run_id"]))
_SPAN_KIND_INTERNAL = 1
_STATUS_OK, _STATUS_ERROR = 1, 2


class ExportCounts(dict):
    """``{"rows", "attached", "own_spans", "lines"}``: rows exported, rows attached to a source span, rows given a
    trace of their own, and lines written."""


def span_ids_of(metadata_json: str | None) -> tuple[str, str] | None:
    """``(trace_id, parent_span_id)`` of an envelope's ``metadata_json``, from ``metadata.spans``: the trace id and
    the root span id (else the first model span id), both lower-case hex; ``None`` when the trace did not come from
    spans or its ids are not valid hex of the right length."""
    if not metadata_json:
        return None
    try:
        spans = json.loads(metadata_json).get("spans")
    except (ValueError, AttributeError):
        return None
    if not isinstance(spans, dict):
        return None
    trace_id = spans.get("trace_id")
    parent = spans.get("root_span_id") or next(iter(spans.get("model_span_ids") or []), None)
    if not (_is_hex(trace_id, 16) and _is_hex(parent, 8)):
        return None
    return trace_id.lower(), parent.lower()


def _is_hex(value: Any, size: int) -> bool:
    if not isinstance(value, str) or len(value) != size * 2:
        return False
    try:
        return any(bytes.fromhex(value))  # all-zero ids are invalid in OpenTelemetry
    except ValueError:
        return False


def _derived(size: int, *parts: Any) -> str:
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()[:size]
    return (digest if any(digest) else b"\x01" + digest[1:]).hex()


def _value(value: Any) -> dict[str, Any]:
    """An OTLP JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _explanation(row: dict[str, Any], rules: list[str]) -> str:
    parts = []
    if rules:
        parts.append("failing rules: " + ", ".join(rules))
    if row.get("error_kind"):
        parts.append(f"row error {row['error_kind']}: {row.get('error_message') or ''}".rstrip(": "))
    fn, fp = row.get("fn") or 0, row.get("fp") or 0
    if fn or fp:
        wrong = sorted({w["name"] for w in row.get("wrong_args") or []})
        parts.append(f"{fn} missing and {fp} extra call(s)" + (f"; wrong arguments in {', '.join(wrong)}"
                                                               if wrong else ""))
    if row.get("failure_owner"):
        parts.append(f"owner: {row['failure_owner']}" + (f" (first divergent boundary: "
                                                         f"{row['first_divergent_boundary']})"
                                                         if row.get("first_divergent_boundary") else ""))
    return "; ".join(parts) or "calls match the reference; no blocking rule"


def _span(row: dict[str, Any], outcome: Any, ids: tuple[str, str] | None, run: PublishedRun,
          time_ns: int) -> dict[str, Any]:
    case_id, trial = str(row["case_id"]), int(row.get("trial") or 0)
    failing = bool(outcome.rules) and outcome.quarantine is None
    label = "quarantined" if outcome.rules and outcome.quarantine is not None else "fail" if failing else "pass"
    span_id = _derived(8, run.run_id, case_id, trial, "span")
    trace_id = ids[0] if ids else _derived(16, run.run_id, case_id, trial, "trace")
    event = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "gen_ai.evaluation.score.value": float(row["f1"]) if row.get("f1") is not None else None,
        "gen_ai.evaluation.score.label": label,
        "gen_ai.evaluation.explanation": _explanation(row, outcome.rules),
        "gen_ai.response.id": row.get("response_id"),
        "error.type": row.get("error_kind"),
        "tooleval.failing_rules": list(outcome.rules),
        "tooleval.failure_owner": row.get("failure_owner"),
        "tooleval.first_divergent_boundary": row.get("first_divergent_boundary"),
        "tooleval.exact_match": row.get("exact_match"),
        "tooleval.case_id": case_id,
        "tooleval.trial": trial,
        "tooleval.run_id": run.run_id,
        "tooleval.dataset_revision": run.revision,
    }
    span: dict[str, Any] = {
        "traceId": trace_id, "spanId": span_id, "name": SPAN_NAME, "kind": _SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(time_ns), "endTimeUnixNano": str(time_ns),
        "attributes": _attributes({"gen_ai.evaluation.name": EVALUATION_NAME,
                                   "gen_ai.evaluation.score.label": label, "tooleval.case_id": case_id,
                                   "tooleval.trial": trial, "tooleval.run_id": run.run_id}),
        "events": [{"timeUnixNano": str(time_ns), "name": EVENT_NAME, "attributes": _attributes(event)}],
        "status": {"code": _STATUS_ERROR if row.get("error_kind") else _STATUS_OK},
    }
    if ids:
        span["parentSpanId"] = ids[1]
    return span


def _source_ids(run: PublishedRun) -> dict[tuple[str, int], tuple[str, str]]:
    from tooleval.storage import read_versioned

    found: dict[tuple[str, int], tuple[str, str]] = {}
    for path in run.files("traces"):
        table = read_versioned(path, "traces", ["case_id", "trial", "metadata_json"])
        for batch in table.to_batches(max_chunksize=5_000):
            for record in batch.to_pylist():
                ids = span_ids_of(record["metadata_json"])
                if ids is not None:
                    found[(str(record["case_id"]), int(record["trial"] or 0))] = ids
    return found


def _rows(run: PublishedRun) -> Iterator[dict[str, Any]]:
    from tooleval.storage import read_versioned

    for path in run.files("rows"):
        table = read_versioned(path, "rows", _ROW_COLUMNS)
        for batch in table.to_batches(max_chunksize=5_000):
            yield from batch.to_pylist()


def _time_ns(run: PublishedRun) -> int:
    stamp = run.summary.get("completed_at")
    try:
        moment = datetime.fromisoformat(stamp) if isinstance(stamp, str) else datetime.now(timezone.utc)
    except ValueError:
        moment = datetime.now(timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _request(spans: list[dict[str, Any]], run: PublishedRun) -> dict[str, Any]:
    from tooleval.versions import tooleval_version

    resource = _attributes({"service.name": "tooleval", "tooleval.run_id": run.run_id,
                            "tooleval.dataset_revision": run.revision})
    return {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": {"name": "tooleval", "version": tooleval_version()},
                                               "spans": spans}]}]}


def export_otel(run: PublishedRun, handle: IO[str], *, config: str | Path | None = None) -> ExportCounts:
    """Write one span with one ``gen_ai.evaluation.result`` event per row of ``run`` (the module docstring).

    Args:
        run: The published run (:func:`tooleval.runs.published.open_run`).
        handle: A text file open for writing; OTLP JSON lines are written to it.
        config: A gate.toml for the verdicts (default: the dataset's own, else the defaults).

    Returns:
        The counts (:class:`ExportCounts`).

    Raises:
        InputFileError: the run has no rows, a part file cannot be read, or the gate config is invalid.
    """
    files = run.files("rows")
    if not files:
        raise InputFileError(run.location("rows"), None, f"run {run.run_id!r} has no rows.",
                             "run the row-level path first (tooleval run without --legacy-only).")
    tally = GateTally(gate_config_for(run.dataset.path, config), today=datetime.now(timezone.utc).date(), listed=0)
    sources = _source_ids(run)
    time_ns = _time_ns(run)
    counts = ExportCounts(rows=0, attached=0, own_spans=0, lines=0)
    pending: list[dict[str, Any]] = []
    for row in _rows(run):
        outcome = tally.add(row)
        ids = sources.get((str(row["case_id"]), int(row.get("trial") or 0)))
        pending.append(_span(row, outcome, ids, run, time_ns))
        counts["rows"] += 1
        counts["attached" if ids else "own_spans"] += 1
        if len(pending) == SPANS_PER_LINE:
            handle.write(json.dumps(_request(pending, run), ensure_ascii=False) + "\n")
            counts["lines"] += 1
            pending = []
    if pending:
        handle.write(json.dumps(_request(pending, run), ensure_ascii=False) + "\n")
        counts["lines"] += 1
    return counts
