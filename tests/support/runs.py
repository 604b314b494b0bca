"""A small run in this process, and the one way the tests read a run's published rows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SMALL_RUN_ROWS = 100
"""The rows hint of :func:`run_small`: at least the rows of every dataset it runs (they hold at most a few dozen)."""


def run_small(**parameters):
    """:func:`flows.evaluate.run_evaluate` as ``tooleval run`` calls it on a dataset of a few rows: with a rows hint
    below ``PROCESS_POOL_MIN_ROWS`` the shards run on one thread of this process. Without a hint, ``run_evaluate``
    spawns a process pool of ``os.cpu_count()`` workers (~5 s a run on 2 cores) that these tests are not about;
    tests/flows/test_scale_flow.py covers the pool. Returns ``(RunResult, drift_failed)``."""
    from flows.evaluate import run_evaluate
    from tooleval.runs.spec import RunSpec

    return run_evaluate(RunSpec(**parameters), rows_hint=SMALL_RUN_ROWS)


def published_rows(out: Path | str, run_id: str | None = None, *, revision: str | None = None,
                   drop: Iterable[str] = ()) -> list[dict]:
    """The published rows of a results folder (or an ``s3://`` URL), as the product reads them: only files behind
    a run's commit marker (:func:`tooleval.storage.read_table`), so a file a run wrote but never committed is not
    a row. One run's, or one revision's, when given; without the columns ``drop``; sorted by (case, trial)."""
    from tooleval.storage import read_table

    table = read_table(out, "rows", revision=revision, run_id=run_id)
    dropped = set(drop)
    table = table.select([name for name in table.column_names if name not in dropped])
    return sorted(table.to_pylist(), key=lambda row: (row["case_id"], row["trial"]))
