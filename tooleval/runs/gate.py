"""Running the release gate over a run's rows (issue 3): the config a run uses, the verdict, ``junit.xml``.

The gate config is ``--config FILE`` or the dataset's own ``gate.toml`` (defaults when it has none: every
blocking violation blocks, F1 is advisory). The verdict is computed with today's UTC date (an expired waiver
fails the gate).

Nothing unscored passes (issue 11): :func:`gate_rows` adds a placeholder row for every case of the run's scope
(:func:`gate_scope`) that has no row, and for every trace that made none (``errors.json``: a trace of an unknown
case, a line that could not be read as a trace); the gate fails each as rule ``unscored``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from tooleval.models import Case
from tooleval.rules import GateConfig, GateVerdict, evaluate_gate, load_gate_config, write_junit

__all__ = ["gate_config_for", "gate_rows", "gate_scope", "run_gate", "unscored_rows", "write_junit"]

_UNSCORED_KINDS = ("missing_trace", "unknown_case", "bad_trace", "generation_error")
"""``errors.json`` kinds that stand for a (case, trial) without a row (a row that exists carries its own error)."""


def gate_config_for(dataset_path: str | Path, config: str | Path | None = None) -> GateConfig:
    """The gate config of a run: ``config`` when given, else ``<dataset>/gate.toml``, else the defaults.

    Raises:
        tooleval.errors.InputFileError: unreadable TOML, unknown keys or invalid values (file and line named).
    """
    if config is not None:
        return load_gate_config(Path(config))
    own = Path(dataset_path) / "gate.toml"
    return load_gate_config(own) if own.is_file() else GateConfig()


def run_gate(rows: list[dict[str, Any]], config: GateConfig) -> GateVerdict:
    """The gate verdict of ``rows`` (row dicts with the row columns) under ``config``, as of today (UTC)."""
    return evaluate_gate(rows, config, today=datetime.now(timezone.utc).date())


def gate_scope(cases: Mapping[str, Case], slices: Iterable[str] | None = None) -> dict[str, str | None]:
    """The cases a run answers for, ``case_id -> slice``: every case of the dataset, or those of the ``--slices``
    asked for. A diagnostic subset (``rescore --case/--trial``) has no scope beyond its own rows: pass ``None``
    to :func:`gate_rows` instead."""
    wanted = None if slices is None else set(slices)
    return {case_id: case.slice for case_id, case in cases.items() if wanted is None or case.slice in wanted}


def unscored_rows(rows: list[dict[str, Any]], scope: Mapping[str, str | None] | None,
                  errors: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Placeholder rows (``unscored: true``) for what the run should have scored and did not.

    Args:
        rows: The run's rows (``case_id``, ``trial``).
        scope: :func:`gate_scope`, or ``None`` (a diagnostic subset: only ``errors`` count).
        errors: ``errors.json`` entries (``kind``, ``case_id``, ``trial``, ``message``, ``line``).

    Returns:
        One row per (case, trial) named by an error of kind ``missing_trace``, ``unknown_case``, ``bad_trace``
        or ``generation_error`` that has no row, then one per case of ``scope`` still without any row, in that
        order. Each has ``error`` (``"<kind>: <message>"``), ``unscored`` true and null metrics. A line that named
        no case gets the case id ``<traces line N>`` so that JUnit can name it.
    """
    present = {(str(r["case_id"]), r.get("trial")) for r in rows}
    cases_with_rows = {case_id for case_id, _ in present}
    out: list[dict[str, Any]] = []
    for error in errors:
        if error.get("kind") not in _UNSCORED_KINDS:
            continue
        case_id = error.get("case_id")
        case_id = f"<traces line {error.get('line')}>" if case_id is None else str(case_id)
        key = (case_id, error.get("trial"))
        if key in present or (error.get("trial") is None and case_id in cases_with_rows):
            continue
        present.add(key)
        cases_with_rows.add(case_id)
        out.append(_placeholder(case_id, error.get("trial"), (scope or {}).get(case_id),
                                f"{error['kind']}: {error.get('message')}"))
    for case_id, slice_ in (scope or {}).items():
        if case_id not in cases_with_rows:
            out.append(_placeholder(case_id, None, slice_, "missing_trace: the run has no row for this case"))
    return out


def _placeholder(case_id: str, trial: int | None, slice_: str | None, error: str) -> dict[str, Any]:
    return {"case_id": case_id, "trial": trial, "slice": slice_, "error": error, "unscored": True, "f1": None,
            "exact_match": None, "fp": None, "fn": None, "missing_calls": None, "extra_calls": None,
            "wrong_args": None, "violations": None, "tool_families": None}


def gate_rows(rows: list[dict[str, Any]], scope: Mapping[str, str | None] | None,
              errors: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """``rows`` followed by their :func:`unscored_rows`: what :func:`run_gate` and ``write_junit`` judge."""
    return list(rows) + unscored_rows(rows, scope, errors)
