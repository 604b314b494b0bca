"""Compare the rows and trace envelopes of two published runs (issue 9: rows do not change with how they are
computed), so a run of new code can be checked against a baseline run of the previous commit.

What is compared, per table, over one run's committed partition files (``runs/<run>/commit.json``; a run without
a marker: every ``part-*.parquet`` of ``<table>/dataset_revision=*/run_id=<run>/``), read with DuckDB
``hive_types={'dataset_revision': VARCHAR, 'run_id': VARCHAR}`` and ``union_by_name``:

- ``rows``: every column except ``run_id`` and the version columns ``row_schema_version``, ``scorer_version``
  (a digest of the package's sources, different by construction between two commits) and ``ragas_version``;
- ``traces``: every column except ``run_id``, ``captured_at`` and ``envelope_version``; the JSON-text columns
  (``messages_json``, ``metadata_json``, ``request_messages_json``) as JSON values (DuckDB ``json()`` text, one
  spelling of separators and numbers), since only their values are envelope content (the trace digest is
  computed from the canonical value).

A row's error is compared as one text column named ``error``: the old ``error`` column (row schema 3 and before:
``"<kind>: <message>"``) as it is, and a run with the columns ``error_kind`` and ``error_message`` (row schema 4)
as ``error_kind || ': ' || error_message`` (null when ``error_kind`` is null; a null message reads as ``''``).
So a schema-3 run and a schema-4 run compare equal when their errors agree. The mapping applies to whichever
table has both split columns; a run whose files have both schemas reads a row's split columns when its
``error_kind`` is set, else its ``error``. Columns that only one run has are listed (``only_in_a``,
``only_in_b``) and left out of the comparison, so added columns do not block the check.

Each table prints one line: ``rows_a``, ``rows_b``, ``columns`` (compared), ``only_in_a``, ``only_in_b``,
``types_differ`` (compared columns whose DuckDB types differ: ``[type_a, type_b]``; values compare after DuckDB's
implicit cast), ``a_minus_b`` and ``b_minus_a`` (rows of one run missing from the other as multisets: DuckDB
``EXCEPT ALL`` both ways), ``sorted_equal`` (same row count and every compared column equal, both sides sorted
by ``(case_id, trial)`` and paired by position), ``differing_columns`` (the compared columns that differ in at
least one such pair; ``IS DISTINCT FROM``) and ``differing_rows`` (how many pairs differ, per column). Exit 0
when both tables are equal (``a_minus_b == b_minus_a == 0``, ``sorted_equal``), 1 when not, 2 on usage errors.

Run from the repository root (local result folders; ``OUT`` is a run's ``--out``):

    .venv/bin/python bench/compare_rows.py OUT_A RUN_A OUT_B RUN_B

e.g. ``.venv/bin/python bench/compare_rows.py /tmp/baseline/bfcl base /tmp/cand/bfcl cand``.
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import duckdb

EXCLUDED = {"rows": ("run_id", "row_schema_version", "scorer_version", "ragas_version"),
            "traces": ("run_id", "captured_at", "envelope_version")}
"""Columns left out of the comparison, per table."""

HIVE_TYPES = "{'dataset_revision': 'VARCHAR', 'run_id': 'VARCHAR'}"
SPLIT_ERROR = ("error_kind", "error_message")
JSON_TEXT = {"messages_json", "metadata_json", "request_messages_json"}
"""The envelope's JSON-text columns: DuckDB's ``json()`` re-writes each in one spelling before comparison."""
ERROR_TEXT = "CASE WHEN error_kind IS NULL THEN {} ELSE error_kind || ': ' || coalesce(error_message, '') END"
"""A schema-4 row's error as the schema-3 text ``"<kind>: <message>"``; ``{}``: the text without a kind."""


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run_files(out: str, run: str, table: str) -> list[str]:
    """The Parquet files of ``table`` that run ``run`` published in ``out``: the commit marker's partition files
    when the run has a marker that lists the table, else the partition folders' ``*.parquet``."""
    marker = Path(out) / "runs" / run / "commit.json"
    if marker.is_file():
        partitions = json.loads(marker.read_text()).get("partitions") or {}
        listed = [str(Path(out) / name) for folder, names in sorted(partitions.items())
                  if folder.split("/")[0] == table for name in names]
        if listed:
            return listed
    return sorted(glob.glob(str(Path(out) / table / "dataset_revision=*" / f"run_id={run}" / "*.parquet")))


def create_view(con: duckdb.DuckDBPyConnection, name: str, table: str, out: str, run: str) -> dict[str, str]:
    """Create view ``name`` of one run's ``table`` with the error mapped and the excluded columns dropped;
    ``{column: type}`` of the view, in the files' column order."""
    files = run_files(out, run, table)
    if not files:
        raise SystemExit(f"no {table} files for run {run!r} in {out}")
    source = (f"read_parquet([{', '.join(_literal(f) for f in files)}], hive_partitioning=true, "
              f"union_by_name=true, hive_types={HIVE_TYPES}) WHERE run_id = {_literal(run)}")
    described = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    columns = [row[0] for row in described]
    names = set(columns)
    split = all(column in names for column in SPLIT_ERROR)
    error_text = ERROR_TEXT.format('"error"' if "error" in names else "NULL")
    selected: list[tuple[str, str]] = []  # (output name, expression)
    for column in columns:
        if column in EXCLUDED[table] or (split and column == "error"):
            continue
        if split and column == SPLIT_ERROR[0]:
            selected.append(("error", error_text))
        elif column in JSON_TEXT:  # compared as JSON values: the writer's spelling (separators, floats) may change
            selected.append((column, f"json({_ident(column)})::VARCHAR"))
        elif not (split and column == SPLIT_ERROR[1]):
            selected.append((column, _ident(column)))
    body = ", ".join(f"{expr} AS {_ident(out_name)}" for out_name, expr in selected)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name}_all AS SELECT {body} FROM {source}")
    return {row[0]: row[1] for row in con.execute(f"DESCRIBE {name}_all").fetchall()}


def compare(table: str, a: tuple[str, str], b: tuple[str, str]) -> dict:
    """``{rows_a, rows_b, columns, only_in_a, only_in_b, types_differ, a_minus_b, b_minus_a, sorted_equal,
    differing_columns, differing_rows}`` of one table; ``a`` and ``b`` are ``(out, run_id)``."""
    con = duckdb.connect()
    types_a = create_view(con, "a", table, *a)
    types_b = create_view(con, "b", table, *b)
    common = [column for column in types_a if column in types_b]
    select = ", ".join(_ident(column) for column in common)
    for name in "ab":
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {select} FROM {name}_all")
    count = "SELECT count(*) FROM (SELECT * FROM {} EXCEPT ALL SELECT * FROM {})"
    rows_a, rows_b = (con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in "ab")
    order = ", ".join(_ident(k) for k in ("case_id", "trial") if k in common)
    numbered = "SELECT row_number() OVER (ORDER BY {}) AS __pos, * FROM {}"
    checks = ", ".join(f"count(*) FILTER (WHERE x.{_ident(c)} IS DISTINCT FROM y.{_ident(c)})" for c in common)
    counts = con.execute(f"SELECT {checks} FROM ({numbered.format(order, 'a')}) x "
                         f"JOIN ({numbered.format(order, 'b')}) y USING (__pos)").fetchone()
    differing = {column: n for column, n in zip(common, counts) if n}
    return {"rows_a": rows_a, "rows_b": rows_b, "columns": len(common),
            "only_in_a": [c for c in types_a if c not in types_b],
            "only_in_b": [c for c in types_b if c not in types_a],
            "types_differ": {c: [types_a[c], types_b[c]] for c in common if types_a[c] != types_b[c]},
            "a_minus_b": con.execute(count.format("a", "b")).fetchone()[0],
            "b_minus_a": con.execute(count.format("b", "a")).fetchone()[0],
            "sorted_equal": rows_a == rows_b and not differing,
            "differing_columns": sorted(differing), "differing_rows": dict(sorted(differing.items()))}


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: compare_rows.py OUT_A RUN_A OUT_B RUN_B (see the module docstring)", file=sys.stderr)
        return 2
    out_a, run_a, out_b, run_b = argv
    equal = True
    for table in EXCLUDED:
        result = compare(table, (out_a, run_a), (out_b, run_b))
        print(table, result, flush=True)
        equal &= result["sorted_equal"] and result["a_minus_b"] == 0 and result["b_minus_a"] == 0
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
