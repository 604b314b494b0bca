"""Child processes that must not outlive the command that started them: a process pool's workers, the
benchmark's peer processes.

* In the parent, :func:`ended_on_signals` ends the children it is given when SIGTERM or SIGHUP arrives (the
  process then ends by that signal) and, when asked, on SIGINT (then Ctrl-C goes on as before:
  ``KeyboardInterrupt``). They are ended inside the signal handler itself, not by the exception it raises: an
  exception raised from a handler lands in whatever code runs at that moment, and some turns it into another
  error (pydantic's serializer, inside Prefect's task submission, made Ctrl-C a ``PydanticSerializationError``
  that the flow took for an ordinary failure, and the pool's shutdown then waited 80 s for its shards).
  :func:`end_processes` also ends them when an exception leaves the block that runs them.
* In a child, :func:`exit_with_parent` starts a thread that ends the process once its parent is gone: a parent
  killed with SIGKILL runs no handler, and a pool worker's parent may be killed so. A process-pool worker gets it
  through :func:`pool_worker_initializer`; and since a spawned worker unpickles its initializer's arguments (and
  so imports Prefect, tens of seconds on a loaded machine) before any initializer runs, importing this module in a
  process that multiprocessing's spawn is starting already starts the watch: the initializer is named first, so
  this module is imported first.

Linux and other POSIX systems only (``/proc`` is read when present; elsewhere a signal 0 probes the process).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

__all__ = ["ENDING_SIGNALS", "end_processes", "ended_on_signals", "exit_with_parent", "pool_worker_initializer"]

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that end the process once its children are ended. SIGINT (``interrupt=True``) ends the children and
then raises ``KeyboardInterrupt`` as before, for the command to record the interrupted run and exit 130."""

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
    if previous == signal.SIG_IGN:
        return
    if signum == signal.SIGINT and callable(previous):
        previous(signum, frame)  # KeyboardInterrupt, as without the children
        return
    # SIGTERM, SIGHUP: end now, by the signal. A handler installed before (Prefect's flow engine raises an exception
    # to record the crash) is not called: its exception can be turned into an ordinary error on its way up, and the
    # command would then report a failed run, exit 1, instead of ending. The next command records the crash.
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


@contextmanager
def ended_on_signals(pids: Callable[[], Iterable[int]], *, interrupt: bool = False) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP end the processes that ``pids()`` lists at that moment, then this process
    by that signal (unless it was ignored); with ``interrupt``, SIGINT ends them too, then raises
    ``KeyboardInterrupt`` through the handler that was there. Nests (the outermost block's signals stay handled);
    handlers are installed from the main thread only (elsewhere the block runs unchanged)."""
    main = threading.current_thread() is threading.main_thread()
    signals = ENDING_SIGNALS + ((signal.SIGINT,) if interrupt else ())
    with _LOCK:
        _SOURCES.append(pids)
    installed = []
    if main:
        for signum in signals:
            if signal.getsignal(signum) is not _on_signal:
                _PREVIOUS[signum] = signal.signal(signum, _on_signal)
                installed.append(signum)
    try:
        yield
    finally:
        with _LOCK:
            _SOURCES.remove(pids)
        for signum in installed:
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, _PREVIOUS.pop(signum, signal.SIG_DFL))


def exit_with_parent(parent: int | None = None, poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """In a child process: end it (exit code 1, no clean-up: its work belongs to a command that is gone) within
    about ``poll_s`` seconds of its parent's end, seen as a change of the parent pid (the orphan is reparented).
    ``parent``: the pid expected (default: the current parent). Returns the watching daemon thread."""
    expected = os.getppid() if parent is None else parent
    _WATCHING.append(expected)

    def watch() -> None:
        while True:
            if os.getppid() != expected:
                os._exit(1)
            time.sleep(poll_s)

    thread = threading.Thread(target=watch, name="tooleval-parent-watch", daemon=True)
    thread.start()
    return thread


_WATCHING: list[int] = []  # the parent pid this process watches for, once a watch is started


def pool_worker_initializer(parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    """A process-pool worker's initializer around another one (``initializer(*initargs)``, run last): the worker
    ends once ``parent`` (the command) is gone (:func:`exit_with_parent`), ignores Ctrl-C (a terminal sends it to
    every process of the job; the command ends its workers itself, rather than each printing a traceback while its
    shard's task fails on its own) and takes SIGTERM and SIGHUP by their default action."""
    if parent not in _WATCHING:
        exit_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for signum in ENDING_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    if initializer is not None:
        initializer(*initargs)


def _watch_if_spawning() -> None:
    import sys

    spawn = sys.modules.get("multiprocessing.spawn")
    if spawn is not None and spawn.is_forking(sys.argv) and not _WATCHING:
        exit_with_parent()


_watch_if_spawning()
