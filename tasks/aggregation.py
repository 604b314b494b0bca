"""Stage 4, aggregation: DuckDB over the run's rows.

Cache key: the digests of the rows stage files, the code version and this task's source. ``rows_source`` (where
the staged rows sit for this run) is excluded: the figures depend on the rows' content, not on their location.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.runs.aggregate import summarize_rows


@task(name="aggregation", cache_policy=(INPUTS - "rows_source") + TASK_SOURCE, persist_result=True)
def aggregate_rows(rows_source: str, rows_digests: list[str], code_version: str) -> dict[str, Any]:
    """Summarise a run's rows.

    Args:
        rows_source: DuckDB table expression over the staged rows partition.
        rows_digests: Digests of the rows stage files, in shard order (cache key).
        code_version: Code version (cache key).

    Returns:
        The figures of :func:`tooleval.runs.aggregate.summarize_rows`.
    """
    return summarize_rows(rows_source)
