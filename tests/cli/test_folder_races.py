"""Races between processes on one results folder, run for real: ``tooleval gc`` beside a run in progress, and two
runs that reuse one revision name with different content, started together.

* A gc deleted the stage files of a run in progress (none is in a published ``stages.json`` yet): the run then
  failed with a ``FileNotFoundError`` traceback. Now a run holds the stage files in use from its plan to its
  publication, and gc keeps every stage file meanwhile.
* Both runs passed the plan's revision check (neither had published) and both published in 2 of 3 tries. Now the
  check is made again under the revision's commit lock: exactly one publishes, the other exits 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import BUNDLED, REPO
from tooleval.runs.catalog import collect_garbage

pytestmark = pytest.mark.slow  # `tooleval run` and `tooleval gc` processes racing on one folder


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="250", PREFECT_SERVER_ANALYTICS_ENABLED="false", TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
    return env


def _run(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tooleval.cli", "run", *args], env=_env(), cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_gc_in_a_loop_beside_a_run_spares_what_the_run_needs(tmp_path):
    out = tmp_path / "results"
    run = _run("--dataset", str(BUNDLED), "--out", str(out), "--run-id", "nightly")
    passes, kept_for_the_run, deleted = 0, 0, 0
    deadline = time.monotonic() + 900
    while run.poll() is None:  # the nightly gc, as often as it can run, for the whole run
        if time.monotonic() > deadline:  # the run hung once its stage files were gone
            run.kill()
            pytest.fail(f"the run did not end within 900 s beside gc: {run.communicate()[0][-3000:]}")
        if (out / ".tooleval").is_dir():
            report = collect_garbage(out)
            passes += 1
            kept_for_the_run += getattr(report, "run_in_progress", False)
            deleted += report.stage_files
        time.sleep(0.02)
    printed = run.communicate()[0]
    assert "Traceback" not in printed and "FileNotFoundError" not in printed, printed[-4000:]
    assert run.returncode == 0, printed[-4000:]
    summary = json.loads((out / "runs/nightly/summary.json").read_text())
    assert (summary["rows"], summary["exact_match_rows"], summary["expected_calls"], summary["observed_calls"],
            round(summary["mean_f1"], 4), summary["errors"]) == (200, 12, 632, 1164, 0.3538, 0)
    assert passes > 10 and kept_for_the_run > 0
    # the run's stage files stayed, and once it ended a gc keeps them still: its stages.json names them
    after = collect_garbage(out)
    assert not after.run_in_progress and after.stage_files == 0
    used = set(json.loads((out / "runs/nightly/stages.json").read_text())["digests"])
    on_disk = {p.stem for p in (out / ".tooleval/stages").glob("*/*.*") if p.suffix in (".parquet", ".arrow")}
    assert used and used <= on_disk
    # the CLI says why it kept them while a run holds them
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", "gc", "--out", str(out)], env=_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "freed" in done.stdout and "Traceback" not in done.stderr


def test_two_runs_reusing_one_revision_with_different_content_exactly_one_publishes(tmp_path):
    first = write_dataset(tmp_path / "one", TINY_CASES, TINY_TRACES, revision="r1")
    changed = [dict(case) for case in TINY_CASES]
    changed[1] = {**changed[1], "input": "look up B, changed"}
    second = write_dataset(tmp_path / "two", changed, TINY_TRACES, revision="r1")
    out = tmp_path / "results"
    runs = {"a": _run("--dataset", str(first), "--out", str(out), "--run-id", "a"),
            "b": _run("--dataset", str(second), "--out", str(out), "--run-id", "b")}
    printed = {name: process.communicate(timeout=900)[0] for name, process in runs.items()}
    codes = {name: process.returncode for name, process in runs.items()}
    for name, text in printed.items():
        assert "Traceback" not in text, text[-4000:]
    assert sorted(codes.values()) == [0, 2], printed
    refused = next(name for name, code in codes.items() if code == 2)
    published = next(name for name, code in codes.items() if code == 0)
    text = " ".join(printed[refused].split())
    assert "revision 'r1' was already written to" in text and "with different dataset content" in text, text
    assert "bump 'revision' in dataset.json" in text
    assert (out / "runs" / published / "commit.json").is_file()
    assert not (out / "runs" / refused / "commit.json").exists()
    assert not (out / "rows/dataset_revision=r1" / f"run_id={refused}").exists()
    ledger = json.loads((out / "revisions/r1.json").read_text())
    summary = json.loads((out / "runs" / published / "summary.json").read_text())
    assert ledger["content_digest"] == summary["dataset"]["content_digest"]  # the ledger names the published one
