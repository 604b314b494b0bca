"""Running the typer app in this process: registering its commands and turning its outcomes into exit codes.

Apart from the package's ``__init__`` so that the warm runner (:mod:`tooleval.cli._warm`), which runs a command in
a forked child, and the console entry point (:func:`tooleval.cli.main`) share it without importing each other.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

__all__ = ["end_without_teardown", "exit_without_teardown", "register_commands", "run_app"]

_ENDING: list[int] = []
"""The exit code of a process that ends without the interpreter's teardown (:func:`exit_without_teardown`)."""


def register_commands() -> None:
    """Import the command modules: importing one registers its commands on the app, in this order."""
    from tooleval.cli import _run  # noqa: F401, I001
    from tooleval.cli import _runs  # noqa: F401
    from tooleval.cli import _catalog  # noqa: F401
    from tooleval.cli import _data  # noqa: F401
    from tooleval.cli import _scale  # noqa: F401
    from tooleval.cli import _view  # noqa: F401


def run_app() -> int:
    """Run the typer app on ``sys.argv`` in this process; returns the exit code."""
    import sys

    import typer

    from tooleval.cli import _app

    register_commands()
    try:
        code = _app.app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("interrupted.\n")
        code = 130
    except typer.TyperException as exc:  # usage errors (typer's own click): their message, exit 2
        if not hasattr(exc, "show"):
            raise
        exc.show()
        code = getattr(exc, "exit_code", 2)
    except Exception as exc:  # a full disk, a damaged results file, a killed worker: exit 2 with the cause
        fault = _app.environment_fault(exc)
        if fault is None:
            raise
        from rich.markup import escape

        problem, fix = fault
        _app.err_console.print(f"[bold red]error:[/] {escape(problem)} Fix: {escape(fix)}", highlight=False)
        code = 2
    return code or 0


def end_without_teardown() -> None:
    """Register the exit handler that lets :func:`exit_without_teardown` end the process. Called before anything
    else registers one: exit handlers run last registered first, so this one runs after all the others (Prefect
    drains its event and log queues in its own)."""
    atexit.register(_end_now)


def exit_without_teardown(code: int) -> NoReturn:
    """End the process with ``code``: the interpreter's normal exit (threads that are not daemons are waited for,
    every exit handler runs), then, in the handler :func:`end_without_teardown` registered, the streams are
    flushed and the process ends without freeing every module and object one by one, which took 2 s on the quiet
    2-core machine (more on a loaded one) between the command's last line and the prompt. Without that handler
    registered, the exit is simply the normal one."""
    _ENDING[:] = [code]
    raise SystemExit(code)


def _end_now() -> None:
    if not _ENDING:  # a normal exit: the interpreter tears down as usual
        return
    if "logging" in sys.modules:  # its own exit handler may have been registered before this one
        import logging

        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(_ENDING[0])
