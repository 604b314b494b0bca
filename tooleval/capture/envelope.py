"""Trace envelopes: the immutable, versioned record that scoring reads (docs/design.md "Stages", trace capture).

An envelope is a plain dict shaped like :data:`tooleval.storage.ENVELOPE_SCHEMA` (one Parquet row). ``run_id`` and
``dataset_revision`` are the partition columns: the capture stage leaves them null and a run fills them in when it
publishes, so the same capture is reused by a later run over the same trace and case — also under a new revision of a
growing corpus, whose unchanged traces are then never captured twice. ``trace_digest`` is a sha256 over the canonical
envelope content — every column except ``run_id``, ``dataset_revision``, ``captured_at``, ``trace_digest`` and
``error`` (envelope version 3; versions 1 and 2 also covered ``dataset_revision`` and keep their formulas) — and
:func:`digest_ok` recomputes it from the stored columns.

Envelope version 2 records calls at three boundaries, so that a failure can be put on the model, the adapter or the
tool: *model* (as emitted in the assistant messages), *adapter* (after parsing, validation and defaults) and
*executor* (the payload each tool received, how many times it ran and its result status), where the source has them;
plus the request as sent, the prompt and tool schema versions and the generation timestamps.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Collection

import orjson

from tooleval.canonical import (ORJSON_CANONICAL, orjson_canonical, canonical_dumps, canonical_json,
                                canonical_loads, canonical_text, canonical_value, dumps_text, loads_text)
from tooleval.capture._call_state import MARKER_KEY
from tooleval.capture.provenance import input_key
from tooleval.models import AgentInfo, Call, RecordedTrace, call_records_from_messages
from tooleval.capture.transcript import transcript_columns
from tooleval.storage import ENVELOPE_VERSION, VIEW_FIELDS

__all__ = ["build_envelope", "generation_envelope", "envelope_digest", "digest_ok", "envelope_calls", "boundary_calls"]

_NOT_CONTENT = {"run_id", "dataset_revision", "captured_at", "trace_digest", "error", *VIEW_FIELDS.names}
"""Columns the version-3 digest leaves out: the partition columns, the capture time, the digest itself and the
columns the capture stage writes beside the envelope (a view of its content, derived from what is digested)."""
_NOT_CONTENT_V2 = _NOT_CONTENT - {"dataset_revision"}


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


_JSON_TEXT = ("messages_json", "metadata_json", "request_messages_json")


def _timestamps_as_text(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` with its generation timestamps as UTC ISO text to the microsecond (Parquet stores UTC
    microseconds: the digest covers the same instant, however the value was given); changed in place."""
    for key in ("generation_started_at", "generation_finished_at"):
        value = content.get(key)
        if isinstance(value, datetime):
            value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
            content[key] = value.astimezone(timezone.utc).isoformat(timespec="microseconds")
    return content


def _canonical_content(record: dict[str, Any], skipped: set[str] = _NOT_CONTENT) -> dict[str, Any]:
    """The digested content, canonical (:func:`tooleval.canonical.canonical_value` of it): the JSON-text columns
    are read with :func:`tooleval.canonical.canonical_loads`, which yields their canonical values directly, so
    only the small remaining columns are walked."""
    content = canonical_value(_timestamps_as_text(
        {k: v for k, v in record.items() if k not in skipped and k not in _JSON_TEXT}))
    for key in _JSON_TEXT:
        if key in record:
            content[key] = None if record[key] is None else canonical_loads(record[key])
    return content


def _digest_v1(record: dict[str, Any]) -> str:
    content = {
        "envelope_version": 1,
        "dataset_revision": record["dataset_revision"],
        "case_id": record["case_id"],
        "trial": record["trial"],
        "agent": AgentInfo(name=record["agent_name"], version=record["agent_version"],
                           model=record["agent_model"]).model_dump(mode="json"),
        "request_id": record["request_id"],
        "response_id": record["response_id"],
        "messages": _loads(record["messages_json"]),
        "metadata": _loads(record["metadata_json"]) or {},
    }
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def _digest_of_values(record: dict[str, Any], values: dict[str, Any]) -> str:
    """:func:`envelope_digest` of a version-3 record whose JSON-text columns were just written from ``values``
    (column -> decoded value): the same bytes are hashed, without reading the text back.

    The canonical content is written by one orjson call: the small columns as values, the JSON-text columns as
    their canonical text (:func:`tooleval.canonical.canonical_text`, passed in as ``orjson.Fragment``). The small
    columns are written by :func:`tooleval.canonical.canonical_dumps`' orjson way when it gives the canonical bytes
    (they are text, integers, null and call records); otherwise the record takes the canonical way (a walk and
    ``json.dumps`` per column, as before)."""
    small = _timestamps_as_text({k: v for k, v in record.items() if k not in _NOT_CONTENT and k not in _JSON_TEXT})
    texts = {key: "null" if values[key] is None else canonical_text(values[key]) for key in _JSON_TEXT}
    if orjson_canonical(small) is not None:
        whole = {**small, **{key: orjson.Fragment(text) for key, text in texts.items()}}
        return hashlib.sha256(orjson.dumps(whole, option=ORJSON_CANONICAL)).hexdigest()
    content = _canonical_content(small)
    parts = {key: canonical_dumps(value) for key, value in content.items()}
    parts.update(texts)
    body = ",".join(f"{canonical_dumps(key)}:{parts[key]}" for key in sorted(parts))
    return hashlib.sha256(("{" + body + "}").encode()).hexdigest()


def envelope_digest(record: dict[str, Any]) -> str:
    """sha256 (64 hex) of an envelope record's canonical content (version-aware: version 1 and 2 envelopes keep
    the formula they were written with; version 3 leaves out ``dataset_revision``)."""
    version = record.get("envelope_version")
    if version == 1:
        return _digest_v1(record)
    skipped = _NOT_CONTENT_V2 if version == 2 else _NOT_CONTENT
    return hashlib.sha256(canonical_dumps(_canonical_content(record, skipped)).encode()).hexdigest()


def digest_ok(record: dict[str, Any]) -> bool:
    """True when the stored ``trace_digest`` equals the digest recomputed from the stored columns."""
    return record.get("trace_digest") is not None and envelope_digest(record) == record["trace_digest"]


def _call_records(raw: list[dict[str, Any]] | None) -> list[dict] | None:
    if raw is None:
        return None
    return [Call.from_raw(c.get("name", ""), c.get("args", c.get("arguments"))).to_record() for c in raw]


def _executor_records(raw: list[dict[str, Any]] | None) -> list[dict] | None:
    if raw is None:
        return None
    records = []
    for call in raw:
        record = Call.from_raw(call.get("name", ""), call.get("args", call.get("arguments"))).to_record()
        record["executions"] = int(call.get("executions") or 1)
        record["status"] = call.get("status")
        records.append(record)
    return records


def build_envelope(
    trace: RecordedTrace,
    revision: str | None,
    captured_at: datetime,
    *,
    tool_schema_version: str | None = None,
    redacted_fields: list[str] | None = None,
    kept_results: Collection[str] | None = None,
) -> dict[str, Any]:
    """Turn one recorded agent response into an envelope record.

    Args:
        trace: The agent's raw response for one (case, trial) (already redacted when redaction is on).
        revision: Dataset revision the trace answers; ``None`` in a capture stage file, which any revision whose
            case the trace answers may publish (the revision is stamped then; it is not part of the digest).
        captured_at: Timezone-aware UTC capture time.
        tool_schema_version: Version of the tool schemas the agent was offered, when the trace does not say.
        redacted_fields: Field paths redacted at capture.
        kept_results: The tools whose result texts the transcript view keeps (those that declare confidential
            fields, whose results the leak rule reads); ``None``: every tool's.

    Returns:
        A dict with the envelope columns; ``run_id`` is ``None`` until publication. ``error`` is set (and
        ``model_calls`` empty) when the messages hold a tool call that cannot be read at all (no tool name), and
        (``generation_error: recorded: <text>``) when the trace records that its agent failed (``error``).

    Raises:
        ValueError: ``captured_at`` is naive.
    """
    if captured_at.tzinfo is None:
        raise ValueError("captured_at must be timezone-aware (UTC)")
    error = None
    try:
        calls = call_records_from_messages(trace.messages)
    except ValueError as exc:
        calls, error = [], f"bad_trace: {exc}"
    recorded_error = (trace.model_extra or {}).get("error")
    if error is None and isinstance(recorded_error, str):
        # the recorded agent failed to answer (BFCL's "Error during inference: ..."): a failing row that says so,
        # never a row scored as if the agent had chosen to make no call
        error = f"generation_error: recorded: {recorded_error}"
    request = trace.request.get("messages") if isinstance(trace.request, dict) else None
    metadata = trace.metadata or {}
    record: dict[str, Any] = {
        "envelope_version": ENVELOPE_VERSION,
        "dataset_revision": revision,
        "run_id": None,
        "case_id": trace.case_id,
        "trial": trace.trial,
        "agent_name": trace.agent.name,
        "agent_version": trace.agent.version,
        "agent_model": trace.agent.model,
        "request_id": trace.request_id,
        "response_id": trace.response_id,
        "messages_json": dumps_text(trace.messages),
        "model_calls": calls,
        "metadata_json": dumps_text(metadata, sort_keys=True),
        "captured_at": captured_at,
        "trace_digest": None,
        "error": error,
        "request_messages_json": None if request is None else dumps_text(request),
        "adapter_calls": _call_records(trace.adapter_calls),
        "executor_calls": _executor_records(trace.executor_calls),
        "prompt_version": trace.prompt_version,
        "tool_schema_version": trace.tool_schema_version or tool_schema_version,
        "generation_started_at": trace.generation_started_at,
        "generation_finished_at": trace.generation_finished_at,
        "redacted_fields": sorted(redacted_fields or []),
    }
    record["trace_digest"] = _digest_of_values(record, {"messages_json": trace.messages, "metadata_json": metadata,
                                                        "request_messages_json": request})
    record.update(_view(trace.messages, calls, request, metadata, kept_results))
    return record


def _view(messages: list, calls: list[dict], request: Any, metadata: dict,
          kept: Collection[str] | None) -> dict[str, Any]:
    """The capture stage's view columns (:data:`tooleval.storage.VIEW_FIELDS`) of a trace being enveloped: what
    the scoring stage reads of its content, taken from the values decoded here."""
    view = transcript_columns(messages, [call["name"] for call in calls], kept)
    view["request_key"] = None if request is None else input_key(request) or ""
    reward = metadata.get("reward")
    view["recorded_reward"] = None if isinstance(reward, bool) or not isinstance(reward, (int, float)) \
        else float(reward)
    marker = metadata.get(MARKER_KEY)
    secrets = marker.get("reference_secrets") if isinstance(marker, dict) else None
    view["reference_secrets_json"] = None if secrets is None else json.dumps(secrets)
    return view


def _recorded_trace(payload: dict[str, Any]) -> RecordedTrace:
    """``RecordedTrace.model_validate(payload)`` of a payload read from JSON text. A message list of plain objects
    is taken as it is rather than copied object by object by the validation (three quarters of its time on a
    long trace): read from JSON text, each message is a dict with string keys already, which is all that its type
    (``list[dict[str, Any]]``) asks; any other message list is validated, and refused, as before."""
    messages = payload.get("messages")
    if type(messages) is not list or not all(type(message) is dict for message in messages):
        return RecordedTrace.model_validate(payload)
    trace = RecordedTrace.model_validate({**payload, "messages": []})
    trace.messages = messages
    return trace


def generation_envelope(record: dict[str, Any], captured_at: datetime,
                        tool_schema_version: str | None = None,
                        kept_results: Collection[str] | None = None) -> dict[str, Any]:
    """The envelope of one generation record (what the capture stage writes for it; ``tooleval.testing`` captures
    through it too, so that a trajectory checked in a test is captured exactly as in a run).

    Args:
        record: ``{case_id, trial, payload_json, error}``: a recorded trace as JSON text or its UTF-8 bytes (already redacted when
            redaction is on; an optional ``redacted_fields`` key lists the redacted field paths), and the
            generation's error text, if any; or, instead of the text, ``payload``: the trace's decoded JSON values
            (not modified).
        captured_at: Timezone-aware UTC capture time.
        tool_schema_version: As :func:`build_envelope`.
        kept_results: As :func:`build_envelope`.

    Returns:
        :func:`build_envelope` of the payload (its ``error`` the record's, when set: a failed generation keeps
        what was captured); an envelope with no calls that carries the error when there is no payload.

    Raises:
        pydantic.ValidationError: the payload is not a recorded trace (the generation stage only writes valid
            ones).
    """
    payload = record.get("payload")
    if payload is None and record["payload_json"] is None:
        return {"envelope_version": ENVELOPE_VERSION, "dataset_revision": None, "run_id": None,
                "case_id": record["case_id"], "trial": record["trial"], "captured_at": captured_at,
                "model_calls": [], "error": record["error"]}
    payload = loads_text(record["payload_json"]) if payload is None else dict(payload)
    redacted = payload.pop("redacted_fields", None)
    trace = _recorded_trace(payload)
    envelope = build_envelope(trace, None, captured_at, tool_schema_version=tool_schema_version,
                              redacted_fields=redacted, kept_results=kept_results)
    if record["error"] is not None:  # a failed generation keeps what was captured (its attempts included)
        envelope["error"] = record["error"]
    return envelope


def envelope_calls(envelope: dict[str, Any], *, written_here: bool = False) -> list[Call]:
    """The model-boundary calls of an envelope record, as :class:`~tooleval.models.Call` objects.

    Args:
        envelope: An envelope record.
        written_here: The record is exactly what :func:`build_envelope` wrote (its stage file's sha256 was
            checked), so each well-formed call's ``args_json`` is canonical text and is read as such
            (:meth:`~tooleval.models.Call.from_canonical`) instead of being parsed as outside text.
    """
    records = envelope.get("model_calls") or []
    if not written_here:
        return [Call.from_record(record) for record in records]
    return [Call.from_record(r) if r.get("parse_error") is not None or r.get("args_json") is None
            else Call.from_canonical(r["name"], r["args_json"]) for r in records]


def boundary_calls(envelope: dict[str, Any]) -> tuple[list[Call] | None, list[tuple[Call, int]] | None]:
    """``(adapter calls, [(executor payload, executions)])`` of an envelope; ``None`` where not recorded."""
    adapter = envelope.get("adapter_calls")
    executor = envelope.get("executor_calls")
    return (
        None if adapter is None else [Call.from_record(r) for r in adapter],
        None if executor is None else [(Call.from_record(r), int(r.get("executions") or 1)) for r in executor],
    )
