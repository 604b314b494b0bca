"""Commands over existing runs and data, as a new user meets them: ordering of the legacy series, diagnostic
rescores, exact error positions, `sql` formats and refusals (exit 2, no traceback)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tooleval.cli import app
from tooleval.storage import connect

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


@pytest.fixture(scope="module")
def published(tmp_path_factory, prefect_harness):
    """The tiny dataset and a results folder with two runs, published once for the module (each run costs
    seconds of Prefect bookkeeping)."""
    base = tmp_path_factory.mktemp("cli-commands")
    dataset = write_dataset(base / "d", TINY_CASES, TINY_TRACES)
    out = base / "out"
    for run_id in ("nightly-1", "nightly-2"):  # the second over unchanged inputs: every stage from the cache
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", run_id])
        assert result.exit_code == 0, result.output
    return dataset, out


@pytest.fixture
def run_folder(published, tmp_path):
    """A copy of the published results folder of its own for each test (tests publish more runs into it)."""
    dataset, out = published
    copy = tmp_path / "out"
    shutil.copytree(out, copy, symlinks=True)
    return dataset, copy


@pytest.mark.slow  # the Prefect test harness's server
def test_cached_runs_publish_their_own_computed_at(run_folder):
    _, out = run_folder
    series = connect(out).execute(
        "SELECT run_id, value, rows, computed_at FROM legacy_scalars ORDER BY computed_at").fetchall()
    assert [(r[0], r[1], r[2]) for r in series] == [("nightly-1", 0.375, 4), ("nightly-2", 0.375, 4)]
    assert series[0][3] < series[1][3]


@pytest.mark.slow  # the Prefect test harness's server
def test_rescore_of_one_row_publishes_no_legacy_scalar(run_folder):
    _, out = run_folder
    result = runner.invoke(app, ["rescore", "--run-id", "nightly-1", "--case", "A", "--trial", "1", "--to-run-id",
                                 "diag", "--out", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "not published: a diagnostic subset" in result.output
    assert not (out / "legacy" / "dataset_revision=r1" / "run_id=diag").exists()
    assert [r[0] for r in connect(out).execute("SELECT run_id FROM legacy_scalars").fetchall()] == [
        "nightly-1", "nightly-2"]
    assert json.loads((out / "runs" / "diag" / "drift.json").read_text())["coverage"]["new"] == 1


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.parametrize("args,text", [
    (["--case", "nope"], "no trace envelope for case 'nope'"),
    (["--case", "A", "--trial", "9"], "case 'A' and trial 9"),
    (["--to-run-id", "../x"], "'../x'"),
])
def test_rescore_refusals_exit_2_before_prefect(run_folder, args, text):
    _, out = run_folder
    result = runner.invoke(app, ["rescore", "--run-id", "nightly-1", "--out", str(out), *args], env=WIDE)
    assert result.exit_code == 2
    assert text in result.output and "Traceback" not in result.output


@pytest.mark.slow  # the Prefect test harness's server
def test_a_slices_run_publishes_no_legacy_scalar(tmp_path, prefect_harness):
    cases = [dict(c, slice="refunds" if c["case_id"] == "A" else "lookups") for c in TINY_CASES]
    dataset = write_dataset(tmp_path / "d", cases, TINY_TRACES)
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "s1",
                                 "--slices", "refunds"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert not (out / "legacy").exists()  # the dashboards' series is not touched by a partial run
    drift = json.loads((out / "runs" / "s1" / "drift.json").read_text())
    assert drift["verdict"] == "ok" and drift["slices"] == ["refunds"] and drift["coverage"]["new"] == 2


@pytest.mark.slow  # the Prefect test harness's server
def test_example_datasets_share_one_results_folder(tmp_path, prefect_harness):
    from tests.support.paths import REPO

    out = tmp_path / "out"
    for name in ("refund-trajectory", "refund-negative", "tool-contracts"):
        result = runner.invoke(app, ["run", "--dataset", str(REPO / "datasets" / "examples" / name), "--out",
                                     str(out), "--run-id", name], env=WIDE)
        assert result.exit_code == 0, result.output


@pytest.mark.slow  # the Prefect test harness's server
def test_drift_of_a_legacy_only_run_is_a_usage_error(run_folder):
    dataset, out = run_folder
    assert runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "old",
                               "--legacy-only"]).exit_code == 0
    result = runner.invoke(app, ["drift", "--run-id", "old", "--out", str(out)], env=WIDE)
    assert result.exit_code == 2 and "no rows" in result.output


@pytest.mark.slow  # the Prefect test harness's server
def test_sql_formats_and_a_missing_results_folder(run_folder, tmp_path):
    _, out = run_folder
    query = "SELECT case_id, trial, f1 FROM rows WHERE run_id = 'nightly-1' AND case_id = 'A' ORDER BY trial"
    as_csv = runner.invoke(app, ["sql", query, "--out", str(out), "--format", "csv"])
    assert list(csv.reader(io.StringIO(as_csv.output))) == [["case_id", "trial", "f1"], ["A", "0", "1.0"],
                                                            ["A", "1", "0.5"]]
    as_jsonl = runner.invoke(app, ["sql", query, "--out", str(out), "--format", "jsonl"])
    assert [json.loads(line) for line in as_jsonl.output.splitlines()] == [
        {"case_id": "A", "trial": 0, "f1": 1.0}, {"case_id": "A", "trial": 1, "f1": 0.5}]
    missing = runner.invoke(app, ["sql", "SELECT 1", "--out", str(tmp_path / "nowhere")], env=WIDE)
    assert missing.exit_code == 2 and "no results folder" in missing.output
    bad = runner.invoke(app, ["sql", "SELEC nonsense", "--out", str(out)])
    assert bad.exit_code == 2 and "views are" not in bad.output  # a syntax error: no hint about views
    unknown = runner.invoke(app, ["sql", "SELECT count(*) FROM nosuchtable", "--out", str(out)], env=WIDE)
    assert unknown.exit_code == 2
    assert "tooleval's views are rows, traces and legacy_scalars" in " ".join(unknown.output.split())


def test_truncated_cases_line_names_the_real_column(tmp_path):
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    lines = (dataset / "cases.jsonl").read_text().splitlines()
    lines[2] = lines[2][:25]  # cut off mid-object
    (dataset / "cases.jsonl").write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(tmp_path / "o")], env=WIDE)
    assert result.exit_code == 2
    assert "cases.jsonl:3:" in result.output and "column 26" in result.output
