"""Holding a run's writer lease: the lease of a results location (a local folder or an fsspec URL), held for a
block and re-entrant within a process.

Apart from the two lease kinds it chooses between (:mod:`tooleval.storage._lease`, local;
:mod:`tooleval.storage._remote_lease`, object storage), which it imports, so that neither imports the other.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tooleval.storage._fs import as_location
from tooleval.storage._lease import RunLease
from tooleval.storage._remote_lease import RemoteLease

__all__ = ["lease_for", "hold_run"]


def lease_for(out: str | Path, run_id: str, ttl: float | None = None) -> RunLease:
    """The lease of ``run_id`` under ``out``: a :class:`RunLease` in a local folder (``file://`` included), a
    :class:`tooleval.storage._remote_lease.RemoteLease` on an fsspec URL."""
    location = as_location(out) if isinstance(out, str) else Path(out)
    if isinstance(location, str):
        return RemoteLease(location, run_id, ttl)
    return RunLease(location.resolve(), run_id, ttl)


_HELD: dict[tuple[str, str], list] = {}
_HELD_LOCK = threading.Lock()


@contextmanager
def hold_run(out: str | Path, run_id: str) -> Iterator[RunLease]:
    """Hold the lease of ``run_id`` for the block; re-entrant within a process (a command that holds it may
    call a publication that takes it again).

    Raises:
        LeaseHeldError: another live writer holds it.
    """
    lease = lease_for(out, run_id)
    key = (str(lease.out), run_id)
    with _HELD_LOCK:
        entry = _HELD.get(key)
        if entry is None:
            lease.acquire()
            entry = _HELD[key] = [lease, 0]
        entry[1] += 1
    try:
        yield entry[0]
    finally:
        with _HELD_LOCK:
            entry[1] -= 1
            if entry[1] == 0:
                del _HELD[key]
                entry[0].release()
