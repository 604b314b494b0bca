"""Bootstrap confidence intervals over cases (scipy.stats.bootstrap), for variability figures and run comparison.

Rows of one case are not independent (its trials share an input), so resampling is over **cases**: each case
contributes a sum of values and a count of rows, and a resample's statistic is the ratio of the resampled sums
(the row-weighted mean). This is the cluster bootstrap (Davison & Hinkley 1997, section 3.8). Intervals are
percentile intervals of 9,999 resamples with a fixed seed, so the same data always gives the same interval.

Above :data:`NORMAL_ABOVE` cases the interval is the large-sample one of the same ratio estimator instead:
``R ± z · se`` with ``se² = Σ (s_i − R c_i)² / (n (n − 1) c̄²)`` (the linearised variance of a ratio estimator over
clusters, Cochran 1977, *Sampling Techniques*, 3rd ed., section 6.4). The bootstrap costs 9,999 x cases draws per
figure — about 48 s for the variability figures of 14,286 cases, many minutes at a million rows — and its
percentile interval converges to this one as cases grow (``tests/runs/test_bootstrap_large.py`` measures the gap).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SEED", "RESAMPLES", "NORMAL_ABOVE", "cluster_mean_ci"]

SEED = 20261130
"""Seed of the bootstrap's random generator (a fixed seed makes intervals reproducible)."""
RESAMPLES = 9999
BATCH_ELEMENTS = 2_000_000
"""Resampled values held at once (about 16 MB per array): above ``RESAMPLES`` x cases, resamples are drawn in
batches (``scipy.stats.bootstrap(batch=...)``), so a run with a million rows' cases stays in bounded memory.
Below it (every bundled dataset) the draw is one batch, as before."""
NORMAL_ABOVE = 5_000
"""Cases above which the interval is the large-sample normal one (see the module docstring)."""


def _ratio(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(sums, axis=axis) / np.sum(counts, axis=axis)


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
    s = np.asarray(sums, dtype=float)
    c = np.asarray(counts, dtype=float)
    if s.size == 0:
        return None
    per_case = s / c
    if s.size == 1 or np.allclose(per_case, per_case[0], rtol=0.0, atol=1e-12):
        mean = float(s.sum() / c.sum())
        return (mean, mean)
    if s.size > NORMAL_ABOVE:
        return _normal_ci(s, c, level)
    from scipy.stats import bootstrap  # imported when an interval is computed: ~0.5 s of every command's start-up

    batch = None if s.size * RESAMPLES <= BATCH_ELEMENTS else max(1, BATCH_ELEMENTS // s.size)
    result = bootstrap((s, c), _ratio, paired=True, vectorized=True, n_resamples=RESAMPLES, batch=batch,
                       confidence_level=level, method="percentile", rng=np.random.default_rng(SEED))
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def _normal_ci(s: np.ndarray, c: np.ndarray, level: float) -> tuple[float, float]:
    """Large-sample interval ``R ± z·se`` of the ratio estimator ``R = Σs / Σc`` over ``n`` clusters."""
    n = s.size
    ratio = s.sum() / c.sum()
    se = np.sqrt(np.sum((s - ratio * c) ** 2) / (n * (n - 1))) / c.mean()
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    return (float(ratio - z * se), float(ratio + z * se))
