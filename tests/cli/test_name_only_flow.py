"""Content capture off, end to end: OpenLLMetry writes the spans (against the scripted chat server on 127.0.0.1),
``tooleval import otlp`` reads them, ``tooleval run`` scores them, ``tooleval gate`` judges them.

The same four-case agent plan is traced twice by the real producer: once with content capture on
(``TRACELOOP_TRACE_CONTENT=true``, tool spans with ``gen_ai.tool.call.arguments``) and once with it off (chat spans
without messages, tool spans without arguments: the GenAI conventions make both opt-in). Imported from one folder,
each case has trial 0 (captured, traced first) and trial 1 (names only). The model emits (tests/importers/
span_producers.py ``default_plan(4)``): case-0 get_order(A-0), refund(A-0, 250); case-1 get_order(A-1); case-2
get_order(A-2); case-3 get_order(A-3), refund(A-3, 253). The references below differ on purpose:

=======  ===========================================  ==========================  =========================
case     reference                                    trial 0 (arguments)         trial 1 (names only)
=======  ===========================================  ==========================  =========================
case-0   get_order(A-0), refund(A-0, 250)             tp 2: f1 1.0, exact         tp 2: f1 1.0, not exact
case-1   get_order(A-1), refund(A-1, 100)             tp 1, fn 1: f1 2/3          tp 1, fn 1: f1 2/3
case-2   get_order(A-9)                               wrong args: tp 0, f1 0.0    by name: tp 1, f1 1.0
case-3   cancel_order(A-3)                            tp 0, fp 2, fn 1: f1 0.0    tp 0, fp 2, fn 1: f1 0.0
=======  ===========================================  ==========================  =========================

So mean f1 (argument-level rows) = (1 + 2/3 + 0 + 0) / 4 = 5/12; exact-match rows 1; name-only rows 4 with mean
name-level f1 (1 + 2/3 + 1 + 0) / 4 = 2/3. ragas sees trial 1's calls with ``{}`` arguments, so only trial 0's case-0
(1.0) and case-1 (precision 1, recall 1/2: 0.6667) score: mean (1 + 0.6667) / 8 = 0.2083375. case-2 is the point:
its arguments were wrong, and the name-only trial cannot know it.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.paths import REPO
from tooleval.cli import app
from tooleval.storage import connect

pytestmark = pytest.mark.slow  # the Prefect test harness's server

runner = CliRunner()

REFERENCES = [
    {"case_id": "case-0", "input": "case-0: please help", "expected_calls": [
        {"name": "get_order", "args": {"order_id": "A-0"}},
        {"name": "refund", "args": {"order_id": "A-0", "amount_cents": 250}}]},
    {"case_id": "case-1", "input": "case-1: please help", "expected_calls": [
        {"name": "get_order", "args": {"order_id": "A-1"}},
        {"name": "refund", "args": {"order_id": "A-1", "amount_cents": 100}}]},
    {"case_id": "case-2", "input": "case-2: please help", "expected_calls": [
        {"name": "get_order", "args": {"order_id": "A-9"}}]},
    {"case_id": "case-3", "input": "case-3: please help", "expected_calls": [
        {"name": "cancel_order", "args": {"order_id": "A-3"}}]},
]


def _producers():
    name = "tooleval_tests_span_producers"
    if name not in sys.modules:
        path = REPO / "tests" / "importers" / "span_producers.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def produced_run(tmp_path_factory, prefect_harness) -> tuple[Path, str]:
    """The produced files imported into one dataset and run once as ``names``: (results folder, run output)."""
    producers = _producers()
    root = tmp_path_factory.mktemp("name-only")
    source = root / "spans"
    source.mkdir()
    plan = producers.default_plan(4)
    producers.produce("openllmetry", source / "1-capture-on.jsonl", plan)  # traced first: trial 0
    producers.produce("openllmetry-nocontent", source / "2-capture-off.jsonl", plan)
    references = root / "references.jsonl"
    references.write_text("".join(json.dumps(line) + "\n" for line in REFERENCES))
    dataset = root / "ds"
    imported = runner.invoke(app, ["import", "otlp", str(source), "--out", str(dataset), "--references",
                                   str(references)])
    assert imported.exit_code == 0, imported.output
    assert "read 8, converted 8, skipped 0" in imported.output
    out = root / "results"
    result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "names"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output  # every row was scored, whatever the gate says
    accepting = root / "accept.toml"
    accepting.write_text("schema_version = 1\naccept_name_only = true\n")
    again = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "accepted",
                                "--gate-config", str(accepting)])
    assert again.exit_code == 0, again.output
    return out, result.output


@pytest.fixture
def run(produced_run) -> Path:
    return produced_run[0]


def test_the_imported_trace_marks_the_calls(run):
    with gzip.open(run.parent / "ds" / "traces.jsonl.gz", "rt") as handle:
        (trace,) = [t for t in map(json.loads, handle) if (t["case_id"], t.get("trial")) == ("case-0", 1)]
    calls = [c for m in trace["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    assert [(c["function"], c["arguments_captured"]) for c in calls] == [
        ({"name": "get_order"}, False), ({"name": "refund"}, False)]


def test_rows_say_name_only_with_the_rule(run):
    con = connect(run)
    rows = {(c, t): rest for c, t, *rest in con.execute(
        "SELECT case_id, trial, name_only, round(f1, 4), exact_match, calls_match, ragas_tool_call_f1, "
        "list_transform(list_filter(violations, lambda v: v.rule = 'args_not_captured'), lambda v: v.tool), "
        "failure_owner, provenance_status FROM rows WHERE run_id = 'names' ORDER BY 1, 2").fetchall()}
    assert rows == {
        ("case-0", 0): [False, 1.0, True, True, 1.0, [], None, "ok"],
        ("case-0", 1): [True, 1.0, False, True, 0.0, ["get_order", "refund"], None, "missing"],
        ("case-1", 0): [False, 0.6667, False, False, 0.6667, [], "agent", "ok"],
        ("case-1", 1): [True, 0.6667, False, False, 0.0, ["get_order"], "agent", "missing"],
        ("case-2", 0): [False, 0.0, False, False, 0.0, [], "agent", "ok"],
        ("case-2", 1): [True, 1.0, False, True, 0.0, ["get_order"], None, "missing"],
        ("case-3", 0): [False, 0.0, False, False, 0.0, [], "agent", "ok"],
        ("case-3", 1): [True, 0.0, False, False, 0.0, ["get_order", "refund"], "agent", "missing"],
    }
    observed = con.execute("SELECT observed_calls FROM rows WHERE case_id = 'case-2' AND trial = 1").fetchone()[0]
    assert observed == [{"name": "get_order", "args_json": None, "args_raw": None, "parse_error": None}]


def test_summary_and_report_keep_name_only_rows_apart(run, produced_run):
    summary = json.loads((run / "runs" / "names" / "summary.json").read_text())
    assert summary["summary_version"] == 4 and summary["versions"]["row_schema"] == 7
    assert summary["rows"] == 8 and summary["exact_match_rows"] == 1
    assert summary["mean_f1"] == pytest.approx(5 / 12)
    assert summary["name_only_rows"] == 4 and summary["mean_name_f1"] == pytest.approx(2 / 3)
    # call counts cover every row: tp 2+1+0+0 + 2+1+1+0, fp 0+0+1+2 + 0+0+0+2, fn 0+1+1+1 + 0+1+0+1
    assert (summary["tp"], summary["fp"], summary["fn"]) == (7, 5, 5)
    assert (summary["expected_calls"], summary["observed_calls"]) == (12, 12)
    assert summary["mean_ragas_tool_call_f1"] == pytest.approx((1 + 0.6667) / 8)
    assert summary["drift"]["verdict"] == "ok"  # ragas and the legacy path both read unknown arguments as {}
    assert summary["legacy"]["value"] == pytest.approx((1 + 0.6667) / 8)
    html = (run / "runs" / "names" / "report.html").read_text()
    assert "name-only rows (arguments not captured; out of mean f1 and exact-match rows)" in html
    printed = produced_run[1]  # what `tooleval run` printed
    assert "name-only rows (arguments not captured)" in printed and "mean name-level f1 of name-only rows" in printed
    assert "0.6667" in printed and "0.4167" in printed


def test_pass_at_k_and_compare_follow_the_gate(run):
    """Under the default gate only case-0's trial 0 passes: pass@1 = (1/2 + 0 + 0 + 0) / 4 = 0.125 (were name-only
    rows judged by their names, case-0 trial 1 and case-2 trial 1 would pass too: 0.375). The run ``accepted``
    (same traces, gate.toml ``accept_name_only = true``) passes those: (2/2 + 0 + 1/2 + 0) / 4 = 0.375."""
    names = json.loads((run / "runs" / "names" / "summary.json").read_text())
    accepted = json.loads((run / "runs" / "accepted" / "summary.json").read_text())
    assert names["variability"]["pass@k"]["1"] == 0.125 and accepted["variability"]["pass@k"]["1"] == 0.375
    assert (names["row_outcome"]["accept_name_only"], accepted["row_outcome"]["accept_name_only"]) == (False, True)
    assert "fails (args_not_captured)" in names["row_outcome"]["passes_when"]
    assert accepted["failures_by_rule"] == {"reference_mismatch": 5}
    compared = runner.invoke(app, ["compare", "names", "accepted", "--out", str(run), "--json"])
    assert compared.exit_code == 0, compared.output
    result = json.loads(compared.stdout)
    # pass rate over the 8 rows: 1/8 under the default, 3/8 when names are accepted
    assert (result["overall"]["pass_rate"]["base"], result["overall"]["pass_rate"]["head"]) == (0.125, 0.375)
    verdicts = {(r["case_id"], r["trial"]): (r["base_verdict"], r["base_rules"], r["head_verdict"], r["head_rules"])
                for r in result["changed_rows"]}
    # every name-only row fails under the default (args_not_captured); accepted, each is judged on its names:
    # case-0 and case-2 match and pass; case-1 (refund missing) and case-3 (cancel_order missing) still fail, as
    # reference_mismatch, a verdict that did not change, so they are not listed
    assert verdicts == {("case-0", 1): ("fail", ["args_not_captured"], "pass", []),
                        ("case-2", 1): ("fail", ["args_not_captured"], "pass", [])}


def test_the_gate_fails_them_unless_gate_toml_accepts_names(run, tmp_path):
    def gate(config: str | None) -> tuple[int, dict]:
        args = ["gate", "--run-id", "names", "--out", str(run), "--format", "json"]
        if config is not None:
            (tmp_path / "gate.toml").write_text(config)
            args += ["--config", str(tmp_path / "gate.toml")]
        result = runner.invoke(app, args)
        return result.exit_code, json.loads(result.stdout)

    # default: trial 0's case-1, 2, 3 differ from their references; all four name-only rows fail on their own rule
    code, verdict = gate(None)
    assert code == 1 and verdict["counts"]["blocking_rows"] == 7
    assert verdict["counts"]["failures_by_rule"] == {"args_not_captured": 4, "reference_mismatch": 5}
    # judged by the blocking rules alone, the name-only rows still fail: a match by name vouches for no argument
    code, verdict = gate('schema_version = 1\nrow_outcome = "no_blocking"\n')
    assert code == 1 and verdict["counts"]["failures_by_rule"] == {"args_not_captured": 4}
    code, verdict = gate('schema_version = 1\nrow_outcome = "no_blocking"\naccept_name_only = true\n')
    assert code == 0 and verdict["passed"] and verdict["counts"]["advisory_violations"] == 6
    # accepted under the default row outcome, the name-only rows pass or fail on their names: case-0 and case-2
    code, verdict = gate('schema_version = 1\naccept_name_only = true\n')
    assert code == 1 and verdict["counts"]["failures_by_rule"] == {"reference_mismatch": 5}
