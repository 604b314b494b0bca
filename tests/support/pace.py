"""The machine's pace, for tests that assert what the product promises in seconds ("exits within 10 s of
Ctrl-C"): such a deadline is the promise on the quiet 2-core machine, scaled by how much slower than there a
start-up measured in the same test was. A loaded machine (a shared CI runner at a load of 10-20) then gets longer
deadlines, and a test never fails only because the machine is slow; on a quiet machine the promise stands as it
is. Waits that promise nothing (a run to finish, a process to reach a pause point) use :data:`PATIENT_S`.

Also: the processes of a command started in its own session (``start_new_session=True``), to check that none is
left once it ended.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PATIENT_S = 1800.0
"""Seconds a test waits for something the product promises no time for: long enough for a machine at a load of 20,
short enough that a hang still ends the test."""


def scaled(promise_s: float, measured_s: float, quiet_s: float) -> float:
    """``promise_s`` (seconds, as on the quiet machine) times how much slower than ``quiet_s`` the start-up
    ``measured_s`` of this test run was, or times the machine's load per core now if that is larger (the load can
    rise after the start-up was measured: a neighbour test starts a run), never less than the promise itself."""
    try:
        busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        busy = 0.0
    return promise_s * max(1.0, measured_s / quiet_s, busy)


def session_processes(session: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the live (not zombie) processes of the session led by ``session``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session and fields[0] != "Z":
                found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except (OSError, IndexError, ValueError):
            continue
    return found


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def session_empty_within(session: int, seconds: float) -> list[tuple[int, str]]:
    """Wait up to ``seconds`` for the session to hold no live process; returns what is left (empty: none)."""
    deadline = time.monotonic() + seconds
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
