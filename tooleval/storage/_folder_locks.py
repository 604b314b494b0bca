"""Locks of a results folder that several runs share: the stage files in use, and one revision's commit.

Both are ``fcntl.flock`` locks on small files under ``<out>/.tooleval/locks`` (a local folder; for a results URL,
this machine's state folder for it, :func:`tooleval.storage._machine.local_state_dir`). The kernel drops a lock when
its process ends, however it ends, so a killed run never leaves one behind.

* **Stage files in use** (``.tooleval/locks/stages.lock``): a run holds it *shared* from the end of its plan until it
  has published, since any stage file under ``.tooleval/stages`` — its own, or one a cached task of an earlier run
  wrote — may be read meanwhile. ``tooleval gc`` deletes stage files only while it holds it *exclusively*; when a
  run holds it, gc keeps every stage file (and says so), and a run that starts while gc deletes waits for it to
  finish (a few seconds at most), then finds the records of deleted files gone too and computes them again.
* **On object storage** a flock holds only this machine's runs, so a run also holds a lease object
  ``<out>/.tooleval/locks/.stages-<random>.json`` on the store and ``gc`` holds ``.tooleval/locks/.gc.json`` while
  it deletes (:func:`_remote_in_use`): a run of any machine keeps gc from deleting stage files, and waits while gc
  deletes.
* **A revision's commit** (``.tooleval/locks/revision-<revision>.lock``): held exclusively around "read the
  revision ledger, then commit", so that of two runs reusing one revision name with different content, started
  together, exactly one publishes; the other finds the first one's ledger entry and is refused.
"""

from __future__ import annotations

import fcntl
import hashlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tooleval.storage._fs import as_location
from tooleval.storage._paths import ensure_dir

__all__ = ["revision_commit", "stages_in_use", "stages_unused"]


def _state_folder(out: str | Path, name: str) -> Path:
    location = as_location(out) if isinstance(out, str) else Path(out)
    if isinstance(location, Path):
        return ensure_dir(location.resolve(), f".tooleval/{name}")
    from tooleval.storage._machine import local_state_dir

    folder = local_state_dir(location, name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def _flocked(path: Path, mode: int) -> Iterator[bool]:
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, mode)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def stages_in_use(out: str | Path) -> Iterator[None]:
    """Hold the stage files of ``out`` in use (shared with other runs), waiting while ``gc`` deletes some.

    Raises:
        tooleval.storage.OutFolderError: ``<out>/.tooleval`` cannot be made (a link or a file on the way).
        OSError: on object storage, the in-use object cannot be written.
    """
    with _flocked(_state_folder(out, "locks") / "stages.lock", fcntl.LOCK_SH):
        location = as_location(out) if isinstance(out, str) else Path(out)
        if isinstance(location, Path):
            yield
            return
        with _remote_in_use(location):
            yield


@contextmanager
def stages_unused(out: str | Path) -> Iterator[bool]:
    """Try to hold the stage files of ``out`` exclusively, without waiting; yields whether it could (``False``:
    a run is in progress, delete no stage file). On object storage a run of any machine counts (see
    :func:`_remote_in_use`).

    Raises:
        tooleval.storage.OutFolderError: ``<out>/.tooleval`` cannot be made (a link or a file on the way).
        OSError: on object storage, the gc object cannot be written.
    """
    with _flocked(_state_folder(out, "locks") / "stages.lock", fcntl.LOCK_EX | fcntl.LOCK_NB) as free:
        location = as_location(out) if isinstance(out, str) else Path(out)
        if not free or isinstance(location, Path):
            yield free
            return
        with _remote_unused(location) as alone:
            yield alone


GC_LEASE = ".gc"
"""The lease name ``gc`` holds on object storage while it deletes stage files (no run id starts with a dot)."""
IN_USE_PREFIX = ".stages-"
"""The lease names of the runs that hold a store's stage files in use (one per run, with a random suffix)."""


@contextmanager
def _remote_in_use(url: str) -> Iterator[None]:
    """A run of any machine holds the stage files of a results URL in use: its own lease object
    ``.tooleval/locks/.stages-<random>.json`` (renewed while it runs, so a killed run's expires), then it waits while
    a live ``gc`` holds :data:`GC_LEASE`. ``gc`` takes its lease first and then looks for live in-use objects, so
    of a run and a gc started together one sees the other: the run waits, or gc keeps every stage file."""
    import secrets
    import time

    from tooleval.storage._lease import holder_alive, read_lease
    from tooleval.storage._remote_lease import RemoteLease

    lease = RemoteLease(url, f"{IN_USE_PREFIX}{secrets.token_hex(8)}")
    lease.acquire()
    try:
        while (record := read_lease(url, GC_LEASE)) is not None and holder_alive(record):
            time.sleep(0.5)  # gc deletes for seconds; a dead gc's lease expires
        yield
    finally:
        lease.release()


@contextmanager
def _remote_unused(url: str) -> Iterator[bool]:
    """``gc``'s side of :func:`_remote_in_use`: yields whether no run of any machine holds the stage files."""
    from tooleval.storage._fs import RemoteTree
    from tooleval.storage._lease import holder_alive, read_lease
    from tooleval.storage._remote_lease import RemoteLease

    lease = RemoteLease(url, GC_LEASE)
    if lease.try_acquire() is not None:  # another gc is at work
        yield False
        return
    try:
        names = (path.rsplit("/", 1)[-1][:-len(".json")]
                 for path in RemoteTree(url).files(f".tooleval/locks/{IN_USE_PREFIX}*.json"))
        yield not any((record := read_lease(url, name)) is not None and holder_alive(record) for name in names)
    finally:
        lease.release()


@contextmanager
def revision_commit(out: str | Path, revision: str) -> Iterator[None]:
    """Hold the commit of ``revision`` under ``out`` exclusively (waiting for another run's commit of it).

    Raises:
        tooleval.storage.OutFolderError: ``<out>/.tooleval/locks`` cannot be made.
    """
    folder = _state_folder(out, "locks")
    name = hashlib.sha256(revision.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    with _flocked(folder / f"revision-{name}.lock", fcntl.LOCK_EX):
        yield
