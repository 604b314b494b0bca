"""The pytest plugin: a dataset's rows as items judged by the release gate, run from folders with no other tests.

The bundled tau-bench airline data must split exactly as ``tooleval gate`` splits the published bundled run (83
passing rows, 117 failing), plus a passing ``dataset-checks`` item. A small dataset shows the other outcomes: a
waived row is xfail with the waiver's owner and expiry, a quarantined case skipped with its reason, a case without
a trace fails ``dataset-checks``, ``-k`` selects cases, and ``tooleval_case`` parametrizes a test by case.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib.metadata import entry_points

import pytest

import tooleval.testing._dataset  # noqa: F401  loaded here: pytester's in-process runs drop what they import,
import tooleval.testing.pytest_plugin  # noqa: F401  and numpy cannot be imported twice in one process
from tests.support.datasets import tool_call, trace, write_dataset
from tests.support.paths import BUNDLED

pytestmark = pytest.mark.slow  # pytest in subprocesses, each scoring the bundled run

pytest_plugins = ["pytester"]


INSTALLED = any(ep.name == "tooleval" for ep in entry_points(group="pytest11"))
"""Whether the installed package's ``pytest11`` entry point loads the plugin (pytest refuses a plugin registered
twice under two names, so the tests add it only when it is not)."""


def plugin_args() -> list[str]:
    """``-p`` for the plugin in a pytest process of its own, unless the entry point loads it."""
    return [] if INSTALLED else ["-p", "tooleval.testing.pytest_plugin"]


def plugins() -> list:
    """The plugin for an in-process run (as a module object: ``-p`` would ask pytest to rewrite the asserts of a
    module this process has already imported), unless the entry point loads it."""
    return [] if INSTALLED else [tooleval.testing.pytest_plugin]


def outcomes(reprec) -> dict[str, str]:
    """Item name -> outcome (``passed``, ``failed``, ``skipped``, ``xfailed``) of an inline run."""
    found = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        name = report.nodeid.split("::")[-1]
        if report.when == "call" or (report.when == "setup" and report.skipped):
            found[name] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    return found


class TestBundled:
    def test_the_split_is_tooleval_gates(self, pytester, bundled_pair):
        from tooleval.rules import GateTally
        from tooleval.runs.gate import GATE_COLUMNS, gate_config_for
        from tooleval.storage import committed_files, read_versioned

        reprec = pytester.inline_run("--tooleval-dataset", str(BUNDLED), "-p", "no:cacheprovider", plugins=plugins())
        got = outcomes(reprec)
        assert got.pop("dataset-checks") == "passed"
        assert len(got) == 200 and set(got.values()) == {"passed", "failed"}
        tally = GateTally(gate_config_for(BUNDLED), today=datetime.now(timezone.utc).date())
        gate = {}
        for path in committed_files(bundled_pair, "rows", run_id="base"):
            for row in read_versioned(path, "rows", GATE_COLUMNS).to_pylist():
                gate[f"{row['case_id']}[{row['trial']}]"] = "failed" if tally.add(row).rules else "passed"
        assert got == gate
        assert list(got.values()).count("passed") == 83 and list(got.values()).count("failed") == 117
        summary = json.loads((bundled_pair / "runs" / "base" / "summary.json").read_text())
        assert summary["gate"]["counts"]["blocking_rows"] == 117 and summary["gate"]["counts"]["rows_evaluated"] == 200

    def test_a_failing_row_shows_its_rules_and_call_diff(self, pytester):
        result = pytester.runpytest("--tooleval-dataset", str(BUNDLED), "-k", "39[1]",
                                    "-p", "no:cacheprovider", plugins=plugins())
        result.assert_outcomes(failed=1, deselected=200)
        result.stdout.fnmatch_lines([
            "*case '39' trial 1*",
            "case '39' trial 1 fails the gate: forbidden_tool",
            "tool calls do not match (unordered): 2 extra",
            '  + cancel_reservation(reservation_id="H8Q05L")  (not expected)',
            "  ! forbidden_tool: call #3 cancel_reservation(*",
        ])


ORDER = {"name": "get_order", "args": {"id": "A"}}
CASES = [
    {"case_id": "ok", "input": "look up A", "expected_calls": [ORDER]},
    {"case_id": "bad", "input": "look up A", "expected_calls": [ORDER], "forbidden_tools": ["refund"]},
    {"case_id": "waived", "input": "look up A", "expected_calls": [ORDER], "forbidden_tools": ["refund"]},
    {"case_id": "held", "input": "look up A", "expected_calls": [ORDER], "forbidden_tools": ["refund"]},
    {"case_id": "untraced", "input": "look up A", "expected_calls": [ORDER]},
    {"case_id": "more", "input": "look up A", "expected_calls": [ORDER], "match_mode": "superset"},
]
LOOKUP = tool_call("get_order", '{"id": "A"}')
REFUND = tool_call("refund", '{"id": "A"}')
TRACES = [trace("ok", 0, [LOOKUP]), trace("bad", 0, [LOOKUP, REFUND]), trace("waived", 0, [LOOKUP, REFUND]),
          trace("held", 0, [LOOKUP, REFUND]), trace("more", 0, [LOOKUP, LOOKUP])]
# Judged by the rules alone: the waived and held rows also differ from their reference (an extra refund call),
# which the default row outcome would fail as reference_mismatch beside the waived or quarantined rule.
GATE = """schema_version = 1
row_outcome = "no_blocking"
[[waivers]]
case = "waived"
rule = "forbidden_tool"
owner = "qa-lead"
reason = "refund tool fix due"
expires = 2999-01-01

[[quarantine]]
case = "held"
owner = "ml-oncall"
reason = "upstream sandbox flaky"
"""


@pytest.fixture
def small(tmp_path):
    folder = write_dataset(tmp_path / "small", CASES, TRACES)
    (folder / "gate.toml").write_text(GATE)
    return folder


class TestOutcomes:
    def test_each_outcome(self, pytester, small):
        result = pytester.runpytest("--tooleval-dataset", str(small), "-rfsxX", "-p", "no:cacheprovider",
                                    plugins=plugins())
        result.assert_outcomes(passed=2, failed=2, skipped=1, xfailed=1)
        result.stdout.fnmatch_lines_random([
            # the node id is relative to pytest's root folder, which may sit beside the dataset's folder
            "XFAIL *small::waived[[]0[]] - forbidden_tool waived by qa-lead until 2999-01-01: refund tool fix due",
            "SKIPPED [[]1[]] *: quarantined by ml-oncall: upstream sandbox flaky",
            "FAILED *small::bad[[]0[]]*",
            "FAILED *small::dataset-checks*",
        ])
        result.stdout.fnmatch_lines(["the gate fails the dataset:",
                                     "  - case 'untraced' has no scored row (missing_trace: no trace in * for this case)"])

    def test_the_case_mode_reaches_the_row(self, small):
        from tooleval.testing._dataset import judge_dataset

        rows = {row.case_id: row for row in judge_dataset(small).rows}
        assert (rows["more"].match_mode, rows["more"].calls_match, rows["more"].exact_match) == ("superset", True, False)
        assert (rows["ok"].match_mode, rows["ok"].calls_match) == ("unordered", True)

    def test_k_selects_cases(self, pytester, small):
        reprec = pytester.inline_run("--tooleval-dataset", str(small), "-k", "ok or bad",
                                     "-p", "no:cacheprovider", plugins=plugins())
        assert outcomes(reprec) == {"ok[0]": "passed", "bad[0]": "failed"}

    def test_an_expired_waiver_fails_the_dataset(self, pytester, small, tmp_path):
        other = tmp_path / "expired.toml"
        other.write_text(GATE.replace("2999-01-01", "2020-01-01"))
        reprec = pytester.inline_run("--tooleval-dataset", str(small), "--tooleval-gate", str(other),
                                     "-p", "no:cacheprovider", plugins=plugins())
        got = outcomes(reprec)
        assert got["waived[0]"] == "failed" and got["dataset-checks"] == "failed"
        (report,) = [r for r in reprec.getreports("pytest_runtest_logreport")
                     if r.nodeid.endswith("dataset-checks") and r.when == "call"]
        assert "waiver (case 'waived', rule 'forbidden_tool', owner qa-lead) expired on 2020-01-01" in str(report.longrepr)

    def test_other_traces(self, pytester, small, tmp_path):
        fixed = tmp_path / "fixed.jsonl"
        fixed.write_text("".join(json.dumps(trace(c["case_id"], 0, [LOOKUP])) + "\n" for c in CASES))
        reprec = pytester.inline_run("--tooleval-dataset", str(small), "--tooleval-traces", str(fixed),
                                     "-p", "no:cacheprovider", plugins=plugins())
        assert set(outcomes(reprec).values()) == {"passed", "skipped"}  # the quarantined case stays skipped

    def test_a_bad_dataset_is_a_collection_error_naming_the_file(self, pytester, tmp_path):
        folder = write_dataset(tmp_path / "broken", CASES, TRACES)
        (folder / "cases.jsonl").write_text("{not json\n")
        result = pytester.runpytest("--tooleval-dataset", str(folder), "-p", "no:cacheprovider", plugins=plugins())
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.stdout.fnmatch_lines(["tooleval: *broken/cases.jsonl:1: not valid JSON*"])

    def test_without_the_option_nothing_is_added(self, pytester):
        pytester.makepyfile(test_plain="def test_one():\n    pass\n")
        reprec = pytester.inline_run("-p", "no:cacheprovider", plugins=plugins())
        assert outcomes(reprec) == {"test_one": "passed"}


class TestCaseFixture:
    TEST = """
def test_agent(tooleval_case):
    calls = [{"name": "get_order", "args": {"id": "A"}}]
    if tooleval_case.case_id == "bad":
        calls.append({"name": "refund", "args": {"id": "A"}})
    assert tooleval_case.expected_calls == [{"name": "get_order", "args": {"id": "A"}}]
    tooleval_case.assert_calls(calls)
"""

    def test_a_test_per_case_with_its_rules(self, pytester, small):
        pytester.makepyfile(test_agent=self.TEST)
        reprec = pytester.inline_run("--tooleval-dataset", str(small), "-p", "no:cacheprovider",
                                     "test_agent.py", plugins=plugins())
        got = {name: outcome for name, outcome in outcomes(reprec).items() if name.startswith("test_agent")}
        assert got == {"test_agent[ok]": "passed", "test_agent[bad]": "failed", "test_agent[waived]": "passed",
                       "test_agent[held]": "passed", "test_agent[untraced]": "passed", "test_agent[more]": "passed"}

    def test_without_a_dataset_the_test_is_skipped(self, pytester):
        pytester.makepyfile(test_agent=self.TEST)
        result = pytester.runpytest("-rs", "-p", "no:cacheprovider", plugins=plugins())
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*tooleval_case needs --tooleval-dataset DIR*"])


def test_no_item_starts_prefect(pytester, repo_root):
    """In a process of its own (this one has Prefect loaded): the plugin and its items never import Prefect."""
    pytester.makeconftest("""
import sys

def pytest_sessionfinish(session):
    with open("modules.txt", "w") as handle:
        handle.write("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] == "prefect")))
""")
    dataset = repo_root / "datasets" / "examples" / "refund-trajectory"
    result = pytester.runpytest_subprocess(*plugin_args(), "--tooleval-dataset", str(dataset), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)  # seed 004: only "correct" passes, and the dataset checks
    assert (pytester.path / "modules.txt").read_text() == ""
