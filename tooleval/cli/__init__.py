"""The ``tooleval`` command line (typer). Flows are imported lazily inside the commands, after the Prefect
environment has been set, so that ``tooleval --help`` and ``tooleval import`` never start Prefect.

Importing this package costs next to nothing: the typer app and its commands load on first use of ``app`` (or
of the other public names), so that ``tooleval run`` can hand itself to a warm runner (:mod:`tooleval.cli._warm`)
before anything heavy is imported.

Exit codes: 0 every row scored; 1 the run completed but some rows or cases had errors;
2 a file, usage or environment error (a full disk, a damaged results file, a killed worker), in which case
nothing was published.
"""

from __future__ import annotations

__all__ = ["app", "main", "prefect_environment", "prefect_session", "LocalPrefect"]


def __getattr__(name: str):
    if name in ("app", "prefect_environment", "prefect_session", "LocalPrefect"):
        from tooleval.cli import _app
        from tooleval.cli._entry import register_commands

        register_commands()
        return getattr(_app, name)
    raise AttributeError(f"module 'tooleval.cli' has no attribute {name!r}")


def main() -> None:
    """The ``tooleval`` console entry point: the typer app, with Ctrl-C anywhere ending in exit 130 and one
    line instead of click's "Aborted!" (exit 1) or a traceback.

    ``tooleval run`` first offers itself to a warm runner of its results folder (:mod:`tooleval.cli._warm`):
    when one answers, the command runs there, on this process's terminal, and this process exits with its code;
    otherwise it runs here and, once done, leaves a warm runner for the next run.
    """
    import signal
    import sys

    from tooleval.cli import _warm
    from tooleval.cli._entry import end_without_teardown, run_app

    # called by the program itself (the console script, ``python -m``): nothing runs after it, so the process may
    # end without the interpreter's teardown; registered first, so that it runs after every other exit handler
    program = sys._getframe(1).f_globals.get("__name__") == "__main__"
    if program:
        end_without_teardown()
        # the command's own process: its ragas scores ToolCallF1 and nothing else
        from tooleval.runs.memory import return_freed_memory
        from tooleval.scoring.ragas_metric import hide_provider_sdks

        hide_provider_sdks()
        return_freed_memory()
    # Ctrl-C must interrupt from the first instant, also when the process inherited SIGINT ignored (a background
    # job of a non-interactive shell, or a scheduler that starts it so): Python keeps an inherited SIG_IGN.
    if threading_main():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    request = _warm.request_for(sys.argv)
    if request is not None:
        code = _warm.run_warm(request)
        if code is not None:
            sys.exit(code)
    code = run_app()
    if request is not None and code in (0, 1):
        _warm.start_runner(request)
    _exit(code, program=program)


def _exit(code: int, *, program: bool) -> None:
    """End the process with ``code`` once the exit handlers have run (Prefect drains its queues there), without
    the interpreter's teardown (:func:`tooleval.cli._entry.exit_without_teardown`). A caller other than the
    program's own entry (``program`` false: a test, a script calling :func:`main`) gets the normal exit
    (``SystemExit``)."""
    import sys

    from tooleval.cli._entry import exit_without_teardown

    if not program:
        sys.exit(code)
    exit_without_teardown(code)


def threading_main() -> bool:
    """True in the main thread (the only one where a signal handler can be installed)."""
    import threading

    return threading.current_thread() is threading.main_thread()
