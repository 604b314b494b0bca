"""What the report shows, read with DuckDB aggregates over a run's rows: never every row into Python.

Only aggregates (histograms, per-case means) and the worst ``limit`` rows leave DuckDB, so a report over a
million rows costs a few queries and holds at most ``limit`` row records, so the page and the
process that builds it stay small whatever the size of the run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb

from tooleval.runs.aggregate import has_column

__all__ = ["WORST_ROWS", "CASE_LIMIT", "F1_BINS", "f1_histogram", "worst_rows", "rows_of", "not_exact",
           "schema_findings", "case_trials", "run_history", "natural_key"]

WORST_ROWS = 500
"""Failing rows the report lists (the worst first: blocking, then error, then lowest F1)."""
CASE_LIMIT = 60
"""Cases the per-case outcome panel shows (the lowest mean F1 first)."""
F1_BINS = [round(i / 10, 1) for i in range(10)]
"""Lower edges of the F1 histogram's bins (width 0.1; 1.0 falls in the 0.9 bin)."""
_METRICS = ("f1", "ragas_tool_call_f1")


def natural_key(case_id: object) -> list:
    """Sort key that reads the digits in a case id as a number: ``2`` before ``10``, ``task-9`` before
    ``task-10`` (the ids of most benchmarks are numbers written as text, which sort 0, 1, 10, 11 otherwise).
    Text parts compare without letter case; the id itself breaks ties."""
    text = "" if case_id is None else str(case_id)
    # re.split with a group alternates text and digits, so the two kinds never meet at one position
    parts = [int(part) if i % 2 else part.casefold() for i, part in enumerate(re.split(r"(\d+)", text))]
    return [parts, text]

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
       CASE WHEN r.error_kind IS NOT NULL THEN 'error' WHEN r.gate_verdict IN ('waived', 'quarantined')
            THEN r.gate_verdict WHEN coalesce(r.gate_verdict = 'fail', r.blocking, false) THEN 'fails the gate'
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
        ``[{"metric": "f1" | "ragas_tool_call_f1", "bin": float, "rows": int}]``: all ten bins of both metrics,
        an empty bin with ``rows`` 0; null F1s are left out of the counts.
    """
    counts = {(r["metric"], round(float(r["bin"]), 1)): r["rows"]
              for r in _records(con, _HISTOGRAM.format(source=source))}
    # every bin of both metrics, empty ones as 0: a bin left out would vanish from the axis (0, 0.2, 0.3, ...)
    return [{"metric": metric, "bin": edge, "rows": int(counts.get((metric, edge), 0))}
            for metric in _METRICS for edge in F1_BINS]


def worst_rows(con: duckdb.DuckDBPyConnection, source: str, limit: int = WORST_ROWS) -> tuple[list[dict], int]:
    """The failing rows (an error, blocking, or not an exact match), worst first, at most ``limit``.

    Returns:
        ``(rows, failing)``: row records (call lists as lists of dicts) and the count of all failing rows.
    """
    findings = "schema_findings" if has_column(con, source, "schema_findings") else "NULL"  # row schema < 3
    rows = _records(con, _WORST.format(source=source, limit=int(limit), findings=findings))
    rows.sort(key=_worst_first)  # the SQL order again, with case ids in natural order among equals
    failing = con.execute(_FAILING.format(source=source)).fetchone()[0]
    return rows, int(failing)


_KEYED = """
SELECT case_id, trial, slice, f1, ragas_tool_call_f1, exact_match, blocking, error_kind, error_message,
       CASE WHEN error_kind IS NULL THEN NULL ELSE error_kind || ': ' || coalesce(error_message, '') END AS error,
       mismatch_categories,
       missing_calls, extra_calls, wrong_args, violations, tool_families, trace_digest, {findings} AS schema_findings
FROM {source} JOIN (SELECT * FROM (VALUES {keys}) AS k(k_case, k_trial)) ON case_id = k_case AND trial = k_trial
"""


def rows_of(con: duckdb.DuckDBPyConnection, source: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """The report's columns of the rows ``keys`` names (``(case_id, trial)``), by key: the rows the gate
    listed as failing, read with their evidence."""
    if not keys:
        return {}
    findings = "schema_findings" if has_column(con, source, "schema_findings") else "NULL"  # row schema < 3
    values = ", ".join("(?, ?)" for _ in keys)
    params = [v for case_id, trial in keys for v in (str(case_id), int(trial))]
    cursor = con.execute(_KEYED.format(source=source, findings=findings, keys=values), params)
    names = [d[0] for d in cursor.description]
    found = [dict(zip(names, values)) for values in cursor.fetchall()]
    return {(str(r["case_id"]), int(r["trial"])): r for r in found}


def not_exact(con: duckdb.DuckDBPyConnection, source: str) -> tuple[int, int]:
    """``(rows that are not an exact match, rows with errors)``, counted apart from the gate's verdict."""
    rows = con.execute(f"SELECT count(*) FILTER (WHERE error_kind IS NULL AND NOT coalesce(exact_match, false)), "
                       f"count(*) FILTER (WHERE error_kind IS NOT NULL) FROM {source}").fetchone()
    return int(rows[0]), int(rows[1])


def _worst_first(row: dict[str, Any]) -> tuple:
    f1 = row["f1"]
    return (not row["blocking"], row["error_kind"] is None, (0, 0.0) if f1 is None else (1, f1),
            natural_key(row["case_id"]), row["trial"])


def schema_findings(con: duckdb.DuckDBPyConnection, source: str, limit: int = WORST_ROWS) -> list[dict[str, Any]]:
    """Tool schema findings of the run's rows, by tool and kind, at most ``limit``.

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
        ``[{"case_id", "trial", "f1", "outcome"}]`` with outcome ``error`` | ``fails the gate`` (the row's
        ``gate_verdict`` is ``fail``; rows published before that column: ``blocking``) | ``waived`` |
        ``quarantined`` | ``exact`` | ``not exact``, cases in natural order (:func:`natural_key`), then trials.
    """
    cells = _records(con, _CASES.format(source=source, limit=int(limit)))
    return sorted(cells, key=lambda c: (natural_key(c["case_id"]), c["trial"]))


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
