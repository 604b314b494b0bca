"""tooleval: batch evaluation of AI agents' tool calls against reference calls.

The pure core (this package) imports no Prefect. One sub-package per stage: :mod:`tooleval.agents`
(generation), :mod:`tooleval.capture` (recorded traces, envelopes, provenance, redaction),
:mod:`tooleval.scoring` (matching, the ragas column, rows), :mod:`tooleval.rules`, :mod:`tooleval.runs`
(planning, aggregation, legacy scalar, drift, gate, handoff) and :mod:`tooleval.storage`; at the bottom, shared
by all: :mod:`tooleval.models`, :mod:`tooleval.canonical`, :mod:`tooleval.errors`, :mod:`tooleval.versions`,
:mod:`tooleval.dataset`. Prefect tasks live in ``tasks/`` and flows in
``flows/``; the CLI (:mod:`tooleval.cli`) imports them lazily inside its commands. :mod:`tooleval.testing` runs
the same capture and scoring inside a team's own pytest suite (an assertion API and a pytest plugin).
"""

from tooleval.canonical import canonical_json, parse_arguments
from tooleval.scoring.matching import MatchResult, WrongArgs, f1_score, match_calls
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
