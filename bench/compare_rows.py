"""Compare the rows and trace envelopes of two published runs (issue 9: rows do not change with how they are
computed): every column except ``run_id``, ``scorer_version`` (a digest of the package's sources, different by
construction between two commits) and, for envelopes, ``captured_at``; as multisets (``EXCEPT ALL`` both ways,
DuckDB) and sorted by ``(case_id, trial)``. Prints one line per table. Run from the repository root:

    .venv/bin/python bench/compare_rows.py OUT_A RUN_A OUT_B RUN_B
"""

from __future__ import annotations

import sys

import duckdb

EXCLUDED = {"rows": "run_id, scorer_version", "traces": "run_id, captured_at"}


def compare(table: str, a: tuple[str, str], b: tuple[str, str]) -> dict:
    """``{rows_a, rows_b, columns, a_minus_b, b_minus_a, sorted_equal, differing_columns}`` of one table."""
    con = duckdb.connect()
    for name, (out, run) in (("a", a), ("b", b)):
        con.execute(f"CREATE VIEW {name} AS SELECT * EXCLUDE ({EXCLUDED[table]}) FROM read_parquet("
                    f"'{out}/{table}/**/*.parquet', hive_partitioning=true, union_by_name=true) "
                    f"WHERE run_id = '{run}'")
    columns = [row[0] for row in con.execute("DESCRIBE a").fetchall()]
    first, second = (con.execute(f"SELECT * FROM {v} ORDER BY case_id, trial").fetchall() for v in "ab")
    differing = sorted({columns[i] for x, y in zip(first, second) for i in range(len(columns)) if x[i] != y[i]})
    count = "SELECT count(*) FROM (SELECT * FROM {} EXCEPT ALL SELECT * FROM {})"
    return {"rows_a": len(first), "rows_b": len(second), "columns": len(columns),
            "a_minus_b": con.execute(count.format("a", "b")).fetchone()[0],
            "b_minus_a": con.execute(count.format("b", "a")).fetchone()[0],
            "sorted_equal": first == second, "differing_columns": differing}


if __name__ == "__main__":
    out_a, run_a, out_b, run_b = sys.argv[1:5]
    for table in EXCLUDED:
        print(table, compare(table, (out_a, run_a), (out_b, run_b)))
