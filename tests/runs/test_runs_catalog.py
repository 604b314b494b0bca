"""`tooleval runs`, `runs --delete` and `gc` on real results folders: listing order, a delete that touches
nothing else, and a gc that keeps a kept run's cached rerun cached."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooleval.runs.spec import RunSpec
from tests.support.datasets import TINY_CASES, TINY_TRACES, trace, tool_call, write_dataset
from tooleval.cli import app
from tooleval.runs.catalog import collect_garbage, list_runs

pytestmark = pytest.mark.slow  # the Prefect test harness's server

runner = CliRunner()


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_runs_lists_newest_first(bundled_pair):
    infos = list_runs(bundled_pair)
    assert [i.run_id for i in infos] == ["head", "base"]
    assert infos[1].rows == 200 and round(infos[1].mean_f1, 4) == 0.3538 and infos[1].gate == "FAIL"
    assert infos[1].drift == "ok"
    result = runner.invoke(app, ["runs", "--out", str(bundled_pair)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "gpt-4o-airline-v1" in line]
    assert [line.split()[1] for line in lines] == ["head", "base"]
    jsonl = runner.invoke(app, ["runs", "--out", str(bundled_pair), "--format", "jsonl"])
    assert [json.loads(line)["run_id"] for line in jsonl.output.splitlines()] == ["head", "base"]


@pytest.fixture(scope="module")
def three_runs(prefect_harness, tmp_path_factory):
    """Runs r1, r3 (same traces) and r2 (case C changed) in one folder; shared by the tests below, in order:
    the delete test works on a copy, the gc command keeps everything, the last test collects."""
    from flows.evaluate import evaluate

    tmp_path = tmp_path_factory.mktemp("three-runs")
    out = tmp_path / "results"
    first = write_dataset(tmp_path / "d1", TINY_CASES, TINY_TRACES)
    evaluate(RunSpec(dataset=str(first), out=str(out), run_id="r1"))
    changed = TINY_TRACES[:3] + [trace("C", 0, [tool_call("noise", "{}")])]
    evaluate(RunSpec(dataset=str(write_dataset(tmp_path / "d2", TINY_CASES, changed)), out=str(out), run_id="r2"))
    evaluate(RunSpec(dataset=str(first), out=str(out), run_id="r3"))
    return out, first


def test_delete_removes_one_run_and_nothing_else(three_runs, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(three_runs[0], out)
    before = _tree(out)
    result = runner.invoke(app, ["runs", "--out", str(out), "--delete", "r2"])
    assert result.exit_code == 0, result.output
    removed = set(before) - set(_tree(out))
    assert removed and all("r2" in path for path in removed)
    assert not any("r2" in path for path in _tree(out))
    assert {p.split("/")[0] for p in removed} == {"traces", "rows", "legacy", "runs"}
    assert runner.invoke(app, ["runs", "--out", str(out), "--delete", "r2"]).exit_code == 2


def test_gc_command_prints_what_it_freed(three_runs):
    out, _ = three_runs
    result = runner.invoke(app, ["gc", "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # Every run is kept: r2's files are needed by r2, the others by r1 and r3: nothing to free.
    assert "freed 0.00 MB: 0 run(s), 0 stage file(s), 0 Prefect result record(s)" in result.output


def test_gc_keeps_what_kept_runs_need_and_their_cache_stays_warm(three_runs, monkeypatch):
    from prefect.settings import get_current_settings

    from flows.evaluate import evaluate

    out, first = three_runs
    storage = Path(get_current_settings().results.local_storage_path)
    monkeypatch.setenv("TOOLEVAL_PREFECT_HOME", str(storage.parent))  # where this session's records are
    assert storage.name == "storage"
    stages = out / ".tooleval" / "stages"
    before = {p.name for p in stages.glob("*/*.*") if p.suffix in (".parquet", ".arrow")}  # rows, and the rest
    r3_needs = set(json.loads((out / "runs" / "r3" / "stages.json").read_text())["digests"])
    report = collect_garbage(out, keep=1)
    assert report.deleted_runs == ["r2", "r1"]
    after = {p.stem for p in stages.glob("*/*.*") if p.suffix in (".parquet", ".arrow")}
    assert after == r3_needs
    # r2's trace of case C differs: its generation, capture and scoring shard files were freed.
    assert report.stage_files == len(before) - len(after) == 3 and report.bytes_freed > 0
    assert report.result_records == 3  # the cache records of those three shard tasks
    rerun = evaluate(RunSpec(dataset=str(first), out=str(out), run_id="r4"))
    assert {name: set(states) for name, states in rerun.stage_states.items()
            if name in ("generation", "trace-capture", "scoring")} == {
        "generation": {"Cached"}, "trace-capture": {"Cached"}, "scoring": {"Cached"}}
