"""Per-tool tables of ``summary.json`` and the report keep their worst entries and a count of the rest, however
many distinct tool names a corpus holds (1,000,000 of them wrote a 138 MB summary and a 254 MB report); the full
table stays in SQL over the rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.datasets import tool_call, trace, write_dataset
from tests.support.paths import GOLDEN, REPO
from tooleval.cli._report import TOP_TOOLS
from tooleval.runs.documents import TABLE_ENTRIES_KEPT, bounded_tables, read_summary

TOOLS = 1500


def test_a_table_keeps_its_worst_entries_and_counts_the_rest():
    table = {f"t{i:04d}": {"missing": i % 5, "extra": 1, "wrong_args": 0} for i in range(1000)}
    cut = bounded_tables({"failures_by_tool": table, "gate": {"counts": {"failures_by_tool_family": {
        f"f{i}": i for i in range(250)}}}}, kept=10)
    kept = cut["failures_by_tool"]
    assert len(kept) == 10 and all(counts["missing"] == 4 for counts in kept.values())  # the worst: 4 + 1 each
    assert list(kept) == sorted(kept) == [f"t{i:04d}" for i in range(4, 50, 5)]
    left = cut["omitted_entries"]["failures_by_tool"]
    assert left == {"entries": 990, "counts": {"extra": 990, "missing": sum(i % 5 for i in range(1000)) - 40,
                                                "wrong_args": 0}}
    families = cut["gate"]["counts"]["failures_by_tool_family"]
    assert list(families) == sorted(f"f{i}" for i in range(240, 250))
    assert cut["omitted_entries"]["failures_by_tool_family"] == {"entries": 240, "counts": sum(range(240))}
    small = {"failures_by_tool": {"a": {"missing": 1}}}
    assert bounded_tables(small) == small  # nothing cut, nothing added


def test_summary_v4_golden_reads():
    summary = read_summary(GOLDEN / "summary_v4.json")
    assert summary.summary_version == 4 and summary.rows == json.loads((GOLDEN / "summary_v3.json").read_text())["rows"]
    assert summary.omitted_entries["failures_by_tool"]["entries"] == 2


@pytest.mark.slow  # `tooleval run` in a process of its own
def test_a_run_over_many_distinct_tools_writes_bounded_documents(tmp_path):
    cases = [{"case_id": f"c{i:04d}", "input": "go", "expected_calls": [{"name": f"t{i:04d}", "args": {}}]}
             for i in range(TOOLS)]
    traces = [trace(f"c{i:04d}", 0, [tool_call(f"u{i:04d}", "{}")]) for i in range(TOOLS)]
    dataset = write_dataset(tmp_path / "d", cases, traces)
    out = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="250", PREFECT_SERVER_ANALYTICS_ENABLED="false", TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out",
                           str(out), "--run-id", "many"], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "runs/many/summary.json").read_text())
    assert summary["summary_version"] == 4
    assert len(summary["failures_by_tool"]) == TABLE_ENTRIES_KEPT  # 3,000 entries before
    left = summary["omitted_entries"]["failures_by_tool"]
    assert left["entries"] == 2 * TOOLS - TABLE_ENTRIES_KEPT
    kept = summary["failures_by_tool"].values()
    assert sum(c["missing"] + c["extra"] for c in kept) + sum(left["counts"].values()) == 2 * TOOLS
    report = (out / "runs/many/report.html").read_text()
    omitted = sorted({f"t{i:04d}" for i in range(TOOLS)} | {f"u{i:04d}" for i in range(TOOLS)}
                     - set(summary["failures_by_tool"]))
    assert omitted[-1] == f"u{TOOLS - 1:04d}" and f'"{omitted[-1]}"' not in report
    more = 2 * TOOLS - TOP_TOOLS  # each tool failed once (a missing t call, an extra u call)
    assert f"... and {more} more tools with {more} failed calls (every tool: tooleval sql" in " ".join(
        done.stdout.split())
    # the full table is in SQL
    sql = subprocess.run([sys.executable, "-m", "tooleval.cli", "sql", "--out", str(out), "--format", "jsonl",
                          "select count(distinct m.name) as n from rows, unnest(missing_calls) as t(m)"],
                         env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert json.loads(sql.stdout.splitlines()[0]) == {"n": TOOLS}, sql.stdout + sql.stderr
