"""The plan's reading of a large traces file, split over the flow's worker processes: each task reads the lines
of one byte range (:func:`tooleval.capture.recorded.index_part`) while the flow's own process loads the dataset.
Not cached: the plan reads its inputs afresh on every run, so that every file problem is found before anything
is written."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from tooleval.capture.recorded import TracePart, index_part

__all__ = ["index_traces_range"]


@task(name="index-traces", cache_policy=NO_CACHE, persist_result=False)
def index_traces_range(path: str, span: tuple[int, int]) -> TracePart:
    """:func:`tooleval.capture.recorded.index_part` of the lines in ``span`` (``(start, end)`` byte offsets at
    line starts) of the traces file ``path``: keys, unusable lines, each line's offset and digest, line numbers
    counted from the range's start.

    Raises:
        tooleval.errors.InputFileError: the file is missing or unreadable (a too-long line is returned in the
            part's ``failure`` instead, with its line).
    """
    return index_part(Path(path), tuple(span))
