"""`tooleval compare` on two runs of the bundled data that differ in one case's trace (conftest.bundled_pair):
exactly that case's row is listed and the deltas are right to 4 decimals, computed here from the Parquet rows."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tooleval.runs.spec import RunSpec
from tests.support.datasets import CHANGED_CASE, tool_call, trace, write_dataset
from tooleval.cli import app
from tooleval.runs.compare import compare_runs, failed_thresholds, parse_fail_on

runner = CliRunner()


def _by_key(out, run_id):
    files = sorted((out / "rows").glob(f"*/run_id={run_id}/*.parquet"))
    return {(r["case_id"], r["trial"]): r for f in files for r in pq.read_table(f).to_pylist()}


class TestBundledPair:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_exactly_the_changed_case_is_listed(self, bundled_pair):
        result = compare_runs(bundled_pair, "base", "head")
        assert result["pairs"] == 200 and result["only_base"] == [] and result["only_head"] == []
        assert result["changed_count"] == 1
        (row,) = result["changed_rows"]
        assert (row["case_id"], row["trial"]) == CHANGED_CASE
        assert row["head_f1"] == 1.0

    @pytest.mark.slow  # the Prefect test harness's server
    def test_deltas_to_4_decimals(self, bundled_pair):
        base, head = _by_key(bundled_pair, "base"), _by_key(bundled_pair, "head")
        changed = CHANGED_CASE
        # Only one row differs, so each mean moves by (head value - base value) / 200 rows.
        expected = {
            "f1": (head[changed]["f1"] - base[changed]["f1"]) / 200,
            "ragas_f1": (head[changed]["ragas_tool_call_f1"] - base[changed]["ragas_tool_call_f1"]) / 200,
            "exact_match": (int(head[changed]["exact_match"]) - int(base[changed]["exact_match"])) / 200,
            "pass_rate": (int(not head[changed]["blocking"]) - int(not base[changed]["blocking"])) / 200,
        }
        # By hand: base row f1 = 1/3 (tp 2 of 5 expected calls, 7 observed: 2*2/(2*2+5+3)), head row exact.
        assert base[changed]["f1"] == pytest.approx(1 / 3) and head[changed]["f1"] == 1.0
        assert expected["f1"] == pytest.approx(0.0033, abs=5e-5)
        result = compare_runs(bundled_pair, "base", "head")
        for metric, delta in expected.items():
            assert round(result["overall"][metric]["delta"], 4) == round(delta, 4), metric
            assert round(result["by_slice"]["airline"][metric]["delta"], 4) == round(delta, 4), metric
        mean_f1 = sum(r["f1"] for r in base.values()) / 200
        assert round(result["overall"]["f1"]["base"], 4) == round(mean_f1, 4) == 0.3538  # README's mean f1
        low, high = result["overall"]["f1"]["ci95"]
        # 49 of 50 cases did not move: resamples without case 2 give 0, so the interval touches 0.
        assert low == 0.0 and expected["f1"] <= high

    @pytest.mark.slow  # the Prefect test harness's server
    def test_one_changed_case_is_noise_for_fail_on(self, bundled_pair):
        out = str(bundled_pair)
        worse = runner.invoke(app, ["compare", "head", "base", "--out", out, "--fail-on", "f1:0.001"])
        assert worse.exit_code == 0, worse.output  # worse by 0.0033 but its interval includes 0
        assert "2" in worse.output and "changed (1)" in worse.output

    @pytest.mark.slow  # the Prefect test harness's server
    def test_json_output(self, bundled_pair):
        result = runner.invoke(app, ["compare", "base", "head", "--out", str(bundled_pair), "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert [(r["case_id"], r["trial"]) for r in data["changed_rows"]] == [CHANGED_CASE]
        assert data["fail_on"] == {"conditions": [], "failed": []}

    @pytest.mark.slow  # the Prefect test harness's server
    def test_unknown_run_exits_2(self, bundled_pair):
        result = runner.invoke(app, ["compare", "base", "nope", "--out", str(bundled_pair)])
        assert result.exit_code == 2 and "no run 'nope'" in result.output


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_fail_on_exits_1_when_every_case_gets_worse(tmp_path):
    from flows.evaluate import evaluate

    cases = [{"case_id": f"c{i}", "input": "look up", "expected_calls": [{"name": "get", "args": {"id": i}}]}
             for i in range(6)]
    right = [trace(f"c{i}", 0, [tool_call("get", json.dumps({"id": i}))]) for i in range(6)]
    # Head: c0-c2 call the wrong id (f1 0); c3-c5 add an extra call (tp 1, fp 1: f1 2/3).
    worse = [trace(f"c{i}", 0, [tool_call("get", json.dumps({"id": i + 100}))]) for i in range(3)] + [
        trace(f"c{i}", 0, [tool_call("get", json.dumps({"id": i})), tool_call("noise", "{}")]) for i in range(3, 6)]
    out = tmp_path / "results"
    evaluate(RunSpec(dataset=str(write_dataset(tmp_path / "base", cases, right)), out=str(out), run_id="b"))
    evaluate(RunSpec(dataset=str(write_dataset(tmp_path / "head", cases, worse)), out=str(out), run_id="h"))
    result = runner.invoke(app, ["compare", "b", "h", "--out", str(out), "--fail-on", "f1:0.02"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    comparison = compare_runs(out, "b", "h")
    # Mean delta: (3 * -1 + 3 * -1/3) / 6 = -2/3; every case got worse, so the whole interval is below 0,
    # between the smallest and the largest per-case change.
    assert round(comparison["overall"]["f1"]["delta"], 4) == -0.6667
    low, high = comparison["overall"]["f1"]["ci95"]
    assert -1.0 <= low < high <= -1 / 3
    assert "f1 fell by 0.6667" in result.output
    assert comparison["changed_count"] == 6
    # Neither dataset has a gate.toml, so both runs were judged "match": a head row that calls the wrong id
    # (f1 0) or adds a call (f1 2/3) breaks no rule but no longer matches its reference — "pass -> fail" as
    # reference_mismatch, and the pass rate falls from 1 to 0 (judged by blocking rules alone it would not have moved).
    assert comparison["row_outcome"] == {"base": "match", "head": "match"}
    assert {(r["base_verdict"], r["head_verdict"], tuple(r["head_rules"])) for r in comparison["changed_rows"]} == {
        ("pass", "fail", ("reference_mismatch",))}
    assert comparison["overall"]["pass_rate"]["delta"] == -1.0
    assert "pass" in result.output and "fail (reference_mismatch)" in result.output

    # A run sharing two pairs with "b" (c0 right, c1 wrong) plus a case of its own (d0, blocking: no call):
    # deltas cover the 2 pairs only. By hand: f1 (1 + 0) / 2 - 1 = -0.5; the unpaired d0 row counts nowhere.
    part = [{"case_id": "d0", "input": "x", "expected_calls": [{"name": "get", "args": {"id": 9}}]}] + cases[:2]
    traces = [right[0], trace("c1", 0, [tool_call("get", json.dumps({"id": 7}))]), trace("d0", 0, [])]
    evaluate(RunSpec(dataset=str(write_dataset(tmp_path / "part", part, traces, revision="r2")), out=str(out), run_id="p"))
    partial = compare_runs(out, "b", "p")
    assert partial["pairs"] == 2 and partial["only_head"] == [["d0", 0]]
    assert (partial["only_head_count"], partial["only_base_count"]) == (1, 4)  # d0 only in p; c2-c5 only in b
    assert partial["overall"]["f1"]["rows"] == 2 and partial["overall"]["f1"]["delta"] == -0.5
    assert partial["overall"]["pass_rate"]["rows"] == 2

    # Runs with no pair in common: nothing to compare, a usage error (exit 2), not deltas from unpaired rows.
    other = [{"case_id": "z0", "input": "x", "expected_calls": []}]
    evaluate(RunSpec(dataset=str(write_dataset(tmp_path / "other", other, [trace("z0", 0, [])], revision="r3")), out=str(out), run_id="o"))
    refused = runner.invoke(app, ["compare", "b", "o", "--out", str(out)], env={"COLUMNS": "200"})
    assert refused.exit_code == 2 and "share no (case_id, trial) pair" in refused.output, refused.output


def test_parse_fail_on():
    assert [(c.metric, c.threshold) for c in parse_fail_on("f1:0.02, pass_rate:.1")] == [
        ("f1", 0.02), ("pass_rate", 0.1)]
    for bad in ("f1", "precision:0.1", "f1:-1", "f1:x"):
        with pytest.raises(ValueError, match="METRIC:THRESHOLD"):
            parse_fail_on(bad)


def test_failed_thresholds_needs_the_size_and_an_interval_below_zero():
    def comparison(delta, low, high):
        return {"overall": {"f1": {"delta": delta, "ci95": [low, high]}}}

    rule = parse_fail_on("f1:0.02")
    assert failed_thresholds(comparison(-0.03, -0.05, -0.01), rule) != []
    assert failed_thresholds(comparison(-0.03, -0.05, 0.01), rule) == []  # interval includes 0
    assert failed_thresholds(comparison(-0.01, -0.02, -0.005), rule) == []  # too small


def test_a_run_published_before_row_outcomes_was_judged_by_its_rules(tmp_path):
    from tests.support.paths import GOLDEN
    from tooleval.runs.compare import run_row_outcome

    (tmp_path / "runs" / "old").mkdir(parents=True)
    (tmp_path / "runs" / "old" / "summary.json").write_text((GOLDEN / "summary_v1.json").read_text())
    assert run_row_outcome(tmp_path, "old") == "no_blocking"
