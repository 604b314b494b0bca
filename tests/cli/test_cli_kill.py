"""The real ``tooleval`` process killed mid-publication, interrupted, and raced (issue 12, sections 1 and 2).

Each test runs the CLI as a subprocess in its own process group (as a shell job), with its own Prefect home and
no ``PREFECT_API_URL``, so tooleval starts the local server of that home (shared by its commands; 3 s of idle
time here). A deterministic pause point inside publish
(``TOOLEVAL_TEST_PUBLISH_PAUSE``) holds the run at an exact moment; the test then kills or interrupts it.
"""

from __future__ import annotations

import os
from contextlib import closing
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO
from tests.support.pace import PATIENT_S, scaled
from tooleval.storage import committed_files, read_table
from tooleval.storage._pause import PAUSE_ENV, PAUSE_FILE_ENV
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # `tooleval run` processes with their Prefect server, killed mid-run

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}

QUIET_TO_PAUSE_S = 20.0
"""Seconds from a first ``tooleval run`` of the tiny dataset to its pause point (its server's start-up, the plan,
the stages), on the 2-core machine at a load of about 2: the start-up each test measures again, to scale the
deadlines it asserts (:func:`pace.scaled`)."""


class Cli:
    """Runs ``python -m tooleval.cli`` against one results folder and one Prefect home."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.out = tmp_path / "out"
        self.home = seeded_home(tmp_path / "prefect-home")
        self.dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        self.env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", PAUSE_ENV)}
        self.env.update(TOOLEVAL_PREFECT_HOME=str(self.home), COLUMNS="300", TOOLEVAL_PREFECT_SERVER_IDLE_S="3")

    def start(self, *args: str, pause: str | None = None) -> tuple[subprocess.Popen, Path | None]:
        env = dict(self.env)
        flag = None
        if pause is not None:
            flag = self.tmp / f"paused-{time.monotonic_ns()}"
            env.update({PAUSE_ENV: pause, PAUSE_FILE_ENV: str(flag)})
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "tooleval.cli", *args], env=env, cwd=REPO, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        process.started = started
        return process, flag

    def run(self, *args: str, timeout: float = PATIENT_S) -> subprocess.CompletedProcess:
        process, _ = self.start(*args)
        stdout, stderr = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)

    def evaluate(self, run_id: str, pause: str | None = None):
        return self.start("run", "--dataset", str(self.dataset), "--out", str(self.out), "--run-id", run_id,
                          pause=pause)

    def server_pid(self) -> int:
        return int((self.home / "server.pid").read_text())

    def states(self, table: str) -> list[str]:
        with closing(sqlite3.connect(self.home / "prefect.db")) as db:
            return sorted(row[0] for row in db.execute(f"SELECT state_type FROM {table}"))


def wait_for(flag: Path, process: subprocess.Popen, timeout: float = PATIENT_S) -> float:
    """Wait until ``process`` reaches its pause point; returns the seconds since it started, a start-up of this
    machine measured now."""
    deadline = time.monotonic() + timeout
    while not flag.exists():
        if process.poll() is not None:
            _, stderr = process.communicate()
            raise AssertionError(f"tooleval exited {process.returncode} before its pause point: {stderr}")
        assert time.monotonic() < deadline, "tooleval never reached its pause point"
        time.sleep(0.1)
    return time.monotonic() - process.started


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan's zombie waits for a reaper, but holds nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_kill_9_mid_publish_second_writer_takeover_and_crashed_run(tmp_path):
    cli = Cli(tmp_path)
    first, flag = cli.evaluate("k1", pause="committed")
    startup_s = wait_for(flag, first)
    server = cli.server_pid()
    assert alive(server)

    second = cli.run("run", "--dataset", str(cli.dataset), "--out", str(cli.out), "--run-id", "k1")
    assert second.returncode == 2, second.stderr
    assert f"pid {first.pid} on host" in " ".join(second.stderr.split()) and "Traceback" not in second.stderr

    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=PATIENT_S)
    assert gone_within(server, scaled(10, startup_s, QUIET_TO_PAUSE_S)), \
        "the Prefect server outlived the killed tooleval process"

    # committed before the kill: readers see the whole new run (4 rows, 4 traces), drift agrees
    assert read_table(cli.out, "rows", run_id="k1").num_rows == 4
    sql = cli.run("sql", "SELECT count(*) AS n FROM traces WHERE run_id = 'k1'", "--out", str(cli.out),
                  "--format", "csv")
    assert sql.stdout.split() == ["n", "4"], sql.stderr
    drift = cli.run("drift", "--run-id", "k1", "--out", str(cli.out))
    assert drift.returncode == 0, drift.stdout + drift.stderr

    third = cli.run("run", "--dataset", str(cli.dataset), "--out", str(cli.out), "--run-id", "k1")
    assert third.returncode == 0, third.stdout + third.stderr  # the dead holder's lease was taken over
    assert "Traceback" not in third.stderr
    assert cli.states("flow_run") == ["COMPLETED", "CRASHED"]  # the killed run was marked by the next one
    task_states = cli.states("task_run")
    assert set(task_states) <= FINAL and task_states.count("COMPLETED") >= 5  # 3 stage tasks + legacy + aggregation
    # the third run ended normally: its server waits for the next command (the idle time, 3 s here), then stops
    server = cli.server_pid()
    assert alive(server)
    assert gone_within(server, scaled(30, startup_s, QUIET_TO_PAUSE_S)), "an idle server did not stop by itself"


def test_ctrl_c_exits_130_quickly_publishes_nothing_and_records_the_crash(tmp_path):
    cli = Cli(tmp_path)
    process, flag = cli.evaluate("c1", pause="written")
    startup_s = wait_for(flag, process)
    server = cli.server_pid()
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a shell sends: the job's process group
    stdout, stderr = process.communicate(timeout=PATIENT_S)
    elapsed = time.monotonic() - started
    assert process.returncode == 130, stderr
    # the promise: within 10 s on the quiet machine (measured: 18.7 s at a load of 10-20)
    assert elapsed < scaled(10, startup_s, QUIET_TO_PAUSE_S), (elapsed, startup_s)
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert gone_within(server, scaled(10, startup_s, QUIET_TO_PAUSE_S))
    assert committed_files(cli.out, "rows") == [] and not (cli.out / "runs/c1/commit.json").exists()
    assert list(cli.out.glob("rows/*/*/*.parquet")) == []  # the written files were discarded
    assert cli.states("flow_run") == ["CRASHED"]
