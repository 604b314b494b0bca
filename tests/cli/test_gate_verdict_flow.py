"""One verdict per row, the gate's: a real run whose gate goes from FAIL to PASS through waivers alone, then
``compare``, ``rescore``, the report and the pytest plugin, each reading the verdict the run stored on its rows
(``gate_verdict``, ``gate_rules``).

The dataset: four cases ``c0``..``c3``, one trial each, each expecting ``get(id=i)``. The recorded agent calls
``get(id=0)`` and ``get(id=1)`` right, and ``get(id=102)``, ``get(id=103)`` for ``c2`` and ``c3`` (f1 0: one fn,
one fp). No rule of the dataset fires, so the row column ``blocking`` is false on all four rows; the default gate
(``row_outcome = "match"``) fails c2 and c3 as ``reference_mismatch``. Worked by hand:

* run ``before`` (no gate.toml): gate FAIL, 2 blocking rows; verdicts pass, pass, fail, fail; pass rate 2/4 = 0.5.
* run ``after`` (a gate.toml waiving ``reference_mismatch`` on c2 and on c3, same traces): gate PASS, 0 blocking
  rows, 2 waived; verdicts pass, pass, waived, waived; pass rate 4/4 = 1.0 (a waived row is one the gate passes).
* ``compare before after``: f1 delta 0 (same calls), pass_rate 0.5 -> 1.0, delta +0.5; the two rows c2#0 and c3#0
  changed verdict (fail -> waived); no rule newly fails. Judged by ``blocking`` and ``calls_match`` alone, as
  compare did before the verdict was stored, both runs would be 0.5 with no row changed.
* ``rescore after``: the same verdicts, gate PASS, pass rate 1.0000 printed beside it.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import tooleval.testing._dataset  # noqa: F401  loaded here: pytester's in-process runs drop what they import
import tooleval.testing.pytest_plugin  # noqa: F401
from tests.support.datasets import tool_call, trace, write_dataset
from tooleval.cli import app
from tooleval.runs.compare import compare_runs
from tooleval.storage import connect

pytestmark = pytest.mark.slow  # the Prefect test harness's server

pytest_plugins = ["pytester"]

runner = CliRunner()
WIDE = {"COLUMNS": "250"}

CASES = [{"case_id": f"c{i}", "input": "look up", "expected_calls": [{"name": "get", "args": {"id": i}}]}
         for i in range(4)]
TRACES = [trace(f"c{i}", 0, [tool_call("get", json.dumps({"id": i if i < 2 else 100 + i}))]) for i in range(4)]
WAIVERS = """schema_version = 1
[[waivers]]
case = "c2"
rule = "reference_mismatch"
owner = "qa"
reason = "the reference of c2 is under review"
expires = 2999-01-01

[[waivers]]
case = "c3"
rule = "reference_mismatch"
owner = "qa"
reason = "the reference of c3 is under review"
expires = 2999-01-01
"""


def verdicts(out, run_id: str) -> list[tuple]:
    return connect(out).execute(
        "SELECT case_id, trial, gate_verdict, gate_rules, blocking FROM rows WHERE run_id = $r ORDER BY 1, 2",
        {"r": run_id}).fetchall()


def summary(out, run_id: str) -> dict:
    return json.loads((out / "runs" / run_id / "summary.json").read_text())


@pytest.fixture(scope="module")
def waived_runs(tmp_path_factory, prefect_harness):
    """The dataset and a results folder with ``before`` (default gate), ``after`` (the waivers, same revision:
    gate.toml is not part of the dataset's content) and ``again`` (``tooleval rescore after``)."""
    base = tmp_path_factory.mktemp("gate-verdict")
    dataset = write_dataset(base / "d", CASES, TRACES)
    out = base / "results"
    before = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "before"], env=WIDE)
    assert before.exit_code == 0, before.output
    (dataset / "gate.toml").write_text(WAIVERS)
    after = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "after"], env=WIDE)
    assert after.exit_code == 0, after.output
    again = runner.invoke(app, ["rescore", "--run-id", "after", "--to-run-id", "again", "--out", str(out)], env=WIDE)
    assert again.exit_code == 0, again.output
    return dataset, out, {"before": before.output, "after": after.output, "again": again.output}


def test_the_runs_store_the_gates_verdict(waived_runs):
    _, out, printed = waived_runs
    assert verdicts(out, "before") == [("c0", 0, "pass", [], False), ("c1", 0, "pass", [], False),
                                       ("c2", 0, "fail", ["reference_mismatch"], False),
                                       ("c3", 0, "fail", ["reference_mismatch"], False)]
    assert verdicts(out, "after") == [("c0", 0, "pass", [], False), ("c1", 0, "pass", [], False),
                                      ("c2", 0, "waived", ["reference_mismatch"], False),
                                      ("c3", 0, "waived", ["reference_mismatch"], False)]
    gates = {run: summary(out, run)["gate"] for run in ("before", "after")}
    assert (gates["before"]["passed"], gates["before"]["counts"]["blocking_rows"]) == (False, 2)
    assert (gates["after"]["passed"], gates["after"]["counts"]["blocking_rows"],
            gates["after"]["counts"]["waived_rows"]) == (True, 0, 2)
    assert "gate: FAIL (2 blocking rows)" in printed["before"] and "gate: PASS" in printed["after"]
    # the pass rate of each run follows the gate: 2 of 4, then 4 of 4
    assert summary(out, "before")["variability"]["pass_rate"] == 0.5
    assert summary(out, "after")["variability"]["pass_rate"] == 1.0


def test_compare_reads_the_stored_verdicts(waived_runs):
    _, out, _ = waived_runs
    result = compare_runs(out, "before", "after")
    overall = result["overall"]
    assert overall["f1"]["delta"] == 0.0
    assert (overall["pass_rate"]["base"], overall["pass_rate"]["head"], overall["pass_rate"]["delta"]) == (
        0.5, 1.0, 0.5)
    assert result["changed_count"] == 2
    assert [(r["case_id"], r["base_verdict"], r["head_verdict"], r["base_rules"], r["head_rules"])
            for r in result["changed_rows"]] == [("c2", "fail", "waived", ["reference_mismatch"], []),
                                                 ("c3", "fail", "waived", ["reference_mismatch"], [])]
    assert result["new_failing_rules"] == {}
    # the other way round the waived rows fail again: reference_mismatch newly fails on both
    back = compare_runs(out, "after", "before")
    assert back["overall"]["pass_rate"]["delta"] == -0.5
    assert back["new_failing_rules"] == {"reference_mismatch": [["c2", 0], ["c3", 0]]}
    printed = runner.invoke(app, ["compare", "before", "after", "--out", str(out)], env=WIDE)
    assert printed.exit_code == 0, printed.output
    assert "fail (reference_mismatch)" in printed.output and "waived" in printed.output
    assert "+0.5000" in printed.output


def test_rescore_reads_the_same_verdict(waived_runs):
    _, out, printed = waived_runs
    assert [r[:4] for r in verdicts(out, "again")] == [r[:4] for r in verdicts(out, "after")]
    assert summary(out, "again")["gate"]["passed"] is True
    assert summary(out, "again")["variability"]["pass_rate"] == 1.0
    assert "pass rate 1.0000" in printed["again"] and "gate: PASS" in printed["again"]
    same = compare_runs(out, "after", "again")
    assert same["changed_count"] == 0 and same["overall"]["pass_rate"]["delta"] == 0.0


def test_the_report_counts_the_gates_failing_rows(waived_runs):
    _, out, _ = waived_runs
    for run, failing in (("before", 2), ("after", 0)):
        stored = connect(out).execute("SELECT count(*) FROM rows WHERE run_id = $r AND gate_verdict = 'fail'",
                                      {"r": run}).fetchone()[0]
        assert stored == failing == summary(out, run)["gate"]["counts"]["blocking_rows"]
        html = (out / "runs" / run / "report.html").read_text()
        assert f"{failing} row(s) fail the gate" in html


def outcomes(reprec) -> dict[str, str]:
    """Item name -> outcome (``passed``, ``failed``, ``skipped``, ``xfailed``) of an inline pytest run."""
    found = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        name = report.nodeid.split("::")[-1]
        if report.when == "call" or (report.when == "setup" and report.skipped):
            found[name] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    return found


def test_the_plugin_agrees_with_the_gate(waived_runs, pytester, tmp_path):
    from importlib.metadata import entry_points

    dataset, out, _ = waived_runs
    plugins = [] if any(ep.name == "tooleval" for ep in entry_points(group="pytest11")) else [
        tooleval.testing.pytest_plugin]
    waived = outcomes(pytester.inline_run("--tooleval-dataset", str(dataset), "-p", "no:cacheprovider",
                                          plugins=plugins))
    assert waived == {"c0[0]": "passed", "c1[0]": "passed", "c2[0]": "xfailed", "c3[0]": "xfailed",
                      "dataset-checks": "passed"}
    default = tmp_path / "default.toml"
    default.write_text("schema_version = 1\n")
    failing = outcomes(pytester.inline_run("--tooleval-dataset", str(dataset), "--tooleval-gate", str(default),
                                           "-p", "no:cacheprovider", plugins=plugins))
    assert [name for name, got in failing.items() if got == "failed"] == ["c2[0]", "c3[0]"]
    assert len([1 for got in failing.values() if got == "failed"]) == summary(out, "before")["gate"]["counts"][
        "blocking_rows"]


def test_the_bundled_run_stores_the_gates_117(bundled_pair):
    """The bundled run: its gate.toml judges by the rules alone (``no_blocking``), so the rows stored as ``fail``
    are the gate's 117 blocking rows, and the report counts the same."""
    rows = connect(bundled_pair).execute(
        "SELECT gate_verdict, count(*) FROM rows WHERE run_id = 'base' GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("fail", 117), ("pass", 83)]
    assert summary(bundled_pair, "base")["gate"]["counts"]["blocking_rows"] == 117
    assert "117 row(s) fail the gate" in (bundled_pair / "runs" / "base" / "report.html").read_text()
