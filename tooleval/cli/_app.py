"""The typer application, its consoles and what every command shares (Prefect environment, errors, formats)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator

import typer
from rich.console import Console

from tooleval.errors import InputFileError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Evaluate AI agents' tool calls.")
console = Console()
err_console = Console(stderr=True)

_NOT_A_TERMINAL_WIDTH = 4096
"""Width of output that is not a terminal: wide enough that paths, ids and commands are never wrapped or cut."""


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

OutOption = Annotated[Path, typer.Option("--out", help="Results folder.")]


BUNDLED_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline"
"""The default ``--dataset``: the bundled tau-bench airline dataset (repository root / datasets)."""


def _bundled_dataset() -> Path:
    return BUNDLED_DATASET


def prefect_environment(out: Path) -> dict[str, str]:
    """Set the Prefect environment for a command that runs flows, before Prefect is imported.

    Prefect's home (its SQLite database and cached results) goes to ``$TOOLEVAL_PREFECT_HOME`` or, by default,
    ``<out>/.tooleval/prefect``, so a run never touches the user's ``~/.prefect``. Settings the user already
    exported win. With ``PREFECT_API_URL`` set, runs go to that server instead of a temporary one.

    Returns:
        The variables this call set.
    """
    home = os.environ.get("TOOLEVAL_PREFECT_HOME") or str(out.resolve() / ".tooleval" / "prefect")
    wanted = {
        "PREFECT_HOME": home,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
        "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS": "4",
    }
    Path(home).mkdir(parents=True, exist_ok=True)
    applied = {}
    for key, value in wanted.items():
        if key not in os.environ or (key == "PREFECT_HOME" and "TOOLEVAL_PREFECT_HOME" in os.environ):
            os.environ[key] = value
            applied[key] = value
    return applied


@contextmanager
def prefect_session(out: Path) -> Iterator[None]:
    """Run flows inside: tooleval's Prefect environment (:func:`prefect_environment`), heartbeats off (a
    synchronous flow call otherwise pays ~1 s on exit: PREFECT.md)."""
    prefect_environment(out)
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def fail(exc: InputFileError) -> None:
    err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
    err_console.print("Nothing was written.")
    raise typer.Exit(2)


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)
