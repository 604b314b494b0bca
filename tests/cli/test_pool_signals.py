"""A command that runs a process pool ends its workers on SIGINT, SIGTERM and SIGHUP, at once (not after the shards
they run), and a worker whose command was killed with SIGKILL exits by itself.

Real processes: ``tooleval run`` and ``tooleval bench`` on a synthetic corpus of the smallest size that gets a pool
(``flows.evaluate.PROCESS_POOL_MIN_ROWS``), each command in its own session, so that every process it started is
found by its session id (the Prefect server, held running for the module, has a session of its own). Deadlines
are the promise on the quiet machine scaled by the start-up measured in the same test (:mod:`pace`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.pace import PATIENT_S, gone_within, scaled, session_empty_within, session_processes
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # `tooleval run` and `tooleval bench` on a process pool, signalled and killed

POOL_ROWS = 50_000
"""``flows.evaluate.PROCESS_POOL_MIN_ROWS``: fewer rows run on one thread of the command."""

QUIET_POOL_START_S = 15.0
"""Seconds from a command's start to its two pool workers existing, the Prefect server already running, measured on
the 2-core machine at a load of about 2."""

EXIT_PROMISE_S = 10.0
"""Seconds within which the command ends after the signal (quiet machine; measured after the fix: 0.1-1.2 s;
before it, Ctrl-C took 38 s, the shards' time)."""

WORKERS_GONE_PROMISE_S = 10.0
"""Seconds within which no process of the command is left once it ended (the parent-death check runs every
0.5 s once a worker has imported its modules)."""


HOLDER = """
import sys
from pathlib import Path
from tooleval.cli import _prefect_server as server
use = server.begin_server(Path(sys.argv[1]))
print(use.wait(), flush=True)
sys.stdin.readline()
server.end_server(linger=False)
"""


@pytest.fixture(scope="module")
def holder(tmp_path_factory) -> tuple[Path, subprocess.Popen]:
    """A Prefect home whose server a holder process keeps running for the module: each command finds it, so the
    tests pay its start-up once (a signalled command's own server stopping is tested in test_cli_kill.py). Not
    waited for here: :func:`corpus` writes its corpus meanwhile, and :func:`home` waits."""
    folder = seeded_home(tmp_path_factory.mktemp("pool-home"))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(folder), TOOLEVAL_PREFECT_SERVER_IDLE_S="0")
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=REPO, env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    yield folder, process
    process.communicate("\n", timeout=60)


@pytest.fixture(scope="module")
def home(holder) -> Path:
    """The home of :func:`holder`, once its server answers."""
    folder, process = holder
    assert process.stdout.readline().startswith("http://127.0.0.1:")
    return folder


@pytest.fixture(scope="module")
def corpus(holder, tmp_path_factory) -> Path:
    """The synthetic corpus, written while the holder's server starts (both are independent)."""
    folder = tmp_path_factory.mktemp("pool-corpus") / f"bfcl-{POOL_ROWS}-s0"  # the name `tooleval bench` reuses
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", "synth", "--rows", str(POOL_ROWS), "--out",
                           str(folder)], cwd=REPO, capture_output=True, text=True, timeout=PATIENT_S)
    assert done.returncode == 0, done.stderr
    return folder


def _start(tmp_path: Path, corpus: Path, command: str, home: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TOOLEVAL_PREFECT_HOME=str(home), TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               TOOLEVAL_WARM_RUNNER="0", COLUMNS="200")
    if command == "run":
        args = ["run", "--dataset", str(corpus), "--out", str(tmp_path / "out"), "--workers", "2"]
    else:
        workdir = tmp_path / "bench"
        workdir.mkdir()
        (workdir / corpus.name).symlink_to(corpus)
        args = ["bench", "--rows", str(POOL_ROWS), "--workdir", str(workdir), "--workers", "2", "--peer-rows", "50"]
    with open(tmp_path / "command.log", "w") as log:
        return subprocess.Popen([sys.executable, "-m", "tooleval.cli", *args], cwd=REPO, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _workers(process: subprocess.Popen) -> list[int]:
    return [pid for pid, line in session_processes(process.pid)
            if "multiprocessing.spawn" in line and "resource_tracker" not in line]


def _wait_for_workers(process: subprocess.Popen, tmp_path: Path) -> list[int]:
    deadline = time.monotonic() + PATIENT_S
    while len(workers := _workers(process)) < 2:
        assert process.poll() is None, (tmp_path / "command.log").read_text()
        assert time.monotonic() < deadline, "the command started no pool"
        time.sleep(0.1)
    return workers


@pytest.mark.parametrize("command, signum", [("run", signal.SIGINT), ("run", signal.SIGTERM),
                                             ("run", signal.SIGHUP), ("bench", signal.SIGINT),
                                             ("bench", signal.SIGTERM)],
                         ids=["run-INT", "run-TERM", "run-HUP", "bench-INT", "bench-TERM"])
def test_a_signal_ends_the_command_and_its_pool_workers_at_once(corpus, home, tmp_path, command, signum):
    started = time.monotonic()
    process = _start(tmp_path, corpus, command, home)
    workers = _wait_for_workers(process, tmp_path)
    startup_s = time.monotonic() - started
    time.sleep(1.0)  # the workers are importing or running shards

    sent = time.monotonic()
    process.send_signal(signum)  # to the command alone, as `kill` or a supervisor sends it
    process.wait(timeout=PATIENT_S)
    exit_s = time.monotonic() - sent
    log = (tmp_path / "command.log").read_text()
    print(f"start-up {startup_s:.1f} s, exit {exit_s:.1f} s after the signal")
    assert process.returncode == (130 if signum == signal.SIGINT else -signum), log
    assert exit_s < scaled(EXIT_PROMISE_S, startup_s, QUIET_POOL_START_S), (exit_s, startup_s)
    left = session_empty_within(process.pid, scaled(WORKERS_GONE_PROMISE_S, startup_s, QUIET_POOL_START_S))
    assert left == [], f"workers {workers}; left: {left}"
    if signum == signal.SIGINT:
        assert "Traceback" not in log and "interrupted" in log


def test_workers_of_a_killed_command_exit_by_themselves(corpus, home, tmp_path):
    started = time.monotonic()
    process = _start(tmp_path, corpus, "run", home)
    workers = _wait_for_workers(process, tmp_path)
    startup_s = time.monotonic() - started
    time.sleep(1.0)
    process.send_signal(signal.SIGKILL)  # no handler runs: the workers must notice by themselves
    process.wait(timeout=60)
    deadline = scaled(WORKERS_GONE_PROMISE_S, startup_s, QUIET_POOL_START_S)
    assert all(gone_within(pid, deadline) for pid in workers), (workers, session_processes(process.pid))
    assert session_empty_within(process.pid, deadline) == []
