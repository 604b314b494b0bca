"""Aggregation with DuckDB over the rows of one (revision, run) partition (docs/design.md "Stages").

Zero-call rows count: list lengths go through ``coalesce(len(x), 0)`` because DuckDB's ``UNNEST`` and list aggregates
skip empty and NULL lists, and a row without calls would drop out of the counts. ``failures_by_tool`` counts, per tool
name, the missing calls (fn), the extra calls (fp) and the wrong-argument pairs; a wrong-argument pair is also one
missing and one extra call, so ``sum(missing) == fn`` and ``sum(extra) == fp``.

**Name-only rows** (row column ``name_only``: some call's arguments were not captured, so it matched by name
only) leave the argument-level figures — ``mean_f1`` and ``exact_match_rows`` — and are counted apart:
``name_only_rows`` and ``mean_name_f1`` (their mean F1, a name-level figure). Every other figure (calls, tp, fp,
fn, the ragas mean, failures by tool) covers every row, as the legacy scalar and the drift check do.

Tool schema findings (row column ``schema_findings``) are counted apart from the failures: a call that
departs from its schema is still matched as made, so they never move f1, fp or fn. Rows written before the column
existed (row schema version < 3) count as not checked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # connections come from tooleval.storage, which imports DuckDB when it opens one
    import duckdb

from tooleval.storage import source_connection

__all__ = ["summarize_rows", "has_column"]

_FIGURES = """
SELECT
  count(*) AS rows,
  count(*) FILTER (WHERE exact_match AND NOT coalesce(name_only, false)) AS exact_match_rows,
  coalesce(sum(len(expected_calls)), 0) AS expected_calls,
  coalesce(sum(coalesce(len(observed_calls), 0)), 0) AS observed_calls,
  coalesce(sum(tp), 0) AS tp,
  coalesce(sum(fp), 0) AS fp,
  coalesce(sum(fn), 0) AS fn,
  count(*) FILTER (WHERE fn > 0) AS rows_with_missing,
  count(*) FILTER (WHERE fp > 0) AS rows_with_extra,
  count(*) FILTER (WHERE duplicate_calls > 0) AS rows_with_duplicates,
  count(*) FILTER (WHERE malformed_calls > 0) AS rows_with_malformed,
  count(*) FILTER (WHERE error_kind IS NULL AND coalesce(len(observed_calls), 0) = 0) AS rows_without_calls,
  count(*) FILTER (WHERE error_kind IS NOT NULL) AS rows_with_errors,
  count(*) FILTER (WHERE provenance_status = 'ok') AS provenance_ok,
  count(*) FILTER (WHERE provenance_status = 'missing') AS provenance_missing,
  count(*) FILTER (WHERE provenance_status = 'mismatch') AS provenance_mismatch,
  NULL AS mean_f1,  -- the means are computed exactly from the values (_exact_mean); here for their place
  NULL AS mean_ragas_tool_call_f1,
  count(*) FILTER (WHERE name_only) AS name_only_rows,
  NULL AS mean_name_f1
FROM {source}
"""

_MEANS = {
    "mean_f1": ("f1", "NOT coalesce(name_only, false)"),
    "mean_ragas_tool_call_f1": ("ragas_tool_call_f1", "true"),
    "mean_name_f1": ("f1", "name_only"),
}
"""Each mean's column and the rows it covers (nulls never count, as in ``avg``)."""

_BY_TOOL = """
WITH failures AS (
  SELECT unnest(missing_calls).name AS tool, 'missing' AS what FROM {source}
  UNION ALL SELECT unnest(extra_calls).name, 'extra' FROM {source}
  UNION ALL SELECT unnest(wrong_args).name, 'wrong_args' FROM {source}
)
SELECT tool, what, count(*) AS n FROM failures GROUP BY ALL ORDER BY tool, what
"""


_SCHEMA = """
SELECT
  count(*) FILTER (WHERE schema_findings IS NOT NULL) AS rows_schema_checked,
  count(*) FILTER (WHERE len(schema_findings) > 0) AS rows_with_schema_findings,
  coalesce(sum(len(schema_findings)), 0) AS schema_findings
FROM {source}
"""

_SCHEMA_BY_TOOL = """
SELECT f.tool, f.kind, count(*) AS n FROM (SELECT unnest(schema_findings) AS f FROM {source}) GROUP BY ALL
ORDER BY 1, 2
"""

_BY_OWNER = """
SELECT failure_owner, count(*) FROM {source} WHERE failure_owner IS NOT NULL GROUP BY ALL ORDER BY 1
"""


def has_column(con: duckdb.DuckDBPyConnection, source: str, name: str) -> bool:
    """True when the rows in ``source`` have column ``name`` (partitions of an older row schema may lack it)."""
    return name in [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]


def _schema_figures(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, Any]:
    if not has_column(con, source, "schema_findings"):
        return {"rows_schema_checked": 0, "rows_with_schema_findings": 0, "schema_findings": 0,
                "schema_findings_by_tool": {}}
    checked, with_findings, findings = con.execute(_SCHEMA.format(source=source)).fetchone()
    by_tool: dict[str, dict[str, int]] = {}
    for tool, kind, n in con.execute(_SCHEMA_BY_TOOL.format(source=source)).fetchall():
        by_tool.setdefault(tool, {})[kind] = int(n)
    return {"rows_schema_checked": int(checked), "rows_with_schema_findings": int(with_findings),
            "schema_findings": int(findings), "schema_findings_by_tool": by_tool}


def _exact_mean(con: duckdb.DuckDBPyConnection, source: str, column: str, where: str) -> float | None:
    """The mean of the non-null ``column`` values of the rows ``where`` holds: their correctly rounded sum
    (``math.fsum``) over their count, so the same rows give the same float in every run (DuckDB's ``avg`` adds in
    the order its threads read the files, which moved the last digits from one run to the next)."""
    values = con.sql(f"SELECT {column} FROM {source} WHERE {column} IS NOT NULL AND ({where})").to_arrow_table()
    numbers = values.column(0).to_numpy()
    return math.fsum(numbers) / numbers.size if numbers.size else None


def summarize_rows(source: str, connection: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    """Compute a run's figures.

    Args:
        source: A DuckDB table expression over the rows, e.g. ``read_parquet('…/part-*.parquet')`` (see
            :func:`tooleval.storage.scan_rows_sql`).
        connection: DuckDB connection to use (a new in-memory one by default).

    Returns:
        ``{rows, exact_match_rows, expected_calls, observed_calls, tp, fp, fn, rows_with_missing,
        rows_with_extra, rows_with_duplicates, rows_with_malformed, rows_without_calls, rows_with_errors,
        mean_f1, mean_ragas_tool_call_f1, name_only_rows, mean_name_f1, failures_by_tool, failures_by_owner,
        provenance, rows_schema_checked, rows_with_schema_findings, schema_findings, schema_findings_by_tool}``;
        ``mean_f1`` and ``exact_match_rows`` leave out the name-only rows, which ``name_only_rows`` counts and
        ``mean_name_f1`` averages (null without any); counts are
        ints, means floats in [0, 1] or ``None`` when no row was scored; ``failures_by_tool`` maps tool name to
        ``{"missing": n, "extra": n, "wrong_args": n}``; ``failures_by_owner`` maps a failure owner (agent,
        adapter, executor, evaluation_platform) to its row count; ``provenance`` counts rows by
        ``provenance_status`` (``missing`` rows are never counted as a provenance pass);
        ``schema_findings`` counts tool schema findings (``rows_schema_checked``: rows whose calls were checked,
        i.e. the dataset has a tools.json) and ``schema_findings_by_tool`` maps tool name to ``{kind: n}``
        (kinds: :data:`tooleval.rules.FINDING_KINDS`).
    """
    con = connection or source_connection(source)
    means = {key: _exact_mean(con, source, column, where) for key, (column, where) in _MEANS.items()}
    cursor = con.execute(_FIGURES.format(source=source))
    names = [d[0] for d in cursor.description]
    figures = {key: means[key] if key in means else int(value or 0) for key, value in zip(names, cursor.fetchone())}
    by_tool: dict[str, dict[str, int]] = {}
    for tool, what, n in con.execute(_BY_TOOL.format(source=source)).fetchall():
        by_tool.setdefault(tool, {"missing": 0, "extra": 0, "wrong_args": 0})[what] = int(n)
    figures["failures_by_tool"] = by_tool
    owners = con.execute(_BY_OWNER.format(source=source)).fetchall()
    figures["failures_by_owner"] = {owner: int(n) for owner, n in owners}
    figures["provenance"] = {
        "ok": figures.pop("provenance_ok"),
        "missing": figures.pop("provenance_missing"),
        "mismatch": figures.pop("provenance_mismatch"),
    }
    figures.update(_schema_figures(con, source))
    return figures
