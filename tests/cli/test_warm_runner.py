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
from tests.support.prefect_home import seeded_home

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
               TOOLEVAL_PREFECT_HOME=str(seeded_home(tmp_path / "home")))
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


def _launch(src, dataset, out, run_id, env, **extra) -> tuple[subprocess.Popen, Path]:
    """Start a client, measured; returns it and the file its peak RSS goes to (:func:`_collect`)."""
    peak = src.parent / f"{run_id}.maxrss"
    client = subprocess.Popen(
        [sys.executable, "-c", MEASURED, str(peak), sys.executable, "-m", "tooleval.cli", "run", "--dataset",
         str(dataset), "--out", str(out), "--run-id", run_id],
        cwd=src, env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return client, peak


def _collect(launched: tuple[subprocess.Popen, Path]) -> tuple[int, str, str, float]:
    """Wait for a client of :func:`_launch`; returns (exit code, stdout, stderr, its peak RSS in MB)."""
    client, peak = launched
    stdout, stderr = client.communicate(timeout=PATIENT_S)
    return client.returncode, stdout, stderr, int(peak.read_text()) / 1024


def _run(src, dataset, out, run_id, env, **extra) -> tuple[int, str, str, float]:
    """Run a client to its end; returns (exit code, stdout, stderr, its peak RSS in MB)."""
    return _collect(_launch(src, dataset, out, run_id, env, **extra))


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
    """``text`` without what differs between two runs of one command on any machine: the rates, whether the
    shared Prefect server was still up (on a slow machine its idle time can run out between two runs, and the
    second one starts it again), and Prefect's warning that its events were still being sent when the command
    ended (it is timed: a busy machine prints it for one run and not the other)."""
    text = re.sub(r"(?m)^.*\| WARNING \| EventsWorker - Still processing items: .*\n", "", text)
    text = re.sub(r"\(\d+ rows/s\)", "(N rows/s)", text)
    return re.sub(r"(starting|connecting to) the local Prefect server", "reaching the local Prefect server", text)


def _published(out: Path, run_id: str) -> bool:
    return (out / "runs" / run_id / "summary.json").exists()


def test_a_second_run_is_served_warm_alike_and_an_edit_means_cold(setup, tmp_path):
    src, dataset, out, env = setup
    code1, _, err1, mb1 = _run(src, dataset, out, "r1", env)
    assert mb1 > COLD_RUN_MIN_MB, err1
    first = _bound_runner(tmp_path, set())

    # the same command warm and cold, run at once: two run ids of one folder run side by side (their
    # publications take turns, silently; test_concurrent_runs.py), so what each prints and publishes is what
    # it would alone, and only the warm one asks the runner
    warm = _launch(src, dataset, out, "r2", env)
    cold = _launch(src, dataset, out, "r3", env, TOOLEVAL_WARM_RUNNER="0")
    code2, out2, err2, mb2 = _collect(warm)
    code3, out3, err3, mb3 = _collect(cold)
    assert mb2 < WARM_CLIENT_MAX_MB, (mb2, err2)  # served by the runner
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
            if client.poll() is None and time.monotonic() >= deadline:
                client.kill()  # still running past the deadline: end it so that its output can be read
                pytest.fail(f"{run_id} never paused in its publication: {client.communicate(timeout=PATIENT_S)}")
            assert client.poll() is None, client.communicate(timeout=PATIENT_S)
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


# --- one runner per Prefect home, whatever the terminal, the folder or the way the program is called -----------

VENV_BIN = Path(sys.executable).parent


def _terminal(env: dict[str, str], src: Path, *, activated: bool, session: str) -> dict[str, str]:
    """``env`` as a terminal has it: the copied code first on ``sys.path`` (the venv's ``tooleval`` program then
    runs it); with ``activated``, what ``. .venv/bin/activate`` adds (the venv first on ``PATH``, ``VIRTUAL_ENV``,
    the prompt); and the variables that differ between two terminals."""
    base = {k: v for k, v in env.items() if k not in ("VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT", "PS1")}
    path = [p for p in base.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    base.update(PYTHONPATH=str(src), PATH=os.pathsep.join(path), TERM_SESSION_ID=session, WINDOWID=session,
                SHLVL=str(len(session)), SSH_CONNECTION=f"10.0.0.{len(session)} 5{len(session)} 10.0.0.9 22")
    if activated:
        base.update(PATH=os.pathsep.join([str(VENV_BIN), *path]), VIRTUAL_ENV=str(VENV_BIN.parent),
                    VIRTUAL_ENV_PROMPT="(.venv) ", PS1="(.venv) \\u@\\h:\\w$ ")
    return base


def _program(program: str, cwd: Path, dataset: Path, out: Path, run_id: str, env: dict[str, str]):
    """Run ``program run`` (a name looked up on ``env``'s ``PATH``, or a path) to its end from ``cwd``; returns
    (exit code, stdout, stderr, the client's peak RSS in MB)."""
    cwd.mkdir(parents=True, exist_ok=True)
    peak = cwd / f"{run_id}.maxrss"
    done = subprocess.run([sys.executable, "-c", MEASURED, str(peak), program, "run", "--dataset", str(dataset),
                           "--out", str(out), "--run-id", run_id],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=PATIENT_S)
    return done.returncode, done.stdout, done.stderr, int(peak.read_text()) / 1024


def _processes_naming(text: str) -> dict[int, tuple[int, str]]:
    """pid -> (RSS in KB, command line) of every process whose command line contains ``text``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text()
        except OSError:
            continue
        rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")]
        if text in cmdline and rss and " Z " not in (entry / "stat").read_text():
            found[int(entry.name)] = (rss[0], cmdline)
    return found


def test_two_terminals_and_five_results_folders_share_one_runner_and_one_server_that_end_when_idle(setup, tmp_path):
    """`tooleval run` from an activated virtual environment and by the path of its program, in two terminals, two
    working folders and five results folders: one runner and one Prefect server serve every run, in the user's
    Prefect home, and both end by themselves once idle."""
    src, dataset, results, env = setup
    # The runs follow each other within a second or two (a client's start-up), so an idle time of 10 s keeps
    # both processes between them; the test then waits that idle time out, so a longer one only costs time.
    idle_s = 10
    env = {k: v for k, v in env.items() if k != "TOOLEVAL_PREFECT_HOME"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), TOOLEVAL_PREFECT_SERVER_IDLE_S=str(idle_s))
    home = seeded_home(tmp_path / "cache" / "tooleval" / "prefect")  # the user's, as no home is set
    activated = _terminal(env, src, activated=True, session="first-terminal")
    direct = _terminal(env, src, activated=False, session="second")
    # `. .venv/bin/activate && tooleval run` in one terminal, cold: it leaves a runner
    code1, _, err1, mb1 = _program("tooleval", tmp_path / "a", dataset, results / "a", "r1", activated)
    assert code1 in (0, 1) and mb1 > COLD_RUN_MIN_MB, err1
    runner = _bound_runner(tmp_path, set())
    # `.venv/bin/tooleval run` in another terminal, another working folder and another results folder: served
    code2, _, err2, mb2 = _program(str(VENV_BIN / "tooleval"), tmp_path / "b", dataset, results / "b", "r2", direct)
    assert (code2, mb2 < WARM_CLIENT_MAX_MB) == (code1, True), (mb2, err2)
    # and the first terminal again, into a third folder, then both terminals into two more: the same runner
    folders = {"a": "r1", "b": "r2", "c": "r3", "d": "r4", "e": "r5"}
    for folder, program, cwd, terminal in (("c", "tooleval", "a", activated),
                                           ("d", str(VENV_BIN / "tooleval"), "b", direct),
                                           ("e", "tooleval", "a", activated)):
        code, _, err, mb = _program(program, tmp_path / cwd, dataset, results / folder, folders[folder], terminal)
        assert (code, mb < WARM_CLIENT_MAX_MB) == (code1, True), (folder, mb, err)
    assert _runner_pids(tmp_path) == [runner]
    assert json.loads((home / "warm-runner.json").read_text())["pid"] == runner
    # five results folders leave two processes, the runner and the server, both of the user's one Prefect home
    left = _processes_naming(str(tmp_path))
    kinds = sorted("runner" if "tooleval.cli._warm" in cmdline else "server" if "_prefect_daemon" in cmdline
                   else cmdline for _, cmdline in left.values())
    assert kinds == ["runner", "server"], left
    assert all(str(home) in cmdline for _, cmdline in left.values())
    total_mb = sum(rss for rss, _ in left.values()) / 1024
    assert total_mb <= 700, left
    # every folder's rows, and its own task results and cache records; one Prefect database, in the home (read
    # while the two processes wait out their idle time)
    for folder, run_id in folders.items():
        assert len(published_rows(results / folder, run_id)) == len(TINY_TRACES)
        assert len(list((results / folder / ".tooleval" / "prefect" / "storage").iterdir())) > 0
        assert not (results / folder / ".tooleval" / "prefect" / "prefect.db").exists()
    assert (home / "prefect.db").exists()
    # idle: both end by themselves
    deadline = time.monotonic() + idle_s + 60
    while _processes_naming(str(tmp_path)):
        assert time.monotonic() < deadline, f"still running {idle_s + 60} s after the last run: {left}"
        time.sleep(0.5)


# --- forking safely ---------------------------------------------------------------------------------------------

RUNNER_WITH_A_THREAD = """
import _thread, socket, sys, threading, time
from tooleval.cli import _warm
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(_warm._address(sys.argv[1]))
listener.listen(4)
if sys.argv[2] == "threading":
    threading.Thread(target=time.sleep, args=(120,), name="late-thread", daemon=True).start()
else:  # a thread that Python's threading module does not list, as a compiled library's own
    _thread.start_new_thread(time.sleep, (120,))
print(_warm.other_threads(), flush=True)
sys.exit(_warm._Loop(listener, sys.argv[1], 60.0).run())
"""

CLIENT = """
import os, sys
from tooleval.cli import _warm
request = _warm.WarmRequest(argv=["tooleval", "run"], env=dict(os.environ), cwd=os.getcwd(), out="results",
                            key=sys.argv[1])
print(_warm.run_warm(request))
"""


@pytest.mark.parametrize("kind", ["threading", "native"])
def test_a_fork_is_refused_while_another_thread_lives(tmp_path, kind):
    key = f"test-{os.getpid()}-{kind}-{time.monotonic_ns()}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-c", RUNNER_WITH_A_THREAD, key, kind], env=env, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as runner:
        try:
            threads = runner.stdout.readline().strip()
            client = subprocess.run([sys.executable, "-c", CLIENT, key], env=env, cwd=tmp_path,
                                    capture_output=True, text=True, timeout=PATIENT_S)
            code = runner.wait(timeout=PATIENT_S)  # the runner ends: it may fork no more
        finally:
            if runner.poll() is None:
                runner.kill()
            _, stderr = runner.communicate()
    # a native thread is named as its process is (the program's file name)
    assert threads == ("late-thread" if kind == "threading" else Path(sys.executable).name[:15]), threads
    assert client.stdout.strip() == "None", client.stderr  # no child: the command runs cold, in the client
    assert (code, stderr) == (0, "")
    log = (tmp_path / "warm-runner.log").read_text()
    assert f"not forking: another thread is alive ({threads}); ending" in log


def test_the_runner_imports_start_no_thread(tmp_path):
    """What a run imports, imported as a runner does: no thread besides the main one (Python's or the kernel's),
    so the runner forks at all; the same imports without the runner's settings start OpenBLAS' and jemalloc's."""
    script = ("import os, sys\n"
              "if sys.argv[1] == 'runner':\n"
              "    from tooleval.cli._warm import _RUNNER_THREADS_OFF\n"
              "    os.environ.update(_RUNNER_THREADS_OFF)\n"
              "import numpy, scipy.optimize, pyarrow, pyarrow.parquet, duckdb, prefect, flows.evaluate\n"
              "from tooleval.cli._warm import other_threads\n"
              "print(len(os.listdir('/proc/self/task')), other_threads())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "OMP_", "JE_ARROW_"))}
    env["PYTHONPATH"] = str(REPO)
    # the two imports are independent: both processes run at once
    started = {how: subprocess.Popen([sys.executable, "-c", script, how], env=env, cwd=tmp_path, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE) for how in ("runner", "plain")}
    found = {how: process.communicate(timeout=PATIENT_S)[0].strip() for how, process in started.items()}
    assert found["runner"] == "1"
    assert int(found["plain"].split()[0]) > 1 and "jemalloc_bg_thd" in found["plain"]


EXITING = """
import atexit, sys
from tooleval.cli._entry import end_without_teardown, exit_without_teardown
end_without_teardown()


class TornDown:
    def __del__(self):
        sys.stdout.write(" torn down")


kept = TornDown()
atexit.register(lambda: sys.stdout.write(" exit handler ran"))
sys.stdout.write("working")  # still buffered when the process ends
if sys.argv[1] == "fast":
    exit_without_teardown(3)
sys.exit(3)
"""


def test_a_command_ends_after_its_exit_handlers_without_the_teardown(tmp_path):
    ends = {how: subprocess.run([sys.executable, "-c", EXITING, how], env={**os.environ, "PYTHONPATH": str(REPO)},
                                capture_output=True, text=True, timeout=PATIENT_S) for how in ("fast", "normal")}
    assert (ends["fast"].returncode, ends["fast"].stdout) == (3, "working exit handler ran")
    assert (ends["normal"].returncode, ends["normal"].stdout) == (3, "working exit handler ran torn down")


def test_the_runner_key_follows_what_can_change_a_result(tmp_path):
    from tooleval.cli._warm import WarmRequest, runner_key

    base = {"HOME": "/home/u", "PATH": "/usr/bin", "LANG": "C.UTF-8", "TOOLEVAL_REDACTION_KEY": "k" * 32}

    def key(env: dict[str, str], cwd: Path = tmp_path, out: str = "results") -> str:
        return runner_key(WarmRequest(argv=["tooleval", "run"], env=env, cwd=str(cwd), out=out))

    first = key(base)
    activated = {**base, "PATH": f"{VENV_BIN}:/usr/bin", "VIRTUAL_ENV": str(VENV_BIN.parent), "PS1": "(.venv) $ ",
                 "VIRTUAL_ENV_PROMPT": "(.venv) ", "TERM_SESSION_ID": "2", "SSH_TTY": "/dev/pts/3", "SHLVL": "2",
                 "TOOLEVAL_PREFECT_SERVER_IDLE_S": "60", "TOOLEVAL_REDACTION_KEY": "x" * 32}
    # another terminal, an activated virtual environment, another working folder or results folder: one runner
    assert key(activated) == key(base, tmp_path / "elsewhere", "other-results") == first
    # what Prefect, the interpreter or the libraries read once at import, or another Prefect home: another runner
    changed = [{**base, "PREFECT_API_URL": "http://127.0.0.1:4200/api"}, {**base, "PYTHONHASHSEED": "1"},
               {**base, "LANG": "de_DE.UTF-8"}, {**base, "TZ": "Europe/Paris"}, {**base, "OMP_NUM_THREADS": "1"},
               {**base, "TOOLEVAL_PREFECT_HOME": "/tmp/ph"}, {**base, "XDG_CACHE_HOME": "/tmp/cache"},
               {**base, "HOME": "/home/v"}]
    keys = {key(env) for env in changed}
    assert first not in keys and len(keys) == len(changed)
    # a relative home is the working folder's
    relative = {**base, "TOOLEVAL_PREFECT_HOME": "ph"}
    assert key(relative, tmp_path / "a") != key(relative, tmp_path / "b")
    assert key(relative, tmp_path) == key({**base, "TOOLEVAL_PREFECT_HOME": str(tmp_path / "ph")}, tmp_path / "b")
