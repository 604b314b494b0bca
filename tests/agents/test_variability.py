"""Variability: pass@k / pass^k (unbiased estimators), pass rate, F1 spread, flaky cases, outcome specs."""

from __future__ import annotations

import gzip
import json
from math import comb
from pathlib import Path

import pytest

from tooleval.runs.variability import (
    format_variability,
    outcome_from_spec,
    pass_at_k,
    pass_hat_k,
    variability_summary,
)

BUNDLED_TRACES = Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline" / "traces.jsonl.gz"


def row(case_id, trial, *, f1=None, reward=None, exact=None, slice_=None, error=None, **extra):
    return {"case_id": case_id, "trial": trial, "slice": slice_, "f1": f1, "recorded_reward": reward,
            "exact_match": exact, "error_kind": error, **extra}


def test_bundled_tau_bench_recorded_reward_pass_hat_k_and_pass_at_k():
    with gzip.open(BUNDLED_TRACES, "rt", encoding="utf-8") as handle:
        rows = [row(t["case_id"], t["trial"], reward=t["metadata"]["reward"]) for t in map(json.loads, handle)]
    assert len(rows) == 200
    summary = variability_summary(rows, outcome_from_spec("recorded_reward"))
    assert summary["k_max"] == 4 and summary["cases"] == 50 and summary["rows_without_outcome"] == 0
    expected_hat = [0.4200, 0.2733, 0.2200, 0.2000]
    expected_at = [0.4200, 0.5667, 0.6600, 0.7200]
    for k in range(1, 5):
        assert summary["pass^k"][str(k)] == pytest.approx(expected_hat[k - 1], abs=5e-5)
        assert summary["pass@k"][str(k)] == pytest.approx(expected_at[k - 1], abs=5e-5)
    assert summary["pass_rate"] == pytest.approx(0.42)
    assert len(summary["flaky_cases"]) == 26  # the issue: 26 of 50 tasks with mixed outcomes
    json.dumps(summary)  # JSON-ready
    assert "0.2733" in format_variability(summary)


def test_estimators_by_hand():
    # n=4, c=2: pass@2 = 1 - C(2,2)/C(4,2) = 5/6; pass^2 = C(2,2)/C(4,2) = 1/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6) and pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_at_k(3, 0, 3) == 0.0 and pass_hat_k(3, 3, 3) == 1.0 and pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_hat_k(2, 3, 1)


def test_summary_by_hand_with_slices_flaky_cases_and_f1_spread():
    rows = [row("a", 0, f1=1.0, exact=True, slice_="s1"), row("a", 1, f1=0.5, exact=False, slice_="s1"),
            row("b", 0, f1=1.0, exact=True, slice_="s1"), row("b", 1, f1=1.0, exact=True, slice_="s1"),
            row("c", 0, f1=0.0, exact=False), row("c", 1, f1=0.0, exact=False)]
    s = variability_summary(rows, outcome_from_spec("exact"))
    assert (s["k_max"], s["rows"], s["trials"], s["passes"]) == (2, 6, 6, 3)
    assert s["pass_rate"] == 0.5 and s["pass@k"]["1"] == pytest.approx(0.5)
    assert s["pass@k"]["2"] == pytest.approx((1 + 1 + 0) / 3)  # a: 1 - C(1,2)/C(2,2) = 1
    assert s["pass^k"]["2"] == pytest.approx((0 + 1 + 0) / 3)
    assert s["flaky_cases"] == ["a"]
    assert s["f1"]["min"] == 0.0 and s["f1"]["max"] == 1.0 and s["f1"]["mean"] == pytest.approx(3.5 / 6)
    assert list(s["by_slice"]) == ["(none)", "s1"]
    s1 = s["by_slice"]["s1"]
    assert (s1["cases"], s1["pass_rate"], s1["pass^k"]["2"], s1["flaky_cases"]) == (2, 0.75, 0.5, ["a"])
    a = s["by_case"]["a"]
    assert (a["trials"], a["passes"], a["flaky"], a["slice"]) == (2, 1, True, "s1")
    assert a["f1"]["std"] == pytest.approx(0.3535534, abs=1e-6)  # sample std of (1.0, 0.5)
    assert s["by_case"]["c"]["f1"]["std"] == 0.0 and s["by_case"]["c"]["pass@k"] == {"1": 0.0, "2": 0.0}


def test_k_is_the_smallest_trial_count_and_every_case_uses_all_its_trials():
    rows = [row("a", t, f1=1.0) for t in range(3)] + [row("b", 0, f1=1.0), row("b", 1, f1=0.0)]
    s = variability_summary(rows, outcome_from_spec("f1>=0.5"))
    assert s["k_max"] == 2 and s["trials_per_case"] == {"min": 2, "max": 3}
    assert list(s["pass@k"]) == ["1", "2"]
    assert s["pass^k"]["2"] == pytest.approx((comb(3, 2) / comb(3, 2) + 0) / 2)
    assert s["pass@k"]["1"] == pytest.approx((1 + 0.5) / 2)


def test_rows_without_an_outcome_are_counted_not_failed():
    rows = [row("a", 0, f1=1.0, exact=True), row("a", 1, error="generation_error"),
            row("b", 0, reward=None, exact=False)]
    s = variability_summary(rows, outcome_from_spec("exact"))
    assert s["rows_without_outcome"] == 1 and s["by_case"]["a"]["trials"] == 1 and s["k_max"] == 1
    r = variability_summary(rows, outcome_from_spec("recorded_reward"))
    assert r["rows_without_outcome"] == 3 and r["k_max"] == 0 and r["pass@k"] == {} and r["pass_rate"] is None
    empty = variability_summary([], outcome_from_spec("gate"))
    assert empty["rows"] == 0 and empty["f1"]["mean"] is None


def test_outcome_specs():
    assert outcome_from_spec("recorded_reward")(row("a", 0, reward=1.0)) is True
    assert outcome_from_spec("recorded_reward")(row("a", 0, reward=0.5)) is False  # partial reward fails
    assert outcome_from_spec(" F1 >= 0.75 ")(row("a", 0, f1=0.75)) is True
    assert outcome_from_spec("f1>=.8")(row("a", 0, f1=0.75)) is False
    assert outcome_from_spec("f1>=1")(row("a", 0, f1=None)) is None
    assert outcome_from_spec("exact")(row("a", 0, exact=True)) is True
    gate = outcome_from_spec("gate", "no_blocking")
    assert gate(row("a", 0, gate_pass=True)) is True and gate(row("a", 0, gate_pass=False)) is False
    assert gate(row("a", 0, blocking=False)) is True and gate(row("a", 0, blocking=["forbidden_tool"])) is False
    assert gate(row("a", 0, blocking=False, error="scoring_error")) is None
    with pytest.raises(ValueError, match="gate_pass"):
        gate(row("a", 0))
    for bad in ("", "pass", "f1>1.5", "f1>=1.5", "f1 > 0.5", "reward", None):
        with pytest.raises(ValueError, match="unknown outcome"):
            outcome_from_spec(bad)
    with pytest.raises(ValueError, match="unknown row outcome 'exact'"):
        outcome_from_spec("gate", "exact")


def test_the_gate_outcome_follows_the_gates_row_outcome():
    """Without gate.toml (row outcome ``match``) a row passes only when it matches its reference and nothing
    blocks; ``no_blocking`` passes the non-blocking mismatch too. pass@k / pass^k follow, by hand below."""
    match = outcome_from_spec("gate")
    assert match.require_match and not outcome_from_spec("gate", "no_blocking").require_match
    assert match(row("a", 0, f1=1.0, exact=True, blocking=False)) is True
    assert match(row("a", 0, f1=0.4, exact=False, blocking=False)) is False  # F1 0.4, nothing blocking: fails
    assert match(row("a", 0, f1=1.0, exact=True, blocking=True)) is False
    # the case's match mode decides (row schema 5): the reference's calls in another order under strict fail,
    # an extra read under superset passes
    assert match(row("a", 0, f1=1.0, exact=True, blocking=False, calls_match=False)) is False
    assert match(row("a", 0, f1=0.8, exact=False, blocking=False, calls_match=True)) is True
    # case a: trials exact, mismatch (no rule), exact; case b: mismatch, blocking mismatch, exact
    rows = [row("a", 0, f1=1.0, exact=True, blocking=False), row("a", 1, f1=0.4, exact=False, blocking=False),
            row("a", 2, f1=1.0, exact=True, blocking=False), row("b", 0, f1=0.5, exact=False, blocking=False),
            row("b", 1, f1=0.5, exact=False, blocking=True), row("b", 2, f1=1.0, exact=True, blocking=False)]
    strict = variability_summary(rows, match)
    # a: c=2 of 3, b: c=1 of 3 -> pass@1 = (2/3 + 1/3) / 2 = 0.5; pass^2 = (C(2,2) + C(1,2)) / C(3,2) / 2 = 1/6
    assert strict["passes"] == 3 and strict["pass@k"]["1"] == pytest.approx(0.5)
    assert strict["pass^k"]["2"] == pytest.approx(1 / 6) and strict["pass@k"]["3"] == 1.0
    loose = variability_summary(rows, outcome_from_spec("gate", "no_blocking"))
    # a: 3 of 3, b: 2 of 3 -> pass@1 = (1 + 2/3) / 2 = 5/6
    assert loose["passes"] == 5 and loose["pass@k"]["1"] == pytest.approx(5 / 6)
    assert strict["outcome"] == loose["outcome"] == "gate"


def test_duplicate_rows_are_refused():
    with pytest.raises(ValueError, match="two rows"):
        variability_summary([row("a", 0, f1=1.0), row("a", 0, f1=1.0)], outcome_from_spec("f1>=0.5"))


def test_pass_at_k_intervals_on_the_bundled_rewards():
    import statistics

    with gzip.open(BUNDLED_TRACES, "rt", encoding="utf-8") as handle:
        rows = [row(t["case_id"], t["trial"], reward=t["metadata"]["reward"]) for t in map(json.loads, handle)]
    summary = variability_summary(rows, outcome_from_spec("recorded_reward"))
    # Independently: per-case pass@1 = c/4; a normal interval mean +- 1.96 sd / sqrt(50) is close to the
    # percentile bootstrap for 50 cases.
    passes = {}
    for r in rows:
        passes.setdefault(r["case_id"], []).append(r["recorded_reward"] >= 1.0)
    values = [sum(v) / len(v) for v in passes.values()]
    half = 1.96 * statistics.stdev(values) / len(values) ** 0.5
    low, high = summary["pass@k_ci95"]["1"]
    assert low == pytest.approx(0.42 - half, abs=0.02) and high == pytest.approx(0.42 + half, abs=0.02)
    for name in ("pass@k", "pass^k"):
        for k, (low, high) in summary[f"{name}_ci95"].items():
            assert 0.0 <= low <= summary[name][k] <= high <= 1.0
    assert summary == variability_summary(rows, outcome_from_spec("recorded_reward"))  # seeded: reproducible
    low, high = summary["pass@k_ci95"]["1"]
    assert f"0.4200  [{low:.4f}, {high:.4f}]" in format_variability(summary)


def test_cluster_interval_without_spread_is_the_mean():
    from tooleval.runs.bootstrap import cluster_mean_ci

    assert cluster_mean_ci([2.0, 1.0], [2, 1]) == (1.0, 1.0)  # every case's mean is 1.0
    assert cluster_mean_ci([], []) is None
    low, high = cluster_mean_ci([0.0, 1.0, 0.0, 1.0], [1, 1, 1, 1])
    assert 0.0 <= low < 0.5 < high <= 1.0
