"""Peak resident memory of a process tree: this process and all its descendants (process-pool workers, the
temporary Prefect API server), summed, sampled on a thread — for the whole benchmark and for windows inside it."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["RssWindow", "TreeRss"]


class RssWindow:
    """The peak of one window of a :class:`TreeRss`."""

    def __init__(self) -> None:
        self.peak_mb = 0.0
        """Largest summed RSS (MB, 2**20 bytes) sampled while the window was open; final once it is closed."""


class TreeRss:
    """Peak summed RSS (MB) of this process and its descendants, sampled every ``interval`` seconds.

    RSS is summed per process, so pages shared between processes (libraries, copy-on-write memory) count once per
    process that maps them: the figure is an upper bound of the memory the tree holds. The tree itself is walked
    again every ``rescan`` seconds, the known processes' RSS read at every sample: finding descendants means
    reading every process's status on the machine (psutil's ``children``), which, done ten times a second, took
    10 % of the benchmark process's CPU (py-spy) from the runs it measures. A process that starts and ends
    between two walks is not counted (the runs' workers live for minutes). A window
    (:meth:`window`) keeps its own peak over the samples taken while it is open, and is sampled when it opens and
    when it closes, so a window shorter than the interval still has a figure.
    """

    def __init__(self, interval: float = 0.1, rescan: float = 1.0) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval
        self._rescan = rescan
        self._tree: list = []  # the processes of the last walk
        self._walked_at: float | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._open: list[RssWindow] = []
        self._others: dict[int, object] = {}  # pid -> psutil.Process of a tracked process outside the tree
        self.peak_mb = 0.0
        """Largest summed RSS (MB) sampled while the sampler ran."""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self, walk: bool = True) -> float:
        """Sum the tree's RSS now and raise the peaks it exceeds (the whole and every open window).

        Args:
            walk: Walk the tree for its processes first; ``False``: only when the last walk is ``rescan`` seconds
                old (the sampling thread's samples).

        Returns:
            The tree's summed RSS now, MB.
        """
        import time

        import psutil

        now = time.monotonic()
        if walk or self._walked_at is None or now - self._walked_at >= self._rescan:
            try:
                self._tree = self._process.children(recursive=True)
            except psutil.Error:  # a descendant ended while the tree was walked: walk again at the next sample
                self._tree, now = [], None
            self._walked_at = now
        processes = [self._process, *self._tree]
        with self._lock:
            seen = {process.pid for process in processes}
            processes += [process for pid, process in self._others.items() if pid not in seen]
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.Error:  # ended since the walk
                pass
        megabytes = total / 2**20
        with self._lock:
            self.peak_mb = max(self.peak_mb, megabytes)
            for window in self._open:
                window.peak_mb = max(window.peak_mb, megabytes)
        return megabytes

    @contextmanager
    def tracking(self, pid: int | None) -> Iterator[None]:
        """Count process ``pid`` (and its descendants) in every sample taken inside, although it is no descendant
        of this process: tooleval's Prefect server is a daemon that outlives the command that started it.
        ``None`` (no such process) tracks nothing."""
        import psutil

        tracked = []
        if pid is not None:
            try:
                root = psutil.Process(pid)
                tracked = [root, *root.children(recursive=True)]
            except psutil.Error:  # already gone: nothing to count
                tracked = []
        with self._lock:
            for process in tracked:
                self._others[process.pid] = process
        self.sample()
        try:
            yield
        finally:
            self.sample()
            with self._lock:
                for process in tracked:
                    self._others.pop(process.pid, None)

    @contextmanager
    def window(self) -> Iterator[RssWindow]:
        """A window whose peak counts only the samples taken while it is open."""
        window = RssWindow()
        with self._lock:
            self._open.append(window)
        self.sample()
        try:
            yield window
        finally:
            self.sample()
            with self._lock:
                self._open.remove(window)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample(walk=False)
            self._stop.wait(self._interval)

    def __enter__(self) -> "TreeRss":
        # walk once here, so that the thread's samples read the processes of a known walk from their first one on
        # (a thread that starts late would otherwise walk whenever it happens to run first)
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
