"""The writer lease of a run on object storage (``--out s3://bucket/prefix``): an object with an owner token and
an expiry, renewed while the writer lives.

The lease is the JSON object ``<out>/.tooleval/locks/<run>.json`` (the same record as in a local folder:
``run_id, host, pid, started, token, acquired_at, expires_at``):

* **Take**: read the object; when it is absent, or its holder is not alive
  (:func:`tooleval.storage._lease.holder_alive`: it expired — any host — or it names a process of *this* host
  that is gone), write our record in one PUT, wait :data:`SETTLE_S`, read it back, and hold the lease only if
  the object still carries our token. Otherwise the live holder is named (:class:`LeaseHeldError`, exit 2).
* **Renew**: a daemon thread rewrites ``expires_at`` every third of the time to live, after checking that the
  token is still ours (a holder that finds another token stops renewing; its publication then refuses to
  commit: :meth:`RemoteLease.held`).
* **Release**: delete the object if it still carries our token.

**What this does not guarantee.** S3 as fsspec (s3fs) exposes it, and moto's server, offer no conditional PUT
to tooleval, so there is no compare-and-swap: two writers that both read "free" and then both PUT race, and the
last PUT wins. Reading back after :data:`SETTLE_S` makes the loser see the winner's token and back off whenever
the two PUTs land less than :data:`SETTLE_S` apart; it fails when one writer's read-to-PUT takes longer than that
(a stalled client), in which case both may believe they hold the lease. The same window exists between a
renewal's check and its PUT and between the publication's last :meth:`~RemoteLease.held` check and its commit
marker PUT. The consequence is bounded: each publication writes only uniquely named files and commits with one
marker PUT, so readers still see one whole publication or the other, never a mix; what can be lost is the
earlier of two racing publications of the *same run id*. Use distinct run ids for concurrent writers (the
default run id is unique), and a TTL (``TOOLEVAL_LOCK_TTL_S``) well above your store's worst PUT latency.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

from tooleval.storage._fs import RemoteTree
from tooleval.storage._lease import RunLease, holder_alive, lease_relpath, read_lease

__all__ = ["RemoteLease", "SETTLE_S"]

SETTLE_S = 0.5
"""Seconds between writing a lease and reading it back: two takers whose PUTs land closer than this both see the
later one's token, so only one of them proceeds."""


class RemoteLease(RunLease):
    """The lease of one run id under an fsspec URL (see the module docstring for its race window).

    Args:
        out: The results URL (``s3://bucket/prefix``).
        run_id: The run whose partitions and run files the holder may write.
        ttl: Seconds without renewal before the lease is stale (default :func:`tooleval.storage._lease.lease_ttl`).
        settle: Seconds between the PUT and the read-back (default :data:`SETTLE_S`).
    """

    def __init__(self, out: str, run_id: str, ttl: float | None = None, settle: float = SETTLE_S) -> None:
        super().__init__(out, run_id, ttl)
        self.out = out  # a URL, not a Path
        self.settle = settle
        self._tree = RemoteTree(out)

    @property
    def path(self) -> str:  # type: ignore[override]
        return self._tree.location(lease_relpath(self.run_id))

    def _put(self, record: dict) -> None:
        self._tree.write_bytes(lease_relpath(self.run_id), (json.dumps(record, indent=2) + "\n").encode())

    def try_acquire(self) -> dict | None:
        """Take the lease if it is free or stale (write, settle, read back); return None on success, else the
        live holder's record."""
        current = read_lease(self.out, self.run_id)
        if current is not None and current.get("token") != self.token and holder_alive(current):
            return current
        self._put(self._record())
        time.sleep(self.settle)
        current = read_lease(self.out, self.run_id)
        if current is None or current.get("token") != self.token:
            return current or {"run_id": self.run_id, "host": None, "pid": None, "expires_at": None}
        self._thread = threading.Thread(target=self._renew, name=f"tooleval-lease-{self.run_id}", daemon=True)
        self._thread.start()
        return None

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                current = read_lease(self.out, self.run_id)
                if current is None or current.get("token") != self.token:
                    return  # taken over (we were presumed dead): stop renewing
                self._put(dict(current, expires_at=(datetime.now(timezone.utc)
                                                    + timedelta(seconds=self.ttl)).isoformat()))
            except OSError:  # the store is unreachable: the lease expires on its own
                return

    def release(self) -> None:
        """Give the lease back (only if it still carries our token). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            current = read_lease(self.out, self.run_id)
            if current is not None and current.get("token") == self.token:
                self._tree.delete(lease_relpath(self.run_id))
        except OSError:
            pass
