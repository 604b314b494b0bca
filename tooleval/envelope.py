"""Trace envelopes: the immutable, versioned record that scoring reads (DESIGN.md stage 2, "trace capture").

An envelope is a plain dict shaped like :data:`tooleval.storage.ENVELOPE_SCHEMA` (one Parquet row). ``run_id``
is filled in when a run publishes its partitions, so the same capture can be reused by a later run over the same
inputs. ``trace_digest`` is a sha256 over the canonical envelope content: everything except ``run_id`` and
``captured_at`` (which say when and for whom it was captured, not what was captured).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from tooleval.canonical import canonical_json
from tooleval.models import Call, RecordedTrace, calls_from_messages
from tooleval.storage import ENVELOPE_VERSION

__all__ = ["build_envelope", "envelope_digest", "envelope_calls"]


def envelope_digest(content: dict[str, Any]) -> str:
    """sha256 (64 hex) of the canonical JSON of an envelope's content fields."""
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def build_envelope(trace: RecordedTrace, revision: str, captured_at: datetime) -> dict[str, Any]:
    """Turn one recorded agent response into an envelope record.

    Args:
        trace: The agent's raw response for one (case, trial).
        revision: Dataset revision the trace answers.
        captured_at: Timezone-aware UTC capture time.

    Returns:
        A dict with the envelope columns; ``run_id`` is ``None`` until publication. ``error`` is set (and
        ``model_calls`` empty) when the messages hold a tool call that cannot be read at all (no tool name).
    """
    if captured_at.tzinfo is None:
        raise ValueError("captured_at must be timezone-aware (UTC)")
    metadata = trace.metadata or {}
    content = {
        "envelope_version": ENVELOPE_VERSION,
        "dataset_revision": revision,
        "case_id": trace.case_id,
        "trial": trace.trial,
        "agent": trace.agent.model_dump(mode="json"),
        "request_id": trace.request_id,
        "response_id": trace.response_id,
        "messages": trace.messages,
        "metadata": metadata,
    }
    error = None
    try:
        calls = calls_from_messages(trace.messages)
    except ValueError as exc:
        calls, error = [], f"bad_trace: {exc}"
    return {
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
        "messages_json": json.dumps(trace.messages, ensure_ascii=False),
        "model_calls": [call.to_record() for call in calls],
        "metadata_json": json.dumps(metadata, ensure_ascii=False, sort_keys=True),
        "captured_at": captured_at,
        "trace_digest": envelope_digest(content),
        "error": error,
    }


def envelope_calls(envelope: dict[str, Any]) -> list[Call]:
    """The model-boundary calls of an envelope record, as :class:`~tooleval.models.Call` objects."""
    return [Call.from_record(record) for record in envelope.get("model_calls") or []]
