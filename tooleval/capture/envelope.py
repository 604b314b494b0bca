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
from typing import Any, Collection, NamedTuple

import orjson
import pyarrow as pa

from tooleval.canonical import (ORJSON_CANONICAL, orjson_canonical, canonical_dumps, canonical_json,
                                canonical_loads, canonical_text, canonical_text_written, canonical_value, dumps_text,
                                kept_bytes, loads_text)
from tooleval.capture._call_state import MARKER_KEY
from tooleval.capture.provenance import input_key
from tooleval.models import AgentInfo, Call, RecordedTrace, call_records_from_messages
from tooleval.capture.transcript import transcript_values
from tooleval.capture._walk import MessagesWalk, walk_messages
from tooleval.storage import CAPTURE_SCHEMA, ENVELOPE_SCHEMA, ENVELOPE_VERSION, VIEW_FIELDS

__all__ = ["EnvelopeColumns", "build_envelope", "generation_envelope", "envelope_digest", "digest_ok", "envelope_calls",
           "boundary_calls"]

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
        A dict with the envelope columns and the view columns (:data:`tooleval.storage.VIEW_FIELDS`); ``run_id``
        is ``None`` until publication. ``error`` is set (and ``model_calls`` empty) when the messages hold a tool
        call that cannot be read at all (no tool name), and (``generation_error: recorded: <text>``) when the
        trace records that its agent failed (``error``).

    Raises:
        ValueError: ``captured_at`` is naive.
    """
    if captured_at.tzinfo is None:
        raise ValueError("captured_at must be timezone-aware (UTC)")
    columns = EnvelopeColumns(captured_at, tool_schema_version, kept_results)
    columns.add_model(trace, redacted_fields)
    record = columns.record(0)
    record["dataset_revision"] = revision
    return record


def _no_float(executor: list[dict] | None, redacted: list) -> bool:
    """Whether the small columns of an envelope whose timestamps are null hold no float, seen from the only values
    a trace may give any JSON type: an executor call's status and the redacted field paths it names itself."""
    if executor is not None:
        for call in executor:
            status = call["status"]
            if status is not None and type(status) is not str:
                return False
    for path in redacted:
        if type(path) is not str:
            return False
    return True


class TraceFields(NamedTuple):
    """What an envelope is made of: a recorded trace's fields (as :class:`~tooleval.models.RecordedTrace` holds
    them), its recorded ``error`` (a field the model keeps as an extra) and the paths its redaction replaced."""

    case_id: str
    trial: int
    agent_name: str
    agent_version: str | None
    agent_model: str | None
    request_id: str | None
    response_id: str | None
    messages: list
    metadata: dict | None
    request: dict | None
    adapter_calls: list | None
    executor_calls: list | None
    prompt_version: str | None
    tool_schema_version: str | None
    started: datetime | None
    finished: datetime | None
    recorded_error: Any
    redacted_fields: list[str] | None


_AT = {name: index for index, name in enumerate(CAPTURE_SCHEMA.names)}
"""Column name -> its position in a capture stage row."""


_SAME_IN_EVERY_ROW = frozenset(_AT[name] for name in ("envelope_version", "run_id", "dataset_revision", "captured_at"))
"""The columns whose value every row of a batch shares (the version, the partition columns a stage file leaves null,
the capture time)."""
_MESSAGES_AT = _AT["messages_json"]


class EnvelopeColumns:
    """A batch of capture stage rows being built: each trace's values, in :data:`tooleval.storage.CAPTURE_SCHEMA`'s
    order, kept as one tuple (no record per row, nor the layers of calls that built one), and turned into Arrow
    columns at once by :meth:`table`.

    What depends on one value only is computed once per distinct value for the batch's life (a shard's): the
    call record of a (tool name, argument text) — tool names and argument texts recur across a case's trials and
    across cases.

    Args:
        captured_at: Timezone-aware UTC capture time (every row's).
        tool_schema_version: Recorded for a trace that does not name its own.
        kept: The tools whose result texts the transcript view keeps; ``None``: every tool's.
    """

    def __init__(self, captured_at: datetime, tool_schema_version: str | None,
                 kept: Collection[str] | None) -> None:
        self.captured_at = captured_at
        self.tool_schema_version = tool_schema_version
        self.kept = kept
        self.calls_seen: dict[tuple[str, str], dict[str, str | None]] = {}
        """(tool name, argument text) -> its call record (shared by the rows: never modified)."""
        self.metadata_seen: dict[bytes, tuple[str, str | None]] = {}
        """A metadata object's sorted writing -> its JSON text and canonical text."""
        self.clear()

    def clear(self) -> None:
        """Start a new batch (the memo of call records stays)."""
        self.rows: list[tuple] = []
        """Each row's values, in :data:`~tooleval.storage.CAPTURE_SCHEMA`'s order (turned into columns at once by
        :meth:`table`)."""
        self.text = 0
        """Characters of JSON text in the batch (where a stage file's record batch ends: ``STAGE_GROUP_TEXT``)."""

    def __len__(self) -> int:
        return len(self.rows)

    def record(self, index: int) -> dict[str, Any]:
        """Row ``index`` as a dict of every :data:`~tooleval.storage.CAPTURE_SCHEMA` column."""
        record = dict(zip(CAPTURE_SCHEMA.names, self.rows[index]))
        if type(record["messages_json"]) is bytes:
            record["messages_json"] = record["messages_json"].decode()
        return record

    def table(self) -> pa.Table:
        """The batch as a table of :data:`~tooleval.storage.CAPTURE_SCHEMA`, built column by column (nested
        values, the view's lists of tuples included, converted by Arrow itself)."""
        columns = zip(*self.rows) if self.rows else [()] * len(CAPTURE_SCHEMA)
        count = len(self.rows)
        arrays = []
        for at, (values, field) in enumerate(zip(columns, CAPTURE_SCHEMA)):
            if at in _SAME_IN_EVERY_ROW:  # one value for the whole batch: not converted row by row
                arrays.append(pa.repeat(pa.scalar(values[0] if count else None, field.type), count))
            elif at == _MESSAGES_AT:  # orjson's UTF-8 bytes, or text where the standard library wrote them
                if any(type(value) is str for value in values):
                    values = [value.decode() if type(value) is bytes else value for value in values]
                    arrays.append(pa.array(values, field.type))
                else:
                    arrays.append(pa.array(values, pa.binary()).view(field.type))
            else:
                arrays.append(pa.array(values, field.type))
        return pa.Table.from_arrays(arrays, schema=CAPTURE_SCHEMA)

    def add_failed(self, case_id: str, trial: int, error: str | None) -> None:
        """A row without a trace (its generation failed, or its line is not a valid trace): ``error`` and no
        calls, every other column null."""
        row: list[Any] = [None] * len(CAPTURE_SCHEMA)
        row[_AT["envelope_version"]] = ENVELOPE_VERSION
        row[_AT["case_id"]] = case_id
        row[_AT["trial"]] = trial
        row[_AT["captured_at"]] = self.captured_at
        row[_AT["model_calls"]] = []
        row[_AT["error"]] = error
        self.rows.append(tuple(row))

    def add_model(self, trace: RecordedTrace, redacted_fields: list[str] | None, error: str | None = None) -> None:
        """:meth:`add` of a validated :class:`~tooleval.models.RecordedTrace`."""
        self.add(TraceFields(
            trace.case_id, trace.trial, trace.agent.name, trace.agent.version, trace.agent.model, trace.request_id,
            trace.response_id, trace.messages, trace.metadata, trace.request, trace.adapter_calls,
            trace.executor_calls, trace.prompt_version, trace.tool_schema_version, trace.generation_started_at,
            trace.generation_finished_at, (trace.model_extra or {}).get("error"), redacted_fields), error)

    def add_values(self, trace: dict[str, Any], error: str | None = None, *,
                   messages_json: bytes | None = None) -> None:
        """:meth:`add` of a trace's decoded JSON values (redacted, with their ``redacted_fields``) whose shape
        :func:`plain_trace_shape` proved valid: what :class:`~tooleval.models.RecordedTrace` would hold, read from
        the values without building it. ``messages_json``: orjson's writing of ``trace["messages"]`` when the
        caller has it already (the redaction wrote them part by part)."""
        get = trace.get
        case_id = trace["case_id"]
        agent = get("agent")
        if agent is None:
            name, version, model = "unknown", None, None
        else:
            name, version, model = agent.get("name", "unknown"), agent.get("version"), agent.get("model")
        self.add(TraceFields(
            case_id if type(case_id) is str else str(case_id), trace["trial"], name, version, model,
            get("request_id"), get("response_id"), trace["messages"], get("metadata"), get("request"),
            get("adapter_calls"), get("executor_calls"), get("prompt_version"), get("tool_schema_version"), None,
            None, get("error"), get("redacted_fields")), error, messages_json)

    def add(self, fields: TraceFields, error: str | None = None, messages_written: bytes | None = None) -> None:
        """Append one trace's row (the columns :func:`build_envelope` documents). ``error``: the generation's
        error, which replaces the trace's own (a failed generation keeps what was captured). ``messages_written``:
        orjson's writing of the messages, when the caller has it."""
        (case_id, trial, agent_name, agent_version, agent_model, request_id, response_id, messages, metadata,
         request, adapter_calls, executor_calls, prompt_version, tool_schema_version, started, finished,
         recorded_error, redacted_fields) = fields
        walked = walk_messages(messages, self.calls_seen, self.kept) if type(messages) is list else None
        if walked is not None:
            calls, own_error = walked.calls, None
        else:
            try:
                calls = call_records_from_messages(messages, self.calls_seen)
                own_error = None
            except ValueError as exc:
                calls, own_error = [], f"bad_trace: {exc}"
        if own_error is None and isinstance(recorded_error, str):
            # the recorded agent failed to answer (BFCL's "Error during inference: ..."): a failing row that says
            # so, never a row scored as if the agent had chosen to make no call
            own_error = f"generation_error: recorded: {recorded_error}"
        request_messages = request.get("messages") if isinstance(request, dict) else None
        metadata = metadata or {}
        messages_json: str | bytes
        if messages_written is not None:
            messages_json = messages_written
        else:
            try:  # as UTF-8 bytes, which Arrow takes as they are (orjson writes valid UTF-8): no text object between
                messages_json = orjson.dumps(messages)
                if len(messages_json) < 4096:  # held for the batch's life: not in orjson's 4 KB buffer
                    messages_json = kept_bytes(messages_json)
            except (TypeError, orjson.JSONEncodeError):
                messages_json = dumps_text(messages)
        try:  # the metadata's sorted writing is also its canonical text when it holds no float
            written = orjson.dumps(metadata, option=ORJSON_CANONICAL)
            # the texts depend on the writing alone (orjson's writing of plain JSON values tells them apart, an
            # integral float from an integer included), and most traces of a corpus record one of a few metadata
            # objects (a reward of 0.0 or 1.0): computed once per distinct writing
            known = self.metadata_seen.get(written)
            if known is None:
                known = (written.decode(), canonical_text_written(metadata, written))
                if len(written) <= _METADATA_KEPT:
                    if len(self.metadata_seen) >= _METADATA_ENTRIES:
                        self.metadata_seen.clear()
                    self.metadata_seen[kept_bytes(written)] = known
            metadata_json, canonical_metadata = known
        except (TypeError, orjson.JSONEncodeError):
            metadata_json, canonical_metadata = dumps_text(metadata, sort_keys=True), None
        request_json = None if request_messages is None else dumps_text(request_messages)
        adapter = _call_records(adapter_calls)
        executor = _executor_records(executor_calls)
        schema_version = tool_schema_version or self.tool_schema_version
        redacted = sorted(redacted_fields or [])
        small = {
            "adapter_calls": adapter, "agent_model": agent_model, "agent_name": agent_name,
            "agent_version": agent_version, "case_id": case_id, "envelope_version": ENVELOPE_VERSION,
            "executor_calls": executor, "generation_finished_at": finished, "generation_started_at": started,
            "model_calls": calls, "prompt_version": prompt_version, "redacted_fields": redacted,
            "request_id": request_id, "response_id": response_id, "tool_schema_version": schema_version,
            "trial": trial,
        }
        digest = None
        if canonical_metadata is not None and started is None and finished is None \
                and _no_float(executor, redacted):
            # the small columns hold text, integers and null only: orjson's sorted writing is their canonical text
            # (:func:`_digest_of_values` decides the same of any record, at the cost of writing them twice)
            small["messages_json"] = orjson.Fragment(_canonical_messages(messages, walked))
            small["metadata_json"] = orjson.Fragment(canonical_metadata)
            small["request_messages_json"] = orjson.Fragment(
                "null" if request_messages is None else canonical_text(request_messages))
            try:
                digest = hashlib.sha256(orjson.dumps(small, option=ORJSON_CANONICAL)).hexdigest()
            except (TypeError, orjson.JSONEncodeError):  # text orjson refuses (a lone surrogate): the slow way
                for key in _JSON_TEXT:
                    del small[key]
        if digest is None:
            digest = _digest_of_values(small, {"messages_json": messages, "metadata_json": metadata,
                                               "request_messages_json": request_messages})
        view = _view(messages, calls, request_messages, metadata, self.kept) if walked is None else \
            (*walked.view, *_view_rest(request_messages, metadata))
        self.rows.append((ENVELOPE_VERSION, None, None, case_id, trial, agent_name, agent_version, agent_model,
                          request_id, response_id, messages_json, calls, metadata_json, self.captured_at, digest,
                          error or own_error, request_json, adapter, executor, prompt_version, schema_version,
                          started, finished, redacted, *view))
        self.text += len(messages_json) + len(metadata_json) + (0 if request_json is None else len(request_json)) \
            + (0 if view[-1] is None else len(view[-1]))


_METADATA_KEPT = 512
"""Bytes of metadata text up to which its texts are remembered (a trace's own metadata, unlike a corpus's few
recurring ones, is seldom seen again)."""
_METADATA_ENTRIES = 4096
"""Metadata texts remembered before starting afresh."""


def _canonical_messages(messages: list, walked: MessagesWalk | None) -> str | bytes:
    """:func:`tooleval.canonical.canonical_text` of a trace's messages (or its UTF-8 bytes: it becomes an
    ``orjson.Fragment``), written at once when the walk found no float in them (orjson's sorted writing is then the
    canonical text)."""
    if walked is not None and walked.no_float:
        try:
            return orjson.dumps(messages, option=ORJSON_CANONICAL)
        except (TypeError, orjson.JSONEncodeError):
            pass
    return canonical_text(messages)


def _view(messages: list, calls: list[dict], request: Any, metadata: dict,
          kept: Collection[str] | None) -> tuple:
    """The capture stage's view columns (:data:`tooleval.storage.VIEW_FIELDS`, in their order) of a trace being
    enveloped: what the scoring stage reads of its content, taken from the values decoded here."""
    return (*transcript_values(messages, [call["name"] for call in calls], kept), *_view_rest(request, metadata))


def _view_rest(request: Any, metadata: dict) -> tuple:
    """The last three view columns: the request's join key, the recorded reward and the redaction's markers."""
    request_key = None if request is None else input_key(request) or ""
    reward = metadata.get("reward")
    recorded_reward = None if isinstance(reward, bool) or not isinstance(reward, (int, float)) else float(reward)
    marker = metadata.get(MARKER_KEY)
    secrets = marker.get("reference_secrets") if isinstance(marker, dict) else None
    return request_key, recorded_reward, None if secrets is None else json.dumps(secrets)


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
