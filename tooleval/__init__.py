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

from tooleval.faces import lazy_face

# Where each public name lives. The names are imported on first use (PEP 562), so that importing a sub-package
# (the command line's entry point first of all) does not pay for the matching core and its pydantic models.
_PUBLIC = {
    "Call": "tooleval.models",
    "Case": "tooleval.models",
    "MatchResult": "tooleval.matching",
    "RecordedTrace": "tooleval.models",
    "WrongArgs": "tooleval.matching",
    "calls_from_messages": "tooleval.models",
    "canonical_json": "tooleval.canonical",
    "f1_score": "tooleval.matching",
    "match_calls": "tooleval.matching",
    "parse_arguments": "tooleval.canonical",
}

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_face(__name__, _PUBLIC)
