"""Import traces that observability tools recorded as spans: ``otlp`` (GenAI) and ``openinference``.

**One trace is one trajectory.** Every span of an OpenTelemetry trace (one trace id) belongs to one recorded
trace: its model spans are the model's steps, its tool spans what the executor received
(:mod:`~tooleval.importers._trajectory`). Spans are gathered across export batches on disk
(:class:`~tooleval.importers._span_store.SpanStore`), so memory does not grow with the file.

**How a trace names its case** (first found, looking at root spans first, then the rest in start order):

1. the attribute named by ``--case-attribute``, when given;
2. ``tooleval.case_id``, then ``session.id`` (OpenInference's ``using_session``, OpenLLMetry's association
   properties), then ``gen_ai.conversation.id``;
3. else the trace id (32 hex digits): a ``--references`` file may key its cases by trace id.

``tooleval.trial`` (an integer) sets the trial, ``tooleval.reward`` (a number) the row's ``recorded_reward``; by
default the traces of one case are numbered 0, 1, ... in start time order. References come from ``--references``
(case lines keyed by ``case_id``) or from a ``tooleval.expected_calls`` attribute (JSON text of
``[{"name", "args"}]``) on a span of the trace.

**Provenance** kept in the trace: ``response_id`` (the last model step's ``gen_ai.response.id`` or OpenInference's
response ``id``), ``request`` (the first model step's input messages: the join check compares them with the case
input), and ``metadata.spans``: ``trace_id``, ``root_span_id``, ``model_span_ids``, ``tool_span_ids``,
``response_ids``, ``session_id`` (``session.id`` or ``gen_ai.conversation.id``, when a span has one) and the
format's own ids (``mlflow``: ``mlflow_trace_id``, ``experiment_id``).

**Skipped with a reason and the place** (``file:line`` of the span or record): a record that is not JSON or not an
``ExportTraceServiceRequest``, a span without valid ids, a trace with a span whose parent is missing, a cycle of
parents, a model span in an unknown attribute layout, a trace without a model span, and what the conversation
pipeline skips (no reference, a repeated ``(case_id, trial)``).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.importers._common import check_revision, json_bytes
from tooleval.importers._conversations import Converted, ImportOptions, _load_references, _Writer
from tooleval.importers._span_source import BadRecord, Span, iter_spans
from tooleval.importers._span_store import SpanStore, check_tree
from tooleval.importers._stream import DatasetStage, ImportReport, SkipLine, new_digest, source_files
from tooleval.importers._trajectory import ABSENT, ModelStep, ToolRun, UnknownLayout, assemble, chat_call

__all__ = ["import_spans", "CASE_ATTRIBUTES", "SpanFormat"]

CASE_ATTRIBUTES = ("tooleval.case_id", "session.id", "gen_ai.conversation.id")
"""Span attributes that name a trace's case, in the order they are tried."""

SPAN_PATTERNS = ("*.jsonl", "*.jsonl.gz", "*.json", "*.json.gz", "*.parquet")

SpanReader = Callable[[Span], ModelStep | ToolRun | None]
SpanSource = Callable[[Path, Any], tuple[list[Path], Iterator[Span | BadRecord]]]
"""``(src, digest) -> (files, spans)``: the files a source names and its spans, read lazily (the digest is fed with
what is read). Raises :class:`InputFileError` for a source that cannot be read at all."""

SESSION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id")


def _span_files(src: Path, digest: Any) -> tuple[list[Path], Iterator[Span | BadRecord]]:
    files = source_files(Path(src), SPAN_PATTERNS)
    return files, iter_spans(files, digest)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


class _SkipTrace(Exception):
    def __init__(self, reason: str, where: str) -> None:
        super().__init__(reason)
        self.reason, self.where = reason, where


def _ordered(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.parent_id is None] + [s for s in spans if s.parent_id is not None]


def _attribute(spans: list[Span], keys: tuple[str, ...]) -> Any:
    for key in keys:
        for span in spans:
            value = span.attributes.get(key)
            if value is not None and value != "":
                return value
    return None


def _name_only_calls(runs: list[ToolRun]) -> list[dict[str, Any]]:
    """When no model span recorded its messages, the tool spans still name the calls the model made."""
    calls = [chat_call(run.call_id, run.name, ABSENT) for run in sorted(runs, key=lambda r: (r.start_ns, r.span_id))]
    return [{"role": "assistant", "content": None, "tool_calls": calls}]


def _convert(spans: list[Span], read_span: SpanReader, case_keys: tuple[str, ...], agent: str | None,
             provenance_keys: tuple[tuple[str, str], ...] = ()) -> tuple[Converted, str, int]:
    """One trace's spans -> ``(converted, case_id, start_ns)``; :class:`_SkipTrace` when it cannot be read."""
    ordered = _ordered(spans)
    root = ordered[0]
    broken = check_tree(spans)
    if broken is not None:
        raise _SkipTrace(*broken)
    steps: list[ModelStep] = []
    runs: list[ToolRun] = []
    for span in spans:
        try:
            item = read_span(span)
        except UnknownLayout as exc:
            raise _SkipTrace(str(exc), span.where) from exc
        if isinstance(item, ModelStep):
            steps.append(item)
        elif isinstance(item, ToolRun):
            runs.append(item)
    if not steps:
        raise _SkipTrace("no model span in the trace (no GenAI, OpenInference or MLflow model span)", root.where)
    assembled = assemble(steps, runs)
    messages = assembled["messages"]
    from_tools = not any(m.get("role") == "assistant" for s in steps for m in s.output) and bool(runs)
    if from_tools:
        messages = messages + _name_only_calls(runs)
    case_id = _attribute(ordered, case_keys)
    fields: dict[str, Any] = {"case_id": str(case_id) if case_id is not None else root.trace_id}
    trial = _attribute(ordered, ("tooleval.trial",))
    if trial is not None:
        fields["trial"] = trial
    reward = _attribute(ordered, ("tooleval.reward",))
    if reward is not None:
        if _number(reward) is None:
            raise _SkipTrace("tooleval.reward is not a number", root.where)
        fields["reward"] = reward
    expected = _attribute(ordered, ("tooleval.expected_calls",))
    if expected is not None:
        try:
            fields["expected_calls"] = json.loads(expected) if isinstance(expected, str) else expected
        except ValueError as exc:
            raise _SkipTrace("tooleval.expected_calls is not JSON", root.where) from exc
    name = agent or root.service or "spans"
    fields["agent"] = {"name": name, "model": assembled["model"]} if assembled["model"] else {"name": name}
    if assembled["response_id"]:
        fields["response_id"] = assembled["response_id"]
    provenance = {"trace_id": root.trace_id, "root_span_id": root.span_id,
                  "model_span_ids": [s.span_id for s in sorted(steps, key=lambda s: (s.start_ns, s.span_id))],
                  "tool_span_ids": [r.span_id for r in sorted(runs, key=lambda r: (r.start_ns, r.span_id))],
                  "response_ids": [s.response_id for s in steps if s.response_id]}
    for name, key in (("session_id", SESSION_ATTRIBUTES), *((n, (k,)) for n, k in provenance_keys)):
        value = _attribute(ordered, key)
        if value is not None:
            provenance[name] = value
    metadata: dict[str, Any] = {"spans": provenance}
    if from_tools:
        metadata["model_calls_from_tool_spans"] = True
    trace_fields = {"request": assembled["request"], "executor_calls": assembled["executor_calls"]}
    return Converted(messages, fields, metadata, trace_fields), fields["case_id"], root.start_ns


_REFERENCE_SKIPS = ("no reference (no expected_calls and no --references)", "case_id not in --references",
                    "case fields differ from --references")


def _fix(report: ImportReport, shape_fix: str | None = None) -> str:
    """The fix line for an import that converted nothing, from what was skipped most: the shape of the file, the
    references, or the spans' content (a wrong shape is not cured by --references)."""
    reason = report.skipped.most_common(1)[0][0] if report.skipped else ""
    if reason in _REFERENCE_SKIPS:
        return ("pass --references with case lines keyed by the traces' case ids (the trace id when no span names "
                "a case; docs/importers.md), or put tooleval.expected_calls on a span of each trace.")
    if reason.startswith("no model span"):
        return ("export the traces with their model spans (GenAI chat spans, OpenInference LLM spans, MLflow "
                "CHAT_MODEL or LLM spans).")
    if shape_fix is not None:
        return shape_fix
    return ("export OTLP JSON (one ExportTraceServiceRequest with resourceSpans a line, or one document), Phoenix "
            "spans (a JSON list or JSON lines of spans with context, span_kind and attributes, or the REST API's "
            "{\"data\": [...]}), or Phoenix's spans dataframe as Parquet.")


@dataclass(frozen=True)
class SpanFormat:
    """What one span format brings to :func:`import_spans`: how its spans are read and what its dataset says."""

    fmt: str
    """``otlp``, ``openinference`` or ``mlflow`` (for ``dataset.json``'s ``source``)."""
    read_span: SpanReader
    """The format's span reader."""
    description: str
    """``dataset.json``'s description."""
    source: SpanSource = _span_files
    """Where the spans come from (default: span files, :func:`iter_spans`; ``mlflow``: its stores)."""
    provenance_keys: tuple[tuple[str, str], ...] = ()
    """``(name, attribute)`` pairs copied into ``metadata.spans`` when a span has the attribute."""
    shape_fix: str | None = None
    """The fix line when nothing could be read for the source's shape (default: the file shapes)."""


def import_spans(
    src: Path,
    out: Path,
    *,
    span_format: SpanFormat,
    options: ImportOptions = ImportOptions(),
    case_attribute: str | None = None,
) -> ImportReport:
    """Import span files into one dataset folder (shapes and rules: this module's docstring).

    Args:
        src: A span file or a folder of them (``*.jsonl[.gz]``, ``*.json[.gz]``, ``*.parquet``; name order).
        out: The dataset folder to write (``dataset.json``, ``cases.jsonl``, ``traces.jsonl.gz``).
        span_format: The format: its reader, its source of spans and its dataset description.
        options: The dataset's name, revision, references and agent name (:class:`ImportOptions`); the agent's
            default is the resource's ``service.name``, else ``spans``.
        case_attribute: A span attribute naming the case, tried before :data:`CASE_ATTRIBUTES`.

    Returns:
        The counts: ``read`` = traces plus records that held no readable span; skips by reason with places.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: The source is missing or unreadable, a single JSON document is truncated, or no case
            could be imported (nothing is written then).
    """
    name, revision, references, agent = options.name, options.revision, options.references, options.agent
    fmt, read_span, provenance_keys = span_format.fmt, span_format.read_span, span_format.provenance_keys
    if revision is not None:
        check_revision(revision)
    report = ImportReport()
    digest = new_digest()
    files, spans = span_format.source(Path(src), digest)
    known = _load_references(Path(references), report, digest) if references is not None else None
    case_keys = ((case_attribute,) if case_attribute else ()) + CASE_ATTRIBUTES
    spans_read = 0
    with SpanStore() as store, DatasetStage(Path(out)) as stage:
        for item in spans:
            if isinstance(item, BadRecord):
                report.read += 1
                report.skip(item.reason, item.where)
                continue
            store.add(item)
            spans_read += 1
        store.stash_table()
        for trace in store.traces():
            report.read += 1
            try:
                converted, case_id, start = _convert(trace, read_span, case_keys, agent, provenance_keys)
            except _SkipTrace as skip:
                report.skip(skip.reason, skip.where)
                continue
            where = _ordered(trace)[0].where
            store.stash(case_id, start, trace[0].trace_id, pickle.dumps((converted, where)))
        writer = _Writer(stage, known, agent or "spans")
        for body in store.stashed():
            converted, where = pickle.loads(body)
            try:
                writer.add(converted, where, 0, report)
            except SkipLine as skip:
                report.skip(skip.reason, where)
                continue
            report.converted += 1
        if known is not None:
            writer.write_referenced_cases(stage)
        if not writer.case_count or not report.converted:
            reasons = "; ".join(f"{reason} ({n})" for reason, n in report.skipped.most_common(3)) or "no spans"
            raise InputFileError(files[0], None, f"no case could be imported: {reasons}.",
                                 _fix(report, span_format.shape_fix))
        report.notes.append(f"{spans_read} spans read ({store.duplicates} exported twice, kept once); one trace "
                            "is one trajectory.")
        manifest = {
            "name": name or Path(out).resolve().name,
            "revision": revision or "src-" + digest.hexdigest()[:12],
            "schema_version": 1,
            "description": span_format.description,
            "license": None,
            "source": f"{fmt}: " + ", ".join(p.name for p in files),
        }
        stage.write_bytes("dataset.json", json_bytes(manifest))
        report.datasets.append(stage.commit())
    return report


def span_importer(fmt: str, read_span: SpanReader, what: str, source: SpanSource = _span_files,
                  provenance_keys: tuple[tuple[str, str], ...] = (),
                  shape_fix: str | None = None) -> Callable[..., ImportReport]:
    """The public ``import_<format>`` function of a span format (arguments: :func:`import_spans`; ``source``,
    ``provenance_keys`` and ``shape_fix``: :class:`SpanFormat`'s)."""
    span_format = SpanFormat(fmt, read_span, f"{what} imported by tooleval ({fmt}).", source, provenance_keys,
                             shape_fix)

    def importer(src: Path, out: Path, *, name: str | None = None, revision: str | None = None,
                 references: Path | None = None, agent: str | None = None,
                 case_attribute: str | None = None) -> ImportReport:
        return import_spans(src, out, span_format=span_format,
                            options=ImportOptions(name, revision, references, agent), case_attribute=case_attribute)

    importer.__name__ = importer.__qualname__ = "import_" + fmt.replace("-", "_")
    importer.__doc__ = (f"Import {what} as a dataset folder (which spans form a case, how a trace names its "
                        "case, what is kept: :mod:`tooleval.importers._spans`).\n\nArgs: ``src``, ``out`` and "
                        "``case_attribute`` as :func:`tooleval.importers._spans.import_spans`, the others as the "
                        "fields of :class:`tooleval.importers._conversations.ImportOptions`. Returns and errors: "
                        ":func:`~tooleval.importers._spans.import_spans`.")
    return importer
