"""The writer lease of a run on object storage (``--out s3://bucket/prefix``): an object with an owner token and
an expiry, renewed while the writer lives.

The lease is the JSON object ``<out>/.tooleval/locks/<run>.json`` (the same record as in a local folder:
``run_id, host, pid, started, token, acquired_at, expires_at``). On S3 every change is a conditional write
(:mod:`tooleval.storage._conditional`, boto3), so the lease is a true compare-and-swap:

* **Take**: create the object with ``If-None-Match: *``. When it exists, read it with its ETag; a live holder
  (:func:`tooleval.storage._lease.holder_alive`) is named (:class:`LeaseHeldError`, exit 2); a stale one (expired
  — any host —, or a process of *this* host that is gone) is replaced with ``If-Match: <the ETag read>``. Of any
  number of writers racing for the lease exactly one write succeeds; the others' conditions fail and they report
  the winner.
* **Renew**: a daemon thread rewrites ``expires_at`` every third of the time to live with ``If-Match`` on the ETag
  of its own last write; a failed condition means the lease was taken over (this writer was presumed dead): it
  stops renewing, and its publication refuses to commit.
* **Check before commit** (:meth:`RemoteLease.held`): a renewal, so a success proves the lease was still ours at
  that moment and gives the commit a whole time to live; the commit marker is then written with a condition on
  the marker's own ETag (:func:`tooleval.storage._commit.commit_marker`), so a writer that stalled past its
  expiry after this check cannot commit over a publication made meanwhile.
* **Release**: delete the object with ``If-Match`` on our ETag (a lease taken over is left alone).

**Without conditional writes** (another fsspec protocol than ``s3://``, or an S3-compatible store that answers
``501 Not Implemented`` or ignores the condition: detected, then a warning is logged once) the lease falls back
to *write, wait* :data:`SETTLE_S` *, read back*: two writers whose PUTs land less than :data:`SETTLE_S` apart both
see the later one's token and only it proceeds, but a writer stalled longer than that between its read and its
PUT can overwrite a lease taken meanwhile, and both then believe they hold it; the check before the marker
narrows (does not close) the same window. Readers still see one whole publication or the other, never a mix
(each publication writes only uniquely named files and commits with one marker PUT); what can be lost is the
earlier of two racing publications of the *same run id*.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

from tooleval.storage._conditional import (ConditionalStore, ConditionsUnsupported, PreconditionFailed,
                                           check_honoured, conditional_store, mark_unsupported)
from tooleval.storage._fs import RemoteTree
from tooleval.storage._lease import RunLease, holder_alive, lease_relpath, read_lease

__all__ = ["RemoteLease", "SETTLE_S"]

SETTLE_S = 0.5
"""Seconds between writing a lease and reading it back, without conditional writes: two takers whose PUTs land
closer than this both see the later one's token, so only one of them proceeds."""

_TAKE_ATTEMPTS = 5
"""Times a taker starts over when the lease changed between its read and its conditional write (released, or
taken and released again): each attempt ends in a held lease, a named holder, or another change."""


def _encode(record: dict) -> bytes:
    return (json.dumps(record, indent=2) + "\n").encode()


def _decode(data: bytes) -> dict | None:
    try:
        record = json.loads(data)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class RemoteLease(RunLease):
    """The lease of one run id under an fsspec URL (see the module docstring for what it guarantees).

    Args:
        out: The results URL (``s3://bucket/prefix``).
        run_id: The run whose partitions and run files the holder may write.
        ttl: Seconds without renewal before the lease is stale (default :func:`tooleval.storage._lease.lease_ttl`).
        settle: Seconds between the PUT and the read-back without conditional writes (default :data:`SETTLE_S`).

    Attributes:
        conditional: Whether this lease was taken with conditional writes (None before :meth:`try_acquire`).
        etag: The ETag of our last write of the lease object (conditional writes only).
    """

    def __init__(self, out: str, run_id: str, ttl: float | None = None, settle: float = SETTLE_S) -> None:
        super().__init__(out, run_id, ttl)
        self.out = out  # a URL, not a Path
        self.settle = settle
        self._tree = RemoteTree(out)
        self._store: ConditionalStore | None = conditional_store(self._tree)
        self.conditional: bool | None = None
        self.etag: str | None = None
        self._written: dict | None = None
        """The record whose write carries :attr:`etag` (conditional writes only)."""
        self._etag_lock = threading.Lock()

    @property
    def path(self) -> str:  # type: ignore[override]
        return self._tree.location(lease_relpath(self.run_id))

    @property
    def relpath(self) -> str:
        return lease_relpath(self.run_id)

    def _put(self, record: dict) -> None:
        self._tree.write_bytes(self.relpath, _encode(record))

    def _start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew, name=f"tooleval-lease-{self.run_id}", daemon=True)
        self._thread.start()

    def try_acquire(self) -> dict | None:
        """Take the lease if it is free or stale; return None on success, else the live holder's record.

        Raises:
            OSError: the store cannot be read or written (credentials, endpoint, bucket).
        """
        if self._store is not None:
            try:
                holder = self._take_conditionally(self._store)
            except ConditionsUnsupported as exc:
                mark_unsupported(self._store, str(exc))
                self._store = None
            else:
                if self._store is not None:  # the probe may have found the conditions ignored
                    self.conditional = True
                    if holder is None:
                        self._start_renewing()
                    return holder
                return self._settle_and_check()
        self.conditional = False
        return self._take_unconditionally()

    def _take_conditionally(self, store: ConditionalStore) -> dict | None:
        unknown = {"run_id": self.run_id, "host": None, "pid": None, "expires_at": None}
        for _ in range(_TAKE_ATTEMPTS):
            written = self._record()
            record = _encode(written)
            try:
                self.etag, self._written = store.put(self.relpath, record, create=True), written
            except PreconditionFailed:
                pass
            else:
                if not check_honoured(store, self.relpath, record):
                    self._store = None  # the conditions were ignored: verify as without them
                return None
            found = store.get(self.relpath)
            if found is None:
                continue  # released between our write and our read: try again
            data, etag = found
            current = _decode(data)
            if current is not None and current.get("token") == self.token:
                self.etag, self._written = etag, current  # our own write, whose answer was lost and retried
                return None
            if current is not None and holder_alive(current):
                return current
            try:  # stale (or unreadable): replace exactly the version we read
                written = self._record()
                self.etag, self._written = store.put(self.relpath, _encode(written), if_match=etag), written
                return None
            except PreconditionFailed:
                continue  # another taker replaced it first: look again
        return read_lease(self.out, self.run_id) or unknown

    def _settle_and_check(self) -> dict | None:
        time.sleep(self.settle)
        current = read_lease(self.out, self.run_id)
        if current is None or current.get("token") != self.token:
            return current or {"run_id": self.run_id, "host": None, "pid": None, "expires_at": None}
        self._start_renewing()
        return None

    def _take_unconditionally(self) -> dict | None:
        current = read_lease(self.out, self.run_id)
        if current is not None and current.get("token") != self.token and holder_alive(current):
            return current
        self._put(self._record())
        return self._settle_and_check()

    def _renew_once(self) -> bool:
        """Extend the lease by a time to live if it is still ours; False when it was taken over."""
        if self.conditional and self._store is not None:
            with self._etag_lock:
                if self.etag is None or self._written is None:
                    return False
                # no read first: the write's condition, our last ETag, holds only while the object is still the
                # record we wrote (any other taker's write, or a release, changes or removes it)
                record = dict(self._written, expires_at=(datetime.now(timezone.utc)
                                                         + timedelta(seconds=self.ttl)).isoformat())
                try:
                    self.etag, self._written = self._store.put(self.relpath, _encode(record),
                                                               if_match=self.etag), record
                except PreconditionFailed:
                    return False
                return True
        current = read_lease(self.out, self.run_id)
        if current is None or current.get("token") != self.token:
            return False
        self._put(dict(current, expires_at=(datetime.now(timezone.utc) + timedelta(seconds=self.ttl)).isoformat()))
        return True

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not self._renew_once():
                    return  # taken over (we were presumed dead): stop renewing
            except OSError:  # the store is unreachable: the lease expires on its own
                return

    def held(self) -> bool:
        """Whether the lease is still ours. With conditional writes this renews it (``If-Match`` on our last
        ETag): True proves no other writer took it since, and leaves a whole time to live for what follows."""
        try:
            return self._renew_once()
        except OSError:
            return False

    def release(self) -> None:
        """Give the lease back (only if it is still ours). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if self.conditional and self._store is not None and self.etag is not None:
                with self._etag_lock:
                    try:
                        self._store.delete(self.relpath, if_match=self.etag)
                    except PreconditionFailed:
                        pass  # taken over: the lease is another writer's now
                    except ConditionsUnsupported:
                        current = read_lease(self.out, self.run_id)  # a store without conditional deletes
                        if current is not None and current.get("token") == self.token:
                            self._tree.delete(self.relpath)
                    self.etag = None
                return
            current = read_lease(self.out, self.run_id)
            if current is not None and current.get("token") == self.token:
                self._tree.delete(self.relpath)
        except OSError:
            pass
