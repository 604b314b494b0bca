"""The command line in-process (typer's CliRunner) under the session Prefect harness: exit codes 0 / 1 / 2,
what is printed, and that a file or usage error writes nothing."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pathlib import Path

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import BUNDLED, SHARED_DATA
from tooleval.cli import app

runner = CliRunner()


@pytest.mark.usefixtures("prefect_harness")
class TestRun:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_all_rows_scored_exits_0_and_prints_stages_and_summary(self, tiny_dataset, tmp_path):
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(tiny_dataset), "--out", str(out), "--run-id", "c0"],
                               env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        for stage in ("generation", "trace-capture", "scoring", "aggregation"):
            assert stage in result.output
        assert "Completed" in result.output or "Cached" in result.output
        assert "rows with malformed calls" in result.output and "mean ragas_tool_call_f1" in result.output
        assert (out / "runs" / "c0" / "summary.json").is_file()

    @pytest.mark.slow  # the Prefect test harness's server
    def test_row_errors_exit_1_and_rows_are_still_written(self, tmp_path):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES[:2] + [dict(TINY_TRACES[0], case_id="ZZ")])
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "c1"],
                               env={"COLUMNS": "200"})
        assert result.exit_code == 1, result.output
        assert "unknown_case" in result.output and "missing_trace" in result.output
        assert json.loads((out / "runs" / "c1" / "summary.json").read_text())["rows"] == 2


class TestFileErrors:
    def test_broken_cases_line_exits_2_and_names_file_and_line(self, tiny_dataset, tmp_path):
        (tiny_dataset / "cases.jsonl").write_text('{"case_id": "A", "input": "x", "expected_calls": []}\n{oops\n')
        out = tmp_path / "results"
        result = runner.invoke(app, ["run", "--dataset", str(tiny_dataset), "--out", str(out)],
                               env={"COLUMNS": "300"})
        assert result.exit_code == 2
        assert "cases.jsonl:2:" in result.output and "Fix:" in result.output
        assert not out.exists()

    def test_unsafe_run_id_exits_2(self, tiny_dataset, tmp_path):
        result = runner.invoke(app, ["run", "--dataset", str(tiny_dataset), "--out", str(tmp_path / "o"),
                                     "--run-id", "../x"], env={"COLUMNS": "300"})
        assert result.exit_code == 2 and "'../x'" in result.output
        assert not (tmp_path / "o").exists()

    def test_missing_dataset_exits_2(self, tmp_path):
        result = runner.invoke(app, ["run", "--dataset", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
        assert result.exit_code == 2


def test_default_dataset_is_the_bundled_one():
    from flows.evaluate import DEFAULT_DATASET
    from tooleval.cli._app import BUNDLED_DATASET

    assert BUNDLED_DATASET == BUNDLED == Path(DEFAULT_DATASET)
    assert (BUNDLED_DATASET / "dataset.json").is_file()


def test_run_without_dataset_plans_the_bundled_one(tmp_path):
    # A usage error found after the bundled dataset was read: its revision is already written with other content.
    out = tmp_path / "results"
    (out / "revisions").mkdir(parents=True)
    (out / "revisions" / "gpt-4o-airline-v1.json").write_text('{"content_digest": "0000"}')
    result = runner.invoke(app, ["run", "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "revision 'gpt-4o-airline-v1' was already written" in result.output


def test_import_tau_bench(tmp_path):
    source = SHARED_DATA / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
    tools = SHARED_DATA / "tau-bench" / "tools" / "airline_tools.json"
    result = runner.invoke(app, ["import", "tau-bench", str(source), "--out", str(tmp_path / "ds"), "--tools",
                                 str(tools), "--revision", "v7"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "ds" / "dataset.json").read_text())["revision"] == "v7"
    assert len((tmp_path / "ds" / "cases.jsonl").read_text().splitlines()) == 50


def test_import_unknown_format_exits_2(tmp_path):
    result = runner.invoke(app, ["import", "nope", str(tmp_path), "--out", str(tmp_path / "ds")])
    assert result.exit_code == 2 and "unknown format" in result.output
