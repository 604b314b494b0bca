"""Task runs without tags: the flows' bodies create their task runs inside :func:`untagged_task_runs`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

__all__ = ["untagged_task_runs"]


@contextmanager
def untagged_task_runs() -> Iterator[None]:
    """Task runs created inside carry no tags (neither the command's nor any caller's).

    Why: the command tags its flow runs with its holder (``tooleval-holder:<host>:<pid>:<start>``), which is how a
    dead command's open runs are found; inherited by every task run, each tag costs Prefect two round trips to the
    server per task run, to acquire and release the tag's concurrency slots even when no limit exists (measured:
    ~0.4 s of a 4-row cached rerun's ~2 s in its five task runs). Task runs are found through their flow run.
    """
    from prefect.context import TagsContext

    with TagsContext(current_tags=set()):
        yield
