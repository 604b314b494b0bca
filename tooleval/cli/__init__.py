"""The ``tooleval`` command line (typer). Flows are imported lazily inside the commands, after the Prefect
environment has been set, so that ``tooleval --help`` and ``tooleval import`` never start Prefect.

Exit codes: 0 every row scored; 1 the run completed but some rows or cases had errors;
2 a file or usage error, in which case nothing was written.
"""

from tooleval.cli import _run  # noqa: F401, I001  (importing a module registers its commands, in this order)
from tooleval.cli import _runs  # noqa: F401
from tooleval.cli import _catalog  # noqa: F401
from tooleval.cli import _data  # noqa: F401
from tooleval.cli import _scale  # noqa: F401
from tooleval.cli._app import app, prefect_environment, prefect_session

__all__ = ["app", "main", "prefect_environment", "prefect_session"]


def main() -> None:
    """The ``tooleval`` console entry point: the typer app, with Ctrl-C anywhere ending in exit 130 and one
    line instead of click's "Aborted!" (exit 1) or a traceback."""
    import signal
    import sys

    import typer

    # Ctrl-C must interrupt from the first instant, also when the process inherited SIGINT ignored (a background
    # job of a non-interactive shell, or a scheduler that starts it so): Python keeps an inherited SIG_IGN.
    if threading_main():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = app(standalone_mode=False)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("interrupted.\n")
        code = 130
    except typer.TyperException as exc:  # usage errors (typer's own click): their message, exit 2
        if not hasattr(exc, "show"):
            raise
        exc.show()
        code = getattr(exc, "exit_code", 2)
    sys.exit(code or 0)


def threading_main() -> bool:
    """True in the main thread (the only one where a signal handler can be installed)."""
    import threading

    return threading.current_thread() is threading.main_thread()
