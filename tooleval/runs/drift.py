"""The drift check: the legacy scalar path against the row-level path, on the same immutable traces.

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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tooleval.runs.legacy import LegacyResult

__all__ = ["DRIFT_COLUMNS", "check_drift", "drift_partial_sql", "recheck_run",
           "drift_partial", "drift_report", "DEFAULT_TOLERANCE", "MAX_LISTED"]

DEFAULT_TOLERANCE = 1e-9

DRIFT_COLUMNS = ["case_id", "trial", "ragas_tool_call_f1", "ragas_version", "scorer_version"]
"""The row columns a :func:`drift_partial` reads."""


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
        A JSON-ready partial for :func:`drift_report`: counts, exact sums (``math.fsum``) and the keys of each list
        (one side only, twice, differing) up to :data:`MAX_LISTED`, with their counts (``<list>_count``): what
        a worker sends back stays small even when every row of its shard drifted.
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
    partial: dict[str, Any] = {
        "legacy_rows": len(legacy_keys), "new_rows": len(new_rows), "new_keys": len(new_keys),
        "legacy_sum": math.fsum(legacy_scored), "legacy_count": len(legacy_scored),
        "new_sum": math.fsum(new_scored), "new_count": len(new_scored),
        "ragas_versions": sorted({r["ragas_version"] for r in new_rows if r.get("ragas_version")}),
        "scorer_versions": sorted({r["scorer_version"] for r in new_rows if r.get("scorer_version")}),
    }
    lists = {"only_legacy": sorted(set(legacy_keys) - set(new_keys)),
             "only_new": sorted(set(new_keys) - set(legacy_keys)),
             "twice_legacy": sorted(k for k, n in legacy_keys.items() if n > 1),
             "twice_new": sorted(k for k, n in new_keys.items() if n > 1), "differing": differing}
    for name, listed in lists.items():  # the first MAX_LISTED by key: all that drift_report can list
        partial[name], partial[f"{name}_count"] = listed[:MAX_LISTED], len(listed)
    return partial


def _keys(parts: list[dict], name: str) -> tuple[list[dict], int]:
    keys = [tuple(k) for part in parts for k in part[name]]
    count = sum(p.get(f"{name}_count", len(p[name])) for p in parts)  # a partial may list only the first keys
    return [{"case_id": c, "trial": t} for c, t in sorted(keys)[:MAX_LISTED]], count


def drift_report(partials: list[dict[str, Any]], legacy: LegacyResult, *, tolerance: float = DEFAULT_TOLERANCE
                 ) -> dict[str, Any]:
    """Combine :func:`drift_partial` results into ``drift.json`` (see :func:`check_drift`).

    ``legacy`` supplies the legacy side's metric, value, row count and versions (its ``per_row`` is not read).
    Key lists and differing rows are listed up to :data:`MAX_LISTED` each, sorted by key; their full counts are
    ``coverage.*_count`` and ``rows_differing_count`` (a partial that lists only some of its keys carries their
    count as ``<list>_count``, e.g. ``only_legacy_count``, ``differing_count``: :func:`drift_partial_sql`).
    """
    new_count = sum(p["new_count"] for p in partials)
    new_value = math.fsum(p["new_sum"] for p in partials) / new_count if new_count else None
    only_legacy, n_only_legacy = _keys(partials, "only_legacy")
    only_new, n_only_new = _keys(partials, "only_new")
    twice_legacy, n_twice_legacy = _keys(partials, "twice_legacy")
    twice_new, n_twice_new = _keys(partials, "twice_new")
    differing = sorted((d for p in partials for d in p["differing"]), key=lambda d: (d["case_id"], d["trial"]))
    n_differing = sum(p.get("differing_count", len(p["differing"])) for p in partials)
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
    if n_differing:
        reasons.append(f"{n_differing} row(s) with different values")
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
        "rows_differing_count": n_differing,
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


_PARTIAL_SQL = {
    "counts": """
        SELECT (SELECT count(*) FROM legacy), (SELECT count(*) FROM ({new})),
               (SELECT count(*) FROM (SELECT DISTINCT case_id, trial FROM ({new}))),
               (SELECT fsum(ragas_tool_call_f1) FROM ({new})), (SELECT count(ragas_tool_call_f1) FROM ({new}))""",
    "only_legacy": """SELECT case_id, trial FROM (SELECT DISTINCT case_id, trial FROM legacy)
        ANTI JOIN (SELECT DISTINCT case_id, trial FROM ({new})) USING (case_id, trial) ORDER BY 1, 2""",
    "only_new": """SELECT case_id, trial FROM (SELECT DISTINCT case_id, trial FROM ({new}))
        ANTI JOIN (SELECT DISTINCT case_id, trial FROM legacy) USING (case_id, trial) ORDER BY 1, 2""",
    "twice_legacy": "SELECT case_id, trial FROM legacy GROUP BY ALL HAVING count(*) > 1 ORDER BY 1, 2",
    "twice_new": "SELECT case_id, trial FROM ({new}) GROUP BY ALL HAVING count(*) > 1 ORDER BY 1, 2",
    "differing": """SELECT l.case_id, l.trial, l.value, n.ragas_tool_call_f1 FROM legacy l
        JOIN ({new}) n USING (case_id, trial)
        WHERE (l.value IS NULL) != (n.ragas_tool_call_f1 IS NULL) OR abs(l.value - n.ragas_tool_call_f1) > {tol}
        ORDER BY 1, 2""",
}


def drift_partial_sql(con: Any, legacy: Any, new_source: str, *, tolerance: float = DEFAULT_TOLERANCE
                      ) -> dict[str, Any]:
    """:func:`drift_partial` computed by DuckDB, for a whole published run at once: what ``tooleval drift``
    compares without holding a row per key in Python (a million keys as Python
    tuples would cost more memory than the run).

    Args:
        con: A DuckDB connection.
        legacy: An Arrow table of the legacy per-row values: ``case_id``, ``trial``, ``value``.
        new_source: A DuckDB table expression over the run's rows (:func:`tooleval.storage.scan_rows_sql`).
        tolerance: As in :func:`drift_partial`.

    Returns:
        The partial, listing at most :data:`MAX_LISTED` keys per list with the full counts as ``<list>_count``.
    """
    con.register("legacy", legacy)
    try:
        new = f"SELECT case_id, trial, ragas_tool_call_f1, ragas_version, scorer_version FROM {new_source}"
        n_legacy, n_new, n_keys, new_sum, new_count = con.execute(_PARTIAL_SQL["counts"].format(new=new)).fetchone()
        values = legacy.column("value").drop_null().to_pylist()
        partial: dict[str, Any] = {
            "legacy_rows": n_legacy, "new_rows": n_new, "new_keys": n_keys,
            "legacy_sum": math.fsum(values), "legacy_count": len(values),
            "new_sum": float(new_sum or 0.0), "new_count": new_count,
        }
        for name in ("only_legacy", "only_new", "twice_legacy", "twice_new", "differing"):
            sql = _PARTIAL_SQL[name].format(new=new, tol=float(tolerance))
            partial[f"{name}_count"] = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
            listed = con.execute(f"{sql} LIMIT {MAX_LISTED}").fetchall()
            partial[name] = ([{"case_id": c, "trial": t, "legacy": a, "new": b} for c, t, a, b in listed]
                             if name == "differing" else [(c, t) for c, t in listed])
        for name, column in (("ragas_versions", "ragas_version"), ("scorer_versions", "scorer_version")):
            found = con.execute(f"SELECT DISTINCT {column} FROM ({new}) WHERE {column} IS NOT NULL").fetchall()
            partial[name] = sorted(v for (v,) in found if v)
        return partial
    finally:
        con.unregister("legacy")


def recheck_run(run: Any, *, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Re-run the drift check of a published run from its files.

    The legacy side is recomputed from the run's published trace envelopes with ragas
    (:func:`tooleval.runs.legacy.legacy_score`), one part file and at most 1,000 envelopes at a time, keeping
    only ``(case_id, trial, value)`` per envelope in Arrow columns; DuckDB compares them with the run's rows
    (:func:`drift_partial_sql`). The published legacy scalar (``scalar.json``) must also equal the recomputed
    one.

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
    from tooleval.storage import partition_dir, read_document, read_versioned, scan_rows_sql, source_connection

    row_files = run.files("rows")
    if not row_files:
        from tooleval.errors import InputFileError

        raise InputFileError(run.location("rows"), None, f"run {run.run_id!r} has no rows (a --legacy-only run?): "
                             "there is no row-level path to compare.", "run it without --legacy-only first.")
    cases, redactor = run.dataset.cases, run.redactor()
    scorer = str(run.summary.get("versions", {}).get("scorer"))
    parts: list[pa.Table] = []
    rows_seen, last = 0, None
    for path in run.files("traces"):
        table = read_versioned(path, "traces", ["case_id", "trial", "messages_json", "metadata_json", "error"])
        for batch in table.to_batches(max_chunksize=1000):
            last = legacy_score(batch.to_pylist(), cases, scorer, redactor)
            rows_seen += last.rows
            parts.append(pa.table({"case_id": pa.array([r.case_id for r in last.per_row], pa.string()),
                                   "trial": pa.array([r.trial for r in last.per_row], pa.int64()),
                                   "value": pa.array([r.value for r in last.per_row], pa.float64())}))
    values = pa.concat_tables(parts) if parts else pa.table(
        {"case_id": pa.array([], pa.string()), "trial": pa.array([], pa.int64()), "value": pa.array([], pa.float64())})
    scored = values.column("value").drop_null().to_pylist()
    legacy = LegacyResult(value=math.fsum(scored) / len(scored) if scored else None, rows=rows_seen,
                          ragas_version=last.ragas_version if last else _ragas_version(),
                          scorer_version=scorer, computed_at=datetime.now(timezone.utc), per_row=[])
    source = scan_rows_sql([str(f) for f in row_files])
    report = drift_report([drift_partial_sql(source_connection(source), values, source, tolerance=tolerance)], legacy,
                          tolerance=tolerance)
    scalar_relpath = (partition_dir(Path(), "legacy", run.revision, run.run_id) / "scalar.json").as_posix()
    scalar = read_document(run.out, scalar_relpath)  # the committed copy, in a folder or on object storage
    published = json.loads(scalar)["value"] if scalar is not None else None
    report["published_legacy_value"] = published
    if published is None or legacy.value is None or abs(published - legacy.value) > tolerance:
        if not (published is None and legacy.value is None):
            report["verdict"] = "drift"
            report["reasons"].append(
                f"published legacy scalar {published} differs from the one recomputed from the traces ({legacy.value})"
            )
            report["attribution"] = report["attribution"] or "legacy_path"
    return report


def _ragas_version() -> str:
    from tooleval.scoring.ragas_metric import ragas_version

    return ragas_version()
