"""Scoring: the ragas column and building one row per (case, trial) from an envelope and its case.

Import these names from here (each is imported on first use: :mod:`tooleval.faces`); modules whose names start
with ``_`` are this package's own.
"""

from tooleval.faces import lazy_face

_EXPORTS = {
    "RAGAS_F1_VERSION": "tooleval.scoring.ragas_f1",
    "ragas_call_set": "tooleval.scoring.ragas_f1",
    "ragas_set_f1": "tooleval.scoring.ragas_f1",
    "ragas_set_f1_many": "tooleval.scoring.ragas_f1",
    "ragas_set_f1_of_sets": "tooleval.scoring.ragas_f1",
    "ragas_args": "tooleval.scoring.ragas_metric",
    "ragas_tool_call_f1": "tooleval.scoring.ragas_metric",
    "ragas_tool_call_f1_many": "tooleval.scoring.ragas_metric",
    "ragas_version": "tooleval.scoring.ragas_metric",
    "ShardMemo": "tooleval.scoring._cases",
    "CallRegistry": "tooleval.scoring._cases",
    "ScoringSources": "tooleval.scoring._table",
    "score_table": "tooleval.scoring._table",
    "case_inputs": "tooleval.scoring._cases",
    "redacted_case": "tooleval.scoring._cases",
    "redacted_rules": "tooleval.scoring._cases",
    "reference_calls": "tooleval.scoring._cases",
    "score_envelopes": "tooleval.scoring.rows",
    "score_rows": "tooleval.scoring.rows",
    "trace_reference_secrets": "tooleval.scoring._cases",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
