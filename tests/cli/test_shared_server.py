"""The local Prefect server shared by the commands of one Prefect home (``tooleval/cli/_prefect_server.py``):
commands running at once share one server; a ``kill -9`` of the last command using it stops it within seconds;
after a command that ended normally it waits for the next one for the idle time, then stops by itself; and it
stops as soon as its home (the results folder's ``.tooleval``) is deleted.

Each holder below is a real process that registers as a user of the server, as a command does, and ends as told.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.paths import REPO
from tests.support.pace import PATIENT_S, scaled
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # tooleval's shared local Prefect server, killed and restarted

QUIET_SERVER_START_S = 10.0
"""Seconds a seeded home's server (:func:`seeded_home`) takes to answer on the 2-core machine at a load of about 2:
the start-up each test measures again, to scale the stop deadlines it asserts (:func:`pace.scaled`). A fresh
home's took 18 s there, for about 11 s of CPU; a seeded home's costs about 6 s of CPU (measured), hence 10 s. The
homes here are seeded: what a new home's server does first (build its database) is not what these tests are
about (tests/cli/test_fresh_machine.py is)."""

HOLDER = """
import sys
from pathlib import Path
from tooleval.cli import _prefect_server as server
use = server.begin_server(Path(sys.argv[1]))
print(use.wait(), flush=True)
server.end_server(linger=sys.stdin.readline().strip() == "linger")
"""


def _env(idle: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING",
               PREFECT_SERVER_LOGGING_LEVEL="CRITICAL", TOOLEVAL_PREFECT_SERVER_IDLE_S=str(idle))
    return env


def _begin_hold(home: Path, idle: float = 300) -> subprocess.Popen:
    """Start a process that uses the server of ``home`` (:func:`_answered` waits for its API URL)."""
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], env={**_env(idle), "PREFECT_HOME": str(home)},
                            cwd=REPO, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _answered(process: subprocess.Popen) -> tuple[subprocess.Popen, str]:
    """``process`` of :func:`_begin_hold` once its server answered, and the API URL it was given."""
    url = process.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.poll() is not None else url
    return process, url


def _hold(home: Path, idle: float = 300) -> tuple[subprocess.Popen, str]:
    """A process using the server of ``home``; returns it and the API URL it was given."""
    return _answered(_begin_hold(home, idle))


def _server_pid(home: Path) -> int:
    return json.loads((home / "server.json").read_text())["pid"]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_shared_while_used_gone_after_a_kill_idle_or_deleted_home(tmp_path):
    home = seeded_home(tmp_path / "results" / ".tooleval" / "prefect")
    began = time.monotonic()
    first, url = _hold(home)
    startup_s = time.monotonic() - began
    # the results folder deleted at the end is another one: its server starts now and is up by the time the
    # first one has been killed, idled and replaced (its start-up spent during those waits, not after them)
    deleted_home = seeded_home(tmp_path / "deleted" / "results" / ".tooleval" / "prefect")
    fourth = _begin_hold(deleted_home)
    second, same = _hold(home, idle=2)
    server = _server_pid(home)
    assert same == url and _alive(server)  # two commands at once: one server

    first.send_signal(signal.SIGKILL)  # one user killed: the other still uses the server
    first.communicate(timeout=PATIENT_S)
    time.sleep(2)
    assert _alive(server)

    second.communicate("linger\n", timeout=60)  # ended normally: waits for the next command the idle time (2 s)
    assert second.returncode == 0 and _alive(server)
    assert _gone_within(server, scaled(30, startup_s, QUIET_SERVER_START_S)), "an idle server did not stop by itself"
    assert not (home / "server.json").exists()

    third, _ = _hold(home)  # a new server, which a kill -9 of its only user stops within seconds
    replaced = _server_pid(home)
    assert replaced != server
    os.killpg(third.pid, signal.SIGKILL)
    third.communicate(timeout=PATIENT_S)
    assert _gone_within(replaced, scaled(15, startup_s, QUIET_SERVER_START_S)), "the server outlived the killed command that used it"

    fourth, _ = _answered(fourth)
    last = _server_pid(deleted_home)
    shutil.rmtree(tmp_path / "deleted" / "results")  # removed while the server runs: it lets go at once
    assert _gone_within(last, scaled(15, startup_s, QUIET_SERVER_START_S)), "the server kept a deleted results folder's database open"
    fourth.communicate("quit\n", timeout=60)


TAKEN_PORT_HOLDER = """
import sys
from pathlib import Path
from tooleval.cli import _prefect_server as server
ports = [int(sys.argv[2])]  # the first port chosen is one another process holds: the server cannot bind it
choose = server._free_port
server._free_port = lambda: ports.pop() if ports else choose()
use = server.begin_server(Path(sys.argv[1]))
first = use.pid
print(use.wait(), first, use.pid, flush=True)
server.end_server(linger=False)
"""


def test_a_server_that_exits_before_it_answers_is_replaced(tmp_path):
    # the port is chosen, then bound by the server a second later: another process may take it meanwhile (uvicorn
    # then exits with its start-up failure code, 3). The command starts another server instead of failing
    import socket

    home = seeded_home(tmp_path / "results" / ".tooleval" / "prefect")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-c", TAKEN_PORT_HOLDER, str(home), str(busy)], env=_env(0),
                              cwd=REPO, text=True, capture_output=True, timeout=PATIENT_S)
        startup_s = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    url, first, second = done.stdout.split()
    assert first != second and url.startswith("http://127.0.0.1:") and not url.endswith(f":{busy}/api")
    assert "exited before it answered; starting another" in done.stderr
    assert _gone_within(int(second), scaled(30, startup_s, QUIET_SERVER_START_S))  # no command uses it any more: it stops (idle time 0)
