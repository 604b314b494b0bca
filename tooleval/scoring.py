"""Scoring: one row per (case, trial) from a trace envelope and its case (DESIGN.md stage 3).

:func:`score_envelopes` is the whole stage as a plain function: the Prefect task in ``tasks/scoring.py`` only
reads the envelopes, calls it and writes the rows. The ragas column is computed for all rows of a shard in one
event loop (:func:`tooleval.ragas_metric.ragas_tool_call_f1_many`).
"""

from __future__ import annotations

import json
from typing import Any

from tooleval.envelope import envelope_calls
from tooleval.matching import match_calls
from tooleval.models import Case
from tooleval.ragas_metric import ragas_args, ragas_tool_call_f1_many, ragas_version
from tooleval.storage import ROW_SCHEMA_VERSION
from tooleval.versions import scorer_version

__all__ = ["score_envelopes", "row_skeleton"]


def _recorded_reward(envelope: dict[str, Any]) -> float | None:
    metadata = json.loads(envelope.get("metadata_json") or "{}")
    reward = metadata.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return None
    return float(reward)


def row_skeleton(case: Case, envelope: dict[str, Any]) -> dict[str, Any]:
    """The identifying and descriptive columns of a row; the metric columns are ``None``."""
    return {
        "dataset_revision": envelope["dataset_revision"],
        "run_id": None,
        "case_id": case.case_id,
        "trial": envelope["trial"],
        "slice": case.slice,
        "row_schema_version": ROW_SCHEMA_VERSION,
        "scorer_version": scorer_version(),
        "ragas_version": ragas_version(),
        "agent_name": envelope.get("agent_name"),
        "agent_version": envelope.get("agent_version"),
        "expected_calls": [call.to_record() for call in case.expected_calls],
        "observed_calls": [],
        "missing_calls": None,
        "extra_calls": None,
        "wrong_args": None,
        "duplicate_calls": None,
        "malformed_calls": None,
        "tp": None,
        "fp": None,
        "fn": None,
        "precision": None,
        "recall": None,
        "f1": None,
        "ragas_tool_call_f1": None,
        "exact_match": None,
        "mismatch_categories": None,
        "recorded_reward": _recorded_reward(envelope),
        "request_id": envelope.get("request_id"),
        "response_id": envelope.get("response_id"),
        "trace_digest": envelope.get("trace_digest"),
        "error": envelope.get("error"),
    }


def score_envelopes(cases: dict[str, Case], envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Score a shard of envelopes.

    Args:
        cases: The dataset's cases by ``case_id``; every envelope's case must be present (the flow routes
            traces of unknown cases to ``errors.json`` before scoring).
        envelopes: Envelope records (see :mod:`tooleval.envelope`).

    Returns:
        One row dict per envelope, in input order, shaped like :data:`tooleval.storage.ROW_SCHEMA` with
        ``run_id`` ``None``. An envelope carrying an ``error`` yields a row with that error and null metrics.
    """
    rows: list[dict[str, Any]] = []
    ragas_inputs: list[tuple[list[dict], list[dict]]] = []
    ragas_rows: list[int] = []
    for envelope in envelopes:
        case = cases[envelope["case_id"]]
        row = row_skeleton(case, envelope)
        rows.append(row)
        if row["error"] is not None:
            continue
        observed = envelope_calls(envelope)
        result = match_calls(case.expected_calls, observed)
        row.update(
            observed_calls=[call.to_record() for call in observed],
            missing_calls=[call.to_record() for call in result.missing_calls],
            extra_calls=[call.to_record() for call in result.extra_calls],
            wrong_args=[pair.to_record() for pair in result.wrong_args],
            duplicate_calls=result.duplicate_calls,
            malformed_calls=result.malformed_calls,
            tp=result.tp,
            fp=result.fp,
            fn=result.fn,
            precision=result.precision,
            recall=result.recall,
            f1=result.f1,
            exact_match=result.exact_match,
            mismatch_categories=result.mismatch_categories,
        )
        ragas_inputs.append(
            (
                [{"name": c.name, "args": ragas_args(c)} for c in case.expected_calls],
                [{"name": c.name, "args": ragas_args(c)} for c in observed],
            )
        )
        ragas_rows.append(len(rows) - 1)
    for index, value in zip(ragas_rows, ragas_tool_call_f1_many(ragas_inputs)):
        rows[index]["ragas_tool_call_f1"] = value
    return rows
