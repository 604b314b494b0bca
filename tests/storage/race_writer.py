"""A writer of the lease race tests, run in a process of its own (``multiprocessing`` spawn), as a second
``tooleval`` process would be: it takes the run's lease through a :class:`~tooleval.storage.Publication` and
publishes rows and a summary, or is refused."""

from __future__ import annotations

import time

from tooleval.storage import LeaseHeldError, Publication, ROW_SCHEMA, table_from_rows

START_TIMEOUT_S = 600.0
"""Seconds a writer waits at the start line for the other one: long enough for a machine at a load of 20, short
enough that a writer whose partner died ends the round with an error instead of hanging it."""

_START_LINE: list = []
"""The barriers of the writers of a pool, set in each pool process by :func:`start_line`: where both start each
round, and where both meet once each has tried to take the lease."""


def start_line(barrier, tried=None) -> None:
    """Pool initializer: the writers of this pool start each round together, at ``barrier``; with ``tried``, the
    one that took the lease holds it until the other has tried to take it (and was refused, or also took it)."""
    _START_LINE[:] = [barrier, tried]


def write(out: str, run_id: str, label: str, start_at: float | None, hold_s: float) -> tuple[str, str]:
    """At wall-clock time ``start_at`` (None: as soon as the other writer of the pool reaches the start line of
    :func:`start_line`), publish run ``run_id``: 3 rows ``<label>0..2`` and a summary naming ``label``, holding
    the lease ``hold_s`` seconds before the commit (and, in a pool with a ``tried`` barrier, until the other
    writer has tried to take it).

    Returns:
        ``("committed", label)``, or ``("refused", the error's text)`` when another writer holds the lease.
    """
    # The pool process's s3fs filesystem is kept from round to round: dropping it each round made every write
    # build a new S3 client (botocore's service model parsed again), half of a writer's CPU, while the lease is
    # taken through the boto3 client that the process keeps anyway. Each round's tree still drops its cached
    # listings (RemoteTree), so no round sees another's.
    if start_at is None:
        # a barrier releases both writers within a scheduler tick of each other, however late either of them
        # received its task: no start time in the future has to be waited for to be sure both got theirs
        _START_LINE[0].wait(START_TIMEOUT_S)
    else:
        time.sleep(max(0.0, start_at - time.time()))
    rows = table_from_rows([{"case_id": f"{label}{i}", "trial": 0, "f1": 1.0} for i in range(3)], ROW_SCHEMA)
    tried = _START_LINE[1] if start_at is None and _START_LINE else None
    try:
        with Publication(out) as publication:
            publication.add_table("rows", "r1", run_id, rows)  # the lease is taken before anything is written
            if tried is not None:
                tried, meet = None, tried
                meet.wait(START_TIMEOUT_S)
            time.sleep(hold_s)
            publication.add_json(f"runs/{run_id}/summary.json", {"writer": label, "rows": 3})
    except LeaseHeldError as exc:
        if tried is not None:
            tried.wait(START_TIMEOUT_S)
        return "refused", str(exc)
    except BaseException:
        if tried is not None:
            tried.abort()  # the other writer, waiting for this one, fails now instead of at the timeout
        raise
    return "committed", label
