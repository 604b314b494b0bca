"""Bootstrap confidence intervals over cases (scipy.stats.bootstrap), for variability figures and run comparison.

Rows of one case are not independent (its trials share an input), so resampling is over **cases**: each case
contributes a sum of values and a count of rows, and a resample's statistic is the ratio of the resampled sums
(the row-weighted mean). This is the cluster bootstrap (Davison & Hinkley 1997, section 3.8). Intervals are
percentile intervals of 9,999 resamples with a fixed seed, so the same data always gives the same interval.

Above :data:`NORMAL_ABOVE` cases the interval is the large-sample one of the same ratio estimator instead:
``R ± z · se`` with ``se² = Σ (s_i − R c_i)² / (n (n − 1) c̄²)`` (the linearised variance of a ratio estimator over
clusters, Cochran 1977, *Sampling Techniques*, 3rd ed., section 6.4). The bootstrap costs 9,999 x cases draws and
gathered values — about 48 s for the variability figures of 14,286 cases when each figure drew its own, many minutes
at a million rows — and its percentile interval converges to this one as cases grow
(``tests/runs/test_bootstrap_large.py`` measures the gap).

The figures of one set of cases (pass@k and pass^k for every k of a slice) are resampled from one draw
(:func:`cluster_mean_cis`): the generator is seeded the same for each, so each figure alone would draw the same
cases, and each interval stays what its own call gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SEED", "RESAMPLES", "NORMAL_ABOVE", "cluster_mean_ci", "cluster_mean_cis"]

SEED = 20261130
"""Seed of the bootstrap's random generator (a fixed seed makes intervals reproducible)."""
RESAMPLES = 9999
BATCH_ELEMENTS = 2_000_000
"""Resampled values held at once (about 16 MB per array): above ``RESAMPLES`` x cases, resamples are drawn in
batches (``scipy.stats.bootstrap(batch=...)``), so a run with a million rows' cases stays in bounded memory.
Below it (every bundled dataset) the draw is one batch, as before."""
NORMAL_ABOVE = 5_000
"""Cases above which the interval is the large-sample normal one (see the module docstring)."""


def cluster_mean_ci(sums: Sequence[float], counts: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """95 % (by default) percentile interval of a row-weighted mean, resampling clusters (cases); above
    :data:`NORMAL_ABOVE` cases, the large-sample interval of the same estimator (module docstring).

    Args:
        sums: Per case, the sum of its rows' values (e.g. F1 differences of its trials).
        counts: Per case, its number of rows (> 0), same length as ``sums``.
        level: Confidence level in (0, 1).

    Returns:
        ``(low, high)``; both equal the mean when every case has the same per-row mean (no spread to resample:
        scipy would warn about degenerate data); ``None`` for no case.
    """
    return cluster_mean_cis([sums], counts, level)[0]


def cluster_mean_cis(figures: Sequence[Sequence[float]], counts: Sequence[float],
                     level: float = 0.95) -> list[tuple[float, float] | None]:
    """:func:`cluster_mean_ci` of several figures over the same cases (e.g. pass@k and pass^k for every k of one
    slice), each interval equal to what :func:`cluster_mean_ci` gives for that figure alone, for the price of one.

    Every call seeds the generator with :data:`SEED`, so the resampled cases of one set of cases are the same for
    each of its figures: they are drawn once here (by ``scipy.stats.bootstrap`` itself, which resamples the case
    indices exactly as its paired resampling does) and every figure's ratio is computed over the same draws.

    Args:
        figures: Per figure, the per-case sums (each as long as ``counts``).
        counts: Per case, its number of rows (> 0).
        level: Confidence level in (0, 1).

    Returns:
        One ``(low, high)`` (or ``None`` for no case) per figure, in order.
    """
    c = np.asarray(counts, dtype=float)
    sums = [np.asarray(s, dtype=float) for s in figures]
    intervals: list[tuple[float, float] | None] = []
    resampled: list[int] = []  # figures left to the bootstrap
    for s in sums:
        if s.size != c.size:
            raise ValueError(f"{s.size} sums for {c.size} counts")
        interval = _closed_form(s, c, level)
        intervals.append(interval)
        if interval is None and s.size:
            resampled.append(len(intervals) - 1)
    if resampled:
        # figures with the same per-case sums (pass@1 and pass^1 often are) are resampled once
        distinct = {sums[i].tobytes(): sums[i] for i in resampled}
        bounds = dict(zip(distinct, _bootstrap(list(distinct.values()), c, level)))
        for i in resampled:
            intervals[i] = bounds[sums[i].tobytes()]
    return intervals


def _closed_form(s: np.ndarray, c: np.ndarray, level: float) -> tuple[float, float] | None:
    """The interval when no resampling is needed (no spread, or :data:`NORMAL_ABOVE` cases and more); ``None``
    for no case and when the bootstrap must decide."""
    if s.size == 0:
        return None
    per_case = s / c
    if s.size == 1 or np.allclose(per_case, per_case[0], rtol=0.0, atol=1e-12):
        mean = float(s.sum() / c.sum())
        return (mean, mean)
    if s.size > NORMAL_ABOVE:
        return _normal_ci(s, c, level)
    return None


def _bootstrap(figures: list[np.ndarray], c: np.ndarray, level: float) -> list[tuple[float, float]]:
    """Percentile intervals of ``sum(s[i]) / sum(c[i])`` over :data:`RESAMPLES` resamples ``i`` of the cases,
    one per figure ``s``, from one draw of the resamples.

    The draw is ``scipy.stats.bootstrap``'s own over the case indices (its paired resampling resamples exactly
    these indices, batch by batch, from the same seeded generator), and each ratio is the same numpy sum over the
    resampled values that the paired statistic computes, so each interval equals a paired call's bit for bit.
    """
    from scipy.stats import bootstrap  # imported when an interval is computed: ~0.5 s of every command's start-up

    n = c.size
    ones = bool(np.all(c == 1.0))  # every case one row (pass@k over cases): the resampled counts sum to n

    def ratios(i: np.ndarray, axis: int = -1) -> np.ndarray:
        # ``take`` gathers the same values as ``s[i]`` (the indices are in range, so ``clip`` changes none) at
        # about twice the speed of fancy indexing
        resampled_counts = n if ones else np.sum(np.take(c, i, mode="clip"), axis=axis)
        return np.stack([np.sum(np.take(s, i, mode="clip"), axis=axis) / resampled_counts for s in figures])

    batch = None if n * RESAMPLES <= BATCH_ELEMENTS else max(1, BATCH_ELEMENTS // n)
    result = bootstrap((np.arange(n),), ratios, vectorized=True, n_resamples=RESAMPLES, batch=batch,
                       confidence_level=level, method="percentile", rng=np.random.default_rng(SEED))
    lows, highs = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
    return [(float(low), float(high)) for low, high in zip(lows, highs)]


def _normal_ci(s: np.ndarray, c: np.ndarray, level: float) -> tuple[float, float]:
    """Large-sample interval ``R ± z·se`` of the ratio estimator ``R = Σs / Σc`` over ``n`` clusters."""
    n = s.size
    ratio = s.sum() / c.sum()
    se = np.sqrt(np.sum((s - ratio * c) ** 2) / (n * (n - 1))) / c.mean()
    # the standard normal quantile from scipy.special, which scipy.stats' norm.ppf calls itself (the same value):
    # importing scipy.stats for it cost ~1 s more of the flow's time after the last shard
    from scipy.special import ndtri

    z = ndtri(0.5 + level / 2)
    return (float(ratio - z * se), float(ratio + z * se))
