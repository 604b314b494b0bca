"""Scoring envelopes given as record dicts: :func:`score_rows` and :func:`score_envelopes` turn them into one Arrow
table and score it as the stage does (:func:`tooleval.scoring._table.score_table`), so that the testing helpers and
any caller holding dicts get the stage's rows, column for column. What scoring derives once from a case (its
references redacted as its traces were, the case inputs the join check reads) is in
:mod:`tooleval.scoring._cases` and is named here too. The ragas column is tooleval's own implementation of ragas
0.4.3's set-F1 (:mod:`tooleval.scoring.ragas_f1`, proven equal to ragas by tests and re-proven per row on every
run by the legacy path and the drift check).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import pyarrow as pa

from tooleval.models import Case, ToolSpec
from tooleval.rules import PolicyConfig
from tooleval.scoring._cases import (ShardMemo, case_inputs, reference_calls, redacted_case, redacted_rules,
                                     trace_reference_secrets)
from tooleval.scoring._table import ScoringSources, score_table
from tooleval.capture.redaction import Redactor
from tooleval.storage import ENVELOPE_SCHEMA, Row

__all__ = ["score_envelopes", "score_rows", "ShardMemo", "reference_calls", "case_inputs", "redacted_case",
           "redacted_rules", "trace_reference_secrets"]


def score_envelopes(cases: dict[str, Case], envelopes: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
    """:func:`score_rows` as record dicts keyed by column name (:meth:`tooleval.storage.Row.record`), in input
    order; ``options`` are :func:`score_rows`' keyword arguments."""
    return _table_of(cases, envelopes, **options).to_pylist()


def score_rows(
    cases: dict[str, Case],
    envelopes: list[dict[str, Any]],
    *,
    redactor: Redactor | None = None,
    inputs: Mapping[str, list[str]] | Callable[[], Mapping[str, list[str]]] | None = None,
    tools: dict[str, ToolSpec] | None = None,
    policy: PolicyConfig | None = None,
    digests_verified: bool = False,
    memo: ShardMemo | None = None,
) -> list[Row]:
    """Score envelopes given as record dicts: :func:`tooleval.scoring._table.score_table` of them, one
    :class:`tooleval.storage.Row` per envelope.

    Args:
        cases: The dataset's cases by ``case_id``; every envelope's case must be present (the flow routes
            traces of unknown cases to ``errors.json`` before scoring).
        envelopes: Envelope records (see :mod:`tooleval.capture.envelope`), keyed by
            :data:`tooleval.storage.ENVELOPE_SCHEMA`'s column names (a missing column is null).
        redactor: When the traces were redacted, the same redactor: reference calls and case inputs are
            redacted alike so that matching and the join check see comparable values.
        inputs: Precomputed :func:`case_inputs`, or a function returning them (called only for a row whose
            recorded request is not its own case's input: most shards never need the whole dataset's map);
            ``None``: computed here when needed.
        tools: The dataset's tool specs by name (side effects, confirmation, argument rules, families).
        policy: The dataset's ``[policy]`` from its gate.toml (:func:`tooleval.rules.load_policy`).
        digests_verified: The envelopes are exactly what :func:`tooleval.capture.envelope.build_envelope` wrote
            (their capture stage file's sha256 was checked against its ref), so each stored ``trace_digest`` is the
            digest of its content and is not recomputed. ``False``: every digest is recomputed for the join check.
        memo: A :class:`ShardMemo` kept across the calls that score one shard's batches (same ``cases``,
            ``redactor``, ``tools`` and ``policy``); a fresh one when ``None``.

    Returns:
        One :class:`tooleval.storage.Row` per envelope, in input order, with ``run_id`` ``None``. An envelope
        carrying an ``error`` yields a row with that error (``error_kind``, ``error_message``) and null metrics.
    """
    table = _table_of(cases, envelopes, redactor=redactor, inputs=inputs, tools=tools, policy=policy,
                      digests_verified=digests_verified, memo=memo)
    return [Row(**record) for record in table.to_pylist()]


def _table_of(cases: dict[str, Case], envelopes: list[dict[str, Any]], **options: Any) -> Any:
    present = {key for envelope in envelopes for key in envelope}
    schema = pa.schema([item for item in ENVELOPE_SCHEMA if item.name in present])
    table = pa.Table.from_pylist(envelopes, schema=schema)
    return score_table(table, ScoringSources(cases, **options))
