"""tooleval's local Prefect API server, shared by the commands of one Prefect home, and the bookkeeping that keeps
the Prefect UI truthful.

Prefect's built-in temporary server costs every command its start-up (5-10 s here) and outlives a main process killed
with SIGTERM or SIGKILL (only SIGINT shuts it down), holding ``prefect.db`` and a port forever. So when no
``PREFECT_API_URL`` is set, tooleval runs the same server (Prefect's app under uvicorn, with the ephemeral settings)
as a process of its own per Prefect home (:mod:`tooleval.cli._prefect_daemon`), which the commands share, found
through files in that home:

* ``server.lock`` — a command holds it (``flock``) while it finds or starts the server; the server holds it while
  it stops. So two commands never start two servers, and none picks up a server that is stopping.
* ``server.json`` — the server's pid, port, host and process start time (and ``server.pid``, its pid alone).
* ``server.users`` — every command using the server holds a shared lock on it; the kernel releases it when the
  command ends, however it ends (``kill -9`` included).
* ``server.linger`` — a deadline: a command that ends normally asks the server to wait for the next one until
  then (``$TOOLEVAL_PREFECT_SERVER_IDLE_S``, default :data:`IDLE_S`; 0 stops it with the command, as before);
  a command that starts clears it.

The server stops itself within about a second once no command uses it and no deadline holds: after a killed or
interrupted command at once, after a normal one when the idle time is over; and at once when its home is deleted
or moved, so it never holds a removed results folder. The command starts the server in its own session (Ctrl-C
reaches only tooleval, which records the interrupted runs ``Crashed`` while the server still listens), and starts
it before it imports Prefect, so both start-ups overlap.

Every flow run a tooleval process creates carries a tag naming its holder (host, pid, process start time). At
start, runs left ``Running``/``Pending`` by a holder that is gone are set ``Crashed``. Before a command returns,
the client's event queue is drained and the server polled until each task run of the command's flow runs is
recorded in a final state (task-run states reach the database asynchronously, through events).

Prefect is imported lazily, inside the functions: the core of tooleval imports no Prefect.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tooleval.errors import InputFileError
from tooleval.settings import DEFAULT_SERVER_IDLE_S, STARTUP_TIMEOUT_ENV
from tooleval.storage import process_alive, process_start

__all__ = ["IDLE_S", "ServerStartError", "ServerUse", "begin_server", "crash_dead_runs", "end_server", "holder_tag",
           "server_for", "superseded", "wait_until_recorded"]

logger = logging.getLogger(__name__)

TAG_PREFIX = "tooleval-holder:"
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
IDLE_S = DEFAULT_SERVER_IDLE_S
"""Seconds a server waits for the next command after one ended normally, unless
``$TOOLEVAL_PREFECT_SERVER_IDLE_S`` says otherwise."""
STATE, START_LOCK, USERS, LINGER = "server.json", "server.lock", "server.users", "server.linger"
_DAEMON = Path(__file__).with_name("_prefect_daemon.py")
_SPAWNED: list[subprocess.Popen] = []  # kept referenced: a server outlives this process by design


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def idle_seconds() -> float:
    """``$TOOLEVAL_PREFECT_SERVER_IDLE_S`` (:func:`tooleval.settings.prefect_server_idle_s`; default
    :data:`IDLE_S`).

    Raises:
        tooleval.settings.EnvironmentValueError: a value that is not a number of seconds in [0, 86400].
    """
    from tooleval.settings import prefect_server_idle_s

    return prefect_server_idle_s()


def _live_state(home: Path) -> dict | None:
    """``server.json`` when it names a live server process of this host, else None. A server that exited but was
    not yet reaped by the command that started it (a zombie, which ``kill 0`` still finds) is not live."""
    try:
        state = json.loads((home / STATE).read_text())
    except (OSError, ValueError):
        return None
    alive = isinstance(state, dict) and process_alive(state.get("host"), state.get("pid"), state.get("started"))
    return state if alive and state.get("host") == socket.gethostname() and _running(state["pid"]) else None


RESTARTS = 2
"""Times a command starts the server again when it exited before it answered (its port taken by another process
between the choice and the bind, a start-up failure), before giving up with the server's log named."""

LOG_LINES = 12
"""Lines of ``server.log`` quoted when the server did not answer."""


class ServerStartError(InputFileError):
    """The local Prefect server did not answer in time, or kept exiting before it answered: an environment error
    (exit 2; the run never started). The message quotes the last lines of the server's log and names
    ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``.

    Attributes:
        log: The server's log file.
    """

    def __init__(self, log: Path, problem: str) -> None:
        super().__init__(None, None, f"{problem}\n{_log_tail(log)}\n",
                         f"on a busy machine give the server longer: {STARTUP_TIMEOUT_ENV}=600 (seconds); "
                         "or point PREFECT_API_URL at a running Prefect server.")
        self.args = (log, problem)  # what pickling passes back to __init__
        self.log = log


def _log_tail(log: Path) -> str:
    """The last :data:`LOG_LINES` lines of ``log``, indented, under a line naming it."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, os.path.getsize(log) - 64 * 1024))
            lines = handle.read().decode("utf-8", "replace").splitlines()[-LOG_LINES:]
    except OSError:
        lines = []
    if not any(line.strip() for line in lines):
        return f"{log} holds nothing (the server logs errors only)."
    return f"last lines of {log}:\n" + "\n".join(f"  {line}" for line in lines)


class ServerUse:
    """This process's use of the shared server of ``home`` (:func:`begin_server`, then :meth:`wait`, then
    :func:`end_server`).

    Attributes:
        home: The Prefect home (its SQLite database, ``server.log`` and the files of the protocol above).
        port: The server's port on 127.0.0.1.
        pid: The server's pid.
        started_here: Whether this command started the server (else it found one running).
    """

    def __init__(self, home: Path, port: int, pid: int, started_here: bool, users) -> None:
        self.home, self.port, self.pid, self.started_here, self._users = home, port, pid, started_here, users
        self.began = time.monotonic()  # when this command started the server, or found it

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def wait(self, timeout: float | None = None) -> str:
        """Wait until the server's ``/api/health`` answers; return its API URL. ``timeout``: seconds from the
        moment this command started (or found) the server, default
        :func:`tooleval.settings.prefect_server_startup_s`. A server that exits before it answers is replaced
        (:data:`RESTARTS` times at most; :meth:`_replace`).

        On failure this command's use ends, and a server that it started and that no other command uses is
        stopped (and waited for), so that nothing of the command is left running.

        Raises:
            ServerStartError: the server, and each one started in its place, exited, or none answered within
                ``timeout`` seconds (the message quotes the server's log).
        """
        import httpx

        if timeout is None:
            from tooleval.settings import prefect_server_startup_s

            timeout = prefect_server_startup_s()
        log = self.home / "server.log"
        restarts = 0
        try:
            with httpx.Client() as client:
                while True:  # asked at least once: the command's own imports may have outlasted the timeout
                    if not _running(self.pid):
                        if restarts == RESTARTS:
                            raise ServerStartError(log, f"the local Prefect server (pid {self.pid}) exited before "
                                                   f"it answered, {RESTARTS + 1} times.")
                        restarts += 1
                        logger.warning("the Prefect server (pid %d) exited before it answered; starting another "
                                       "(see %s)", self.pid, log)
                        self._replace()
                        continue
                    try:
                        if client.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                            return self.api_url
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() >= self.began + timeout:
                        break
                    time.sleep(0.05)
            stopped = self.abandon()
            raise ServerStartError(log, f"the local Prefect server (pid {self.pid}) did not answer within "
                                   f"{timeout:g} s of its start ({STARTUP_TIMEOUT_ENV}); "
                                   + ("it was stopped." if stopped else "other commands still wait for it."))
        except BaseException:  # a timeout, an exited server, an interrupt: none leaves a server starting for nobody
            self.abandon()
            raise

    def abandon(self) -> bool:
        """End this command's use, and stop the server if this command started it and no other command uses it:
        a server that has not answered would otherwise finish its start-up first (minutes on a loaded machine).
        Returns whether the server is gone. Idempotent."""
        self.end(linger=False)
        if not self.started_here:
            return not _running(self.pid)
        with open(self.home / START_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _running(self.pid):
                return True
            if _in_use(self.home):
                return False
            try:
                if json.loads((self.home / STATE).read_text()).get("pid") == self.pid:
                    (self.home / STATE).unlink()
            except (OSError, ValueError):
                pass
            try:
                os.killpg(self.pid, 9)  # its own session: the server and anything it started
            except OSError:
                pass
            for process in _SPAWNED:
                if process.pid == self.pid:
                    process.wait()  # reaped before the lock is released: the next command sees it gone
            return True

    def _replace(self) -> None:
        """Use the server that took the exited one's place, or start it: under the start lock, so that commands
        waiting together start one server between them."""
        with open(self.home / START_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = _live_state(self.home)
            if state is None:
                state = _start(self.home)
                self.started_here = True
        self.pid, self.port = state["pid"], state["port"]
        self.began = time.monotonic()

    def end(self, *, linger: bool) -> None:
        """Stop using the server. ``linger``: this command ended normally, so the server waits for the next one
        for the idle time; otherwise it stops once no other command uses it. Idempotent."""
        users, self._users = self._users, None
        if users is None:
            return
        idle = idle_seconds() if linger else 0.0
        if idle > 0:
            _write(self.home / LINGER, str(time.time() + idle))
        users.close()  # releases the shared lock


def _in_use(home: Path) -> bool:
    """Whether a command holds its shared lock on ``server.users``."""
    with open(home / USERS, "a") as users:
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(users, fcntl.LOCK_UN)
        return False


def _running(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie (a server this process started and that exited stays one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _write(path: Path, text: str) -> None:
    """Write ``text`` whole: to a temporary name, then renamed (readers never see half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _spawn(home: Path) -> tuple[int, int]:
    """Start the server of ``home``, not waiting for it; returns (pid, port)."""
    import prefect.server  # noqa: F401  (only to fail here, with Prefect's own message, when it is missing)

    port = _free_port()
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1", "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    with open(home / "server.log", "ab") as log:
        process = subprocess.Popen([sys.executable, str(_DAEMON), str(home), str(port)], env=env, cwd="/",
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    _SPAWNED.append(process)
    return process.pid, port


def _start(home: Path) -> dict:
    """Start the server of ``home`` and record it in ``server.json`` (the caller holds the start lock)."""
    pid, port = _spawn(home)
    state = {"pid": pid, "port": port, "host": socket.gethostname(), "started": process_start(pid)}
    _write(home / STATE, json.dumps(state))
    _write(home / "server.pid", str(pid))
    return state


_USE: ServerUse | None = None


def begin_server(home: Path) -> ServerUse:
    """Find the running server of ``home`` or start one (without waiting for it to answer), and register this
    process as one of its users. Once per process: later calls return the same use.

    Raises:
        OSError: the home cannot hold the protocol's files.
    """
    global _USE
    if _USE is not None and _USE._users is not None:
        return _USE
    home = Path(home)
    with open(home / START_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held briefly; a stopping server holds it until it is gone
        state = _live_state(home)
        started_here = state is None
        if state is None:
            state = _start(home)
        users = open(home / USERS, "a")
        fcntl.flock(users, fcntl.LOCK_SH)
        _write(home / LINGER, "0")  # a command uses it now: only a normal end asks it to wait again
    _USE = ServerUse(home, state["port"], state["pid"], started_here, users)
    return _USE


def end_server(*, linger: bool) -> None:
    """End this process's use of the server, if it began one (see :meth:`ServerUse.end`)."""
    if _USE is not None:
        _USE.end(linger=linger)


def server_for(home: Path) -> str:
    """The API URL of the shared server of ``home``, found or started, once it answers.

    Raises:
        ServerStartError: see :meth:`ServerUse.wait`.
    """
    return begin_server(home).wait()


def holder_tag() -> str:
    """``tooleval-holder:<host>:<pid>:<start>``: the tag on every flow run this process creates."""
    return f"{TAG_PREFIX}{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def _holder_of(tags: list[str]) -> dict | None:
    for tag in tags:
        if tag.startswith(TAG_PREFIX):
            host, _, rest = tag[len(TAG_PREFIX):].partition(":")
            pid, _, started = rest.partition(":")
            if pid.isdigit():
                return {"host": host, "pid": int(pid), "started": None if started == "None" else started}
    return None


def _open_states():
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    return FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
        any_=[StateType.RUNNING, StateType.PENDING, StateType.SCHEDULED, StateType.CANCELLING])))


def _crash(client, flow_run, message: str) -> None:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.states import Crashed

    client.set_flow_run_state(flow_run.id, Crashed(message=message), force=True)
    tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])))
    for task_run in tasks:
        if task_run.state is None or task_run.state.type.value not in FINAL:
            client.set_task_run_state(task_run.id, Crashed(message=message), force=True)


def crash_dead_runs(*, own: bool = False) -> int:
    """Set ``Crashed`` the open flow runs (and their open task runs) whose tooleval holder is gone; with ``own``,
    this process's open runs as well (it is exiting on an interrupt). Returns how many flow runs were set."""
    from prefect.client.orchestration import get_client

    crashed = 0
    with get_client(sync_client=True) as client:
        for flow_run in client.read_flow_runs(flow_run_filter=_open_states()):
            holder = _holder_of(list(flow_run.tags or []))
            if holder is None or holder["host"] != socket.gethostname():
                continue
            mine = holder["pid"] == os.getpid()
            if (mine and own) or (not mine and not process_alive(**holder)):
                why = "interrupted" if mine else f"its tooleval process (pid {holder['pid']}) died"
                _crash(client, flow_run, f"{why}; recorded by tooleval")
                crashed += 1
    return crashed


def _final(run) -> bool:
    return run.state is not None and run.state.type.value in FINAL


def _parents(run) -> list:
    return [getattr(parent, "id", None) for parent in (run.task_inputs or {}).get("__parents__", [])]


def superseded(runs: list) -> set:
    """The ids of the task runs of ``runs`` that a lost worker left unfinished, which no one will report finished.

    When a Dask worker dies mid-shard, the cluster runs the shard again on another worker, under the same shard
    task run; the stage task runs the dead worker had started stay ``Running`` on the server for ever, while the
    shard's result comes from the stage runs of the second attempt. Such a run is recognised by a later run of
    the same task, under the same parent, that is in a final state, its parent being in a final state too: within
    one attempt a stage's runs follow each other (a stale cached result is computed again only after the first
    run ended), so a run followed by a finished one of its own task has ended or was lost, and a final parent has
    every stage run of its attempt behind it."""
    final = {r.id for r in runs if _final(r)}
    siblings: dict[tuple, list] = {}
    for r in runs:
        for parent in _parents(r):
            siblings.setdefault((parent, r.task_key), []).append(r)
    return {r.id for r in runs if r.id not in final and r.start_time is not None
            and any(parent in final and any(s.id in final and s.start_time is not None and s.start_time > r.start_time
                                            for s in siblings[(parent, r.task_key)])
                    for parent in _parents(r))}


def wait_until_recorded(expected: int | None = None, timeout: float = 20.0) -> bool:
    """Drain the client's event and log queues, then wait until the server holds every task run of this
    process's flow runs in a final state (and at least ``expected`` of them), but for the runs a lost worker left
    unfinished (:func:`superseded`: no one reports them, and the wait would last its whole ``timeout``). Returns
    whether it did in time."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    EventsWorker.drain_all(timeout=timeout, at_exit=False)
    APILogWorker.drain_all(timeout=timeout, at_exit=False)
    mine = FlowRunFilter(tags=FlowRunFilterTags(all_=[holder_tag()]))
    deadline = time.monotonic() + timeout
    last, steady = -1, 0
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs, offset = [], 0
            while page := client.read_task_runs(flow_run_filter=mine, limit=200, offset=offset):
                runs += page
                offset += len(page)
            lost = superseded(runs)
            final = all(_final(r) or r.id in lost for r in runs)
            steady = steady + 1 if len(runs) == last else 0
            last = len(runs)
            # With the count known, the last expected task run in a final state ends the wait; without it, the
            # count must hold over two more reads, since task runs reach the server as events, in no set order.
            if final and (len(runs) >= expected if expected is not None else steady >= 2):
                return True
            time.sleep(0.05 if expected is not None else 0.2)
    logger.warning("the Prefect server recorded %d task run(s) in final states within %.0f s; expected %s",
                   last, timeout, expected)
    return False
