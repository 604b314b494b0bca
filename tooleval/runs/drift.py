"""The drift check: the legacy scalar path against the row-level path, on the same immutable traces (issue 5).

Agreement means: the legacy scalar equals the new path's mean ``ragas_tool_call_f1`` within ``tolerance``
(|difference| <= 1e-9 by default), both sides cover the identical set of (case, trial) keys, no key appears twice
on a side, every row's value agrees, and both sides used the same ragas version. Anything else is drift, listed
row by row. A difference that comes with a ragas version change is attributed to the library, not to the agent
(ragas changed how ToolCallAccuracy treats extra and repeated calls three times between releases: ragas issues
1893 and 2300, PR 2582).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tooleval.runs.legacy import LegacyResult

__all__ = ["check_drift", "DEFAULT_TOLERANCE"]

DEFAULT_TOLERANCE = 1e-9


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def check_drift(
    legacy: LegacyResult, new_rows: list[dict[str, Any]], *, tolerance: float = DEFAULT_TOLERANCE
) -> dict[str, Any]:
    """Compare the legacy path with the row-level path.

    Args:
        legacy: The legacy result (scalar plus its per-row values).
        new_rows: Row-level records with ``case_id``, ``trial``, ``ragas_tool_call_f1``, ``ragas_version`` and
            ``scorer_version``.
        tolerance: Largest accepted absolute difference between the two scalars and between row values.

    Returns:
        The JSON-ready ``drift.json`` content: ``verdict`` (``"ok"`` | ``"drift"``), ``attribution``
        (``None`` | ``"library_version"`` | ``"row_level_path"``), ``reasons``, the two values and their
        difference, ``coverage`` per side, keys present on one side only, keys duplicated on a side, every row
        whose values differ, and the versions on each side.
    """
    legacy_keys = Counter((r.case_id, r.trial) for r in legacy.per_row)
    new_keys = Counter((r["case_id"], r["trial"]) for r in new_rows)
    legacy_values = {(r.case_id, r.trial): r.value for r in legacy.per_row}
    new_values = {(r["case_id"], r["trial"]): r["ragas_tool_call_f1"] for r in new_rows}
    new_value = _mean([r["ragas_tool_call_f1"] for r in new_rows if r["ragas_tool_call_f1"] is not None])
    only_legacy = sorted(set(legacy_keys) - set(new_keys))
    only_new = sorted(set(new_keys) - set(legacy_keys))
    twice_legacy = sorted(k for k, n in legacy_keys.items() if n > 1)
    twice_new = sorted(k for k, n in new_keys.items() if n > 1)
    differing = []
    for key in sorted(set(legacy_values) & set(new_values)):
        a, b = legacy_values[key], new_values[key]
        if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance):
            differing.append({"case_id": key[0], "trial": key[1], "legacy": a, "new": b})
    new_ragas = sorted({r["ragas_version"] for r in new_rows if r.get("ragas_version")})
    new_scorer = sorted({r["scorer_version"] for r in new_rows if r.get("scorer_version")})
    if legacy.value is None or new_value is None:
        difference = None if legacy.value is None and new_value is None else float("inf")
    else:
        difference = new_value - legacy.value
    reasons = []
    if new_ragas and new_ragas != [legacy.ragas_version]:
        reasons.append(
            f"ragas version differs: legacy {legacy.ragas_version}, row-level {', '.join(new_ragas)} — a library "
            "version change, not an agent regression"
        )
    if only_legacy or only_new:
        reasons.append(f"row coverage differs: {len(only_legacy)} key(s) only in legacy, {len(only_new)} only in "
                       "the row-level path")
    if twice_legacy or twice_new:
        reasons.append(f"keys scored more than once: legacy {len(twice_legacy)}, row-level {len(twice_new)}")
    if differing:
        reasons.append(f"{len(differing)} row(s) with different values")
    if difference is not None and abs(difference) > tolerance:
        reasons.append(f"scalar differs by {difference:+.3g} (tolerance {tolerance:g})")
    attribution = None
    if reasons:
        attribution = "library_version" if reasons[0].startswith("ragas version") else "row_level_path"
    return {
        "verdict": "drift" if reasons else "ok",
        "attribution": attribution,
        "reasons": reasons,
        "tolerance": tolerance,
        "legacy": {"metric": legacy.metric, "value": legacy.value, "rows": legacy.rows,
                   "ragas_version": legacy.ragas_version, "scorer_version": legacy.scorer_version},
        "new": {"value": new_value, "rows": len(new_rows), "ragas_versions": new_ragas, "scorer_versions": new_scorer},
        "difference": None if difference in (None, float("inf")) else difference,
        "coverage": {
            "legacy": len(legacy_keys),
            "new": len(new_keys),
            "only_legacy": [{"case_id": c, "trial": t} for c, t in only_legacy],
            "only_new": [{"case_id": c, "trial": t} for c, t in only_new],
            "duplicated_legacy": [{"case_id": c, "trial": t} for c, t in twice_legacy],
            "duplicated_new": [{"case_id": c, "trial": t} for c, t in twice_new],
        },
        "rows_differing": differing,
    }


def recheck_run(run: Any, *, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Re-run the drift check of a published run from its files.

    The legacy side is recomputed from the run's published trace envelopes with ragas
    (:func:`tooleval.runs.legacy.legacy_score`) and compared with the run's rows; the published legacy scalar
    (``scalar.json``) must also equal the recomputed one.

    Args:
        run: A :class:`tooleval.runs.published.PublishedRun`.
        tolerance: See :func:`check_drift`.

    Returns:
        The ``drift.json`` content, with ``published_legacy_value`` added.

    Raises:
        tooleval.errors.InputFileError: the run has no rows (legacy-only).
    """
    import json

    import pyarrow as pa
    from tooleval.runs.legacy import legacy_score
    from tooleval.storage import document_path, partition_dir, read_versioned

    def read(kind: str, columns: list[str]) -> list[dict]:
        tables = [read_versioned(path, kind).select(columns) for path in run.files(kind)]
        return pa.concat_tables(tables).to_pylist() if tables else []

    if not run.files("rows"):
        from tooleval.errors import InputFileError

        raise InputFileError(run.out / "rows", None, f"run {run.run_id!r} has no rows (a --legacy-only run?): "
                             "there is no row-level path to compare.", "run it without --legacy-only first.")
    envelopes = read("traces", ["case_id", "trial", "messages_json", "metadata_json", "error"])
    legacy = legacy_score(envelopes, run.dataset.cases, str(run.summary.get("versions", {}).get("scorer")),
                          run.redactor())
    rows = read("rows", ["case_id", "trial", "ragas_tool_call_f1", "ragas_version", "scorer_version"])
    report = check_drift(legacy, rows, tolerance=tolerance)
    scalar_relpath = (partition_dir(Path(), "legacy", run.revision, run.run_id) / "scalar.json").as_posix()
    scalar_path = document_path(run.out, scalar_relpath)
    published = json.loads(scalar_path.read_text())["value"] if scalar_path.is_file() else None
    report["published_legacy_value"] = published
    if published is None or legacy.value is None or abs(published - legacy.value) > tolerance:
        if not (published is None and legacy.value is None):
            report["verdict"] = "drift"
            report["reasons"].append(
                f"published legacy scalar {published} differs from the one recomputed from the traces ({legacy.value})"
            )
            report["attribution"] = report["attribution"] or "legacy_path"
    return report
