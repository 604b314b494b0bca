"""Variability across repeated trials: pass rate, pass@k, pass^k, F1 spread, flaky cases.

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

import heapq
import math
import re
import statistics
import sys
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

import numpy as np

from tooleval.runs.bootstrap import cluster_mean_cis
from tooleval.storage import GATE_PASSES

__all__ = ["Outcome", "outcome_from_spec", "pass_at_k", "pass_hat_k", "variability_summary", "variability_of_parquet",
           "VariabilityTally", "format_variability", "LISTED_CASES", "NO_SLICE"]

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
    require_match: bool = False
    """For ``gate``: a row passes only when its calls also match the reference under its match mode
    (``calls_match``; ``exact_match`` for rows without it), as the gate's row outcome ``match`` judges it."""
    name_only_fails: bool = False
    """For ``gate``: a name-only row (``name_only``: a call's arguments were not captured) fails, as the gate
    judges it unless gate.toml says ``accept_name_only = true``."""

    def __call__(self, row: dict[str, Any]) -> bool | None:
        if self.kind == "recorded_reward":  # the recorded outcome exists even when scoring failed
            reward = row.get("recorded_reward")
            return None if reward is None else float(reward) >= 1.0
        if row.get("error_kind") is not None:
            return None
        if self.kind == "gate":
            stored = row.get("gate_verdict")  # the gate's own verdict, waivers and quarantine included
            if stored is not None:
                return None if stored == "quarantined" else stored in GATE_PASSES
            if row.get("gate_pass") is not None:
                return bool(row["gate_pass"])
            if "blocking" not in row and "gate_pass" not in row and "gate_verdict" not in row:
                raise ValueError("outcome 'gate' needs a 'gate_verdict', 'gate_pass' or 'blocking' column on every row "
                                 "(the rules stage writes them); choose another --outcome or score with rules.")
            if row.get("blocking") is None:
                return None
            if self.name_only_fails and row.get("name_only"):
                return False
            if not self.require_match:
                return not row["blocking"]
            matched = row.get("calls_match")  # the case's match mode; rows before schema 5: exact_match
            return not row["blocking"] and bool(row.get("exact_match") if matched is None else matched)
        if self.kind == "exact":
            return None if row.get("exact_match") is None else bool(row["exact_match"])
        f1 = row.get("f1")
        return None if f1 is None else f1 >= self.threshold


def outcome_from_spec(spec: str, row_outcome: str = "match", accept_name_only: bool = False) -> Outcome:
    """Parse an ``--outcome`` value.

    Args:
        spec: ``gate`` (the gate's verdict: the row column ``gate_verdict`` when the row has it — ``pass`` and
            ``waived`` pass, ``fail`` fails, ``quarantined`` has no outcome —, else ``gate_pass``, else ``not
            blocking`` — and, under the row outcome ``match``, ``calls_match``: rows published before the gate's
            verdict was stored),
            ``exact`` (``exact_match``), ``f1>=X`` with X in [0, 1] (``f1 >= X``), or ``recorded_reward``
            (pass when ``recorded_reward >= 1.0``: a benchmark's full reward, e.g. tau-bench's 1.0; partial
            rewards fail). Spaces around ``>=`` are allowed; case is ignored.
        row_outcome: The gate's row outcome (:attr:`tooleval.rules.GateConfig.row_outcome`: ``match``, the
            default without gate.toml, or ``no_blocking``); only ``gate`` reads it.
        accept_name_only: gate.toml's ``accept_name_only``; unless it is true a name-only row fails under
            ``gate``, as in the gate.

    Returns:
        An :class:`Outcome`.

    Raises:
        ValueError: any other text, with the accepted forms in the message (or an unknown ``row_outcome``).
    """
    if row_outcome not in ("match", "no_blocking"):
        raise ValueError(f"unknown row outcome {row_outcome!r}: use match or no_blocking.")
    text = spec.strip().lower() if isinstance(spec, str) else ""
    if text == "gate":
        return Outcome(spec=text, kind=text, require_match=row_outcome == "match",
                       name_only_fails=not accept_name_only)
    if text in ("exact", "recorded_reward"):
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


LISTED_CASES = 1000
"""Cases listed in ``by_case`` (the flaky ones first, then the lowest pass rate, cases without an outcome last)
and in each ``flaky_cases`` list (the first by case id); ``by_case_count`` and ``flaky_cases_count`` count them
all, so a million-row run's summary stays small."""

_SQRT_BITS = 2 * sys.float_info.mant_dig + 3


def _sqrt_of_fraction(n: int, m: int) -> float:
    """sqrt(n / m) correctly rounded, as :func:`statistics.stdev` rounds it (CPython 3.11 ``statistics``:
    round-to-odd integer square root, bugs.python.org/msg407078)."""
    def rto(a: int, b: int) -> int:
        root = math.isqrt(a // b)
        return root | (root * root * b != a)

    q = (n.bit_length() - m.bit_length() - _SQRT_BITS) // 2
    if q >= 0:
        return (rto(n, m << 2 * q) << q) / 1
    return rto(n << -2 * q, m) / (1 << -q)


class _F1Spread:
    """Exact running mean / sample std / min / max of F1 values, equal to :func:`statistics.fmean` and
    :func:`statistics.stdev` over the same values in any order (exact sums of x and x² by denominator, as
    ``statistics`` keeps them), in memory independent of the count."""

    __slots__ = ("count", "low", "high", "sx", "sxx")

    def __init__(self) -> None:
        self.count, self.low, self.high = 0, None, None
        self.sx: dict[int, int] = defaultdict(int)
        self.sxx: dict[int, int] = defaultdict(int)

    def add(self, value: float, times: int = 1) -> None:
        """Count ``value`` ``times`` times (the same sums as ``times`` calls with it)."""
        n, d = float(value).as_integer_ratio()
        self.count += times
        self.sx[d] += n * times
        self.sxx[d] += n * n * times
        self.low = value if self.low is None or value < self.low else self.low
        self.high = value if self.high is None or value > self.high else self.high

    def figures(self) -> dict[str, float | None]:
        if not self.count:
            return {"mean": None, "std": None, "min": None, "max": None}
        sx = sum((Fraction(n, d) for d, n in self.sx.items()), Fraction(0))
        std = None
        if self.count > 1:
            sxx = sum((Fraction(n, d * d) for d, n in self.sxx.items()), Fraction(0))
            mss = (self.count * sxx - sx * sx) / self.count / (self.count - 1)
            std = _sqrt_of_fraction(mss.numerator, mss.denominator)
        return {"mean": float(sx) / self.count, "std": std, "min": self.low, "max": self.high}


def _f1_stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None}
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "min": min(values), "max": max(values)}


class _Group:
    """Figures of a set of cases, kept as per-case (trials, passes) pairs and an exact F1 spread."""

    def __init__(self) -> None:
        self.cases = 0
        self.trials = array("l")
        self.passes = array("l")
        self.f1 = Counter()
        """F1 value -> how many rows hold it (a run's F1 values take few distinct values: counting them is C's work,
        and the spread's exact sums are made once per distinct value, :meth:`figures`)."""
        self.flaky: list[str] = []
        self.flaky_count = 0

    def add(self, case_id: str, outcomes: list[bool], f1: list[float]) -> None:
        self.cases += 1
        self.f1.update(f1)
        if outcomes:
            self.trials.append(len(outcomes))
            self.passes.append(sum(outcomes))
            if len(set(outcomes)) > 1:
                self.flaky_count += 1
                if len(self.flaky) < LISTED_CASES:
                    self.flaky.append(case_id)

    def figures(self, K: int) -> dict[str, Any]:
        trials, passes = sum(self.trials), sum(self.passes)
        figures: dict[str, Any] = {"cases": self.cases, "cases_with_outcome": len(self.trials),
                                   "trials": trials, "passes": passes,
                                   "pass_rate": passes / trials if trials else None}
        estimators = (("pass@k", pass_at_k), ("pass^k", pass_hat_k))
        # A case's estimate depends only on its (trials, passes): each distinct pair (a few dozen, however many
        # cases) is estimated once and spread to its cases, instead of once per case and k in Python
        trials = np.asarray(self.trials, dtype=np.int64)
        passes = np.asarray(self.passes, dtype=np.int64)
        span = int(passes.max(initial=0)) + 1  # one integer per pair: passes never exceed trials
        distinct, of_case = np.unique(trials * span + passes, return_inverse=True)
        pairs = [(int(key) // span, int(key) % span) for key in distinct]
        per_k = {(name, k): np.array([estimator(n, c, k) for n, c in pairs], dtype=float)[of_case]
                 for name, estimator in estimators for k in range(1, K + 1)}
        # every figure of this set of cases resamples the same cases: one draw serves them all
        intervals = dict(zip(per_k, cluster_mean_cis(list(per_k.values()), np.ones(len(self.trials)))))
        for name, _ in estimators:
            # statistics.fmean's own arithmetic (an exact sum, then one division), over the same floats
            figures[name] = {str(k): math.fsum(v.tolist()) / v.size if v.size else None
                             for (of, k), v in per_k.items() if of == name}
            figures[f"{name}_ci95"] = {str(k): None if ci is None else list(ci)
                                       for (of, k), ci in intervals.items() if of == name}
        spread = _F1Spread()
        for value, times in self.f1.items():  # first-seen order: min and max keep the first of equal values
            spread.add(value, times)
        figures["f1"] = spread.figures()
        figures["flaky_cases"] = self.flaky
        figures["flaky_cases_count"] = self.flaky_count
        return figures


class VariabilityTally:
    """Variability computed from rows streamed **in (case_id, trial) order** (every row of a case together), in
    memory that grows with the number of cases by a few bytes each, never with the rows: what publication uses
    over a run's Parquet files (:func:`variability_of_parquet`). Call :meth:`add` per row, then :meth:`summary`.

    Raises:
        ValueError: (from :meth:`add`) two rows with the same (case_id, trial), or rows out of order.
    """

    def __init__(self, outcome: "Outcome") -> None:
        self.outcome = outcome
        self.rows = self.without = 0
        self.overall = _Group()
        self.slices: dict[str, _Group] = defaultdict(_Group)
        self.listed: list[tuple] = []
        self.cases_total = 0
        self._case: str | None = None
        self._trial: int | None = None
        self._slice: Any = None
        self._outcomes: list[bool] = []
        self._f1: list[float] = []

    def add(self, row: dict[str, Any]) -> None:
        case_id, trial = str(row["case_id"]), int(row["trial"])
        if case_id == self._case:
            if trial == self._trial:
                raise ValueError(f"two rows for case {case_id!r} trial {trial}")
            if trial < self._trial:
                raise ValueError(f"rows of case {case_id!r} are not in trial order")
        else:
            if self._case is not None and case_id < self._case:
                raise ValueError(f"rows are not in case order: {case_id!r} after {self._case!r}")
            self._close()
            self._case = case_id
        self._trial = trial
        self.rows += 1
        self._slice = row.get("slice")
        verdict = self.outcome(row)
        if verdict is None:
            self.without += 1
        else:
            self._outcomes.append(bool(verdict))
        if row.get("f1") is not None:
            self._f1.append(float(row["f1"]))

    def _close(self) -> None:
        if self._case is None:
            return
        case_id, outcomes, f1 = self._case, self._outcomes, self._f1
        self.cases_total += 1
        self.overall.add(case_id, outcomes, f1)
        self.slices[NO_SLICE if self._slice is None else str(self._slice)].add(case_id, outcomes, f1)
        flaky = len(set(outcomes)) > 1
        rate = sum(outcomes) / len(outcomes) if outcomes else 2.0
        entry = (not flaky, rate, case_id, self._slice, tuple(outcomes), tuple(f1))
        if len(self.listed) < LISTED_CASES:
            heapq.heappush(self.listed, _Worse(entry))
        elif _Worse(entry) > self.listed[0]:
            heapq.heapreplace(self.listed, _Worse(entry))
        self._case, self._outcomes, self._f1 = None, [], []

    def summary(self) -> dict[str, Any]:
        """The figures of :func:`variability_summary` (see there)."""
        self._close()
        sizes = self.overall.trials
        K = min(sizes, default=0)
        summary = {"outcome": self.outcome.spec, "k_max": K, "rows": self.rows, "rows_without_outcome": self.without,
                   "trials_per_case": {"min": K if sizes else None, "max": max(sizes, default=None)},
                   **self.overall.figures(K)}
        summary["by_slice"] = {name: group.figures(K) for name, group in sorted(self.slices.items())}
        by_case = {}
        for item in sorted(self.listed, key=lambda w: w.entry[2]):
            _, _, case_id, slice_, outcomes, f1 = item.entry
            one = _Group()
            one.add(case_id, list(outcomes), list(f1))
            figures = one.figures(K)
            by_case[case_id] = {"slice": slice_, "trials": figures["trials"], "passes": figures["passes"],
                                "pass_rate": figures["pass_rate"], "pass@k": figures["pass@k"],
                                "pass^k": figures["pass^k"], "f1": _f1_stats(list(f1)),
                                "flaky": bool(figures["flaky_cases"])}
        summary["by_case"] = by_case
        summary["by_case_count"] = self.cases_total
        return summary


class _Worse:
    """Heap item ordered so that the heap's top is the *least* worth listing case (kept cases: the worst)."""

    __slots__ = ("entry",)

    def __init__(self, entry: tuple) -> None:
        self.entry = entry

    def __lt__(self, other: "_Worse") -> bool:
        return self.entry[:3] > other.entry[:3]


def variability_summary(rows: Iterable[dict[str, Any]], outcome: Outcome) -> dict[str, Any]:
    """Variability of a run's rows, JSON-ready (str keys, floats unrounded in [0, 1] or ``None``).

    Args:
        rows: Scored rows, one per (case_id, trial), in any order (they are sorted here; a run's Parquet files go
            through :func:`variability_of_parquet` instead, which lets DuckDB sort them).
        outcome: The verdict per row (see :func:`outcome_from_spec`).

    Returns:
        ``{outcome, k_max, rows, rows_without_outcome, trials_per_case: {min, max}, cases, cases_with_outcome,
        trials, passes, pass_rate, "pass@k": {"1": v, ..., "K": v}, "pass^k": {...}, "pass@k_ci95":
        {"1": [low, high], ...}, "pass^k_ci95": {...}, f1: {mean, std, min, max},
        flaky_cases: [case_id], flaky_cases_count, by_slice: {slice: <same figures>}, by_case: {case_id: {slice,
        trials, passes, pass_rate, "pass@k", "pass^k", f1, flaky}}, by_case_count}``; ``k_max`` is K (0 when no
        row has an outcome). ``by_case`` and ``flaky_cases`` list at most :data:`LISTED_CASES` cases.

    Raises:
        ValueError: two rows with the same (case_id, trial), or an outcome that cannot read the rows.
    """
    tally = VariabilityTally(outcome)
    for row in sorted(rows, key=lambda r: (str(r["case_id"]), int(r["trial"]))):
        tally.add(row)
    return tally.summary()


def variability_of_parquet(source: str, outcome: Outcome, *, batch_rows: int = 10_000) -> dict[str, Any]:
    """:func:`variability_summary` of the rows in ``source`` (a DuckDB table expression over a run's Parquet
    files: :func:`tooleval.storage.scan_rows_sql`). DuckDB folds each case's rows into its counts
    (:func:`_tally_of_cases`): the process holds a few numbers per case, never a Python object per row. An outcome
    that cannot read these rows takes the row-by-row tally instead, streamed in (case_id, trial) order at most
    ``batch_rows`` rows at a time, which raises what it always raised.

    Raises:
        ValueError: two rows with the same (case_id, trial), or an outcome that cannot read the rows."""
    from tooleval.storage import source_connection

    con = source_connection(source)  # reads URLs too (s3://…)
    names = {d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description}
    verdict = _verdict_sql(outcome, names)
    tally = VariabilityTally(outcome)
    if verdict is None:  # the outcome cannot read these rows: the row-by-row tally raises what it always raised
        columns = [c for c in _OUTCOME_COLUMNS if c in names]
        reader = con.sql(f"SELECT {', '.join(columns)} FROM {source} ORDER BY case_id, trial").to_arrow_reader(
            batch_rows)
        for batch in reader:
            for row in batch.to_pylist():
                tally.add(row)
        return tally.summary()
    return _tally_of_cases(con, source, names, verdict, tally)


def _tally_of_cases(con: Any, source: str, names: set[str], verdict: str, tally: VariabilityTally) -> dict[str, Any]:
    """:meth:`VariabilityTally.summary` of the rows in ``source``, with what it keeps per case computed by DuckDB
    and numpy instead of a Python call per case (a million rows' 143,000 cases were ~2.8 s of Python there, in the
    run's serial tail): each case's counts, the verdict's rule written in SQL (``verdict``: :func:`_verdict_sql`),
    its last trial's slice, and the F1 values counted per slice; only the listed cases (the flaky and the worst,
    :data:`LISTED_CASES` at most) are read trial by trial. Every figure is the one :meth:`VariabilityTally.add`
    gives row by row: the cases are in ``case_id`` order as it takes them, a case's slice is its last trial's, and
    a flaky case is one whose verdicts are not all equal."""
    f1 = "CAST(f1 AS DOUBLE)" if "f1" in names else "NULL::DOUBLE"
    slice_ = "slice" if "slice" in names else "NULL::VARCHAR"
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE variability_rows AS
        SELECT CAST(case_id AS VARCHAR) AS case_id, trial, {f1} AS f1, {slice_} AS slice, {verdict} AS verdict
        FROM {source}""")
    con.execute("""
        CREATE OR REPLACE TEMP TABLE variability_cases AS
        SELECT case_id, count(*) AS rows, count(DISTINCT trial) AS trials, count(verdict) AS judged,
               count(*) FILTER (WHERE verdict) AS passes, count(DISTINCT verdict) > 1 AS flaky,
               arg_max_null(slice, trial) AS slice
        FROM variability_rows GROUP BY case_id""")
    repeated = con.execute("SELECT case_id FROM variability_cases WHERE trials <> rows ORDER BY case_id LIMIT 1"
                           ).fetchall()
    if repeated:  # two rows share a trial: named as the row-by-row tally names the first such case
        _raise_repeated_trial(con, source, repeated[0][0])
    cases = con.sql("SELECT case_id, rows, judged, passes, flaky, slice FROM variability_cases "
                    "ORDER BY case_id").to_arrow_table()
    ids = cases["case_id"].to_pylist()
    judged = cases["judged"].to_numpy()
    passes = cases["passes"].to_numpy()
    flaky = cases["flaky"].to_numpy()
    slices = [NO_SLICE if value is None else str(value) for value in cases["slice"].to_pylist()]
    tally.rows = int(cases["rows"].to_numpy().sum())
    tally.without = tally.rows - int(judged.sum())
    tally.cases_total = len(ids)
    counts: dict[str, Counter] = defaultdict(Counter)
    for value, slice_name, times in con.execute(
            "SELECT r.f1, c.slice, count(*) FROM variability_rows r JOIN variability_cases c USING (case_id) "
            "WHERE r.f1 IS NOT NULL GROUP BY ALL").fetchall():
        counts[NO_SLICE if slice_name is None else str(slice_name)][value] += times
    tally.overall = _group_of(ids, judged, passes, flaky, np.ones(len(ids), dtype=bool), sum(counts.values(), Counter()))
    names_of = np.array(slices, dtype=object)
    for name in sorted(set(slices)):
        tally.slices[name] = _group_of(ids, judged, passes, flaky, names_of == name, counts.get(name, Counter()))
    # the listed cases: flaky first, then the lowest pass rate (2.0 for a case without any verdict), then by id
    listed = con.execute(f"""
        SELECT case_id, slice, flaky, CASE WHEN judged > 0 THEN passes / judged ELSE 2.0 END AS rate
        FROM variability_cases ORDER BY NOT flaky, rate, case_id LIMIT {LISTED_CASES}""").fetchall()
    if listed:
        trials = {case_id: (outcomes or [], values or []) for case_id, outcomes, values in con.execute(
            "SELECT case_id, list(verdict ORDER BY trial) FILTER (WHERE verdict IS NOT NULL), "
            "list(f1 ORDER BY trial) FILTER (WHERE f1 IS NOT NULL) FROM variability_rows "
            "WHERE case_id IN (SELECT unnest(?)) GROUP BY case_id", [[row[0] for row in listed]]).fetchall()}
        tally.listed = [_Worse((not is_flaky, rate, case_id, slice_value, tuple(trials[case_id][0]),
                                tuple(trials[case_id][1])))
                        for case_id, slice_value, is_flaky, rate in listed]
    con.execute("DROP TABLE variability_cases; DROP TABLE variability_rows")
    return tally.summary()


def _group_of(ids: list[str], judged: np.ndarray, passes: np.ndarray, flaky: np.ndarray, member: np.ndarray,
              f1: Counter) -> _Group:
    """The :class:`_Group` of the cases ``member`` marks (arrays in case order), as :meth:`_Group.add` of each in
    that order makes it."""
    group = _Group()
    group.cases = int(member.sum())
    with_outcome = member & (judged > 0)
    group.trials = array("l", judged[with_outcome].tolist())
    group.passes = array("l", passes[with_outcome].tolist())
    group.f1 = f1
    flaky_at = np.flatnonzero(member & flaky)
    group.flaky_count = int(flaky_at.size)
    group.flaky = [ids[index] for index in flaky_at[:LISTED_CASES]]
    return group


def _raise_repeated_trial(con: Any, source: str, case_id: str) -> None:
    trial = con.cursor().execute(f"SELECT trial FROM {source} WHERE CAST(case_id AS VARCHAR) = ? GROUP BY trial "
                                 "HAVING count(*) > 1 ORDER BY trial LIMIT 1", [case_id]).fetchone()[0]
    raise ValueError(f"two rows for case {case_id!r} trial {trial}")


def _verdict_sql(outcome: "Outcome", names: set[str]) -> str | None:
    """:meth:`Outcome.__call__` as a DuckDB expression over a row's columns (``names``: those the rows have; a
    missing one reads as null, as ``row.get`` does): true, false or null. ``None`` when the outcome raises on such
    rows (``gate`` without ``gate_pass`` or ``blocking``). The ``f1>=X`` threshold is the float's ``repr`` read as
    a double: the same double, compared as Python compares it."""
    def col(name: str, kind: str = "BOOLEAN") -> str:
        return f'CAST("{name}" AS {kind})' if name in names else f"NULL::{kind}"

    if outcome.kind == "recorded_reward":
        return f"({col('recorded_reward', 'DOUBLE')} >= 1.0)"
    error = f"{col('error_kind', 'VARCHAR')} IS NOT NULL"
    if outcome.kind == "gate":
        if "blocking" not in names and "gate_pass" not in names and "gate_verdict" not in names:
            return None
        blocking = col("blocking")
        if not outcome.require_match:
            judged = f"NOT {blocking}"
        else:  # the case's match mode; rows before schema 5 carry exact_match only (None reads as a fail)
            judged = f"(NOT {blocking} AND coalesce({col('calls_match')}, {col('exact_match')}, false))"
        if outcome.name_only_fails:
            judged = f"(CASE WHEN coalesce({col('name_only')}, false) THEN false ELSE {judged} END)"
        stored = col("gate_verdict", "VARCHAR")
        passes = ", ".join(f"'{v}'" for v in GATE_PASSES)
        return (f"(CASE WHEN {error} THEN NULL WHEN {stored} = 'quarantined' THEN NULL "
                f"WHEN {stored} IS NOT NULL THEN {stored} IN ({passes}) "
                f"WHEN {col('gate_pass')} IS NOT NULL THEN {col('gate_pass')} "
                f"WHEN {blocking} IS NULL THEN NULL ELSE {judged} END)")
    if outcome.kind == "exact":
        return f"(CASE WHEN {error} THEN NULL ELSE {col('exact_match')} END)"
    threshold = f"CAST('{float(outcome.threshold)!r}' AS DOUBLE)"  # the shortest text that reads back exactly
    return f"(CASE WHEN {error} THEN NULL ELSE {col('f1', 'DOUBLE')} >= {threshold} END)"


_OUTCOME_COLUMNS = ("case_id", "trial", "slice", "f1", "error_kind", "exact_match", "calls_match", "blocking",
                    "gate_pass", "gate_verdict", "recorded_reward", "name_only")
"""The row columns the variability figures and every :class:`Outcome` read."""


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
    flaky = summary.get("flaky_cases_count", len(summary["flaky_cases"]))
    lines.append(f"pass rate {fmt(summary['pass_rate'])}; flaky cases {flaky}; "
                 f"rows without outcome {summary['rows_without_outcome']}")
    return "\n".join(lines)
