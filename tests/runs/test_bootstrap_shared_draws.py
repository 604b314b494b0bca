"""Several figures of one set of cases share one draw of the resampled cases (``cluster_mean_cis``); every interval
must equal, bit for bit, what ``scipy.stats.bootstrap`` gives for that figure alone with the paired resampling of
the cases and the fixed seed (the call every interval was computed with before the draws were shared)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import bootstrap

from tooleval.runs import bootstrap as ci
from tooleval.runs.variability import outcome_from_spec, pass_at_k, pass_hat_k, variability_summary


def _paired(sums: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """The interval of one figure as scipy computes it on its own: paired resampling of (sums, counts), the ratio
    of the resampled sums, 9,999 resamples from the seeded generator, batched above 2,000,000 resampled values."""
    n = sums.size
    batch = None if n * ci.RESAMPLES <= ci.BATCH_ELEMENTS else max(1, ci.BATCH_ELEMENTS // n)
    result = bootstrap((sums, counts), lambda s, c, axis=-1: np.sum(s, axis=axis) / np.sum(c, axis=axis),
                       paired=True, vectorized=True, n_resamples=ci.RESAMPLES, batch=batch, confidence_level=0.95,
                       method="percentile", rng=np.random.default_rng(ci.SEED))
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def _pass_figures(trials: np.ndarray, passes: np.ndarray, k_max: int) -> list[np.ndarray]:
    """pass@k then pass^k for k = 1..k_max, per case: the figures the variability summary resamples."""
    return [np.array([estimator(int(n), int(c), k) for n, c in zip(trials, passes)])
            for estimator in (pass_at_k, pass_hat_k) for k in range(1, k_max + 1)]


def test_one_batch_figures_equal_their_own_bootstrap():
    # 180 cases x 9,999 resamples = 1.8 M values: one batch; 5-7 trials per case, like the bfcl profile
    rng = np.random.default_rng(7)
    trials = rng.integers(5, 8, size=180)
    passes = rng.binomial(trials, rng.beta(0.6, 0.6, size=180))
    figures = _pass_figures(trials, passes, 5)
    ones = np.ones(180)
    assert ci.cluster_mean_cis(figures, ones) == [_paired(f, ones) for f in figures]


def test_batched_figures_with_counts_equal_their_own_bootstrap():
    # 700 cases x 9,999 resamples > 2 M values: drawn in batches of 2,857 resamples; counts other than 1 (a run
    # comparison's cases), so the resampled counts are summed as the paired statistic sums them
    rng = np.random.default_rng(11)
    counts = rng.integers(1, 8, size=700).astype(float)
    figures = [rng.binomial(counts.astype(int), p).astype(float) for p in (0.2, 0.5, 0.9)]
    assert ci.BATCH_ELEMENTS // 700 == 2857
    assert ci.cluster_mean_cis(figures, counts) == [_paired(f, counts) for f in figures]


def test_closed_forms_and_repeated_figures_keep_their_place():
    # a figure without spread is its mean (1.0 per case: (1.0, 1.0)), no case gives None per figure, and two
    # figures with the same sums get the same interval as each alone
    rng = np.random.default_rng(3)
    varied = rng.integers(0, 2, size=60).astype(float)
    flat = np.ones(60)
    ones = np.ones(60)
    got = ci.cluster_mean_cis([varied, flat, varied.copy()], ones)
    alone = _paired(varied, ones)
    assert got == [alone, (1.0, 1.0), alone]
    assert ci.cluster_mean_cis([[], []], []) == [None, None]
    assert ci.cluster_mean_cis([], [1.0, 1.0]) == []


def test_large_sets_take_the_normal_interval_per_figure():
    # above NORMAL_ABOVE cases no draw is made: each figure is its own large-sample interval (by hand in
    # test_bootstrap_large: alternating 1, 0 over 6,000 cases gives 0.5 +- 1.959964 * 0.0064555)
    alternating = np.tile([1.0, 0.0], 3000)
    (low, high), (same_low, same_high) = ci.cluster_mean_cis([alternating, alternating[::-1].copy()], np.ones(6000))
    assert low == pytest.approx(0.5 - 1.959964 * 0.0064555, abs=1e-6)
    assert high == pytest.approx(0.5 + 1.959964 * 0.0064555, abs=1e-6)
    assert (same_low, same_high) == (low, high)


def test_sums_and_counts_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="3 sums for 2 counts"):
        ci.cluster_mean_cis([[1.0, 0.0, 1.0]], [1.0, 1.0])


def test_variability_intervals_are_each_figures_own_bootstrap():
    # 120 cases with 3-5 trials each: K = 3, six figures per set of cases; every interval of the summary is the
    # paired bootstrap of that figure's per-case values alone
    rng = np.random.default_rng(5)
    rows = []
    for case in range(120):
        for trial in range(int(rng.integers(3, 6))):
            rows.append({"case_id": f"c{case:03d}", "trial": trial, "slice": "s", "f1": float(rng.random())})
    summary = variability_summary(rows, outcome_from_spec("f1>=0.5"))
    trials, passes = [], []
    for case in range(120):
        f1 = [r["f1"] for r in rows if r["case_id"] == f"c{case:03d}"]
        trials.append(len(f1))
        passes.append(sum(v >= 0.5 for v in f1))
    assert summary["k_max"] == min(trials) == 3
    ones = np.ones(120)
    for name, estimator in (("pass@k", pass_at_k), ("pass^k", pass_hat_k)):
        for k in (1, 2, 3):
            values = np.array([estimator(n, c, k) for n, c in zip(trials, passes)])
            assert summary[f"{name}_ci95"][str(k)] == list(_paired(values, ones))
            assert summary["by_slice"]["s"][f"{name}_ci95"][str(k)] == list(_paired(values, ones))
