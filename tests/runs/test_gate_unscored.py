"""Issue 11 section 2: the release gate never passes what was not scored (DESIGN.md "Trust rules")."""

from __future__ import annotations

import json
from datetime import date

import pytest
from junitparser import Failure, JUnitXml, Skipped
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tooleval.cli import app
from tooleval.rules import GateConfig, evaluate_gate
from tooleval.models import Case
from tooleval.runs.gate import gate_rows, gate_scope

runner = CliRunner()
TODAY = date(2026, 1, 1)
SCOPE = {"A": "refunds", "B": None, "C": None}


def _scored(case_id: str, trial: int = 0) -> dict:
    return {"case_id": case_id, "trial": trial, "slice": SCOPE.get(case_id), "f1": 1.0, "exact_match": True,
            "fp": 0, "fn": 0, "violations": [], "error_kind": None, "error_message": None}


class TestUnscoredRows:
    def test_cases_without_a_row_fail_as_unscored(self):
        rows = gate_rows([_scored("A")], SCOPE)
        verdict = evaluate_gate(rows, GateConfig(), today=TODAY)
        assert not verdict.passed
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [("B", ["unscored"]), ("C", ["unscored"])]
        assert verdict.counts["scored_rows"] == 1 and verdict.counts["unscored_cases"] == 2
        assert verdict.counts["rows_evaluated"] == 1

    def test_errors_without_rows_fail_and_are_not_counted_twice(self):
        errors = [
            {"kind": "unknown_case", "case_id": "ZZ", "trial": 0, "message": "not in cases.jsonl", "line": 5},
            {"kind": "missing_trace", "case_id": "B", "trial": None, "message": "no trace", "line": None},
            {"kind": "bad_trace", "case_id": None, "trial": None, "message": "not a trace", "line": 9},
            {"kind": "scoring_error", "case_id": "A", "trial": 0, "message": "row has it", "line": None},
        ]
        rows = gate_rows([_scored("A"), _scored("C")], SCOPE, errors)
        assert [(r["case_id"], r["trial"], r["error_kind"]) for r in rows[2:]] == [
            ("ZZ", 0, "unknown_case"), ("B", None, "missing_trace"), ("<traces line 9>", None, "bad_trace")]
        verdict = evaluate_gate(rows, GateConfig(), today=TODAY)
        assert sorted(o.case_id for o in verdict.failing_rows) == ["<traces line 9>", "B", "ZZ"]

    def test_waiver_and_quarantine_name_an_unscored_case(self):
        config = GateConfig.model_validate({
            "waivers": [{"case": "B", "rule": "unscored", "owner": "ana", "reason": "trace lost",
                         "expires": "2026-02-01"}],
            "quarantine": [{"case": "C", "owner": "ana", "reason": "flaky"}],
        })
        verdict = evaluate_gate(gate_rows([_scored("A")], SCOPE), config, today=TODAY)
        assert verdict.passed, verdict.reasons
        assert [o.case_id for o in verdict.waived] == ["B"] and [o.case_id for o in verdict.quarantined] == ["C"]

    def test_scope_is_the_dataset_or_the_slices_asked_for(self):
        cases = {case_id: Case.model_validate({"case_id": case_id, "input": "x", "expected_calls": [], "slice": s})
                 for case_id, s in SCOPE.items()}
        assert gate_scope(cases) == SCOPE
        assert gate_scope(cases, ["refunds"]) == {"A": "refunds"}
        # a --slices run without a row for its one case fails it; cases of other slices are not its business
        assert [r["case_id"] for r in gate_rows([], gate_scope(cases, ["refunds"]))] == ["A"]

    def test_a_diagnostic_subset_judges_only_its_own_rows(self):
        assert gate_rows([_scored("A")], None) == [_scored("A")]

    def test_zero_scored_rows_never_pass_even_with_the_opt_out(self):
        error_row = dict(_scored("A"), error_kind="bad_trace", error_message="x", f1=None)
        for rows in ([], [error_row], gate_rows([], SCOPE)):
            verdict = evaluate_gate(rows, GateConfig(row_errors_block=False), today=TODAY)
            assert not verdict.passed
            assert "no scored row: nothing was evaluated" in verdict.reasons

    def test_explicit_opt_out_lets_unscored_cases_pass(self):
        verdict = evaluate_gate(gate_rows([_scored("A")], SCOPE), GateConfig(row_errors_block=False), today=TODAY)
        assert verdict.passed and verdict.counts["unscored_cases"] == 2

    def test_default_is_blocking(self):
        assert GateConfig().row_errors_block is True


def _junit(out, run_id):
    xml = JUnitXml.fromfile(str(out / "runs" / run_id / "junit.xml"))
    return [case for suite in xml for case in suite]


@pytest.mark.usefixtures("prefect_harness")
class TestCommands:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_empty_traces_file_fails_the_gate_naming_every_case(self, tmp_path, monkeypatch):
        import tooleval.cli._report as report_module

        monkeypatch.setattr(report_module, "ERRORS_LISTED", 2)  # 3 errors: 2 listed, the third counted
        folder = write_dataset(tmp_path / "d", TINY_CASES, [])
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "e"],
                               env={"COLUMNS": "250"})
        assert result.exit_code == 1, result.output  # three cases had errors
        # the three cases are the blocking rows, and the line says they were never scored
        assert "gate: FAIL (3 blocking rows, 3 unscored)" in result.output.splitlines()
        assert f"  details: tooleval gate --run-id e --out {out}" in result.output.splitlines()
        assert "... and 1 more errors (all in " in result.output
        result = runner.invoke(app, ["gate", "--run-id", "e", "--out", str(out)], env={"COLUMNS": "250"})
        assert result.exit_code == 1, result.output
        cases = _junit(out, "e")
        failing = sorted(c.name for c in cases if any(isinstance(r, Failure) for r in c.result))
        assert failing == ["A#-", "B#-", "C#-"]
        gate = json.loads((out / "runs" / "e" / "gate.json").read_text())
        assert gate["reasons"][0] == "no scored row: nothing was evaluated"

    @pytest.mark.slow  # the Prefect test harness's server
    def test_case_without_trace_and_unknown_case_trace_are_named(self, tmp_path):
        traces = TINY_TRACES[:2] + [dict(TINY_TRACES[0], case_id="ZZ")]  # B and C have no trace
        folder = write_dataset(tmp_path / "d", TINY_CASES, traces)
        out = tmp_path / "results"
        runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out), "--run-id", "u"])
        result = runner.invoke(app, ["gate", "--run-id", "u", "--out", str(out)], env={"COLUMNS": "250"})
        assert result.exit_code == 1, result.output
        cases = _junit(out, "u")
        failing = {c.name: c.result[0] for c in cases if any(isinstance(r, Failure) for r in c.result)}
        # A's own rows are judged by their violations (not this test's subject): the unscored entries are
        assert {name: r.type for name, r in failing.items() if r.type == "unscored"} == {
            "B#-": "unscored", "C#-": "unscored", "ZZ#0": "unscored"}
        assert not any(isinstance(r, Skipped) for c in cases for r in c.result)

    @pytest.mark.slow  # the Prefect test harness's server
    def test_empty_cases_file_is_a_usage_error(self, tmp_path):
        folder = write_dataset(tmp_path / "d", [], TINY_TRACES)
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(folder), "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert "cases.jsonl" in result.output and "holds no case" in " ".join(result.output.split())
        assert not out.exists() or not (out / "rows").exists()


def test_the_run_names_the_outcome_and_where_it_was_decided(tmp_path):
    from tooleval.runs.gate import gate_config_for, gate_config_source, row_outcome_record

    assert gate_config_source(tmp_path) is None and gate_config_for(tmp_path).row_outcome == "match"
    assert row_outcome_record(GateConfig(), None, "gate") == {
        "gate": "match", "config": None, "variability": "gate", "accept_name_only": False,
        "passes_when": "its calls match the reference under the case's match mode (calls_match; by default "
                       "unordered: fp = 0 and fn = 0) and no blocking rule fires; a row with a call whose "
                       "arguments were not captured fails (args_not_captured)"}
    accepting = row_outcome_record(GateConfig(accept_name_only=True), None, "gate")
    assert accepting["accept_name_only"] is True and "args_not_captured" not in accepting["passes_when"]
    (tmp_path / "gate.toml").write_text('row_outcome = "no_blocking"\n')
    assert gate_config_source(tmp_path) == str(tmp_path / "gate.toml")
    record = row_outcome_record(gate_config_for(tmp_path), gate_config_source(tmp_path), "exact")
    assert (record["gate"], record["config"], record["variability"]) == ("no_blocking", str(tmp_path / "gate.toml"),
                                                                        "exact")
