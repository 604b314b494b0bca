"""Live progress of a run's stages (issue 9 item 7): a rich progress bar per stage with rows/s on a terminal,
plain periodic lines otherwise (CI logs, pipes)."""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["StageProgress"]


class StageProgress:
    """Rows done per stage. Use as a context manager; call :meth:`advance` as shards finish.

    A plain line names each stage's count and rate, or — when every stage has done the same rows, as when a
    run's shards pass through all stages at once — one count and rate for the stages together
    (``progress: 600/1,000 rows (120 rows/s) through generation -> scoring``).

    Args:
        stages: Stage names, in display order.
        total: Rows each stage will process.
        stream: Where to write (default ``sys.stderr``); a terminal gets rich bars, anything else plain lines
            at most every ``interval`` seconds plus a final line per stage.
        interval: Seconds between plain lines.
        enabled: ``False`` prints nothing (library use, tests).
    """

    def __init__(self, stages: list[str], total: int, *, stream: IO[str] | None = None, interval: float = 5.0,
                 enabled: bool = True) -> None:
        self.stages = stages
        self.total = total
        self.stream = stream or sys.stderr
        self.interval = interval
        self.enabled = enabled
        self.done = dict.fromkeys(stages, 0)
        self._started = time.monotonic()
        self._last_line = self._started
        self._rich = None
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> "StageProgress":
        if self.enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._rich = Progress(TextColumn("{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[rate]:>12}"), TimeElapsedColumn(),
                                  console=Console(file=self.stream), transient=False)
            self._rich.start()
            self._tasks = {s: self._rich.add_task(s, total=self.total, rate="") for s in self.stages}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self.enabled:
            self._line(final=True)

    def rate(self, stage: str) -> float:
        """Rows per second of ``stage`` since the start."""
        return self.done[stage] / max(time.monotonic() - self._started, 1e-9)

    def advance(self, stages: str | list[str], rows: int) -> None:
        """Record ``rows`` more rows done in each of ``stages`` (one name or several: a shard finishes all its
        stages at once, and a plain line shows them together)."""
        for stage in [stages] if isinstance(stages, str) else stages:
            self.done[stage] += rows
            if self._rich is not None:
                self._rich.update(self._tasks[stage], completed=self.done[stage],
                                  rate=f"{self.rate(stage):,.0f} rows/s")
        if self._rich is None and self.enabled and time.monotonic() - self._last_line >= self.interval:
            self._line()

    def _line(self, final: bool = False) -> None:
        self._last_line = time.monotonic()
        counts = {self.done[s] for s in self.stages}
        if len(self.stages) > 1 and len(counts) == 1:  # the stages run fused per shard: one count, one rate
            stage = self.stages[0]
            text = (f"{self.done[stage]:,}/{self.total:,} rows ({self.rate(stage):,.0f} rows/s) through "
                    + " -> ".join(self.stages))
        else:
            text = "; ".join(f"{s} {self.done[s]:,}/{self.total:,} ({self.rate(s):,.0f} rows/s)" for s in self.stages)
        self.stream.write(("done: " if final else "progress: ") + text + "\n")
        self.stream.flush()
