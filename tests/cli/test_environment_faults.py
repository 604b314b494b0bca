"""Faults of the machine, not of the input, end a command with exit 2 and one message naming the cause and the fix
— never a traceback and exit 1 ("the run completed, some rows had errors"): a disk that fills during a run (a
real tmpfs too small for it), a results folder that cannot be written (for every command that publishes), a
damaged Parquet part (for every command that reads one), an empty ``tooleval sql`` query.

Every command runs as ``python -m tooleval.cli`` in a process of its own, the way a user or a scheduler runs it."""

from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.cli.test_cli_faults import AS_UNPRIVILEGED
from tests.support.paths import BUNDLED, REPO, USER_CACHE
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # every command a real `tooleval` process, a full tmpfs among them


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="400", PREFECT_SERVER_ANALYTICS_ENABLED="false", TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", XDG_CACHE_HOME=str(USER_CACHE), **extra)
    return env


def _tooleval(*args: str, prefix: tuple[str, ...] = ("-m", "tooleval.cli"), **env: str):
    return subprocess.run([sys.executable, *prefix, *args], env=_env(**env), cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def _exit_2(done, *needles: str) -> str:
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    for needle in needles:
        assert needle in text, (needle, text[-3000:])
    return text


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A results folder holding one published run ``p`` of a small dataset."""
    base = tmp_path_factory.mktemp("published")
    dataset = write_dataset(base / "d", TINY_CASES, TINY_TRACES)
    out = base / "results"
    done = _tooleval("run", "--dataset", str(dataset), "--out", str(out), "--run-id", "p",
                     TOOLEVAL_PREFECT_HOME=str(seeded_home(base / "prefect-home")))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


PUBLISHING = {
    "gate": ["gate", "--run-id", "p"],
    "report": ["report", "--run-id", "p"],
    "drift": ["drift", "--run-id", "p"],
    "handoff": ["handoff", "--run-id", "p", "--case", "A"],
    "legacy": ["legacy", "--run-id", "p"],
    "rescore": ["rescore", "--run-id", "p", "--to-run-id", "q"],
}


@pytest.mark.parametrize("command", sorted(PUBLISHING))
def test_a_read_only_results_folder(published, command):
    base = Path(tempfile.mkdtemp())
    out = base / "results"
    try:
        shutil.copytree(published, out, symlinks=True)
        for folder, _, files in os.walk(out):
            for name in files:
                os.chmod(os.path.join(folder, name), 0o444)
            os.chmod(folder, 0o555)
        before = sorted(str(p) for p in out.rglob("*"))
        # run as root without the capability that writes through permission bits (tests/cli/test_cli_faults.py)
        done = _tooleval(str(out), *PUBLISHING[command], "--out", str(out), prefix=("-c", AS_UNPRIVILEGED),
                         TOOLEVAL_PREFECT_HOME=str(base / "prefect-home"))
        _exit_2(done, "cannot write here", "writable", str(out))  # a traceback and exit 1 before, but for run
        assert sorted(str(p) for p in out.rglob("*")) == before
    finally:
        for folder, _, _ in os.walk(base):
            os.chmod(folder, 0o755)
        shutil.rmtree(base)


READING = {
    "gate": ["gate", "--run-id", "p"],
    "report": ["report", "--run-id", "p"],
    "drift": ["drift", "--run-id", "p"],
    "handoff": ["handoff", "--run-id", "p", "--case", "A"],
    "compare": ["compare", "p", "p"],
    "sql": ["sql", "select * from rows"],
}


@pytest.mark.parametrize("kind", ["rows", "traces"])
@pytest.mark.parametrize("command", sorted(READING))
def test_a_damaged_parquet_part(published, tmp_path, command, kind):
    out = tmp_path / "results"
    shutil.copytree(published, out, symlinks=True)
    (part,) = (out / kind / "dataset_revision=r1" / "run_id=p").glob("*.parquet")
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # a part cut short: a copy interrupted, a disk that failed
    done = _tooleval(*READING[command], "--out", str(out))
    if kind == "traces" and done.returncode in (0, 1):  # a command that reads the rows alone never opens it
        assert "Traceback" not in done.stdout + done.stderr
        return
    _exit_2(done, "cannot be read", "damaged", "restore it from a backup")  # every command reads the rows


def test_an_empty_sql_query(published):
    for query in ("", "   ", "-- only a comment"):
        done = _tooleval("sql", "--out", str(published), "--", query)
        _exit_2(done, "the query")  # AttributeError traceback before


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    return done.returncode == 0


@pytest.mark.parametrize("size", ["400k", "2m"])  # full while the shards write, or while the run publishes
def test_a_disk_that_fills_during_the_run(tmp_path, size):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, size):
        pytest.skip("mounting a tmpfs needs root")
    try:
        out = disk / "results"
        done = _tooleval("run", "--dataset", str(BUNDLED), "--out", str(out), "--run-id", "full",
                         TOOLEVAL_PREFECT_HOME=str(seeded_home(tmp_path / "prefect-home")))
        _exit_2(done, "no space left on the device", "free some space", "Nothing was published")
        assert "OSError" not in done.stdout + done.stderr
        assert not (out / "runs/full/commit.json").exists()
        assert not list(out.glob("rows/*/run_id=full/*.parquet"))
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_the_sql_views_still_answer_after_a_refused_command(published):
    done = _tooleval("sql", "--out", str(published), "--format", "jsonl", "select count(*) as n from rows")
    assert done.returncode == 0 and json.loads(done.stdout.splitlines()[0]) == {"n": 4}


POOL_RUN = """
import sys

if __name__ == "__main__":  # the pool's spawned workers import this file again: only the command runs it
    import flows.evaluate
    flows.evaluate.PROCESS_POOL_MIN_ROWS = 1  # a pool for the bundled 200 rows, as for a large corpus
    import tooleval.cli
    sys.argv = ["tooleval", *sys.argv[1:]]
    tooleval.cli.main()
"""


def test_a_pool_worker_killed_with_sigkill(tmp_path):
    script = tmp_path / "pool_run.py"
    script.write_text(POOL_RUN)
    out = tmp_path / "results"
    process = subprocess.Popen([sys.executable, str(script), "run", "--dataset", str(BUNDLED), "--out", str(out),
                                "--run-id", "pool", "--workers", "2", "--shard-size", "10"],
                               env=_env(TOOLEVAL_PREFECT_HOME=str(seeded_home(tmp_path / "prefect-home"))),
                               cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killed, deadline = None, time.monotonic() + 600
    while killed is None and process.poll() is None and time.monotonic() < deadline:
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:  # a pool worker (not the resource tracker)
                time.sleep(5)  # at work on a shard by then
                os.kill(int(child), signal.SIGKILL)
                killed = child
                break
        time.sleep(0.2)
    printed = process.communicate(timeout=600)[0]
    assert killed is not None, printed[-3000:]
    text = _exit_2(process_result(process, printed), "a worker process of the run ended abruptly",
                   "run it again")
    assert "BrokenProcessPool" not in text.replace("exception: BrokenProcessPool", "")  # Prefect's state line only
    assert not (out / "runs/pool/commit.json").exists()


def process_result(process: subprocess.Popen, printed: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(process.args, process.returncode, printed, "")
