"""Bootstrap confidence intervals over cases (scipy.stats.bootstrap), for variability figures and run comparison.

Rows of one case are not independent (its trials share an input), so resampling is over **cases**: each case
contributes a sum of values and a count of rows, and a resample's statistic is the ratio of the resampled sums
(the row-weighted mean). This is the cluster bootstrap (Davison & Hinkley 1997, section 3.8). Intervals are
percentile intervals of 9,999 resamples with a fixed seed, so the same data always gives the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap

__all__ = ["SEED", "RESAMPLES", "cluster_mean_ci"]

SEED = 20261130
"""Seed of the bootstrap's random generator (a fixed seed makes intervals reproducible)."""
RESAMPLES = 9999
BATCH_ELEMENTS = 2_000_000
"""Resampled values held at once (about 16 MB per array): above ``RESAMPLES`` x cases, resamples are drawn in
batches (``scipy.stats.bootstrap(batch=...)``), so a run with a million rows' cases stays in bounded memory.
Below it (every bundled dataset) the draw is one batch, as before."""


def _ratio(sums: np.ndarray, counts: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(sums, axis=axis) / np.sum(counts, axis=axis)


def cluster_mean_ci(sums: Sequence[float], counts: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """95 % (by default) percentile interval of a row-weighted mean, resampling clusters (cases).

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
    batch = None if s.size * RESAMPLES <= BATCH_ELEMENTS else max(1, BATCH_ELEMENTS // s.size)
    result = bootstrap((s, c), _ratio, paired=True, vectorized=True, n_resamples=RESAMPLES, batch=batch,
                       confidence_level=level, method="percentile", rng=np.random.default_rng(SEED))
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))
