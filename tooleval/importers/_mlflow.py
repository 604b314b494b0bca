"""MLflow traces -> model steps and tool runs (the ``mlflow`` format), read from MLflow's own stores.

**Stores read** (the source is a path; nothing is started, no MLflow package is needed):

* **The SQLite store** (``mlflow.db``, MLflow's default backend from 3.x on; ``sqlite:///mlflow.db``): the
  ``trace_info`` table (one row a trace), ``trace_tags``, ``trace_request_metadata`` and ``assessments``, and the
  spans in the ``spans`` table (``content``: one span as JSON). A trace whose spans are not in the database (MLflow
  before 3.x kept them as an artifact, tag ``mlflow.artifactLocation``) is read from that ``traces.json`` when it
  is a local folder.
* **The file store** (``./mlruns``, MLflow's default before 3.x): ``<experiment>/traces/<trace id>/`` with
  ``trace_info.yaml``, ``tags/``, ``request_metadata/``, ``assessments/*.yaml`` and ``artifacts/traces.json``.

Either is read one trace at a time (one trace's rows or files in memory, never the whole store). A span is the
JSON that MLflow writes: MLflow 3's OTLP-like ``{"trace_id", "span_id", "parent_span_id"}`` (base64 ids) or MLflow
2's ``{"context": {"trace_id", "span_id"}, "parent_id"}`` (``0x`` hex ids), with every attribute value JSON text.

**Spans read** (``mlflow.spanType``):

* ``CHAT_MODEL`` and ``LLM``: a model call. Its messages come from ``mlflow.spanInputs`` / ``mlflow.spanOutputs``
  as the autologging integration recorded the provider's request and response: OpenAI chat completions
  (``messages`` -> ``choices[0].message``), the OpenAI Responses API (``input`` -> ``output`` items), Anthropic
  Messages (``messages`` and ``system`` -> ``content`` blocks); else ``mlflow.chat.messages`` (MLflow 2's
  normalised chat, the reply last). A model span without inputs is a call whose content was not captured.
* ``TOOL``: what the executor received: the span name (``mlflow.spanFunctionName`` for a traced function) and
  ``mlflow.spanInputs`` as the arguments (absent: not captured, never scored as wrong); a call id when the
  inputs or attributes carry one (``tool_call_id``, ``id``).
* any other type (AGENT, CHAIN, RETRIEVER, ...) is structure. A span without ``mlflow.spanType`` (OpenTelemetry
  spans MLflow ingested from other instrumentations) is read as a GenAI span, else as an OpenInference span.

**The trace's own fields** are laid on its root span, so that the span importers' rules hold (how a trace names
its case: :mod:`~tooleval.importers._spans`): trace tags (``tooleval.case_id`` as a tag names the case,
``tooleval.trial`` and ``tooleval.reward`` tags are read as numbers), the
session (``mlflow.trace.session`` metadata or the ``session_id`` column) as ``session.id``, and the reward.
**Reward**: the first valid feedback assessment (in creation order) whose value is a number, a boolean (1.0 /
0.0) or MLflow's judges' ``yes`` / ``no`` (1.0 / 0.0) becomes ``metadata.reward`` (the row's
``recorded_reward``); every assessment is kept in ``metadata.spans.assessments``. **Provenance**:
``metadata.spans`` keeps the OpenTelemetry ``trace_id`` and span ids, ``mlflow_trace_id`` (``tr-...``),
``experiment_id`` and ``session_id``.

**Refused** (nothing written): a file that is not an SQLite database or is damaged, a database without MLflow's
trace tables, a trace schema version this module does not know (``mlflow.trace_schema.version`` above 3), a
folder that holds neither store, and a truncated ``traces.json``. **Skipped** (the rest is written): a trace with
no spans where they should be, and a span that is not a JSON object with ids.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.importers import _genai, _openinference
from tooleval.importers._anthropic import anthropic_messages
from tooleval.importers._openai_responses import responses_messages
from tooleval.importers._span_source import BadRecord, Span, _span
from tooleval.importers._stream import SkipLine
from tooleval.importers._trajectory import ABSENT, ModelStep, ToolRun, UnknownLayout, chat_call

__all__ = ["read_span", "iter_store", "KNOWN_SCHEMA_VERSIONS", "PROVENANCE_KEYS", "STORE_FIX"]

KNOWN_SCHEMA_VERSIONS = frozenset({"2", "3"})
"""``mlflow.trace_schema.version`` values read here (MLflow 2.x writes 2, MLflow 3.x writes 3)."""

MODEL_TYPES = frozenset({"CHAT_MODEL", "LLM"})
PROVENANCE_KEYS = (("mlflow_trace_id", "mlflow.traceRequestId"), ("experiment_id", "mlflow.experimentId"),
                   ("assessments", "mlflow.assessments"))
STORE_FIX = ("pass MLflow's SQLite store (the mlflow.db of `mlflow.set_tracking_uri('sqlite:///mlflow.db')` or "
             "`mlflow server --backend-store-uri sqlite:///mlflow.db`) or its file store (the ./mlruns folder).")
_JUDGED = {"yes": 1.0, "no": 0.0}
_NUMBER_TAGS = ("tooleval.trial", "tooleval.reward")


# ---------------------------------------------------------------------------------------------------- span reading


def _decoded(value: Any) -> Any:
    """MLflow writes every attribute value as JSON text; a value that is not JSON is kept as written."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _openai_message(message: Any) -> dict[str, Any]:
    """A chat-completions message without the SDK's ``None`` fields (refusal, audio, ...)."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise UnknownLayout("an OpenAI chat message that is not an object with a role")
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    calls = message.get("tool_calls") or []
    if calls:
        out["tool_calls"] = [chat_call(c.get("id"), (c.get("function") or {}).get("name"),
                                       (c.get("function") or {}).get("arguments", ABSENT))
                             for c in calls if isinstance(c, dict)]
        if any(c["function"]["name"] is None for c in out["tool_calls"]):
            raise UnknownLayout("an OpenAI tool call without function.name")
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _anthropic(inputs: dict[str, Any], outputs: Any) -> tuple[list, list]:
    reply = outputs if isinstance(outputs, dict) and isinstance(outputs.get("content"), list) else None
    try:
        messages, _ = anthropic_messages(list(inputs["messages"]) + ([{"role": "assistant", "content":
                                                                        reply["content"]}] if reply else []),
                                         inputs.get("system"))
    except SkipLine as exc:
        raise UnknownLayout(f"Anthropic messages in an MLflow span: {exc.reason}") from exc
    if not reply:
        return messages, []
    return messages[:-1], messages[-1:]


def _responses(inputs: dict[str, Any], outputs: Any) -> tuple[list, list]:
    given = inputs.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
    try:
        inputs_, _ = responses_messages(items)
        outputs_, _ = responses_messages(list(outputs.get("output") or []) if isinstance(outputs, dict) else [])
    except SkipLine as exc:
        raise UnknownLayout(f"Responses API items in an MLflow span: {exc.reason}") from exc
    if isinstance(inputs.get("instructions"), str):
        inputs_ = [{"role": "system", "content": inputs["instructions"]}, *inputs_]
    return inputs_, outputs_


def _chat_messages(messages: Any) -> tuple[list, list]:
    """MLflow 2's ``mlflow.chat.messages``: the request's messages, then the reply (the trailing assistant ones)."""
    if not isinstance(messages, list):
        raise UnknownLayout("mlflow.chat.messages is not a list")
    converted = [_openai_message(m) for m in messages]
    split = len(converted)
    while split > 0 and converted[split - 1]["role"] == "assistant":
        split -= 1
    return converted[:split], converted[split:]


def _model_layout(attributes: dict[str, Any]) -> tuple[list, list] | None:
    inputs = attributes.get("mlflow.spanInputs", ABSENT)
    outputs = attributes.get("mlflow.spanOutputs")
    fmt = attributes.get("mlflow.message.format")
    if isinstance(inputs, dict) and isinstance(inputs.get("messages"), list):
        if fmt == "anthropic" or (isinstance(outputs, dict) and outputs.get("type") == "message"):
            return _anthropic(inputs, outputs)
        replies = []
        if isinstance(outputs, dict) and isinstance(outputs.get("choices"), list) and outputs["choices"]:
            # choices past the first are alternatives the agent did not act on
            replies = [_openai_message({**(outputs["choices"][0] or {}).get("message", {}),
                                        "role": "assistant"})]
        return [_openai_message(m) for m in inputs["messages"]], replies
    if isinstance(inputs, dict) and "input" in inputs and (
            fmt == "openai" or isinstance(outputs, dict) and isinstance(outputs.get("output"), list)):
        return _responses(inputs, outputs)
    if "mlflow.chat.messages" in attributes:
        return _chat_messages(attributes["mlflow.chat.messages"])
    if inputs is ABSENT:
        return None
    keys = sorted(inputs)[:4] if isinstance(inputs, dict) else [type(inputs).__name__]
    raise UnknownLayout(f"an MLflow model span in an unknown layout (mlflow.spanInputs: {', '.join(keys)})")


def _tool_run(span: Span, attributes: dict[str, Any]) -> ToolRun:
    arguments = attributes.get("mlflow.spanInputs", ABSENT)
    call_id = next((attributes[k] for k in ("tool_call_id", "gen_ai.tool.call.id", "tool.id")
                    if isinstance(attributes.get(k), str)), None)
    name = attributes.get("mlflow.spanFunctionName")
    return ToolRun(span.span_id, span.start_ns, str(name if isinstance(name, str) and name else span.name),
                   None if arguments is ABSENT else arguments, call_id, captured=arguments is not ABSENT)


def read_span(span: Span) -> ModelStep | ToolRun | None:
    """Read one MLflow span: a :class:`ModelStep` (CHAT_MODEL, LLM), a :class:`ToolRun` (TOOL) or ``None``.

    Raises:
        UnknownLayout: A model span whose inputs are in no layout of the module docstring.
    """
    attributes = span.attributes
    kind = attributes.get("mlflow.spanType")
    if kind is None:  # a span from another instrumentation, ingested by MLflow as it was written
        return _genai.read_span(span) or _openinference.read_span(span)
    if kind == "TOOL":
        return _tool_run(span, attributes)
    if kind not in MODEL_TYPES:
        return None
    layout = _model_layout(attributes)
    inputs, outputs = layout if layout is not None else ([], [])
    result = attributes.get("mlflow.spanOutputs")
    response_id = result.get("id") if isinstance(result, dict) else None
    model = attributes.get("mlflow.llm.model") or (result.get("model") if isinstance(result, dict) else None)
    if not isinstance(model, str) and isinstance(attributes.get("mlflow.spanInputs"), dict):
        model = attributes["mlflow.spanInputs"].get("model")
    return ModelStep(span.span_id, span.start_ns, inputs, outputs,
                     response_id if isinstance(response_id, str) else None, model if isinstance(model, str) else None)


# --------------------------------------------------------------------------------------------------- store reading


def _without_0x(value: Any) -> Any:
    """MLflow 2's ids: ``0x`` + hex."""
    return value[2:] if isinstance(value, str) and value.startswith("0x") else value


def _trace_id(value: Any) -> Any:
    """MLflow 3's trace id in a span: base64 (the current releases), or MLflow's own ``tr-`` + hex (3.5), also as a
    v4 ``trace:/<location>/tr-...``. Neither prefix can begin base64 text, which has no ``-`` or ``:``."""
    if isinstance(value, str) and value.startswith(("tr-", "trace:/")):
        return value.rsplit("/", 1)[-1].removeprefix("tr-")
    return value


def _mlflow_span(raw: Any, where: str) -> Span | BadRecord:
    """One span as MLflow wrote it (3.x or 2.x shape) -> :class:`Span` with decoded attribute values."""
    if not isinstance(raw, dict):
        return BadRecord("an MLflow span is not a JSON object", where)
    if isinstance(raw.get("context"), dict):  # MLflow 2
        context = raw["context"]
        ids = {"traceId": _without_0x(context.get("trace_id")), "spanId": _without_0x(context.get("span_id")),
               "parentSpanId": _without_0x(raw.get("parent_id")), "startTimeUnixNano": raw.get("start_time")}
    else:  # base64 ids can begin with "0x" too: only MLflow 2's are cut
        ids = {"traceId": _trace_id(raw.get("trace_id")), "spanId": raw.get("span_id"),
               "parentSpanId": raw.get("parent_span_id"), "startTimeUnixNano": raw.get("start_time_unix_nano")}
    span = _span({**ids, "name": raw.get("name")}, None, where)
    if isinstance(span, Span):
        attributes = raw.get("attributes") if isinstance(raw.get("attributes"), dict) else {}
        span.attributes = {str(k): _decoded(v) for k, v in attributes.items()}
        span.events = [{"name": e.get("name"), "attributes": {str(k): _decoded(v) for k, v in
                                                               (e.get("attributes") or {}).items()}}
                       for e in raw.get("events") or [] if isinstance(e, dict)]
    return span


def _reward(assessments: list[dict[str, Any]]) -> float | int | None:
    for assessment in assessments:
        if assessment.get("type") != "feedback" or not assessment.get("valid", True):
            continue
        value = assessment.get("value")
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str) and value.strip().lower() in _JUDGED:
            return _JUDGED[value.strip().lower()]
    return None


def _lay_on_root(spans: list[Span | BadRecord], trace: dict[str, Any]) -> None:
    """Put the trace's own fields on its root span(s) (the module docstring, "The trace's own fields")."""
    extra: dict[str, Any] = {k: v for k, v in trace["tags"].items() if not k.startswith("mlflow.")}
    for key in _NUMBER_TAGS:  # tag values are text; a case id stays text ("007" is not 7)
        if isinstance(extra.get(key), str):
            extra[key] = _decoded(extra[key])
    session = trace["metadata"].get("mlflow.trace.session") or trace.get("session_id")
    if session:
        extra["session.id"] = session
    extra["mlflow.traceRequestId"] = trace["trace_id"]
    if trace.get("experiment_id") is not None:
        extra["mlflow.experimentId"] = str(trace["experiment_id"])
    assessments = sorted(trace["assessments"], key=lambda a: (a.get("created") or 0, a.get("id") or ""))
    if assessments:
        extra["mlflow.assessments"] = assessments
    reward = _reward(assessments)
    if reward is not None:
        extra["tooleval.reward"] = reward
    for span in spans:
        if isinstance(span, Span) and span.parent_id is None:
            for key, value in extra.items():
                span.attributes.setdefault(key, value)


def _check_schema(trace: dict[str, Any], path: Path, where: str) -> None:
    version = trace["metadata"].get("mlflow.trace_schema.version")
    if version is not None and str(version) not in KNOWN_SCHEMA_VERSIONS:
        raise InputFileError(path, None, f"{where}: trace schema version {version!r} is not one tooleval reads "
                             f"({', '.join(sorted(KNOWN_SCHEMA_VERSIONS))}).",
                             "upgrade tooleval, or export the traces with an MLflow release that writes schema 2 "
                             "or 3.")


def _trace_file(path: Path, where: str, digest: Any) -> Iterator[Span | BadRecord]:
    """The spans of one ``traces.json`` (MLflow's trace data artifact: ``{"spans": [...]}``)."""
    data = path.read_bytes()
    digest.update(data)
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise InputFileError(path, None, f"{where}: not a complete JSON document ({exc}).",
                             "remove this trace's folder or re-log the trace (the file may be truncated).") from exc
    if not isinstance(document, dict) or not isinstance(document.get("spans"), list):
        yield BadRecord("an MLflow trace data file without a spans list", where)
        return
    for number, raw in enumerate(document["spans"], start=1):
        yield _mlflow_span(raw, f"{where} span {number}")


def _local(location: Any) -> Path | None:
    if not isinstance(location, str) or not location:
        return None
    if location.startswith("file://"):
        location = location[len("file://"):]
    elif "://" in location:
        return None  # an artifact store elsewhere (s3://, a tracking server): not read here
    return Path(location)


def _sqlite_traces(path: Path, digest: Any) -> Iterator[Span | BadRecord]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield from _sqlite_rows(db, path, digest)
    except sqlite3.DatabaseError as exc:
        raise InputFileError(path, None, f"the database cannot be read ({exc}).",
                             "copy the store again (it may be truncated or still being written), or check it "
                             "with `sqlite3 mlflow.db 'PRAGMA integrity_check'`.") from exc
    finally:
        db.close()


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def _sqlite_rows(db: sqlite3.Connection, path: Path, digest: Any) -> Iterator[Span | BadRecord]:
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "trace_info" not in tables:
        raise InputFileError(path, None, "an SQLite database without MLflow's trace_info table: no MLflow traces "
                             "(an MLflow store older than 2.14, or another program's database).", STORE_FIX)
    info = _columns(db, "trace_info")
    if not {"request_id", "experiment_id", "timestamp_ms"} <= info:
        raise InputFileError(path, None, "MLflow's trace_info table lacks request_id, experiment_id or "
                             "timestamp_ms: a store schema tooleval does not know.",
                             "upgrade the store with `mlflow db upgrade sqlite:///mlflow.db`, then import again.")
    has_spans = "spans" in tables and {"trace_id", "span_id", "content"} <= _columns(db, "spans")
    has_assessments = "assessments" in tables
    session = "session_id" if "session_id" in info else "NULL"
    traces = db.execute(f"SELECT request_id, experiment_id, {session} FROM trace_info ORDER BY timestamp_ms, "
                        "request_id")
    for trace_id, experiment_id, session_id in traces:
        where = f"{path.name}:trace {trace_id}"
        trace = {"trace_id": trace_id, "experiment_id": experiment_id, "session_id": session_id,
                 "tags": dict(db.execute("SELECT key, value FROM trace_tags WHERE request_id = ?", (trace_id,))),
                 "metadata": dict(db.execute("SELECT key, value FROM trace_request_metadata WHERE request_id = ?",
                                             (trace_id,))),
                 "assessments": []}
        _check_schema(trace, path, where)
        if has_assessments:
            for row in db.execute("SELECT assessment_id, name, assessment_type, value, source_type, source_id, "
                                  "span_id, valid, created_timestamp FROM assessments WHERE trace_id = ?",
                                  (trace_id,)):
                trace["assessments"].append({"id": row[0], "name": row[1], "type": row[2], "value": _decoded(row[3]),
                                             "source_type": row[4], "source_id": row[5], "span_id": row[6],
                                             "valid": bool(row[7]), "created": row[8]})
        spans: list[Span | BadRecord] = []
        if has_spans:
            for span_id, content in db.execute("SELECT span_id, content FROM spans WHERE trace_id = ? "
                                               "ORDER BY start_time_unix_nano, span_id", (trace_id,)):
                digest.update((content or "").encode())
                try:
                    raw = json.loads(content)
                except (TypeError, ValueError):
                    spans.append(BadRecord("an MLflow span's content is not JSON", f"{where} span {span_id}"))
                    continue
                spans.append(_mlflow_span(raw, f"{where} span {span_id}"))
        if not spans:
            spans = list(_artifact_spans(trace, where, digest))
        _lay_on_root(spans, trace)
        yield from spans


def _artifact_spans(trace: dict[str, Any], where: str, digest: Any) -> Iterator[Span | BadRecord]:
    folder = _local(trace["tags"].get("mlflow.artifactLocation"))
    data = folder / "traces.json" if folder is not None else None
    if data is None or not data.is_file():
        yield BadRecord("a trace with no spans in the store and no local traces.json artifact", where)
        return
    yield from _trace_file(data, f"{where} ({data})", digest)


def _file_store_traces(root: Path, digest: Any) -> Iterator[Span | BadRecord]:
    import yaml

    folders = sorted(p for p in root.glob("*/traces/*") if p.is_dir())
    for folder in folders:
        where = f"{folder.relative_to(root.parent)}"
        info_path = folder / "trace_info.yaml"
        if not info_path.is_file():
            yield BadRecord("a trace folder without trace_info.yaml", where)
            continue
        try:
            info = yaml.safe_load(info_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise InputFileError(info_path, None, f"not YAML ({exc}).",
                                 "remove this trace's folder or re-log the trace (the file may be truncated).") from exc

        def values(sub: str) -> dict[str, str]:
            base = folder / sub
            return {p.name: p.read_text(encoding="utf-8") for p in sorted(base.iterdir()) if p.is_file()} \
                if base.is_dir() else {}

        experiment = (info.get("trace_location") or {}).get("mlflow_experiment", {}).get("experiment_id") \
            if isinstance(info.get("trace_location"), dict) else info.get("experiment_id")
        trace = {"trace_id": info.get("trace_id") or info.get("request_id") or folder.name,
                 "experiment_id": experiment if experiment is not None else folder.parent.parent.name,
                 "session_id": None, "tags": values("tags"), "metadata": values("request_metadata"),
                 "assessments": []}
        _check_schema(trace, info_path, where)
        for path in sorted((folder / "assessments").glob("*.yaml")):
            item = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            kind = "feedback" if "feedback" in item else "expectation" if "expectation" in item else None
            body = item.get(kind) or {}
            created = _iso_ms(item.get("create_time"))
            trace["assessments"].append({"id": item.get("assessment_id"), "name": item.get("assessment_name"),
                                         "type": kind, "value": body.get("value"),
                                         "source_type": (item.get("source") or {}).get("source_type"),
                                         "source_id": (item.get("source") or {}).get("source_id"),
                                         "span_id": item.get("span_id"), "valid": item.get("valid", True),
                                         "created": created})
        data = folder / "artifacts" / "traces.json"
        if data.is_file():
            spans = list(_trace_file(data, f"{where}/artifacts/traces.json", digest))
        else:
            spans = list(_artifact_spans(trace, where, digest))
        _lay_on_root(spans, trace)
        yield from spans


def _iso_ms(value: Any) -> int | None:
    from datetime import datetime, timezone

    if not isinstance(value, str):
        return value if isinstance(value, int) else None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(moment.replace(tzinfo=moment.tzinfo or timezone.utc).timestamp() * 1000)


def _is_sqlite(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


def iter_store(src: Path, digest: Any) -> tuple[list[Path], Iterator[Span | BadRecord]]:
    """The spans of an MLflow store, one trace at a time (the source argument of the span importer).

    Args:
        src: ``mlflow.db`` (or a ``sqlite:///`` URI), an ``mlruns`` folder, or a folder holding either (the
            SQLite store is taken when both are there).
        digest: A ``hashlib`` object fed with the span JSON read (the default revision derives from it).

    Returns:
        ``([the store's path], spans)``; spans are produced lazily.

    Raises:
        InputFileError: No store at ``src``, or a store that is not MLflow's (module docstring, "Refused"). The
            errors found while reading (a damaged database, a truncated ``traces.json``, an unknown schema version)
            are raised by the iterator, before anything is written.
    """
    text = str(src)
    if text.startswith("sqlite:///"):
        src = Path(text[len("sqlite:///"):])  # sqlite:////abs/path keeps its leading slash
    src = Path(src)
    if src.is_dir():
        if (src / "mlflow.db").is_file():
            src = src / "mlflow.db"
        elif (src / "mlruns").is_dir() and any((src / "mlruns").glob("*/traces")):
            src = src / "mlruns"
    if src.is_file():
        if not _is_sqlite(src):
            raise InputFileError(src, None, "not an SQLite database (no SQLite header): not MLflow's SQLite store.",
                                 STORE_FIX)
        return [src], _sqlite_traces(src, digest)
    if src.is_dir() and any(src.glob("*/traces")):
        return [src], _file_store_traces(src, digest)
    if src.is_dir():
        raise InputFileError(src, None, "no mlflow.db and no MLflow file store (no <experiment>/traces/ folder).",
                             STORE_FIX)
    raise InputFileError(src, None, "source not found.", STORE_FIX)
