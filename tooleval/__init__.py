"""tooleval: batch evaluation of AI agents' tool calls against reference calls.

The pure core (this package) imports no Prefect: canonical argument values (:mod:`tooleval.canonical`),
matching and metrics (:mod:`tooleval.matching`), the ragas column (:mod:`tooleval.ragas_metric`), dataset and
trace loading, storage (:mod:`tooleval.storage`) and aggregation. Prefect tasks live in ``tasks/`` and flows in
``flows/``; the CLI (:mod:`tooleval.cli`) imports them lazily inside its commands.
"""

from tooleval.canonical import canonical_json, parse_arguments
from tooleval.matching import MatchResult, WrongArgs, f1_score, match_calls
from tooleval.models import Call, Case, RecordedTrace, calls_from_messages

__all__ = [
    "Call",
    "Case",
    "MatchResult",
    "RecordedTrace",
    "WrongArgs",
    "calls_from_messages",
    "canonical_json",
    "f1_score",
    "match_calls",
    "parse_arguments",
]
