"""What the gate answers: :class:`GateVerdict`, with a :class:`RowOutcome` per listed row and a
:class:`SliceResult` per slice and tool family (computed by :func:`tooleval.rules.evaluate_gate`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tooleval.rules._gate_config import ROW_OUTCOMES, Waiver

__all__ = ["NO_SLICE", "RowOutcome", "SliceResult", "GateVerdict"]

NO_SLICE = "(none)"
"""Key of rows without a slice (or without a tool family) in the ``failures_by_*`` counts."""


@dataclass(frozen=True)
class RowOutcome:
    """How the gate saw one (case, trial) row, with the evidence to print."""

    case_id: str
    trial: int
    slice: str | None
    rules: list[str]
    """Blocking rules not waived (sorted, unique): why the row fails (or would, when quarantined)."""
    violations: list[dict]
    """Every violation ``{rule, severity, tool, detail}`` with the gate's severity."""
    missing_calls: list[dict]
    extra_calls: list[dict]
    wrong_args: list[dict]
    f1: float | None
    exact_match: bool | None
    fp: int = 0
    fn: int = 0
    tool_families: list[str] = field(default_factory=list)
    waived_rules: list[str] = field(default_factory=list)
    waivers: list[dict] = field(default_factory=list)
    quarantine: dict | None = None
    no_trial: bool = False
    """True for a placeholder of a case that has no row at all (its trial is unknown: JUnit names it ``#-``)."""
    name_only: bool = False
    """Some call's arguments were not captured: its ``f1`` is a name-level figure, left out of the slices' means."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def gate_verdict(self) -> str:
        """The row's verdict as the row column ``gate_verdict`` stores it (:data:`tooleval.storage.GATE_VERDICTS`):
        ``quarantined`` for a row of a quarantined case (out of every total, whatever its rules), else ``fail``
        when a blocking rule is left unwaived, ``waived`` when blocking rules fired and waivers cover them all,
        else ``pass``."""
        if self.quarantine is not None:
            return "quarantined"
        if self.rules:
            return "fail"
        return "waived" if self.waived_rules else "pass"

    @property
    def gate_rules(self) -> list[str]:
        """The rules behind :attr:`gate_verdict` (row column ``gate_rules``): the unwaived blocking rules of a
        failing or quarantined row, the waived ones of a waived row, ``[]`` for a pass."""
        return list(self.waived_rules) if self.gate_verdict == "waived" else list(self.rules)

    def evidence(self) -> dict[str, Any]:
        """What to print for a failing row: its rules, violations and the missing / extra / wrong-argument call
        objects with parsed arguments (``{"name", "args"}``; a malformed call keeps ``args_raw``; a call whose
        arguments were not captured is ``{"name", "arguments_captured": false}``)."""
        return {
            "case_id": self.case_id,
            "trial": self.trial,
            "rules": list(self.rules),
            "violations": [v for v in self.violations if v["severity"] == "blocking"],
            "missing_calls": [_call_object(c) for c in self.missing_calls],
            "extra_calls": [_call_object(c) for c in self.extra_calls],
            "wrong_args": [
                {"name": w["name"], "expected": _args(w.get("expected_args_json")),
                 "observed": _args(w.get("observed_args_json")), "paths": list(w.get("paths") or [])}
                for w in self.wrong_args
            ],
        }


def worst_key(o: RowOutcome) -> tuple:
    """Listing order, the worst first: rows without an F1 (unscored, errors), then the lowest F1; by key."""
    return (o.f1 is not None, o.f1 or 0.0, o.case_id, o.trial)


def _args(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _call_object(call: dict) -> dict[str, Any]:
    if call.get("args_json") is None and call.get("parse_error") is None:  # the source did not record them
        return {"name": call["name"], "arguments_captured": False}
    if call.get("args_json") is None:
        return {"name": call["name"], "args_raw": call.get("args_raw"), "parse_error": call.get("parse_error")}
    return {"name": call["name"], "args": json.loads(call["args_json"])}


@dataclass(frozen=True)
class SliceResult:
    """Figures of one slice (``kind`` ``slice``) or tool family (``kind`` ``family``)."""

    kind: str
    name: str
    rows: int
    """Rows counted (quarantined rows excluded)."""
    quarantined_rows: int
    exact_match_rows: int
    mean_f1: float | None
    min_f1: float | None
    fp: int
    fn: int
    failing_rows: int
    configured: bool
    passed: bool
    failures: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GateVerdict:
    """The gate's answer. ``passed`` is the CI verdict (exit 0 when true, 1 when false)."""

    passed: bool
    reasons: list[str]
    failing_rows: list[RowOutcome]
    waived: list[RowOutcome]
    quarantined: list[RowOutcome]
    slices: list[SliceResult]
    counts: dict[str, Any]
    """``rows_evaluated``, ``exact_match_rows``, ``false_positive_calls``, ``false_negative_calls``,
    ``blocking_rows``, ``waived_rows``, ``quarantined_rows``, ``advisory_violations``, ``violations_by_rule``
    (every violation, advisory included), ``failures_by_rule`` (blocking rule -> failing rows, quarantined rows
    excluded; a row failing two rules counts under both), ``failures_by_tool_family``, ``failures_by_slice``, ``failures_by_slice_and_rule`` (slice -> blocking rule
    -> failing rows; a row failing two rules counts under both) and ``rows_by_slice`` (slice -> ``rows``,
    ``failing``, ``waived``, ``quarantined``, ``quarantined_failing``, ``advisory_violations``; rows without a
    slice under ``(none)``). Every count covers all rows, listed or not."""
    expired_waivers: list[Waiver]
    advisories: list[str]
    listed: int = 100
    """Rows listed at most in each of ``failing_rows``, ``waived`` and ``quarantined`` (the worst first when
    there were more: see :class:`tooleval.rules.GateTally`); ``counts`` has them all."""
    row_outcome: str = "match"
    """When a row passed (:attr:`tooleval.rules.GateConfig.row_outcome`): ``match`` or ``no_blocking``."""

    def limited(self, listed: int) -> "GateVerdict":
        """The same verdict listing at most ``listed`` rows per list — what a gate judged with ``listed`` would
        list: each list as it is while it holds no more, else its worst ``listed`` rows, the worst first."""
        def cut(rows: list[RowOutcome], count: int) -> list[RowOutcome]:
            return list(rows) if count <= listed else sorted(rows, key=worst_key)[:listed]

        counts = self.counts
        return replace(self, listed=listed, failing_rows=cut(self.failing_rows, counts["blocking_rows"]),
                       waived=cut(self.waived, counts["waived_rows"]),
                       quarantined=cut(self.quarantined, counts["quarantined_rows"]))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (dates as ISO text), for ``summary.json``'s ``gate`` key."""
        return {
            "passed": self.passed,
            "reasons": list(self.reasons),
            "row_outcome": self.row_outcome,
            "row_passes_when": ROW_OUTCOMES[self.row_outcome],
            "counts": self.counts,
            "listed": self.listed,
            "failing_rows_count": self.counts["blocking_rows"],
            "waived_count": self.counts["waived_rows"],
            "quarantined_count": self.counts["quarantined_rows"],
            "failing_rows": [r.to_dict() for r in self.failing_rows],
            "waived": [r.to_dict() for r in self.waived],
            "quarantined": [r.to_dict() for r in self.quarantined],
            "slices": [s.to_dict() for s in self.slices],
            "expired_waivers": [w.to_dict() for w in self.expired_waivers],
            "advisories": list(self.advisories),
        }
