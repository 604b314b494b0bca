"""The plan's reading of a large traces file and a large ``cases.jsonl``, split over the flow's worker processes:
each task reads the lines of one byte range (:func:`tooleval.capture.recorded.index_part`,
:func:`tooleval.dataset.load_case_range`) while the flow's own process seeds the run's redactor.
Not cached: the plan reads its inputs afresh on every run, so that every file problem is found before anything
is written."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from tooleval.capture.recorded import TracePart, index_part
from tooleval.dataset import CasePart, load_case_range

__all__ = ["index_traces_range", "load_cases_range"]


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


@task(name="load-cases", cache_policy=NO_CACHE, persist_result=False)
def load_cases_range(path: str, span: tuple[int, int]) -> CasePart:
    """:func:`tooleval.dataset.load_case_range` of the lines in ``span`` (``(start, end)`` byte offsets at line
    starts) of a dataset's ``cases.jsonl``: each case's id, place, digest and slice, line numbers counted from the
    range's start, the first line that is not a valid case kept in the part's ``failure``.

    Raises:
        tooleval.errors.InputFileError: the file is missing or unreadable.
    """
    return load_case_range(Path(path), tuple(span))
