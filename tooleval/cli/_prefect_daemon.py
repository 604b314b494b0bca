"""tooleval's shared Prefect API server of one Prefect home: Prefect's app under uvicorn, and a watchdog that ends
it (see :mod:`tooleval.cli._prefect_server` for the protocol the commands follow).

Run as a script, never imported: ``python _prefect_daemon.py HOME PORT``. A script keeps the server's start-up
to uvicorn and Prefect's server (importing the ``tooleval`` package would add the scoring stack for nothing).

The watchdog checks once per :data:`POLL_S` and stops the server when

* its home is gone or replaced (the results folder, or its ``.tooleval``, was deleted or moved): it never keeps a
  removed folder's database alive;
* no command uses it (none holds a shared lock on ``server.users`` — a lock the kernel releases when its holder
  dies, ``kill -9`` included) and the last command that ended normally asked it to wait no longer
  (``server.linger`` holds that deadline; a command that starts clears it). So a killed command's server stops
  within about a second, and an idle one after the linger time.

It stops under ``server.lock`` (the lock a command takes to find or start the server), after removing
``server.json``: a command never picks up a server that is stopping.
"""

import sys

del sys.path[0]  # this script's folder: its modules must not shadow anything the server imports

import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

POLL_S = 0.5
"""Seconds between two checks of the watchdog."""

STATE, START_LOCK, USERS, LINGER = "server.json", "server.lock", "server.users", "server.linger"
_HELD: list = []  # the start lock, held from the decision to stop until the process is gone


def _in_use(home: Path) -> bool:
    with open(home / USERS, "a") as users:
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(users, fcntl.LOCK_UN)
        return False


def _lingering(home: Path) -> bool:
    try:
        return time.time() < float((home / LINGER).read_text() or 0)
    except (OSError, ValueError):
        return False


def _replaced(home: Path, inode: int) -> bool:
    try:
        return os.stat(home).st_ino != inode
    except OSError:
        return True


def _stop_when_unused(home: Path) -> bool:
    """Take the start lock and stop if still unused; keep the lock until exit. Returns whether it stops."""
    lock = open(home / START_LOCK, "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if _in_use(home) or _lingering(home):
        lock.close()
        return False
    try:
        state = home / STATE
        if json.loads(state.read_text()).get("pid") == os.getpid():
            state.unlink()
    except (OSError, ValueError):
        pass
    _HELD.append(lock)
    return True


def watch(server, home: Path) -> None:
    """Set ``server.should_exit`` when the home is gone or the server is no longer wanted (module docstring).
    A server still starting ends at once: uvicorn looks at ``should_exit`` only once its start-up is over, which
    took minutes on a loaded machine, and a server that never answered has served nothing (SQLite's journal
    keeps its database whole)."""
    inode = os.stat(home).st_ino
    while not server.should_exit:
        time.sleep(POLL_S)
        if _replaced(home, inode):
            server.should_exit = True
        elif not _in_use(home) and not _lingering(home) and _stop_when_unused(home):
            server.should_exit = True
        if server.should_exit and not server.started:
            os._exit(0)


def main(home: Path, port: int) -> None:
    import uvicorn

    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=port,
                            log_level="error", lifespan="on")
    server = uvicorn.Server(config)
    threading.Thread(target=watch, args=(server, home), name="tooleval-server-watchdog", daemon=True).start()
    server.run()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
