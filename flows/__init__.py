"""Prefect flows composed from the stage tasks in ``tasks/``: the nightly evaluation, rescoring a published run,
the legacy scalar path and the drift check.

Import these names from here (each is imported on first use: :mod:`tooleval.faces`); modules whose names start
with ``_`` are this package's own.
"""

from tooleval.faces import lazy_face

_EXPORTS = {
    "evaluate": "flows.evaluate",
    "run_evaluate": "flows.evaluate",
    "task_runner": "flows.evaluate",
    "RunResult": "flows.evaluate",
    "DEFAULT_DATASET": "flows.evaluate",
    "STAGES": "flows.evaluate",
    "rescore": "flows.rescore",
    "legacy": "flows.legacy",
    "drift_check": "flows.drift",
    "parse_address": "flows._dask",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
