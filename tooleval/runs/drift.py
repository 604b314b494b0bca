"""The drift check: the legacy scalar path against the row-level path, on the same immutable traces (issue 5).

Agreement means: the legacy scalar equals the new path's mean ``ragas_tool_call_f1`` within ``tolerance``
(|difference| <= 1e-9 by default), both sides cover the identical set of (case, trial) keys, no key appears twice
on a side, every row's value agrees, and both sides used the same ragas version. Anything else is drift, listed
row by row. A difference that comes with a ragas version change is attributed to the library, not to the agent
(ragas changed how ToolCallAccuracy treats extra and repeated calls three times between releases: ragas issues
1893 and 2300, PR 2582).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from tooleval.runs.legacy import LegacyResult

__all__ = ["check_drift", "drift_partial", "drift_report", "DEFAULT_TOLERANCE", "MAX_LISTED"]

DEFAULT_TOLERANCE = 1e-9


MAX_LISTED = 1000
"""Rows listed per kind (one side only, twice, differing) in ``drift.json``; the rest are counted (``*_count``)."""


def drift_partial(legacy_rows: list[Any], new_rows: list[dict[str, Any]], *, tolerance: float = DEFAULT_TOLERANCE
                  ) -> dict[str, Any]:
    """Compare one shard's legacy per-row values with the same shard's rows (the row-by-row half of the check).

    Shards are composed by key (:mod:`tooleval.runs.shards`), so a key lives in exactly one shard on both sides
    and per-shard comparisons add up to the whole-run comparison.

    Args:
        legacy_rows: :class:`tooleval.runs.legacy.LegacyRow` values of the shard.
        new_rows: Row records with ``case_id``, ``trial``, ``ragas_tool_call_f1``, ``ragas_version``,
            ``scorer_version``.
        tolerance: Largest accepted absolute difference between row values.

    Returns:
        A JSON-ready partial for :func:`drift_report`: counts, exact sums (``math.fsum``) and the listed keys.
    """
    legacy_keys = Counter((r.case_id, r.trial) for r in legacy_rows)
    new_keys = Counter((r["case_id"], r["trial"]) for r in new_rows)
    legacy_values = {(r.case_id, r.trial): r.value for r in legacy_rows}
    new_values = {(r["case_id"], r["trial"]): r["ragas_tool_call_f1"] for r in new_rows}
    differing = []
    for key in sorted(set(legacy_values) & set(new_values)):
        a, b = legacy_values[key], new_values[key]
        if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance):
            differing.append({"case_id": key[0], "trial": key[1], "legacy": a, "new": b})
    legacy_scored = [r.value for r in legacy_rows if r.value is not None]
    new_scored = [r["ragas_tool_call_f1"] for r in new_rows if r["ragas_tool_call_f1"] is not None]
    return {
        "legacy_rows": len(legacy_keys), "new_rows": len(new_rows), "new_keys": len(new_keys),
        "legacy_sum": math.fsum(legacy_scored), "legacy_count": len(legacy_scored),
        "new_sum": math.fsum(new_scored), "new_count": len(new_scored),
        "only_legacy": sorted(set(legacy_keys) - set(new_keys)), "only_new": sorted(set(new_keys) - set(legacy_keys)),
        "twice_legacy": sorted(k for k, n in legacy_keys.items() if n > 1),
        "twice_new": sorted(k for k, n in new_keys.items() if n > 1),
        "differing": differing,
        "ragas_versions": sorted({r["ragas_version"] for r in new_rows if r.get("ragas_version")}),
        "scorer_versions": sorted({r["scorer_version"] for r in new_rows if r.get("scorer_version")}),
    }


def _keys(parts: list[dict], name: str) -> tuple[list[dict], int]:
    keys = [k for part in parts for k in part[name]]
    return [{"case_id": c, "trial": t} for c, t in sorted(keys)[:MAX_LISTED]], len(keys)


def drift_report(partials: list[dict[str, Any]], legacy: LegacyResult, *, tolerance: float = DEFAULT_TOLERANCE
                 ) -> dict[str, Any]:
    """Combine :func:`drift_partial` results into ``drift.json`` (see :func:`check_drift`).

    ``legacy`` supplies the legacy side's metric, value, row count and versions (its ``per_row`` is not read).
    Key lists and differing rows are listed up to :data:`MAX_LISTED` each, sorted by key; their full counts are
    ``coverage.*_count`` and ``rows_differing_count``.
    """
    new_count = sum(p["new_count"] for p in partials)
    new_value = math.fsum(p["new_sum"] for p in partials) / new_count if new_count else None
    only_legacy, n_only_legacy = _keys(partials, "only_legacy")
    only_new, n_only_new = _keys(partials, "only_new")
    twice_legacy, n_twice_legacy = _keys(partials, "twice_legacy")
    twice_new, n_twice_new = _keys(partials, "twice_new")
    differing = sorted((d for p in partials for d in p["differing"]), key=lambda d: (d["case_id"], d["trial"]))
    new_ragas = sorted({v for p in partials for v in p["ragas_versions"]})
    new_scorer = sorted({v for p in partials for v in p["scorer_versions"]})
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
    if n_only_legacy or n_only_new:
        reasons.append(f"row coverage differs: {n_only_legacy} key(s) only in legacy, {n_only_new} only in "
                       "the row-level path")
    if n_twice_legacy or n_twice_new:
        reasons.append(f"keys scored more than once: legacy {n_twice_legacy}, row-level {n_twice_new}")
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
        "new": {"value": new_value, "rows": sum(p["new_rows"] for p in partials), "ragas_versions": new_ragas,
                "scorer_versions": new_scorer},
        "difference": None if difference in (None, float("inf")) else difference,
        "coverage": {
            "legacy": sum(p["legacy_rows"] for p in partials),
            "new": sum(p["new_keys"] for p in partials),
            "only_legacy": only_legacy,
            "only_new": only_new,
            "duplicated_legacy": twice_legacy,
            "duplicated_new": twice_new,
            "only_legacy_count": n_only_legacy,
            "only_new_count": n_only_new,
        },
        "rows_differing": differing[:MAX_LISTED],
        "rows_differing_count": len(differing),
    }


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
        whose values differ (up to :data:`MAX_LISTED` of each, with counts), and the versions on each side.
    """
    return drift_report([drift_partial(legacy.per_row, new_rows, tolerance=tolerance)], legacy, tolerance=tolerance)


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
