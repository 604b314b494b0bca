"""Live progress of a run's stages: a rich progress bar per stage with its count, rows/s and ETA on a terminal,
plain periodic lines otherwise (CI logs, pipes).

A run's stages are fused per shard: one worker runs a shard's generation, capture, scoring and legacy pass one
after the other, and the flow hears of the shard only when all four are done. So that each stage's bar shows
what that stage has finished, a worker notes each stage of each shard as it ends (:func:`note_stage`) in a
*channel*: a folder of this machine where each process appends one line per stage. The flow's
:class:`StageProgress` reads the channel twice a second. A worker that cannot reach the folder (a Dask worker on
another machine) notes nothing, and its shard counts for every stage when it returns to the flow.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

__all__ = ["StageProgress", "note_stage"]

_POLL_S = 0.5
"""Seconds between two reads of the channel."""


def note_stage(channel: str | None, stage: str, shard: str, rows: int) -> None:
    """Record, from a worker, that ``stage`` finished the ``rows`` rows of ``shard``.

    Args:
        channel: :attr:`StageProgress.channel` of the run (``None``: progress is off, nothing is written).
        stage: Stage name, as the flow's :class:`StageProgress` lists it.
        shard: The shard's key (any text without tab or newline, the same the flow passes to
            :meth:`StageProgress.shard_done`).
        rows: Rows of the shard.

    A channel folder that does not exist here (another machine) is left alone; a failed write loses only the
    live count (the shard's return counts it).
    """
    if channel is None or not os.path.isdir(channel):
        return
    try:
        # one short line appended in one write: lines of concurrent writers never interleave
        with open(os.path.join(channel, f"{os.getpid()}.log"), "a", encoding="utf-8") as handle:
            handle.write(f"{shard}\t{stage}\t{rows}\n")
    except OSError:
        pass


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class StageProgress:
    """Rows done per stage. Use as a context manager; report stage ends with :func:`note_stage` (workers) or
    :meth:`shard_done` and :meth:`advance` (the flow).

    A plain line names each stage's count, rate and ETA, or — when every stage has done the same rows — one count
    and rate for the stages together (``progress: 600/1,000 rows (120 rows/s) through generation -> scoring``).

    Args:
        stages: Stage names, in display order.
        total: Rows each stage will process.
        stream: Where to write (default ``sys.stderr``); a terminal gets rich bars, anything else plain lines
            at most every ``interval`` seconds plus a final line.
        interval: Seconds between plain lines.
        enabled: ``False`` prints nothing and opens no channel (library use, tests).
    """

    def __init__(self, stages: list[str], total: int, *, stream: IO[str] | None = None, interval: float = 5.0,
                 enabled: bool = True) -> None:
        self.stages = stages
        self.total = total
        self.stream = stream or sys.stderr
        self.interval = interval
        self.enabled = enabled
        self.done = dict.fromkeys(stages, 0)
        self.channel: str | None = None
        """Folder the workers note stage ends in (:func:`note_stage`); ``None`` when progress is off."""
        self._started = time.monotonic()
        self._last_line = self._started
        self._rich = None
        self._tasks: dict[str, int] = {}
        self._seen: set[tuple[str, str]] = set()
        self._offsets: dict[str, int] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def __enter__(self) -> "StageProgress":
        if not self.enabled:
            return self
        self._started = self._last_line = time.monotonic()
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._rich = Progress(TextColumn("{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[rate]:>12}"), TextColumn("ETA {task.fields[eta]}"),
                                  console=Console(file=self.stream), transient=False)
            self._rich.start()
            self._tasks = {s: self._rich.add_task(s, total=self.total, rate="", eta=_clock(None))
                           for s in self.stages}
        self.channel = tempfile.mkdtemp(prefix="tooleval-progress-")
        self._poller = threading.Thread(target=self._poll, name="tooleval-progress", daemon=True)
        self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._poller is not None:
            self._stop.set()
            self._poller.join()
            self._read_channel()
        if self.channel is not None:
            shutil.rmtree(self.channel, ignore_errors=True)
        if self._rich is not None:
            self._rich.stop()
        elif self.enabled:
            self._line(final=True)

    def rate(self, stage: str) -> float:
        """Rows per second of ``stage`` since the start."""
        return self.done[stage] / max(time.monotonic() - self._started, 1e-9)

    def eta(self, stage: str) -> float | None:
        """Seconds until ``stage`` is done at its rate so far; ``None`` before its first rows."""
        rate = self.rate(stage)
        return (self.total - self.done[stage]) / rate if rate > 0 else None

    def advance(self, stages: str | list[str], rows: int) -> None:
        """Record ``rows`` more rows done in each of ``stages`` (one name or several)."""
        with self._lock:
            for stage in [stages] if isinstance(stages, str) else stages:
                self.done[stage] += rows
            self._show()

    def shard_done(self, shard: str, stages: list[str], rows: int) -> None:
        """Record that ``shard`` (``rows`` rows) passed through ``stages``; a stage a worker already noted for it
        (:func:`note_stage`) is not counted twice."""
        with self._lock:
            self._mark(shard, stages, rows)
            self._show()

    def _mark(self, shard: str, stages: list[str], rows: int) -> None:
        for stage in stages:
            if stage in self.done and (shard, stage) not in self._seen:
                self._seen.add((shard, stage))
                self.done[stage] += rows

    def _show(self) -> None:
        if self._rich is not None:
            for stage in self.stages:
                self._rich.update(self._tasks[stage], completed=self.done[stage],
                                  rate=f"{self.rate(stage):,.0f} rows/s", eta=_clock(self.eta(stage)))
        elif self.enabled and time.monotonic() - self._last_line >= self.interval:
            self._line()

    def _poll(self) -> None:
        while not self._stop.wait(_POLL_S):
            self._read_channel()

    def _read_channel(self) -> None:
        """Count the stage ends the workers noted since the last read (whole lines only)."""
        if self.channel is None:
            return
        noted: list[tuple[str, str, int]] = []
        for path in Path(self.channel).glob("*.log"):
            try:
                with path.open("rb") as handle:
                    handle.seek(self._offsets.get(path.name, 0))
                    data = handle.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]
            self._offsets[path.name] = self._offsets.get(path.name, 0) + len(complete)
            for line in complete.decode("utf-8", "replace").splitlines():
                shard, stage, rows = line.split("\t")
                noted.append((shard, stage, int(rows)))
        with self._lock:
            for shard, stage, rows in noted:
                self._mark(shard, [stage], rows)
            self._show()

    def _line(self, final: bool = False) -> None:
        self._last_line = time.monotonic()
        counts = {self.done[s] for s in self.stages}
        if len(self.stages) > 1 and len(counts) == 1:  # every stage at the same count: one count, one rate
            stage = self.stages[0]
            text = (f"{self.done[stage]:,}/{self.total:,} rows ({self.rate(stage):,.0f} rows/s) through "
                    + " -> ".join(self.stages))
            if not final and self.done[stage] < self.total:
                text += f", ETA {_clock(self.eta(stage))}"
        else:
            text = "; ".join(f"{s} {self.done[s]:,}/{self.total:,} ({self.rate(s):,.0f} rows/s"
                             + ("" if final or self.done[s] >= self.total else f", ETA {_clock(self.eta(s))}") + ")"
                             for s in self.stages)
        self.stream.write(("done: " if final else "progress: ") + text + "\n")
        self.stream.flush()
