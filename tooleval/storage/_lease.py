"""The writer lock of a run: a lease with an expiry and a holder identity, one per ``(out, run id)``.

A lease is a small JSON object at ``<out>/.tooleval/locks/<run>.json``::

    {"run_id", "host", "pid", "started", "token", "acquired_at", "expires_at"}

* A live holder renews it (a daemon thread rewrites ``expires_at`` every third of the time to live), so a
  second writer of the same run id is refused while the first is alive (:class:`LeaseHeldError`, exit 2,
  naming the holder).
* A lease is stale when it expired (any host: the holder stopped renewing), or at once when its holder ran on
  this host and that process is gone (``pid`` and its start time, so a recycled pid is not mistaken for the
  holder). A stale lease is taken over.
* Different run ids have different leases: they publish side by side.

In a local folder every change is a read, a decision and one whole-object write done while holding a guard
(``fcntl.flock`` on ``locks/.guard``): a true compare-and-swap. On object storage (``--out s3://…``) there is no
such guard; :class:`tooleval.storage._remote_lease.RemoteLease` uses the store's conditional writes (S3's
``If-None-Match`` / ``If-Match``), another compare-and-swap, and where a store has none falls back to writing and
reading back, which narrows the race between two writers to a window but does not close it (its docstring says
exactly when).
:func:`lease_for` picks the kind for a results location.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import threading
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

from tooleval.errors import InputFileError
from tooleval.settings import DEFAULT_LOCK_TTL_S, LOCK_TTL_ENV, lock_ttl_s
from tooleval.storage._paths import _os_error, ensure_dir

__all__ = ["LeaseHeldError", "RunLease", "hold_run", "lease_for", "lease_ttl", "holder_alive", "process_alive",
           "process_start", "read_lease"]

TTL_ENV = LOCK_TTL_ENV
DEFAULT_TTL_S = DEFAULT_LOCK_TTL_S


class LeaseHeldError(InputFileError):
    """Another live writer holds the run's lease (exit 2); ``holder`` is its lease record."""

    def __init__(self, path: str | Path, line: int | None, problem: str, fix: str, holder: dict | None = None):
        super().__init__(path, line, problem, fix)
        self.args = (path, line, problem, fix, holder)
        self.holder = holder


def lease_ttl() -> float:
    """Seconds a lease lives without renewal: ``$TOOLEVAL_LOCK_TTL_S`` in [1, 86400], or 120.

    Raises:
        tooleval.settings.EnvironmentValueError: the variable holds anything else (exit 2, naming it).
    """
    return lock_ttl_s()


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _me() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": process_start(os.getpid())}


def process_alive(host: str | None, pid: object, started: str | None) -> bool:
    """Whether process ``pid`` started at ``started`` (see :func:`process_start`) runs on ``host``; a process
    on another host cannot be checked and counts as alive."""
    if host != socket.gethostname():
        return True
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return started is None or process_start(pid) == started


def holder_alive(record: dict, now: datetime | None = None) -> bool:
    """Whether a lease record's holder is alive: not expired, and (on this host) its process still running."""
    now = now or datetime.now(timezone.utc)
    try:
        expires = datetime.fromisoformat(record["expires_at"])
    except (KeyError, TypeError, ValueError):
        return False
    return expires > now and process_alive(record.get("host"), record.get("pid"), record.get("started"))


def _lock_dir(out: Path) -> Path:
    return ensure_dir(out, ".tooleval/locks")


def lease_relpath(run_id: str) -> str:
    """Where the lease of ``run_id`` lives under the results location."""
    return f".tooleval/locks/{run_id}.json"


def read_lease(out: str | Path, run_id: str) -> dict | None:
    """The lease record of ``run_id`` under ``out`` (a folder or an fsspec URL), or None (absent or unreadable)."""
    from tooleval.storage._fs import tree_of

    try:
        record = json.loads(tree_of(out).read_bytes(lease_relpath(run_id)))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


@contextmanager
def _guard(folder: Path) -> Iterator[None]:
    with open(folder / ".guard", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write(path: Path, record: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def describe_holder(record: dict) -> str:
    """``pid 123 on host h (run r, lease until ...)``: the holder as a message names it."""
    return (f"pid {record.get('pid')} on host {record.get('host')!r} (run {record.get('run_id')!r}, "
            f"lease until {record.get('expires_at')})")


class RunLease:
    """The lease of one run id under one results folder.

    Args:
        out: The results folder.
        run_id: The run whose partitions and run files the holder may write.
        ttl: Seconds without renewal before the lease is stale (default :func:`lease_ttl`).
    """

    def __init__(self, out: str | Path, run_id: str, ttl: float | None = None) -> None:
        self.out = Path(out)
        self.run_id = run_id
        self.ttl = ttl or lease_ttl()
        self.token = secrets.token_hex(8)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> Path:
        return self.out / ".tooleval" / "locks" / f"{self.run_id}.json"

    def _record(self) -> dict:
        now = datetime.now(timezone.utc)
        return {"run_id": self.run_id, **_me(), "token": self.token, "acquired_at": now.isoformat(),
                "expires_at": (now + timedelta(seconds=self.ttl)).isoformat()}

    def try_acquire(self) -> dict | None:
        """Take the lease if it is free or stale; return None on success, else the live holder's record."""
        folder = _lock_dir(self.out)
        try:
            with _guard(folder):
                current = read_lease(self.out, self.run_id)
                if current is not None and current.get("token") != self.token and holder_alive(current):
                    return current
                _write(self.path, self._record())
        except OSError as exc:  # a read-only or full results folder: the command cannot publish there
            raise _os_error(folder, exc) from None
        self._thread = threading.Thread(target=self._renew, name=f"tooleval-lease-{self.run_id}", daemon=True)
        self._thread.start()
        return None

    def acquire(self) -> None:
        """Take the lease.

        Raises:
            LeaseHeldError: a live writer holds it (names its host, pid and run id).
            tooleval.storage.OutFolderError: the lease cannot be written (a read-only or full results folder).
        """
        holder = self.try_acquire()
        if holder is not None:
            raise LeaseHeldError(
                self.path, None, f"run {self.run_id!r} is being written by another tooleval process: "
                f"{describe_holder(holder)}.",
                "wait for it to finish, or choose another --run-id; a lease whose holder died is taken over "
                "automatically (at once on the same host, after it expires elsewhere).", holder)

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                with _guard(_lock_dir(self.out)):
                    current = read_lease(self.out, self.run_id)
                    if current is None or current.get("token") != self.token:
                        return  # taken over (we were presumed dead): stop renewing
                    record = dict(current, expires_at=(datetime.now(timezone.utc)
                                                       + timedelta(seconds=self.ttl)).isoformat())
                    _write(self.path, record)
            except (OSError, InputFileError):  # the folder went away: the lease expires on its own
                return

    def held(self) -> bool:
        """Whether the lease record still carries this holder's token (False once another writer took it over)."""
        current = read_lease(self.out, self.run_id)
        return current is not None and current.get("token") == self.token

    def release(self) -> None:
        """Give the lease back (only if it is still ours). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            with _guard(_lock_dir(self.out)):
                current = read_lease(self.out, self.run_id)
                if current is not None and current.get("token") == self.token:
                    self.path.unlink(missing_ok=True)
        except (OSError, InputFileError):
            pass
