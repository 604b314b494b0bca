"""The ``TOOLEVAL_*`` environment variables, each checked against its declared range where it is read.

A value outside its range is a usage error (:class:`EnvironmentValueError`, exit 2) that names the variable, the
value and what is accepted; it never falls back to the default silently (``abc`` is not 120 seconds, ``0`` is not
a one-second lease, ``1e999`` is not an infinite one). An unset variable, or one set to the empty text, takes its
default: the shell's way to unset a variable for one command (``TOOLEVAL_LOCK_TTL_S= tooleval run``).

The command line checks every variable before a command does anything (:func:`check_environment`); library
callers meet the same error where the value is read.

* ``TOOLEVAL_LOCK_TTL_S``: seconds a run's lease lives unrenewed, a number in [1, 86400]; default 120.
* ``TOOLEVAL_MAX_LINE_BYTES``: the longest JSON line read, an integer number of bytes in [1024, 2**31 - 1];
  default 64 MiB.
* ``TOOLEVAL_PREFECT_HOME``: Prefect's home, a folder this user can write or a path where one can be created;
  default ``$PREFECT_HOME`` when set, else one per user, :func:`user_prefect_home` (the task results and cache
  records of a run then stay in ``<out>/.tooleval/prefect/storage``).
* ``TOOLEVAL_PREFECT_SERVER_IDLE_S``: seconds the local Prefect server waits for the next command after one ended
  normally, a number in [0, 86400] (0: it stops with each command); default 300. The warm runner of
  ``tooleval run`` (:mod:`tooleval.cli._warm`) waits as long.
* ``TOOLEVAL_WARM_RUNNER``: ``1`` (default) lets ``tooleval run`` hand its work to a warm runner, a process that
  has imported what a run imports; ``0`` runs every command cold, in its own process.
* ``TOOLEVAL_REDACTION_KEY``: the redaction key's text; ``TOOLEVAL_REDACTION_KEY_FILE``: a readable, non-empty
  file holding it (:mod:`tooleval.capture.keys`); default: ``<out>/redaction.key``.
* ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (Prefect's own setting, which tooleval reads too): seconds
  a command waits for the local Prefect server to answer after starting it, a number in [1, 86400]; default
  :data:`DEFAULT_SERVER_STARTUP_S` (checked where a command sets Prefect up, not by :func:`check_environment`).
* ``PREFECT_HOME`` (Prefect's own): when set, the folder is created (with its parents) as Prefect would; one that
  cannot be is refused (:func:`make_prefect_env_home`).
* ``TOOLEVAL_TEST_PUBLISH_PAUSE`` (tests only): ``written``, ``committed`` or ``rolling``; with
  ``TOOLEVAL_TEST_PUBLISH_PAUSE_FILE``, where the paused process writes its pid (:mod:`tooleval.storage._pause`).
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

from tooleval.errors import InputFileError

__all__ = ["EnvironmentValueError", "LOCK_TTL_ENV", "MAX_LINE_ENV", "PREFECT_HOME_ENV", "SERVER_IDLE_ENV",
           "WARM_RUNNER_ENV", "PAUSE_ENV", "PAUSE_FILE_ENV", "PAUSE_POINTS", "DEFAULT_LOCK_TTL_S", "DEFAULT_MAX_LINE_BYTES",
           "DEFAULT_SERVER_IDLE_S", "LOCK_TTL_RANGE", "MAX_LINE_RANGE", "SERVER_IDLE_RANGE", "lock_ttl_s",
           "max_line_bytes", "prefect_home", "make_prefect_home", "prefect_server_idle_s", "warm_runner_enabled",
           "check_environment", "STARTUP_TIMEOUT_ENV", "DEFAULT_SERVER_STARTUP_S", "SERVER_STARTUP_RANGE",
           "prefect_server_startup_s", "PREFECT_ENV_HOME", "make_prefect_env_home", "user_prefect_home"]

LOCK_TTL_ENV = "TOOLEVAL_LOCK_TTL_S"
MAX_LINE_ENV = "TOOLEVAL_MAX_LINE_BYTES"
PREFECT_HOME_ENV = "TOOLEVAL_PREFECT_HOME"
SERVER_IDLE_ENV = "TOOLEVAL_PREFECT_SERVER_IDLE_S"
WARM_RUNNER_ENV = "TOOLEVAL_WARM_RUNNER"
STARTUP_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
PREFECT_ENV_HOME = "PREFECT_HOME"
PAUSE_ENV = "TOOLEVAL_TEST_PUBLISH_PAUSE"
PAUSE_FILE_ENV = "TOOLEVAL_TEST_PUBLISH_PAUSE_FILE"

DEFAULT_LOCK_TTL_S = 120.0
LOCK_TTL_RANGE = (1.0, 86_400.0)
"""Seconds: under one second the renewing thread (every third of the time to live) cannot keep a lease; over a
day, a lease left by a process that died on another host would block its run id for longer than a nightly run's
period."""

DEFAULT_SERVER_IDLE_S = 300.0
DEFAULT_SERVER_STARTUP_S = 300.0
"""Seconds a command waits for the local Prefect server it started to answer. A fresh server (new database) answered
after 18 s on the quiet 2-core machine, and after 19-50 s with both cores kept busy by two other processes while
the command imported its own modules beside it; a shared CI runner at a load of 10-20 is slower still. 300 s is
six times the slowest measured start-up: a server that is merely slow is waited for, one that hangs is still
reported within minutes."""
SERVER_STARTUP_RANGE = (1.0, 86_400.0)
SERVER_IDLE_RANGE = (0.0, 86_400.0)
"""Seconds: 0 stops the server with each command (no reuse); over a day, an unused server would outlive the
working day that a reuse saves start-ups in."""

DEFAULT_MAX_LINE_BYTES = 64 << 20
MAX_LINE_RANGE = (1024, 2**31 - 1)
"""Bytes: a line shorter than 1 KiB holds no real trace; a line longer than 2**31 - 1 bytes cannot be one value of
an Arrow string column (the stage files')."""

PAUSE_POINTS = ("written", "committed", "rolling")
"""Where :func:`tooleval.storage._pause.pause_point` may hold a publication (tests only)."""


class EnvironmentValueError(InputFileError):
    """An environment variable's value is outside its accepted range (a usage error: exit 2, nothing written).

    Attributes:
        variable: The variable's name (``TOOLEVAL_LOCK_TTL_S``).
        value: Its value as found in the environment.
        accepted: What it accepts, in words (``"a number of seconds in [1, 86400]"``).
        default: What an unset (or empty) variable means, in words.
    """

    def __init__(self, variable: str, value: str, accepted: str, default: str) -> None:
        super().__init__(None, None, f"environment variable {variable}={value!r} is not {accepted}.",
                         f"set {variable} to {accepted}, or unset it ({default}).")
        self.args = (variable, value, accepted, default)  # what pickling passes back to __init__
        self.variable = variable
        self.value = value
        self.accepted = accepted
        self.default = default


def _value(name: str) -> str | None:
    """The variable's text, ``None`` when unset or empty."""
    text = os.environ.get(name)
    return text if text else None


def _number(name: str, low: float, high: float, *, integer: bool, unit: str) -> float | int | None:
    """The variable as a number of ``unit`` in ``[low, high]`` (``None`` when unset); an integer when ``integer``."""
    text = _value(name)
    if text is None:
        return None
    kind = "an integer number" if integer else "a number"
    accepted = f"{kind} of {unit} in [{_plain(low)}, {_plain(high)}]"
    try:
        value: float | int = int(text.strip()) if integer else float(text)
    except ValueError:
        value = math.nan
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        raise EnvironmentValueError(name, text, accepted, _DEFAULTS[name])
    return value


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


_DEFAULTS = {
    LOCK_TTL_ENV: f"default {_plain(DEFAULT_LOCK_TTL_S)} seconds",
    MAX_LINE_ENV: f"default {DEFAULT_MAX_LINE_BYTES} bytes, 64 MiB",
    PREFECT_HOME_ENV: "default $PREFECT_HOME, else ~/.cache/tooleval/prefect",
    SERVER_IDLE_ENV: f"default {_plain(DEFAULT_SERVER_IDLE_S)} seconds",
    WARM_RUNNER_ENV: "default 1, on",
    STARTUP_TIMEOUT_ENV: f"default {_plain(DEFAULT_SERVER_STARTUP_S)} seconds",
    PREFECT_ENV_HOME: "tooleval then puts Prefect's home in ~/.cache/tooleval/prefect",
    PAUSE_ENV: "no pause: the variable is for tests only",
}


def lock_ttl_s() -> float:
    """Seconds a run's lease lives without renewal: ``$TOOLEVAL_LOCK_TTL_S`` in [1, 86400], or 120.

    Raises:
        EnvironmentValueError: the value is not a finite number in that range (``abc``, ``0``, ``-5``, ``1e999``).
    """
    value = _number(LOCK_TTL_ENV, *LOCK_TTL_RANGE, integer=False, unit="seconds")
    return DEFAULT_LOCK_TTL_S if value is None else float(value)


def prefect_server_idle_s() -> float:
    """Seconds the local Prefect server waits for the next command after one ended normally:
    ``$TOOLEVAL_PREFECT_SERVER_IDLE_S`` in [0, 86400], or 300 (:mod:`tooleval.cli._prefect_server`).

    Raises:
        EnvironmentValueError: the value is not a finite number in that range (``5m``, ``-1``, ``1e999``).
    """
    value = _number(SERVER_IDLE_ENV, *SERVER_IDLE_RANGE, integer=False, unit="seconds")
    return DEFAULT_SERVER_IDLE_S if value is None else float(value)


def prefect_server_startup_s() -> float:
    """Seconds a command waits for the local Prefect server to answer:
    ``$PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` in [1, 86400], or :data:`DEFAULT_SERVER_STARTUP_S`.

    Raises:
        EnvironmentValueError: the value is not a finite number in that range (``1m``, ``0``, ``1e999``).
    """
    value = _number(STARTUP_TIMEOUT_ENV, *SERVER_STARTUP_RANGE, integer=False, unit="seconds")
    return DEFAULT_SERVER_STARTUP_S if value is None else float(value)


def warm_runner_enabled() -> bool:
    """Whether ``tooleval run`` may use a warm runner: ``$TOOLEVAL_WARM_RUNNER`` ``1`` (the default) or ``0``.

    Raises:
        EnvironmentValueError: any other value (``yes``, ``off``).
    """
    text = _value(WARM_RUNNER_ENV)
    if text is None:
        return True
    if text.strip() not in ("0", "1"):
        raise EnvironmentValueError(WARM_RUNNER_ENV, text, "0 or 1", _DEFAULTS[WARM_RUNNER_ENV])
    return text.strip() == "1"


def max_line_bytes() -> int:
    """The longest JSON line read (bytes, after gunzip): ``$TOOLEVAL_MAX_LINE_BYTES`` in [1024, 2**31 - 1], or
    64 MiB. The cap keeps a gzip bomb (1 GB of zeros expands from a 1 MB file) from filling memory before the line
    error.

    Raises:
        EnvironmentValueError: the value is not an integer in that range (``64MiB``, ``1e6``, ``0``).
    """
    value = _number(MAX_LINE_ENV, *MAX_LINE_RANGE, integer=True, unit="bytes")
    return DEFAULT_MAX_LINE_BYTES if value is None else int(value)


_HOME_ACCEPTED = "a folder tooleval can write, or a path where one can be created"


def user_prefect_home() -> Path:
    """The Prefect home of this user's commands when none is configured: ``$XDG_CACHE_HOME/tooleval/prefect``, or
    ``~/.cache/tooleval/prefect`` (absolute; not created here). One per user, not one per results folder: its
    local server and warm runner serve every folder."""
    return (Path(_value("XDG_CACHE_HOME") or Path.home() / ".cache") / "tooleval" / "prefect").absolute()


def prefect_home() -> Path | None:
    """``$TOOLEVAL_PREFECT_HOME`` as a path (``None`` when unset: Prefect's home is then ``$PREFECT_HOME`` or
    :func:`user_prefect_home`), checked
    without writing anything: an existing folder that this user can write, or a path whose nearest existing
    ancestor is such a folder.

    Raises:
        EnvironmentValueError: the path names a file, a folder that cannot be written, or lies under a file.
    """
    text = _value(PREFECT_HOME_ENV)
    if text is None:
        return None
    path = Path(text)
    probe = path.absolute()
    try:
        while not os.path.lexists(probe) and probe != probe.parent:
            probe = probe.parent
        info = os.stat(probe)
    except (OSError, ValueError):  # ValueError: a NUL in the text
        raise EnvironmentValueError(PREFECT_HOME_ENV, text, _HOME_ACCEPTED, _DEFAULTS[PREFECT_HOME_ENV]) from None
    if not stat.S_ISDIR(info.st_mode) or not os.access(probe, os.W_OK | os.X_OK):
        raise EnvironmentValueError(PREFECT_HOME_ENV, text, _HOME_ACCEPTED, _DEFAULTS[PREFECT_HOME_ENV])
    return path


def make_prefect_home() -> Path | None:
    """Create ``$TOOLEVAL_PREFECT_HOME`` (with its parents) when it is set; return it (``None`` when unset).

    Raises:
        EnvironmentValueError: see :func:`prefect_home`; or the folder cannot be created there (``/proc/self/nope``:
            a folder that only looks writable).
    """
    path = prefect_home()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        raise EnvironmentValueError(PREFECT_HOME_ENV, str(path), _HOME_ACCEPTED, _DEFAULTS[PREFECT_HOME_ENV]) from None
    return path


def make_prefect_env_home() -> Path | None:
    """Create ``$PREFECT_HOME`` (``~`` expanded, with its parents) when it is set, as Prefect itself would: CI jobs
    point it at a workspace path that does not exist yet. Returns the absolute folder (``None`` when unset).

    Raises:
        EnvironmentValueError: the folder cannot be created there (a file in the way, no permission).
    """
    text = _value(PREFECT_ENV_HOME)
    if text is None:
        return None
    try:
        path = Path(text).expanduser().absolute()
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(text)
    except (OSError, ValueError, RuntimeError):  # ValueError: a NUL; RuntimeError: an unknown ~user
        raise EnvironmentValueError(PREFECT_ENV_HOME, text, _HOME_ACCEPTED, _DEFAULTS[PREFECT_ENV_HOME]) from None
    return path


def _pause_point() -> None:
    text = _value(PAUSE_ENV)
    if text is not None and text not in PAUSE_POINTS:
        raise EnvironmentValueError(PAUSE_ENV, text, f"one of {', '.join(PAUSE_POINTS)}", _DEFAULTS[PAUSE_ENV])


def check_environment() -> None:
    """Check every ``TOOLEVAL_*`` variable this package reads (the table in this module's docstring), before a
    command does anything.

    Raises:
        EnvironmentValueError: a value outside its range (the first one found, in the table's order).

    The redaction key's variables are checked by their reader, :func:`tooleval.capture.keys.environment_key`,
    which the command line calls right after this: settings sit below every package, so they import none.
    """
    lock_ttl_s()
    max_line_bytes()
    prefect_home()
    prefect_server_idle_s()
    warm_runner_enabled()
    _pause_point()
