"""The release gate end to end (issue 3): seed 004's four refund runs through `tooleval run` and `tooleval gate`,
waivers, quarantine, and junit.xml read back with a JUnit reader library."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from junitparser import Failure, JUnitXml
from typer.testing import CliRunner

from tests.support.paths import REPO
from tooleval.cli import app

pytestmark = pytest.mark.slow  # the Prefect test harness's server

REFUND = REPO / "datasets" / "examples" / "refund-trajectory"
runner = CliRunner()


@pytest.fixture(scope="module")
def refund_run(tmp_path_factory, prefect_harness):
    out = tmp_path_factory.mktemp("gate") / "results"
    result = runner.invoke(app, ["run", "--dataset", str(REFUND), "--out", str(out), "--run-id", "g1"],
                           env={"COLUMNS": "250"})
    return out, result


def test_run_exits_0_whatever_the_gate_says(refund_run):
    out, result = refund_run
    assert result.exit_code == 0, result.output  # every row was scored
    assert "gate: FAIL" in result.output
    summary = json.loads((out / "runs" / "g1" / "summary.json").read_text())
    assert summary["gate"]["passed"] is False
    assert summary["blocking_rows"] == 3 and summary["rows_evaluated"] == 4


def test_only_correct_passes_and_gate_exits_1(refund_run):
    out, _ = refund_run
    result = runner.invoke(app, ["gate", "--run-id", "g1", "--out", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert "  skipped-verification#0  f1 0.8000  reference_mismatch, required_order" in lines
    assert "      missing: verify_identity" in lines
    assert "  wrong-amount#0  f1 0.6667  reference_mismatch, wrong_write_arguments" in lines
    # only the argument that differs is named; the call objects (499.9 beside 49.99) are in gate.json and junit.xml
    assert "      wrong args issue_refund: amount" in lines and "499.9" not in result.output
    assert "  looping#0  f1 0.6667  reference_mismatch, repeated_call, unexpected_tool" in lines
    assert "      extra: lookup_order x2, web_search" in lines
    assert "correct#0" not in result.output
    summary = json.loads((out / "runs" / "g1" / "summary.json").read_text())
    rows = {r["case_id"]: r for r in summary["gate"]["failing_rows"]}
    assert sorted(rows) == ["looping", "skipped-verification", "wrong-amount"]
    looping = {(v["rule"], v["tool"]) for v in rows["looping"]["violations"]}
    assert ("unexpected_tool", "web_search") in looping and ("repeated_call", "lookup_order") in looping


def test_junit_names_every_failing_row(refund_run):
    out, _ = refund_run
    runner.invoke(app, ["gate", "--run-id", "g1", "--out", str(out)])
    xml = JUnitXml.fromfile(str(out / "runs" / "g1" / "junit.xml"))
    cases = [case for suite in xml for case in suite]
    failing = sorted(c.name for c in cases if any(isinstance(r, Failure) for r in c.result))
    assert [name.split("#")[0] for name in failing] == ["looping", "skipped-verification", "wrong-amount"]
    # the passing row is counted in its slice's count case, not listed (issue 9: junit.xml stays bounded)
    # (and the dataset gate.toml's floor on slice refund, which holds)
    passed = [(c.classname, c.name) for c in cases if not c.result]
    assert passed == [("refund", "1 passing rows"), ("gate", "slice:refund")]
    props = {p.name: p.value for suite in xml for p in suite.properties()}
    assert (props["rows"], props["failing_rows"], props["listed_rows"]) == ("4", "3", "100")


def test_run_with_gate_flag_exits_with_the_verdict(refund_run, tmp_path):
    result = runner.invoke(app, ["run", "--dataset", str(REFUND), "--out", str(tmp_path / "o"), "--gate"])
    assert result.exit_code == 1


def _config(tmp_path, text: str):
    path = tmp_path / "gate.toml"
    path.write_text("schema_version = 1\n" + text)
    return path


def test_expired_waiver_fails_and_quarantine_is_listed(refund_run, tmp_path):
    out, _ = refund_run
    yesterday = (datetime.now(timezone.utc).date() - timedelta(days=1)).isoformat()
    next_year = (datetime.now(timezone.utc).date() + timedelta(days=365)).isoformat()
    waived = _config(tmp_path, f"""
[[waivers]]
case = "skipped-verification"
owner = "qa@example.com"
reason = "identity service migration"
expires = {next_year}

[[waivers]]
case = "wrong-amount"
owner = "qa@example.com"
reason = "rounding fix shipping"
expires = {next_year}

[[quarantine]]
case = "looping"
owner = "qa@example.com"
reason = "nondeterministic retry loop under investigation"
""")
    ok = runner.invoke(app, ["gate", "--run-id", "g1", "--out", str(out), "--config", str(waived)],
                       env={"COLUMNS": "250"})
    assert ok.exit_code == 0, ok.output
    assert "quarantined rows (1): looping#0" in ok.output.splitlines()
    assert "waived rows (2): skipped-verification#0, wrong-amount#0" in ok.output.splitlines()
    expired = _config(tmp_path, waived.read_text().split("\n", 1)[1].replace(next_year, yesterday, 1))
    failed = runner.invoke(app, ["gate", "--run-id", "g1", "--out", str(out), "--config", str(expired)],
                           env={"COLUMNS": "250"})
    assert failed.exit_code == 1
    assert "expired" in failed.output


def test_bad_gate_config_exits_2(refund_run, tmp_path):
    out, _ = refund_run
    bad = tmp_path / "bad.toml"
    bad.write_text("schema_version = 1\n[f1]\nmin_mean = 'high'\nunknown_key = 3\n")
    result = runner.invoke(app, ["gate", "--run-id", "g1", "--out", str(out), "--config", str(bad)],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 2 and "bad.toml" in result.output
