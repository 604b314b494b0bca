"""Running the typer app in this process: registering its commands and turning its outcomes into exit codes.

Apart from the package's ``__init__`` so that the warm runner (:mod:`tooleval.cli._warm`), which runs a command in
a forked child, and the console entry point (:func:`tooleval.cli.main`) share it without importing each other.
"""

from __future__ import annotations

__all__ = ["register_commands", "run_app"]


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
