"""Variability across repeated trials: pass rate, pass@k, pass^k, F1 spread, flaky cases (issue 6).

Pure functions over scored rows (dicts with at least ``case_id``, ``trial``, ``slice``, ``f1`` and the columns
the chosen outcome reads). For a case with ``n`` trials of which ``c`` pass, the unbiased estimators are

* pass@k = 1 - C(n-c, k) / C(n, k)   (the chance that at least one of k trials drawn without replacement passes)
* pass^k = C(c, k) / C(n, k)         (the chance that all k of them pass)

and a set of cases reports their mean over cases, with a 95 % bootstrap interval over cases (``pass@k_ci95``,
``pass^k_ci95``: :func:`tooleval.runs.bootstrap.cluster_mean_ci`). Decisions:

* **K = the smallest number of trials any case has** (among rows with an outcome). Both estimators need
  n >= k, so k = 1..K is the range on which *every* case contributes; a case with more trials still uses all
  of them (the estimators are unbiased for any n >= k). A larger k over only the cases that reach it would mix
  populations and is not reported.
* A row whose outcome is ``None`` (a row with an ``error``, no recorded reward, no F1) counts in
  ``rows_without_outcome`` and takes no part in pass figures: an infrastructure failure is not an agent failure.
* ``pass_rate`` is passes / trials over all rows with an outcome; pass@1 is the mean over cases of c/n (equal
  to it when every case has the same n).
* F1 ``std`` is the sample standard deviation (n - 1, as DuckDB's ``stddev``), ``None`` below two values.
* A case is *flaky* when its trials' outcomes are not all equal.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from tooleval.runs.bootstrap import cluster_mean_ci

__all__ = ["Outcome", "outcome_from_spec", "pass_at_k", "pass_hat_k", "variability_summary", "format_variability",
           "NO_SLICE"]

NO_SLICE = "(none)"
"""Slice key used for cases whose ``slice`` is null."""

_F1_SPEC = re.compile(r"^f1\s*>=\s*(\d+(?:\.\d*)?|\.\d+)$")


@dataclass(frozen=True)
class Outcome:
    """A row's pass/fail verdict; call it on a row: ``True`` (pass), ``False`` (fail) or ``None`` (no outcome).

    Build one with :func:`outcome_from_spec`; ``spec`` is the text it was built from (recorded in summaries).
    """

    spec: str
    kind: str
    threshold: float | None = None

    def __call__(self, row: dict[str, Any]) -> bool | None:
        if self.kind == "recorded_reward":  # the recorded outcome exists even when scoring failed
            reward = row.get("recorded_reward")
            return None if reward is None else float(reward) >= 1.0
        if row.get("error") is not None:
            return None
        if self.kind == "gate":
            if row.get("gate_pass") is not None:
                return bool(row["gate_pass"])
            if "blocking" not in row and "gate_pass" not in row:
                raise ValueError("outcome 'gate' needs a 'gate_pass' or 'blocking' column on every row "
                                 "(the rules stage writes them); choose another --outcome or score with rules.")
            return None if row.get("blocking") is None else not row["blocking"]
        if self.kind == "exact":
            return None if row.get("exact_match") is None else bool(row["exact_match"])
        f1 = row.get("f1")
        return None if f1 is None else f1 >= self.threshold


def outcome_from_spec(spec: str) -> Outcome:
    """Parse an ``--outcome`` value.

    Args:
        spec: ``gate`` (the gate's verdict: ``gate_pass`` when the row has it, else ``not blocking``),
            ``exact`` (``exact_match``), ``f1>=X`` with X in [0, 1] (``f1 >= X``), or ``recorded_reward``
            (pass when ``recorded_reward >= 1.0``: a benchmark's full reward, e.g. tau-bench's 1.0; partial
            rewards fail). Spaces around ``>=`` are allowed; case is ignored.

    Returns:
        An :class:`Outcome`.

    Raises:
        ValueError: any other text, with the accepted forms in the message.
    """
    text = spec.strip().lower() if isinstance(spec, str) else ""
    if text in ("gate", "exact", "recorded_reward"):
        return Outcome(spec=text, kind=text)
    match = _F1_SPEC.fullmatch(text)
    if match and 0.0 <= float(match.group(1)) <= 1.0:
        threshold = float(match.group(1))
        return Outcome(spec=f"f1>={match.group(1)}", kind="f1", threshold=threshold)
    raise ValueError(f"unknown outcome {spec!r}: use gate, exact, recorded_reward or f1>=X with X in [0, 1] "
                     "(e.g. f1>=0.8).")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` trials with ``c`` passes: 1 - C(n-c, k)/C(n, k), in [0, 1].

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    _check(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k from ``n`` trials with ``c`` passes: C(c, k)/C(n, k), in [0, 1].

    Raises:
        ValueError: unless 0 <= c <= n and 1 <= k <= n.
    """
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def _f1_stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None}
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "min": min(values), "max": max(values)}


def _group(cases: dict[str, dict], K: int) -> dict[str, Any]:
    """Figures of a set of cases (each ``{outcomes, f1}``): pass rate, pass@k / pass^k means, F1, flaky list."""
    scored = {cid: c for cid, c in cases.items() if c["outcomes"]}
    trials = sum(len(c["outcomes"]) for c in scored.values())
    passes = sum(sum(c["outcomes"]) for c in scored.values())
    figures: dict[str, Any] = {"cases": len(cases), "cases_with_outcome": len(scored),
                               "trials": trials, "passes": passes,
                               "pass_rate": passes / trials if trials else None}
    for name, estimator in (("pass@k", pass_at_k), ("pass^k", pass_hat_k)):
        per_k = {k: [estimator(len(c["outcomes"]), sum(c["outcomes"]), k) for c in scored.values()]
                 for k in range(1, K + 1)}
        figures[name] = {str(k): statistics.fmean(v) if v else None for k, v in per_k.items()}
        intervals = {str(k): cluster_mean_ci(v, [1] * len(v)) for k, v in per_k.items()}
        figures[f"{name}_ci95"] = {k: None if ci is None else list(ci) for k, ci in intervals.items()}
    figures["f1"] = _f1_stats([v for c in cases.values() for v in c["f1"]])
    figures["flaky_cases"] = sorted(cid for cid, c in scored.items() if len(set(c["outcomes"])) > 1)
    return figures


def variability_summary(rows: Iterable[dict[str, Any]], outcome: Outcome) -> dict[str, Any]:
    """Variability of a run's rows, JSON-ready (str keys, floats unrounded in [0, 1] or ``None``).

    Args:
        rows: Scored rows, one per (case_id, trial).
        outcome: The verdict per row (see :func:`outcome_from_spec`).

    Returns:
        ``{outcome, k_max, rows, rows_without_outcome, trials_per_case: {min, max}, cases, cases_with_outcome,
        trials, passes, pass_rate, "pass@k": {"1": v, ..., "K": v}, "pass^k": {...}, "pass@k_ci95":
        {"1": [low, high], ...}, "pass^k_ci95": {...}, f1: {mean, std, min, max},
        flaky_cases: [case_id], by_slice: {slice: <same figures>}, by_case: {case_id: {slice, trials, passes,
        pass_rate, "pass@k", "pass^k", f1, flaky}}}``; ``k_max`` is K (0 when no row has an outcome).

    Raises:
        ValueError: two rows with the same (case_id, trial), or an outcome that cannot read the rows.
    """
    cases: dict[str, dict[str, Any]] = defaultdict(lambda: {"slice": None, "outcomes": [], "f1": []})
    seen: set[tuple[str, int]] = set()
    count = without = 0
    for row in rows:
        key = (str(row["case_id"]), int(row["trial"]))
        if key in seen:
            raise ValueError(f"two rows for case {key[0]!r} trial {key[1]}")
        seen.add(key)
        count += 1
        case = cases[key[0]]
        case["slice"] = row.get("slice")
        verdict = outcome(row)
        if verdict is None:
            without += 1
        else:
            case["outcomes"].append(bool(verdict))
        if row.get("f1") is not None:
            case["f1"].append(float(row["f1"]))
    sizes = [len(c["outcomes"]) for c in cases.values() if c["outcomes"]]
    K = min(sizes, default=0)
    summary = {"outcome": outcome.spec, "k_max": K, "rows": count, "rows_without_outcome": without,
               "trials_per_case": {"min": K if sizes else None, "max": max(sizes, default=None)},
               **_group(cases, K)}
    slices: dict[str, dict[str, dict]] = defaultdict(dict)
    for case_id, case in cases.items():
        slices[NO_SLICE if case["slice"] is None else str(case["slice"])][case_id] = case
    summary["by_slice"] = {name: _group(members, K) for name, members in sorted(slices.items())}
    by_case = {}
    for case_id in sorted(cases):
        figures = _group({case_id: cases[case_id]}, K)
        by_case[case_id] = {"slice": cases[case_id]["slice"], "trials": figures["trials"],
                            "passes": figures["passes"], "pass_rate": figures["pass_rate"],
                            "pass@k": figures["pass@k"], "pass^k": figures["pass^k"], "f1": figures["f1"],
                            "flaky": bool(figures["flaky_cases"])}
    summary["by_case"] = by_case
    return summary


def format_variability(summary: dict[str, Any]) -> str:
    """A plain-text table of a :func:`variability_summary` for the CLI: one line per k (with the 95 % intervals
    when the summary has them), then pass rate and flaky cases; figures with 4 decimals."""
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    def interval(name: str, k: str) -> str:
        ci = (summary.get(f"{name}_ci95") or {}).get(k)
        return "" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"

    lines = [f"variability (outcome {summary['outcome']}, {summary['cases_with_outcome']} cases, "
             f"K = {summary['k_max']}; 95 % bootstrap intervals over cases)",
             f"{'k':>3}  {'pass@k':>8}  {'':18}  {'pass^k':>8}"]
    for k in summary["pass@k"]:
        lines.append(f"{k:>3}  {fmt(summary['pass@k'][k]):>8}  {interval('pass@k', k):18}  "
                     f"{fmt(summary['pass^k'][k]):>8}  {interval('pass^k', k)}")
    lines.append(f"pass rate {fmt(summary['pass_rate'])}; flaky cases {len(summary['flaky_cases'])}; "
                 f"rows without outcome {summary['rows_without_outcome']}")
    return "\n".join(lines)
