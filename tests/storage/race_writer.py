"""A writer of the lease race tests, run in a process of its own (``multiprocessing`` spawn), as a second
``tooleval`` process would be: it takes the run's lease through a :class:`~tooleval.storage.Publication` and
publishes rows and a summary, or is refused."""

from __future__ import annotations

import time

from tooleval.storage import LeaseHeldError, Publication, ROW_SCHEMA, table_from_rows


def write(out: str, run_id: str, label: str, start_at: float, hold_s: float) -> tuple[str, str]:
    """At wall-clock time ``start_at``, publish run ``run_id``: 3 rows ``<label>0..2`` and a summary naming
    ``label``, holding the lease ``hold_s`` seconds before the commit.

    Returns:
        ``("committed", label)``, or ``("refused", the error's text)`` when another writer holds the lease.
    """
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()  # each round its own connections, as a fresh process has
    time.sleep(max(0.0, start_at - time.time()))
    rows = table_from_rows([{"case_id": f"{label}{i}", "trial": 0, "f1": 1.0} for i in range(3)], ROW_SCHEMA)
    try:
        with Publication(out) as publication:
            publication.add_table("rows", "r1", run_id, rows)  # the lease is taken before anything is written
            time.sleep(hold_s)
            publication.add_json(f"runs/{run_id}/summary.json", {"writer": label, "rows": 3})
    except LeaseHeldError as exc:
        return "refused", str(exc)
    return "committed", label
