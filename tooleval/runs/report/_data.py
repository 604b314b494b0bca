"""What the report shows, read with DuckDB aggregates over a run's rows: never every row into Python.

Only aggregates (histograms, per-case means) and the worst ``limit`` rows leave DuckDB, so a report over a
million rows costs a few queries and holds at most ``limit`` row records (issue 14: "the report holds
aggregates plus the worst N rows, not a million rows").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from tooleval.runs.aggregate import has_column

__all__ = ["WORST_ROWS", "CASE_LIMIT", "f1_histogram", "worst_rows", "schema_findings", "case_trials",
           "run_history"]

WORST_ROWS = 500
"""Failing rows the report lists (the worst first: blocking, then error, then lowest F1)."""
CASE_LIMIT = 60
"""Cases the per-case outcome panel shows (the lowest mean F1 first)."""

_HISTOGRAM = """
SELECT metric, least(floor(value * 10), 9) / 10 AS bin, count(*) AS rows
FROM (SELECT 'f1' AS metric, f1 AS value FROM {source}
      UNION ALL SELECT 'ragas_tool_call_f1', ragas_tool_call_f1 FROM {source})
WHERE value IS NOT NULL GROUP BY ALL ORDER BY metric, bin
"""

_WORST = """
SELECT case_id, trial, slice, f1, ragas_tool_call_f1, exact_match, blocking, error_kind, error_message,
       CASE WHEN error_kind IS NULL THEN NULL ELSE error_kind || ': ' || coalesce(error_message, '') END AS error,
       mismatch_categories,
       missing_calls, extra_calls, wrong_args, violations, tool_families, trace_digest, {findings} AS schema_findings
FROM {source}
WHERE error_kind IS NOT NULL OR coalesce(blocking, false) OR NOT coalesce(exact_match, false)
ORDER BY coalesce(blocking, false) DESC, error_kind IS NULL, f1 NULLS FIRST, case_id, trial
LIMIT {limit}
"""

_FAILING = """
SELECT count(*) FROM {source}
WHERE error_kind IS NOT NULL OR coalesce(blocking, false) OR NOT coalesce(exact_match, false)
"""

_FINDINGS = """
SELECT case_id, trial, f.call_index + 1 AS call, f.tool, f.kind, f.path, f.detail
FROM (SELECT case_id, trial, unnest(schema_findings) AS f FROM {source})
ORDER BY f.tool, f.kind, case_id, trial, call, f.path
LIMIT {limit}
"""

_CASES = """
WITH worst AS (
  SELECT case_id FROM {source} GROUP BY case_id ORDER BY avg(coalesce(f1, 0)), case_id LIMIT {limit}
)
SELECT r.case_id, r.trial, r.f1,
       CASE WHEN r.error_kind IS NOT NULL THEN 'error' WHEN coalesce(r.blocking, false) THEN 'blocking'
            WHEN r.exact_match THEN 'exact' ELSE 'not exact' END AS outcome
FROM {source} AS r JOIN worst USING (case_id) ORDER BY r.case_id, r.trial
"""


def _records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


def f1_histogram(con: duckdb.DuckDBPyConnection, source: str) -> list[dict[str, Any]]:
    """Rows per F1 bin of width 0.1 (``bin`` is the bin's lower edge; 1.0 falls in the 0.9 bin), for both F1s.

    Returns:
        ``[{"metric": "f1" | "ragas_tool_call_f1", "bin": float, "rows": int}]``; null F1s are left out.
    """
    return [dict(r, bin=round(float(r["bin"]), 1)) for r in _records(con, _HISTOGRAM.format(source=source))]


def worst_rows(con: duckdb.DuckDBPyConnection, source: str, limit: int = WORST_ROWS) -> tuple[list[dict], int]:
    """The failing rows (an error, blocking, or not an exact match), worst first, at most ``limit``.

    Returns:
        ``(rows, failing)``: row records (call lists as lists of dicts) and the count of all failing rows.
    """
    findings = "schema_findings" if has_column(con, source, "schema_findings") else "NULL"  # row schema < 3
    rows = _records(con, _WORST.format(source=source, limit=int(limit), findings=findings))
    failing = con.execute(_FAILING.format(source=source)).fetchone()[0]
    return rows, int(failing)


def schema_findings(con: duckdb.DuckDBPyConnection, source: str, limit: int = WORST_ROWS) -> list[dict[str, Any]]:
    """Tool schema findings of the run's rows (issue 13), by tool and kind, at most ``limit``.

    Returns:
        ``[{"case_id", "trial", "call" (1-based), "tool", "kind", "path", "detail"}]``; ``[]`` for rows written
        before the ``schema_findings`` column existed.
    """
    if not has_column(con, source, "schema_findings"):
        return []
    return _records(con, _FINDINGS.format(source=source, limit=int(limit)))


def case_trials(con: duckdb.DuckDBPyConnection, source: str, limit: int = CASE_LIMIT) -> list[dict[str, Any]]:
    """Outcome of each trial of the ``limit`` cases with the lowest mean F1 (an F1 of null counts as 0).

    Returns:
        ``[{"case_id", "trial", "f1", "outcome"}]`` with outcome ``error`` | ``blocking`` | ``exact`` |
        ``not exact``.
    """
    return _records(con, _CASES.format(source=source, limit=int(limit)))


def run_history(out: Path | str, current: dict[str, Any] | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Figures of the published runs under ``out`` (``runs/*/summary.json``), oldest first, at most ``limit``.

    Args:
        out: Results folder, or an fsspec URL (``s3://…``: the report of a run published there).
        current: The summary of a run being published (not on disk yet); it replaces a run of the same id.

    Returns:
        ``[{"run_id", "dataset_revision", "completed_at", "mean_f1", "mean_ragas_tool_call_f1",
        "legacy_value", "rows"}]``; a summary that cannot be read is skipped.
    """
    from tooleval.errors import InputFileError
    from tooleval.storage import read_document, tree_of

    summaries = {}
    for folder in tree_of(out).folders("runs/*"):
        run = folder.rsplit("/", 1)[-1]
        try:
            data = read_document(out, f"runs/{run}/summary.json")
            if data is not None:
                summaries[run] = json.loads(data)
        except (OSError, ValueError, InputFileError):
            continue
    if current is not None:
        summaries[current["run_id"]] = current
    history = [
        {"run_id": s.get("run_id", run), "dataset_revision": s.get("dataset_revision"),
         "completed_at": s.get("completed_at"), "mean_f1": s.get("mean_f1"),
         "mean_ragas_tool_call_f1": s.get("mean_ragas_tool_call_f1"),
         "legacy_value": (s.get("legacy") or {}).get("value"), "rows": s.get("rows")}
        for run, s in summaries.items()
    ]
    history.sort(key=lambda h: (h["completed_at"] or "", h["run_id"]))
    return history[-limit:]
