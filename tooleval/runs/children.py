"""Child processes that must not outlive the command that started them: a process pool's workers, the
benchmark's peer processes.

* In the parent, :func:`ended_on_signals` ends the children it is given when SIGTERM or SIGHUP arrives (the
  process then ends by that signal, as it would have without them), and :func:`end_processes` ends them when an
  exception (Ctrl-C's ``KeyboardInterrupt`` included) leaves the block that runs them, instead of waiting for
  work that may go on for minutes.
* In a child, :func:`exit_with_parent` starts a thread that ends the process once its parent is gone: a parent
  killed with SIGKILL runs no handler, and a pool worker's parent may be killed so.

Linux and other POSIX systems only (``/proc`` is read when present; elsewhere a signal 0 probes the process).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

__all__ = ["ENDING_SIGNALS", "end_processes", "ended_on_signals", "exit_with_parent"]

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals whose default action ends the process: the children are ended first. SIGINT raises
``KeyboardInterrupt`` instead, which the caller's block handles (:func:`end_processes`)."""

PARENT_POLL_S = 0.5
"""Seconds between two checks, in a child, that its parent is still there."""

_SOURCES: list[Callable[[], Iterable[int]]] = []
_PREVIOUS: dict[int, object] = {}
_LOCK = threading.Lock()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs and is not a zombie (an ended child waits as one until its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def end_processes(pids: Iterable[int], grace_s: float = 3.0) -> None:
    """Send SIGTERM to each of ``pids``, wait up to ``grace_s`` seconds for them to end, then SIGKILL those
    left. Pids that are already gone are skipped; never raises."""
    pids = [pid for pid in set(pids) if pid and pid != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _on_signal(signum: int, frame) -> None:
    with _LOCK:
        sources = list(_SOURCES)
        previous = _PREVIOUS.get(signum, signal.SIG_DFL)
    pids: list[int] = []
    for source in sources:
        try:
            pids += list(source())
        except Exception:  # noqa: BLE001 - a pool that is shutting down lists nothing
            continue
    end_processes(pids)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)  # end as the signal would have ended this process
        signal.raise_signal(signum)


@contextmanager
def ended_on_signals(pids: Callable[[], Iterable[int]]) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP end the processes that ``pids()`` lists at that moment, then act as they
    did before (by default: end this process by that signal). Nests; handlers are installed from the main thread
    only (elsewhere the block runs unchanged)."""
    main = threading.current_thread() is threading.main_thread()
    with _LOCK:
        first = not _SOURCES
        _SOURCES.append(pids)
    if first and main:
        for signum in ENDING_SIGNALS:
            _PREVIOUS[signum] = signal.signal(signum, _on_signal)
    try:
        yield
    finally:
        with _LOCK:
            _SOURCES.remove(pids)
            last = not _SOURCES
        if last and main:
            for signum in ENDING_SIGNALS:
                if signal.getsignal(signum) is _on_signal:
                    signal.signal(signum, _PREVIOUS.pop(signum, signal.SIG_DFL))


def exit_with_parent(parent: int | None = None, poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """In a child process: end it (exit code 1, no clean-up: its work belongs to a command that is gone) within
    about ``poll_s`` seconds of its parent's end, seen as a change of the parent pid (the orphan is reparented).
    ``parent``: the pid expected (default: the current parent). Returns the watching daemon thread."""
    expected = os.getppid() if parent is None else parent

    def watch() -> None:
        while True:
            if os.getppid() != expected:
                os._exit(1)
            time.sleep(poll_s)

    thread = threading.Thread(target=watch, name="tooleval-parent-watch", daemon=True)
    thread.start()
    return thread
