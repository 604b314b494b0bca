"""The warm runner of ``tooleval run`` (tooleval/cli/_warm.py), with real processes over a copy of the code: after
a cold run, the next run of the same results folder is forked from a runner that imported everything — the
client stays small, and the output, exit code and rows equal a cold run's —; an edited source file means a cold
run (never stale code), whose runner replaces the old one; Ctrl-C at the client reaches the command (exit 130,
nothing published); a client killed with SIGKILL ends its command.

Whether a command ran warm is read from the client process itself: its peak RSS (``os.wait4``). A cold
``tooleval run`` imports Prefect, pyarrow and the flows (~300 MB on this machine); a client served warm imports
almost nothing (~18 MB).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO
from tests.support.pace import PATIENT_S
from tests.support.runs import published_rows

pytestmark = pytest.mark.slow  # `tooleval run` processes, their warm runner and Prefect server

WARM_CLIENT_MAX_MB = 80
"""A client served warm stays under this peak RSS; a cold run is above :data:`COLD_RUN_MIN_MB`."""
COLD_RUN_MIN_MB = 150


@pytest.fixture()
def setup(tmp_path):
    src = tmp_path / "src"
    for package in ("tooleval", "tasks", "flows"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "datasets" / "tau-bench-airline", src / "datasets" / "tau-bench-airline")
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(TOOLEVAL_WARM_RUNNER="1", TOOLEVAL_PREFECT_SERVER_IDLE_S="30", COLUMNS="200",
               TOOLEVAL_REDACTION_KEY="tooleval-warm-runner-test-key-0001",
               TOOLEVAL_PREFECT_HOME=str(tmp_path / "home"))
    yield src, dataset, tmp_path / "results", env
    for pid in _runner_pids(tmp_path):
        os.kill(pid, signal.SIGKILL)


def _start(src: Path, dataset: Path, out: Path, run_id: str, env: dict[str, str], **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out", str(out), "--run-id",
         run_id], cwd=src, env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


MEASURED = """
import os, subprocess, sys
client = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(client.pid, 0)
client.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as handle:
    handle.write(str(usage.ru_maxrss))
sys.exit(client.returncode)
"""
"""Runs a command and writes its peak RSS (KB) to a file. The client's peak is measured from this small process,
not from pytest's: a child's peak RSS counts the memory of the process it was forked from, kept through exec."""


def _run(src, dataset, out, run_id, env, **extra) -> tuple[int, str, str, float]:
    """Run a client to its end; returns (exit code, stdout, stderr, its peak RSS in MB)."""
    peak = src.parent / f"{run_id}.maxrss"
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, str(peak), sys.executable, "-m", "tooleval.cli", "run", "--dataset",
         str(dataset), "--out", str(out), "--run-id", run_id],
        cwd=src, env={**env, **extra}, capture_output=True, text=True, timeout=PATIENT_S)
    return done.returncode, done.stdout, done.stderr, int(peak.read_text()) / 1024


def _bound_runner(tmp_path: Path, known: set[int], seconds: float = 60) -> int:
    """The pid of a runner of this test (its command line names a file under ``tmp_path``) not in ``known``, once
    its socket is bound (the socket's inode listed in /proc/net/unix under the runner's name). Other runners may
    run on the machine at the same time."""
    deadline = time.monotonic() + seconds
    while True:
        bound = {line.split()[6] for line in Path("/proc/net/unix").read_text().splitlines()[1:]
                 if "@tooleval-warm-runner-" in line}
        for pid in set(_runner_pids(tmp_path)) - known:
            try:
                inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[len("socket:["):-1]
                          for fd in os.listdir(f"/proc/{pid}/fd")}
            except OSError:
                continue
            if inodes & bound:
                return pid
        assert time.monotonic() < deadline, "no warm runner was started"
        time.sleep(0.1)


def _runner_pids(tmp_path: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "tooleval.cli._warm" in cmdline and str(tmp_path) in cmdline:
                pids.append(int(entry.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])



def _rates_out(text: str) -> str:
    """``text`` without what differs between two runs of one command on any machine: the rates, and whether the
    shared Prefect server was still up (on a slow machine its idle time can run out between two runs, and the
    second one starts it again)."""
    text = re.sub(r"\(\d+ rows/s\)", "(N rows/s)", text)
    return re.sub(r"(starting|connecting to) the local Prefect server", "reaching the local Prefect server", text)


def _published(out: Path, run_id: str) -> bool:
    return (out / "runs" / run_id / "summary.json").exists()


def test_a_second_run_is_served_warm_alike_and_an_edit_means_cold(setup, tmp_path):
    src, dataset, out, env = setup
    code1, _, err1, mb1 = _run(src, dataset, out, "r1", env)
    assert mb1 > COLD_RUN_MIN_MB, err1
    first = _bound_runner(tmp_path, set())

    code2, out2, err2, mb2 = _run(src, dataset, out, "r2", env)
    assert mb2 < WARM_CLIENT_MAX_MB, (mb2, err2)  # served by the runner
    code3, out3, err3, mb3 = _run(src, dataset, out, "r3", env, TOOLEVAL_WARM_RUNNER="0")
    assert mb3 > COLD_RUN_MIN_MB
    # the same command, warm and cold: same exit code, same words on the terminal, the same rows
    assert code2 == code3 == code1, err2 + err3
    assert out2.replace("r2", "RUN") == out3.replace("r3", "RUN")
    assert _rates_out(err2) == _rates_out(err3)
    assert published_rows(out, "r2", drop=["run_id"]) == published_rows(out, "r3", drop=["run_id"])
    assert len(published_rows(out, "r2")) == len(TINY_TRACES)

    # an edited source file changes the runner's key: the next run imports the new code, cold
    canonical = src / "tooleval" / "canonical.py"
    canonical.write_text(canonical.read_text() + "\n# edited\n")
    code4, _, err4, mb4 = _run(src, dataset, out, "r4", env)
    assert (code4, mb4 > COLD_RUN_MIN_MB) == (code1, True), err4
    _bound_runner(tmp_path, {first})  # and leaves a runner of the new key, which ends the old one (it is idle)
    deadline = time.monotonic() + 60
    while _alive(first):
        assert time.monotonic() < deadline, "the runner of the old key outlived its replacement"
        time.sleep(0.2)
    code5, _, err5, mb5 = _run(src, dataset, out, "r5", env)
    assert (code5, mb5 < WARM_CLIENT_MAX_MB) == (code1, True), err5


def test_ctrl_c_and_sigkill_at_the_client_end_the_warm_command(setup, tmp_path):
    src, dataset, out, env = setup
    assert _run(src, dataset, out, "r1", env)[0] in (0, 1)
    runner = _bound_runner(tmp_path, set())

    for run_id, how in (("r2", signal.SIGINT), ("r3", signal.SIGKILL)):
        flag = tmp_path / f"{run_id}.pid"
        client = _start(src, dataset, out, run_id, env, TOOLEVAL_TEST_PUBLISH_PAUSE="written",
                        TOOLEVAL_TEST_PUBLISH_PAUSE_FILE=str(flag))
        deadline = time.monotonic() + 120
        while not flag.exists() or not flag.read_text():
            assert client.poll() is None and time.monotonic() < deadline, client.communicate()
            time.sleep(0.1)
        command = int(flag.read_text())  # the process paused inside the publication
        assert command != client.pid and _parent(command) == runner  # forked by the runner, not the client
        client.send_signal(how)
        stdout, stderr = client.communicate(timeout=PATIENT_S)
        if how == signal.SIGINT:  # passed on: the command stops as at a Ctrl-C in its own terminal
            assert client.returncode == 130, stdout + stderr
            assert "interrupted: nothing of this command was published." in stderr
        else:  # the connection closed: the command interrupts itself, printing nothing more, as a cold one
            assert client.returncode == -signal.SIGKILL
            for needle in ("interrupted", "Traceback", "RuntimeError"):  # "interrupted: nothing …" before
                assert needle not in stdout + stderr, stderr[-3000:]
        deadline = time.monotonic() + 60
        while _alive(command):
            assert time.monotonic() < deadline, f"the command (pid {command}) outlived its client"
            time.sleep(0.1)
        assert not _published(out, run_id)
    summary = json.loads((out / "runs" / "r1" / "summary.json").read_text())
    assert summary["run_id"] == "r1"  # the first run's publication is untouched
