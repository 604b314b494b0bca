"""tooleval's own temporary Prefect API server, and the bookkeeping that keeps the Prefect UI truthful.

Prefect's built-in temporary server outlives a main process killed with SIGTERM or SIGKILL (PREFECT.md), holding
``prefect.db`` and a port, and leaves its flow runs ``Running`` forever. So when no ``PREFECT_API_URL`` is set,
tooleval starts the same server itself (``uvicorn prefect.server.api.server:create_app`` with the ephemeral
settings, as Prefect does), with two differences:

* the child asks the kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes, on
  Linux): whatever kills tooleval, the server dies with it;
* it runs in its own session, so Ctrl-C reaches only tooleval, which then records the interrupted runs as
  ``Crashed`` while the server still listens, and stops it.

Every flow run a tooleval process creates carries a tag naming its holder (host, pid, process start time). At
start, runs left ``Running``/``Pending`` by a holder that is gone are set ``Crashed``. Before a command returns,
the client's event queue is drained and the server polled until each task run of the command's flow runs is
recorded in a final state (task-run states reach the database asynchronously, through events).

Prefect is imported lazily, inside the functions: the core of tooleval imports no Prefect.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tooleval.storage._lease import process_start, process_alive

__all__ = ["TemporaryServer", "holder_tag", "crash_dead_runs", "wait_until_recorded", "server_for"]

logger = logging.getLogger(__name__)

TAG_PREFIX = "tooleval-holder:"
PR_SET_PDEATHSIG = 1
FINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")


def _die_with_parent(parent: int) -> None:
    """In the child, before exec: SIGKILL when the parent dies; exit at once if it is already gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TemporaryServer:
    """One Prefect API server subprocess for this process's life (started at most once, stopped at exit).

    Args:
        home: ``PREFECT_HOME`` of the server (its SQLite database); its log goes to ``<home>/server.log`` and
            its pid to ``<home>/server.pid``.
    """

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self, timeout: float = 60.0) -> str:
        """Start the server and wait until ``/api/health`` answers; return its API URL.

        Raises:
            RuntimeError: the server exited or did not answer within ``timeout`` seconds (its log is named).
        """
        import httpx
        import prefect

        self.port = _free_port()
        log = self.home / "server.log"
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1", "PREFECT_HOME": str(self.home)}
        env.pop("PREFECT_API_URL", None)
        parent = os.getpid()
        with open(log, "ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent),
                 "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
                env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle,
                preexec_fn=lambda: _die_with_parent(parent), start_new_session=True,
            )
        (self.home / "server.pid").write_text(str(self.process.pid))
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        with httpx.Client() as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the Prefect server exited with code {self.process.returncode}; see {log}")
                try:
                    if client.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                        return self.api_url
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the Prefect server did not answer within {timeout:.0f} s; see {log}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_SERVER: TemporaryServer | None = None


def server_for(home: Path) -> str:
    """The API URL of this process's temporary server (started on first use, with ``home``)."""
    global _SERVER
    if _SERVER is None or _SERVER.process is None or _SERVER.process.poll() is not None:
        timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60"))
        _SERVER = TemporaryServer(home)
        _SERVER.start(timeout=timeout)
    return _SERVER.api_url


def stop_server() -> None:
    """Stop this process's temporary server, if it started one."""
    if _SERVER is not None:
        _SERVER.stop()


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


def wait_until_recorded(expected: int | None = None, timeout: float = 20.0) -> bool:
    """Drain the client's event and log queues, then wait until the server holds every task run of this
    process's flow runs in a final state (and at least ``expected`` of them). Returns whether it did in time."""
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
            final = all(r.state is not None and r.state.type.value in FINAL for r in runs)
            steady = steady + 1 if len(runs) == last else 0
            last = len(runs)
            if final and (expected is None or len(runs) >= expected) and steady >= 2:
                return True
            time.sleep(0.2)
    logger.warning("the Prefect server recorded %d task run(s) in final states within %.0f s; expected %s",
                   last, timeout, expected)
    return False
