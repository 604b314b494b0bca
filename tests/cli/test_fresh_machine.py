"""``tooleval run`` on a fresh or slow machine, as real processes: a ``PREFECT_HOME`` that does not exist yet (a CI
workspace path) is created; a Prefect server that does not answer in time ends the command with exit 2, the
setting named and the server's log quoted, and leaves no process behind; bad values of the Prefect settings that
tooleval reads exit 2; and a run says what it does during its silent steps, on a pipe and on a terminal.

Each command runs in its own session, so that every process it started but the Prefect server (a session of its
own, checked by its pid) is found by its session id.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO
from tests.support.pace import PATIENT_S, alive, gone_within, scaled, session_empty_within
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # `tooleval run` processes with a fresh Prefect home or a server that never answers

QUIET_RUN_S = 25.0
"""Seconds a first ``tooleval run`` of the tiny dataset took with a fresh Prefect home (its server's start-up
included), on the 2-core machine at a load of about 2."""

SERVER_GONE_PROMISE_S = 5.0
"""Seconds within which the server of a command run with ``TOOLEVAL_PREFECT_SERVER_IDLE_S=0`` is gone after the
command ended (its watchdog looks twice a second)."""

STEPS = ["reading the dataset and its traces…", "starting the local Prefect server…", "planning 4 rows…",
         "aggregating and publishing the run…", "waiting for the task runs to be recorded by the Prefect server…"]
"""The lines a first run prints during its silent steps, in order."""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "TOOLEVAL_PREFECT_HOME", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")}
    env.update(TOOLEVAL_WARM_RUNNER="0", COLUMNS="200", **extra)
    return env


def _tooleval(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "tooleval.cli", *args], cwd=REPO, env=env, text=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    stdout, stderr = process.communicate(timeout=PATIENT_S)
    assert session_empty_within(process.pid, 2.0) == [], "a process of the command outlived it"
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr), time.monotonic() - started


def _in_order(text: str, lines: list[str]) -> bool:
    positions = [text.find(line) for line in lines]
    return -1 not in positions and positions == sorted(positions)


def test_a_fresh_prefect_home_is_created_and_the_run_says_what_it_does(tmp_path):
    home = tmp_path / "ci" / "workspace" / "prefect"  # no part of it exists yet
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    done, wall_s = _tooleval(_env(PREFECT_HOME=str(home), TOOLEVAL_PREFECT_SERVER_IDLE_S="0"),
                             "run", "--dataset", str(dataset), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert (home / "prefect.db").is_file() and (home / "server.log").is_file()  # Prefect's home is the one given
    assert not (tmp_path / "out" / ".tooleval" / "prefect" / "prefect.db").exists()
    assert len(list((tmp_path / "out" / "runs").glob("*/summary.json"))) == 1
    assert _in_order(done.stderr, STEPS), done.stderr
    server = int((home / "server.pid").read_text())
    assert gone_within(server, scaled(SERVER_GONE_PROMISE_S, wall_s, QUIET_RUN_S))


def test_on_a_terminal_the_run_says_the_same(tmp_path):
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    # a seeded home: the steps a run prints are the same on a new home (the test above), and building a new
    # home's database would only cost this test its time
    home = seeded_home(tmp_path / "home")
    env = _env(TOOLEVAL_PREFECT_HOME=str(home), TOOLEVAL_PREFECT_SERVER_IDLE_S="0", TERM="xterm")
    env.pop("COLUMNS")
    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out",
                                str(tmp_path / "out")], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                               stdout=secondary, stderr=secondary, start_new_session=True)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal's other end closed: the command and its children are done with it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    process.wait(timeout=PATIENT_S)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", b"".join(chunks).decode("utf-8", "replace"))
    assert process.returncode == 0, text
    assert _in_order(text, STEPS), text


def test_a_server_that_does_not_answer_in_time_exits_2_and_leaves_nothing_running(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "server.log").write_text("an earlier line of the server's log\n")
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    out = tmp_path / "out"
    # the default idle time (300 s): a server that never answered must not wait for a next command
    env = _env(TOOLEVAL_PREFECT_HOME=str(home), PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1")
    env.pop("TOOLEVAL_PREFECT_SERVER_IDLE_S", None)
    for quiet in ([], ["--quiet"]):
        done, _ = _tooleval(env, *quiet, "run", "--dataset", str(dataset), "--out", str(out))
        assert done.returncode == 2, done.stderr
        text = " ".join(done.stderr.split())
        assert "Traceback" not in done.stderr
        assert "the local Prefect server (pid" in text and "did not answer within 1 s of its start" in text
        assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=600" in text and "it was stopped" in text
        assert f"last lines of {home / 'server.log'}:" in text and "an earlier line of the server's log" in text
        assert "Nothing was written." in text
        assert ("starting the local Prefect server…" in text) is not bool(quiet)
        server = int((home / "server.pid").read_text())
        assert not alive(server), "the server outlived the command"
        assert not list(out.glob("runs/*")) and not list(out.glob("rows/*"))


def test_bad_values_of_the_prefect_settings_exit_2(tmp_path):
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    run = ("run", "--dataset", str(dataset), "--out", str(tmp_path / "out"))
    done, _ = _tooleval(_env(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1m"), *run)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS='1m' is not a number of seconds in [1, 86400]" in \
        " ".join(done.stderr.split())
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done, _ = _tooleval(_env(PREFECT_HOME=str(blocker / "prefect")), *run)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"PREFECT_HOME='{blocker / 'prefect'}' is not a folder tooleval can write" in " ".join(done.stderr.split())
