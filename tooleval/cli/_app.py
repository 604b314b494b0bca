"""The typer application, its consoles and what every command shares (Prefect environment, errors, formats)."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Callable, Iterator

import typer
from rich.console import Console
from rich.markup import escape

from tooleval.cli._group import ToolevalGroup
from tooleval.errors import InputFileError

app = typer.Typer(cls=ToolevalGroup, add_completion=False, no_args_is_help=True,
                  help="Evaluate AI agents' tool calls.")
console = Console()
err_console = Console(stderr=True)

_NOT_A_TERMINAL_WIDTH = 4096
"""Width of output that is not a terminal: wide enough that paths, ids and commands are never wrapped or cut."""


def say(text: str) -> None:
    """One line on stderr saying what a command is doing during a step that prints nothing else (a server's
    start-up, a plan, the wait for Prefect's records: up to a minute on a loaded machine); nothing with
    ``--quiet``."""
    if not console.quiet:
        err_console.print(text, highlight=False, markup=False)


def _version(value: bool) -> None:
    if value:
        from tooleval.versions import tooleval_version

        console.print(f"tooleval {tooleval_version()}", highlight=False)
        raise typer.Exit(0)


def _setup_consoles(quiet: bool) -> None:
    """Terminal manners, per invocation: when output is not a terminal (a pipe, a file, CI), no wrapping (long
    lines stay whole, tables take the width they need) unless ``COLUMNS`` is set; ``--quiet`` prints only
    errors."""
    for con in (console, err_console):
        terminal = con.is_terminal
        con.soft_wrap = not terminal
        if terminal or "COLUMNS" in os.environ:
            con._width = None  # rich measures the terminal (or COLUMNS) again
        else:
            con.width = _NOT_A_TERMINAL_WIDTH
    console.quiet = quiet


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors; the exit code tells.")] = False,
) -> None:
    """Evaluate AI agents' tool calls."""
    _setup_consoles(quiet)
    from tooleval.capture.keys import environment_key
    from tooleval.settings import check_environment

    try:
        check_environment()  # a bad TOOLEVAL_* value is refused before any command reads or writes anything
        environment_key()  # so is a redaction key file that cannot be read (the key's reader owns its checks)
    except InputFileError as exc:
        fail(exc)

OutOption = Annotated[Path, typer.Option("--out", help="Results folder.")]
UrlOutOption = Annotated[Path, typer.Option("--out", help="Results folder, or an fsspec URL (s3://bucket/prefix; "
                                            "gs://… with gcsfs installed).")]
"""``--out`` of the commands that work on object storage too (typed ``Path``: :func:`results_location` turns
typer's ``s3:/b/p`` back into the URL)."""


BUNDLED_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline"
"""The default ``--dataset``: the bundled tau-bench airline dataset (repository root / datasets)."""


def _bundled_dataset() -> Path:
    return BUNDLED_DATASET


def prefect_environment(out: Path) -> dict[str, str]:
    """Set the Prefect environment for a command that runs flows, before Prefect is imported.

    Prefect's home (its SQLite database, the local server's files, the warm runner's claim) is
    ``$TOOLEVAL_PREFECT_HOME``, else ``$PREFECT_HOME``, else one folder per user,
    ``$XDG_CACHE_HOME/tooleval/prefect`` (or ``~/.cache/tooleval/prefect``): every results folder's commands share
    one local server and one warm runner, so a script that runs many datasets into many folders leaves two
    processes behind, not two per folder, and a run never touches the user's ``~/.prefect``. The task results and
    cache records of a run stay with its results folder, in ``<out>/.tooleval/prefect/storage`` (for
    ``--out s3://…``, Prefect's default storage is a folder of this machine's cache,
    :func:`tooleval.storage.local_state_dir`, while the run's stage tasks keep theirs in the bucket, beside the
    stage files they name, so that every machine finds them), unless a home is configured (they are then in its
    ``storage``, as Prefect puts them): they name the folder's stage files, and a deleted folder takes its cache
    with it. Settings the user already exported win. With ``PREFECT_API_URL``
    set, runs go to that server instead of the local one.

    Returns:
        The variables this call set.

    A ``PREFECT_HOME`` of the environment that does not exist yet is created, as Prefect creates its home.

    Raises:
        tooleval.settings.EnvironmentValueError: ``$TOOLEVAL_PREFECT_HOME`` or ``$PREFECT_HOME`` cannot be a
            folder, or ``$PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` is not a number of seconds (exit 2).
        tooleval.storage.OutFolderError: a symbolic link under ``<out>/.tooleval`` (exit 2).
    """
    from tooleval.settings import (DEFAULT_SERVER_STARTUP_S, STARTUP_TIMEOUT_ENV, make_prefect_env_home,
                                   make_prefect_home, prefect_server_startup_s, user_prefect_home)
    from tooleval.storage import check_state_folder, ensure_dir
    from tooleval.storage import local_state_dir

    location = results_location(out)
    local = location.resolve() if isinstance(location, Path) else location
    configured = make_prefect_home()  # $TOOLEVAL_PREFECT_HOME, checked and created
    prefect_server_startup_s()  # a value that is no number of seconds is refused before any server starts
    users = os.environ.get("PREFECT_HOME") if os.environ.get("PREFECT_HOME") != _SET["home"] else None
    if configured is None and isinstance(local, Path):
        # <out>/.tooleval/prefect: no link on the way, nor anywhere under .tooleval
        check_state_folder(local)
        folder_state = str(ensure_dir(local, ".tooleval/prefect"))  # where local_state_dir puts it for a folder
    elif configured is None:
        folder_state = str(local_state_dir(local, "prefect"))
    storage = None
    if configured is not None:
        home = str(configured)
    elif users:
        # the user's own home: the server's lock and state files go there, so it must exist before they do
        home = os.environ["PREFECT_HOME"] = str(make_prefect_env_home())
    else:
        home = str(user_prefect_home())
        storage = os.path.join(folder_state, "storage")
    wanted = {
        "PREFECT_HOME": home,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        # The client's own switch: without it Prefect prints a telemetry notice into the first run's output on a
        # terminal (the server setting above does not silence the client) and tries to reach the network.
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
        STARTUP_TIMEOUT_ENV: str(int(DEFAULT_SERVER_STARTUP_S)),
        "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS": "4",
    }
    Path(home).mkdir(parents=True, exist_ok=True)
    applied = {}
    for key, value in wanted.items():
        if key not in os.environ or (key == "PREFECT_HOME" and (configured is not None or not users)):
            os.environ[key] = value
            applied[key] = value
    if STORAGE_ENV not in os.environ or os.environ[STORAGE_ENV] == _SET["storage"]:
        # the results folder's own, set again for each folder a process runs into, unless the user exported one
        if storage is None:
            os.environ.pop(STORAGE_ENV, None)
        else:
            os.environ[STORAGE_ENV] = applied[STORAGE_ENV] = storage
        _SET["storage"] = storage
    if "PREFECT_HOME" in applied:
        _SET["home"] = home
    return applied


STORAGE_ENV = "PREFECT_LOCAL_STORAGE_PATH"
"""Prefect's setting for the folder of task results and cache records."""
_SET: dict[str, str | None] = {"home": None, "storage": None}
"""What :func:`prefect_environment` itself set last (not the user): it may set those again for another folder."""


@contextmanager
def prefect_session(out: Path, expected_task_runs: list[int] | None = None,
                    preload: tuple[str, ...] = ()) -> Iterator[None]:
    """Run flows inside: tooleval's Prefect environment (:func:`prefect_environment`), heartbeats off (a synchronous
    flow call otherwise pays ~1 s on exit for Prefect's heartbeat thread), and — unless ``PREFECT_API_URL`` names a
    server — the local server shared by the commands of this Prefect home, found or started
    (:mod:`tooleval.cli._prefect_server`). A server started here boots while this process imports Prefect and the
    ``preload`` modules (the flows the caller runs), so the two start-ups overlap.

    On entry, flow runs left open by a dead tooleval process are set ``Crashed``; on exit, the task runs of this
    command are waited for until recorded in final states (at least ``expected_task_runs[0]`` when the caller
    fills it in), and the server is told to wait for the next command (unless interrupted). Ctrl-C ends the
    command with exit 130, the interrupted runs recorded ``Crashed``.
    """
    import importlib

    from tooleval.cli import _prefect_server as server

    try:
        prefect_environment(out)
    except InputFileError as exc:
        fail(exc)
    shared = None
    if not _api_url_configured():
        try:
            shared = server.begin_server(Path(os.environ["PREFECT_HOME"]))
        except KeyboardInterrupt:
            interrupted()
        say("starting the local Prefect server…" if shared.started_here else "connecting to the local Prefect "
            "server…")
    else:
        say("loading Prefect…")
    try:
        from prefect import tags
        from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

        for module in preload:
            importlib.import_module(module)
        updates: dict = {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
        if os.environ.get(STORAGE_ENV):
            # Prefect read its settings when it was imported, perhaps for another results folder (a warm runner
            # serves them all): this folder's results and cache records go to its own storage
            from prefect.settings import PREFECT_LOCAL_STORAGE_PATH

            updates[PREFECT_LOCAL_STORAGE_PATH] = Path(os.environ[STORAGE_ENV])
        if shared is not None and PREFECT_API_URL.value():  # set where only Prefect looks (prefect.toml, .env)
            server.end_server(linger=False)
        elif shared is not None:
            updates[PREFECT_API_URL] = shared.wait()
    except KeyboardInterrupt:
        server.end_server(linger=False)
        interrupted()
    except InputFileError as exc:  # the server did not answer: the run never started
        server.end_server(linger=False)
        fail(exc)
    except BaseException:
        server.end_server(linger=False)
        raise
    stopped = False
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        if not any(isinstance(f, _UserErrorFilter) for f in logging.getLogger(name).filters):
            logging.getLogger(name).addFilter(_UserErrorFilter())
    late: list[int] = []  # a Ctrl-C that something inside Prefect caught, so the command went on
    _UserErrorFilter.interrupts = late
    previous = _count_interrupts(late)
    with temporary_settings(updates=updates), tags(server.holder_tag()):
        try:
            server.crash_dead_runs()
            yield
        except KeyboardInterrupt:
            stopped = True
        except Exception:
            if not late:
                raise
            # the Ctrl-C, turned into another error by the library code it landed in (pydantic's serializer
            # inside Prefect's task submission did so): the command was interrupted, not failed
            stopped = True
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            _settle(server, stopped or bool(late), expected_task_runs)
            server.end_server(linger=not (stopped or late))
    if stopped:
        interrupted()
    if late:
        interrupted("interrupted after the command finished its work (what it published is complete).")


class LocalPrefect:
    """The Prefect that ``tooleval run`` uses — its environment and its local server — for code outside the
    command line that runs flows as a command does (the benchmark): handed to it by the command, so that it does
    not import the command line."""

    def environment(self, out: Path) -> dict[str, str]:
        """:func:`prefect_environment` of the results folder ``out``."""
        return prefect_environment(out)

    @contextmanager
    def session(self, out: Path) -> Iterator["Callable[[], int | None]"]:
        """:func:`prefect_session` of ``out``; yields a function that returns the local server's process id
        (``None`` when a server named by ``PREFECT_API_URL`` is used), known once the first flow ran."""
        from tooleval.cli import _prefect_server as server

        with prefect_session(out):
            yield lambda: server._USE.pid if server._USE is not None else None


def _api_url_configured() -> bool:
    """Whether flows go to a server named by ``PREFECT_API_URL``: the environment's, or — once Prefect is
    imported (a test harness, a flow calling a command) — Prefect's current setting."""
    if "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return bool(PREFECT_API_URL.value())
    return bool(os.environ.get("PREFECT_API_URL"))


def _count_interrupts(seen: list[int]):
    """Install a SIGINT handler that notes each Ctrl-C before raising KeyboardInterrupt as usual (main thread
    only); returns the previous handler, or None when none was installed."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def note(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGINT, note)


class _UserErrorFilter(logging.Filter):
    """Drop Prefect's ERROR record (with its traceback) for a file or usage error raised inside a flow, or an
    environment fault (:func:`environment_fault`): the command prints it as one clear message and exits 2. After
    a Ctrl-C, drop Prefect's records of the runs it ended (a crash, or the traceback of the error the interrupt
    became): the command says "interrupted" once."""

    interrupts: list[int] = []
    """The current command's Ctrl-Cs (:func:`prefect_session`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if self.interrupts:
            return False
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, InputFileError) or error is not None and environment_fault(error) is not None:
            return False  # the command prints the cause and the fix in one message
        message = record.getMessage()
        return not any(f"exception {name}:" in message or name == "InputFileError" and name in message
                       for name in _error_names())


def _error_names() -> set[str]:
    """Names of :class:`InputFileError` and its subclasses (an ``OutFolderError`` for a full disk included), as
    Prefect's "encountered an exception <name>: ..." lines spell them."""
    names, classes = set(), [InputFileError]
    while classes:
        cls = classes.pop()
        names.add(cls.__name__)
        classes += cls.__subclasses__()
    return names


def _settle(server, stopped: bool, expected: list[int] | None) -> None:
    """Record this command's runs before returning: crashed on an interrupt (quickly), else waited for."""
    try:
        if stopped:
            server.crash_dead_runs(own=True)
            server.wait_until_recorded(None, timeout=3.0)
        else:
            say("waiting for the task runs to be recorded by the Prefect server…")
            server.wait_until_recorded(expected[0] if expected else None)
    except KeyboardInterrupt:
        interrupted()
    except Exception as exc:  # bookkeeping only: a result already published stays published
        logging.getLogger(__name__).warning("could not confirm the Prefect records of this command: %s", exc)


def interrupted(message: str = "interrupted: nothing of this command was published.") -> None:
    """Ctrl-C: one line, no traceback, exit 130 (128 + SIGINT)."""
    err_console.print(message)
    raise typer.Exit(130)


_URL_AS_PATH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")


def results_location(out: Path | str) -> Path | str:
    """``--out`` (or ``--dataset``, ``--traces``) as a path or an fsspec URL: typer hands ``s3://b/p`` over as the
    path ``s3:/b/p``, which is turned back into the URL (``file://`` URLs become their path: :func:`tooleval.storage.as_location`)."""
    from tooleval.storage import as_location

    text = str(out)
    if isinstance(out, Path) and _URL_AS_PATH.match(text) and "://" not in text:
        text = text.replace(":/", "://", 1)
    return as_location(text) if _URL_AS_PATH.match(text) else Path(out)


def open_results(out: Path, *, remote: bool = False, writes: bool = True) -> Path | str:
    """What every command that reads or writes results does first: finish or discard a publication that an
    earlier, killed command left half-done, and remove stale staging (:func:`tooleval.storage.recover`).

    Args:
        out: ``--out`` (see :func:`results_location`).
        remote: The command works on object storage too: a URL is checked (its bucket and credentials,
            :func:`tooleval.storage.check_remote`) and used through its fsspec filesystem instead of refused.
        writes: The command may publish into the results. A command that only reads (``compare``, ``export``)
            leaves a URL's interrupted publications alone: it reads what the commit markers name, which an
            interrupted publication never changes, and needs no write permission on the bucket (as ``sql``). A
            local folder is recovered either way, as it always was.

    Returns:
        The results location: a ``Path`` for a folder (``file://`` URLs too), the URL text for object storage.

    Raises:
        InputFileError: ``out`` is a URL (``s3://…``, seen as ``s3:/…`` once made a path) and the caller did not
            pass ``remote`` (every command that reads results passes it today; one that did not would write a
            local folder named ``s3:``); or the URL's bucket cannot be reached (``OutFolderError``).
    """
    from tooleval.storage import recover

    location = results_location(out)
    if isinstance(location, str):
        if not remote:
            raise InputFileError(None, None, f"--out {location}: this command works on a local results folder "
                                 "only so far (run, sql, runs, gc, gate, drift, report, rescore, handoff, legacy, "
                                 "compare, export and view work on object storage).",
                                 "run it on a local copy of the results (e.g. `aws s3 sync URL DIR`), or query the "
                                 "URL with `tooleval sql --out URL` (for file://, pass the path itself).")
        from tooleval.storage import check_remote

        check_remote(location)
        if writes:
            recover(location)
    elif location.is_dir():
        recover(location)
    return location


def chosen_run(location: Path | str, run_id: str) -> str:
    """``--run-id`` as given, or for ``latest`` the newest run with rows under ``location`` (a folder or a URL,
    ordered the same way: :func:`tooleval.runs.catalog.resolve_run_id`), so a command names the run the scheduled
    flows would pick.

    Raises:
        InputFileError: ``latest`` with no run that has rows.
    """
    from tooleval.runs.catalog import resolve_run_id

    return resolve_run_id(location, run_id)


RunIdOption = Annotated[str, typer.Option("--run-id", help="An existing run, or latest (the newest run with rows).")]
"""``--run-id`` of the commands that take ``latest`` (:func:`chosen_run`)."""


def input_location(value: Path | None) -> Path | str | None:
    """A ``--dataset`` option as a path or an fsspec URL (:func:`results_location`), ``None`` when not given."""
    return None if value is None else results_location(value)


def fail(exc: InputFileError, *, published: bool = True) -> None:
    """Print a file or usage error and exit 2. ``published=False``: the error came after the plan (stage files,
    a cache, may exist), so the message says nothing was *published* rather than nothing written."""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
    err_console.print(_nothing_kept(published))
    raise typer.Exit(2)


def fail_environment(exc: BaseException, *, published: bool = True) -> None:
    """Print a fault of the machine or the files (:func:`environment_fault`: a full disk, a folder that cannot be
    written, a killed worker) with its fix and what was kept, as :func:`fail` does for a file error, and exit 2.
    Raises ``exc`` again when it is no such fault (a bug keeps its traceback)."""
    fault = environment_fault(exc)
    if fault is None:
        raise exc
    problem, fix = fault
    err_console.print(f"[bold red]error:[/] {escape(problem)} Fix: {escape(fix)}", highlight=False)
    err_console.print(_nothing_kept(published))
    raise typer.Exit(2)


def _nothing_kept(published: bool) -> str:
    """What a command that failed left behind: nothing, or (after a run's plan) nothing published."""
    return "Nothing was written." if published else ("Nothing was published (the stage cache under .tooleval/ may "
                                                      "hold work a rerun reuses).")


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)


_SPACE_ERRNOS = {28, 122}  # ENOSPC, EDQUOT
_WRITE_ERRNOS = {1, 13, 30}  # EPERM, EACCES, EROFS


def environment_fault(exc: BaseException) -> tuple[str, str] | None:
    """``(problem, fix)`` for an exception that comes from the machine or the files rather than from the command's
    input: a full disk, a folder that cannot be written, a results file that cannot be read back (a damaged
    Parquet part), a worker process killed (``kill -9``, the out-of-memory killer); ``None`` for anything else.

    Such a fault ends a command with exit 2 and this message instead of a traceback: the commit marker keeps
    whatever it was writing unpublished, so a rerun after the fix starts clean.
    """
    import errno as errnos

    if isinstance(exc, OSError) and exc.errno is not None:
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.errno in _SPACE_ERRNOS:
            return (f"{where}no space left on the device ({exc.strerror}).",
                    "free some space (tooleval gc --keep N removes old runs and stage files), or choose another "
                    "--out; then run the command again.")
        if exc.errno in _WRITE_ERRNOS:
            return (f"{where}cannot write here ({exc.strerror}).",
                    "make the results folder writable, or choose another --out.")
        name = errnos.errorcode.get(exc.errno, str(exc.errno))
        return (f"{where}{exc.strerror or exc} ({name}).", "check the disk and the folder, then run the command "
                "again.")
    if _damaged_file(exc):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"a results file cannot be read back: {first}.",
                "it is damaged or was changed by another program: restore it from a backup, or publish the run "
                "again (tooleval rescore --run-id RUN --to-run-id NEW, or tooleval run).")
    if type(exc).__name__ in ("BrokenProcessPool", "BrokenExecutor"):
        return ("a worker process of the run ended abruptly (killed by a signal, or by the out-of-memory killer); "
                "nothing was published.",
                "run it again (finished shards come from the stage cache); if memory ran out, pass fewer "
                "--workers.")
    return None


def _damaged_file(exc: BaseException) -> bool:
    """Whether ``exc`` is Arrow or DuckDB failing to read a Parquet file (a truncated or overwritten part)."""
    module = type(exc).__module__ or ""
    if module.startswith("pyarrow") and not isinstance(exc, (TypeError, NotImplementedError)):
        return True
    if isinstance(exc, OSError) and exc.errno is None:  # Arrow's own I/O errors carry no errno
        text = str(exc).lower()
        return any(word in text for word in ("parquet", "decompression", "thrift", "corrupt"))
    if module.startswith(("duckdb", "_duckdb")):
        text = str(exc).lower()
        return type(exc).__name__ in ("IOException", "InvalidInputException") and any(
            word in text for word in ("parquet", "failed to read", "corrupt", "magic bytes"))
    return False
