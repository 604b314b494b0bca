"""The release gate: judge a run's rows against a :class:`~tooleval.rules.GateConfig` (issue 3).

Decisions (docs/rules.md "Gate"):

* A row **fails** when it has a blocking violation — severity as recorded on the row unless ``[severity]``
  re-grades the rule, and a ``tool_schema`` violation of a tool named in ``[tool_schema] blocking_tools`` is
  blocking — that no active waiver covers, or (``row_errors_block``) when it could not be scored
  (rule ``row_error``). Advisory violations never fail; they are counted and reported.
* **Nothing unscored passes** (DESIGN.md "Trust rules", issue 11): the caller adds one placeholder row
  (:func:`tooleval.runs.gate.unscored_rows`, ``unscored: true``) per case in the run's scope that has no row and per
  trace that made none (unknown case, unreadable line); each fails as rule ``unscored`` unless a waiver or a
  quarantine names it (``row_errors_block = false`` opts out). A run with **no scored row** fails, always.
* **Waivers** cover a case, a rule, or a rule on one case until their ``expires`` date (inclusive). Waived rows
  are listed in ``waived``. Any waiver past its date fails the gate (and covers nothing).
* **Quarantined** cases leave the blocking totals and the slice floors; their rows are listed in
  ``quarantined`` with the rules they would fail.
* **Slices**: every case ``slice`` and tool family seen is reported (rows, exact-match rows, mean and min F1,
  fp, fn, failing rows — never only the mean); floors apply to configured ones, and a configured slice with
  fewer rows than ``min_rows`` (0: missing from the run) fails. Run-wide ``[f1]`` thresholds only advise.
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import Any

from tooleval.rules._gate_config import Floor, GateConfig, Waiver
from tooleval.rules._schema import SCHEMA_RULE
from tooleval.rules._verdict import NO_SLICE, GateVerdict, RowOutcome, SliceResult

__all__ = ["evaluate_gate"]

def _rule_label(rule: str | None) -> str:
    """``rule 'x'``, or ``all rules`` for a waiver that names no rule (it covers the whole case)."""
    return "all rules" if rule is None else f"rule {rule!r}"


def _severity(violation: dict, config: GateConfig) -> str:
    """The gate's severity of a recorded violation: a schema finding of a blocking tool, else ``[severity]``."""
    if violation["rule"] == SCHEMA_RULE and violation["tool"] in config.tool_schema.blocking_tools:
        return "blocking"
    return config.severity.get(violation["rule"], violation["severity"])


def _outcome(row: dict, config: GateConfig, active: list[Waiver], quarantine: dict) -> RowOutcome:
    case_id = str(row["case_id"])
    violations = [dict(v, severity=_severity(v, config)) for v in row.get("violations") or []]
    if row.get("error") and config.row_errors_block:
        rule = "unscored" if row.get("unscored") else "row_error"
        violations.append({"rule": rule, "severity": "blocking", "tool": None, "detail": str(row["error"])})
    blocking = [v for v in violations if v["severity"] == "blocking"]
    waivers = {id(w): w for v in blocking for w in active if w.covers(case_id, v["rule"])}
    waived = {v["rule"] for v in blocking if any(w.covers(case_id, v["rule"]) for w in active)}
    return RowOutcome(
        case_id=case_id,
        trial=int(row.get("trial") or 0),
        slice=row.get("slice"),
        rules=sorted({v["rule"] for v in blocking} - waived),
        violations=violations,
        missing_calls=list(row.get("missing_calls") or []),
        extra_calls=list(row.get("extra_calls") or []),
        wrong_args=list(row.get("wrong_args") or []),
        f1=row.get("f1"),
        exact_match=row.get("exact_match"),
        fp=int(row.get("fp") or 0),
        fn=int(row.get("fn") or 0),
        tool_families=sorted(row.get("tool_families") or []),
        waived_rules=sorted(waived),
        waivers=[w.to_dict() for w in waivers.values()],
        quarantine=quarantine[case_id].to_dict() if case_id in quarantine else None,
    )


def _slice(kind: str, name: str, members: list[RowOutcome], floor: Floor | None) -> SliceResult:
    counted = [r for r in members if r.quarantine is None]
    scored = [r.f1 for r in counted if r.f1 is not None]
    exact = sum(1 for r in counted if r.exact_match)
    mean = sum(scored) / len(scored) if scored else None
    failures: list[str] = []
    label = f"{kind} {name!r}"
    if floor is not None:
        if len(counted) < floor.min_rows:
            what = "missing from the run" if not counted else f"{len(counted)} row(s)"
            failures.append(f"{label}: {what}; min_rows is {floor.min_rows}")
        if floor.min_mean_f1 is not None and (mean is None or mean < floor.min_mean_f1):
            failures.append(f"{label}: mean f1 {'n/a' if mean is None else f'{mean:.4f}'} "
                            f"is below its floor {floor.min_mean_f1}")
        rate = exact / len(scored) if scored else None
        if floor.min_exact_match_rate is not None and (rate is None or rate < floor.min_exact_match_rate):
            failures.append(f"{label}: exact-match rate {'n/a' if rate is None else f'{rate:.4f}'} "
                            f"is below its floor {floor.min_exact_match_rate}")
    return SliceResult(
        kind=kind, name=name, rows=len(counted), quarantined_rows=len(members) - len(counted),
        exact_match_rows=exact, mean_f1=mean, min_f1=min(scored) if scored else None,
        fp=sum(r.fp for r in counted), fn=sum(r.fn for r in counted),
        failing_rows=sum(1 for r in counted if r.rules), configured=floor is not None,
        passed=not failures, failures=failures,
    )


def evaluate_gate(rows: list[dict[str, Any]], config: GateConfig, *, today: date) -> GateVerdict:
    """Judge a run.

    Args:
        rows: Row dicts with at least ``case_id``, ``trial``, ``slice``, ``f1``, ``exact_match``, ``fp``, ``fn``,
            ``missing_calls``, ``extra_calls``, ``wrong_args``, ``violations`` (``[{rule, severity, tool,
            detail}]``) and optionally ``tool_families`` and ``error`` (as read back from ``rows/``), followed
            by the placeholder rows of unscored cases (``unscored: true``, ``error`` saying why).
        config: The gate configuration.
        today: The date waivers are checked against (pass it explicitly: the verdict must be reproducible).

    Returns:
        A :class:`GateVerdict`.
    """
    quarantine = {q.case: q for q in config.quarantine}
    active = [w for w in config.waivers if not w.expired(today)]
    expired = [w for w in config.waivers if w.expired(today)]
    outcomes = [_outcome(row, config, active, quarantine) for row in rows]
    failing = [o for o in outcomes if o.rules and o.quarantine is None]
    waived = [o for o in outcomes if o.waived_rules and o.quarantine is None]
    quarantined = [o for o in outcomes if o.quarantine is not None]
    groups: dict[tuple[str, str], list[RowOutcome]] = {}
    for o in outcomes:
        if o.slice is not None:
            groups.setdefault(("slice", o.slice), []).append(o)
        for family in o.tool_families:
            groups.setdefault(("family", family), []).append(o)
    floors = {**{("slice", k): v for k, v in config.slices.items()},
              **{("family", k): v for k, v in config.families.items()}}
    keys = sorted(set(groups) | set(floors))
    slices = [_slice(kind, name, groups.get((kind, name), []), floors.get((kind, name))) for kind, name in keys]
    scored = sum(1 for r in rows if not r.get("error") and not r.get("unscored"))
    reasons = [] if scored else ["no scored row: nothing was evaluated"]
    reasons += [f"{len(failing)} blocking row(s)"] if failing else []
    reasons += [f for s in slices for f in s.failures]
    reasons += [f"waiver (case {w.case!r}, {_rule_label(w.rule)}, owner {w.owner}) expired on {w.expires.isoformat()}"
                for w in expired]
    all_violations = [v for o in outcomes for v in o.violations]
    counts = {
        "rows_evaluated": sum(1 for r in rows if not r.get("unscored")),
        "scored_rows": scored,
        "unscored_cases": sum(1 for r in rows if r.get("unscored")),
        "exact_match_rows": sum(1 for r in rows if r.get("exact_match")),
        "false_positive_calls": sum(r.get("fp") or 0 for r in rows),
        "false_negative_calls": sum(r.get("fn") or 0 for r in rows),
        "blocking_rows": len(failing),
        "waived_rows": len(waived),
        "quarantined_rows": len(quarantined),
        "advisory_violations": sum(1 for v in all_violations if v["severity"] == "advisory"),
        "violations_by_rule": dict(sorted(Counter(v["rule"] for v in all_violations).items())),
        "failures_by_tool_family": dict(sorted(Counter(f for o in failing for f in o.tool_families or [NO_SLICE])
                                               .items())),
        "failures_by_slice": dict(sorted(Counter(o.slice or NO_SLICE for o in failing).items())),
    }
    return GateVerdict(
        passed=not reasons, reasons=reasons, failing_rows=failing, waived=waived, quarantined=quarantined,
        slices=slices, counts=counts, expired_waivers=expired,
        advisories=_advisories(config, outcomes, active, counts),
    )


def _advisories(config: GateConfig, outcomes: list[RowOutcome], active: list[Waiver], counts: dict) -> list[str]:
    notes: list[str] = []
    counted = [o for o in outcomes if o.quarantine is None]
    scored = [o.f1 for o in counted if o.f1 is not None]
    mean = sum(scored) / len(scored) if scored else None
    if config.f1.min_mean is not None and mean is not None and mean < config.f1.min_mean:
        notes.append(f"mean f1 {mean:.4f} is below the advisory threshold {config.f1.min_mean}")
    if config.f1.min_exact_match_rate is not None and scored:
        rate = sum(1 for o in counted if o.exact_match) / len(scored)
        if rate < config.f1.min_exact_match_rate:
            notes.append(f"exact-match rate {rate:.4f} is below the advisory threshold "
                         f"{config.f1.min_exact_match_rate}")
    if counts["advisory_violations"]:
        notes.append(f"{counts['advisory_violations']} advisory violation(s)")
    for w in active:
        if not any(w.covers(o.case_id, v["rule"]) for o in outcomes for v in o.violations):
            notes.append(f"waiver (case {w.case!r}, {_rule_label(w.rule)}) matched no violation")
    return notes
