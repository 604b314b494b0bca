"""Above NORMAL_ABOVE cases the interval is the ratio estimator's large-sample one; it must agree with the
cluster bootstrap it replaces (computed here with scipy directly) on the same data."""

from __future__ import annotations

import numpy as np
from scipy.stats import bootstrap

from tooleval.runs import bootstrap as ci


def _data(cases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 8, size=cases).astype(float)  # 1-7 trials per case, like the bfcl profile's 7
    p = rng.beta(0.6, 0.6, size=cases)  # per-case pass rates piled at 0 and 1, as pass^k rates are
    sums = rng.binomial(counts.astype(int), p).astype(float)
    return sums, counts


def test_large_sample_interval_matches_the_cluster_bootstrap():
    sums, counts = _data(ci.NORMAL_ABOVE + 1, seed=3)
    low, high = ci.cluster_mean_ci(sums, counts)
    boot = bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis) / c.sum(axis), paired=True,
                     vectorized=True, n_resamples=2000, method="percentile", rng=np.random.default_rng(1))
    b_low, b_high = boot.confidence_interval.low, boot.confidence_interval.high
    mean = sums.sum() / counts.sum()
    assert low < mean < high
    width = high - low
    # the two intervals agree to a few percent of their width (2,000 resamples carry ~2-3 % Monte-Carlo noise)
    assert abs(low - b_low) < 0.06 * width and abs(high - b_high) < 0.06 * width
    assert 0.9 < width / (b_high - b_low) < 1.1


def test_large_sample_interval_by_hand():
    # 6,000 cases alternate (s, c) = (1, 1) and (0, 1): R = 0.5, every residual s - R c is ±0.5, so
    # se = sqrt(6000 * 0.25 / (6000 * 5999)) / 1 = sqrt(0.25 / 5999) = 0.0064555; z(0.975) = 1.959964
    sums = np.tile([1.0, 0.0], 3000)
    counts = np.ones(6000)
    low, high = ci.cluster_mean_ci(sums, counts)
    assert abs(low - (0.5 - 1.959964 * 0.0064555)) < 1e-6 and abs(high - (0.5 + 1.959964 * 0.0064555)) < 1e-6


def test_small_runs_keep_the_bootstrap():
    # at or below NORMAL_ABOVE cases the interval is scipy's percentile bootstrap with the fixed seed
    sums, counts = _data(300, seed=5)
    expected = bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis) / c.sum(axis), paired=True,
                         vectorized=True, n_resamples=ci.RESAMPLES, method="percentile",
                         rng=np.random.default_rng(ci.SEED)).confidence_interval
    assert ci.cluster_mean_ci(sums, counts) == (float(expected.low), float(expected.high))
