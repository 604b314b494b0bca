"""Readers (tooleval.storage._query): string partitions (H12), schema evolution (H14), zero-call rows (H16)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tooleval.storage import (
    CALL_TYPE,
    ENVELOPE_SCHEMA,
    ROW_SCHEMA,
    connect,
    read_table,
    scan_parquet_sql,
    table_from_rows,
    write_partition,
)

REVISIONS = ["001", "1", "2024-01-01", "1e3"]
OLD_ROW_SCHEMA = ROW_SCHEMA.remove(ROW_SCHEMA.get_field_index("schema_findings"))  # a schema before it existed


def rows(n: int, prefix: str, **extra) -> list[dict]:
    return [{"case_id": f"{prefix}{i}", "trial": 0, **extra} for i in range(n)]


def describe(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    return {name: type_ for name, type_, *_ in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()}


@pytest.fixture
def four_revisions(tmp_path: Path) -> Path:
    """Revision i of REVISIONS holds i + 1 rows, all in run "7" (a run id that looks like a number too)."""
    for i, revision in enumerate(REVISIONS):
        write_partition(tmp_path, "rows", revision, "7", table_from_rows(rows(i + 1, revision), ROW_SCHEMA))
    return tmp_path


class TestRevisionsStayStrings:
    """H12 (apache/arrow 39660; duckdb 11636, 12588)."""

    def test_duckdb(self, four_revisions):
        con = connect(four_revisions)
        assert describe(con, "rows")["dataset_revision"] == "VARCHAR"
        assert describe(con, "rows")["run_id"] == "VARCHAR"
        counts = con.execute("SELECT dataset_revision, run_id, count(*) FROM rows GROUP BY ALL ORDER BY 1").fetchall()
        assert counts == [("001", "7", 1), ("1", "7", 2), ("1e3", "7", 4), ("2024-01-01", "7", 3)]
        selected = con.execute("SELECT case_id FROM rows WHERE dataset_revision = '001'").fetchall()
        assert selected == [("0010",)]

    def test_pyarrow(self, four_revisions):
        table = read_table(four_revisions, "rows")
        assert table.schema.field("dataset_revision").type == pa.string()
        assert table.schema.field("run_id").type == pa.string()
        assert sorted(set(table.column("dataset_revision").to_pylist())) == sorted(REVISIONS)
        assert set(table.column("run_id").to_pylist()) == {"7"}
        only = read_table(four_revisions, "rows", revision="001")
        assert only.column("case_id").to_pylist() == ["0010"]
        assert read_table(four_revisions, "rows", revision="1").num_rows == 2  # "1" is not "001"

    def test_one_column_each_although_in_file_and_path(self, four_revisions):
        con = connect(four_revisions)
        names = [row[0] for row in con.execute("DESCRIBE rows").fetchall()]
        assert names.count("dataset_revision") == 1 and names.count("run_id") == 1
        assert read_table(four_revisions, "rows").schema.names.count("dataset_revision") == 1

    def test_path_value_wins_over_file_value_in_both_readers(self, tmp_path):
        # The writer stamps equal values; this file (written around it) shows what the readers would do otherwise.
        folder = tmp_path / "rows/dataset_revision=001/run_id=run-1"
        folder.mkdir(parents=True)
        record = {"case_id": "a", "trial": 0, "dataset_revision": "FILE", "run_id": "FILE"}
        table = table_from_rows([record], ROW_SCHEMA)
        pq.write_table(table, folder / "part-0.parquet")
        assert connect(tmp_path).execute("SELECT dataset_revision, run_id FROM rows").fetchall() == [("001", "run-1")]
        stored = read_table(tmp_path, "rows")
        assert (stored["dataset_revision"].to_pylist(), stored["run_id"].to_pylist()) == (["001"], ["run-1"])

    def test_the_traps_the_explicit_types_avoid(self, four_revisions):
        # pyarrow: an *inferred* hive partitioning types "001" and "7" as int32 and clashes with the file column
        with pytest.raises(pa.ArrowTypeError, match="incompatible types"):
            ds.dataset(four_revisions / "rows", format="parquet", partitioning="hive")
        # DuckDB: without hive_types a path-only value is autocast (run_id=7 -> BIGINT)
        plain = four_revisions / "plain/dataset_revision=001/run_id=7"
        plain.mkdir(parents=True)
        pq.write_table(pa.table({"x": [1]}), plain / "part-0.parquet")
        con = duckdb.connect()
        glob = str(four_revisions / "plain/*/*/*.parquet")
        assert describe(con, f"read_parquet('{glob}', hive_partitioning=true)")["run_id"] == "BIGINT"
        assert describe(con, f"{scan_parquet_sql(glob)}")["run_id"] == "VARCHAR"
        assert con.execute(f"SELECT dataset_revision, run_id FROM {scan_parquet_sql(glob)}").fetchall() == [
            ("001", "7")
        ]


class TestNewerColumn:
    """H14: r_old written without ``schema_findings``, r_new with it; nulls for the old rows whatever the file order."""

    @pytest.fixture(params=[("r1", "r2"), ("r2", "r1")], ids=["old-file-first", "new-file-first"])
    def out(self, request, tmp_path) -> Path:
        old, new = request.param
        write_partition(tmp_path, "rows", old, "run-1", table_from_rows(rows(2, "old"), OLD_ROW_SCHEMA))
        write_partition(tmp_path, "rows", new, "run-2", table_from_rows(rows(1, "new", schema_findings=[]), ROW_SCHEMA))
        (old_file,) = (tmp_path / f"rows/dataset_revision={old}/run_id=run-1").glob("part-*.parquet")
        assert "schema_findings" not in pq.read_schema(old_file).names
        return tmp_path

    EXPECTED = [("new0", []), ("old0", None), ("old1", None)]

    def test_duckdb_view(self, out):
        con = connect(out)
        assert con.execute("SELECT case_id, schema_findings FROM rows ORDER BY case_id").fetchall() == self.EXPECTED

    @pytest.mark.parametrize("reverse", [False, True])
    def test_duckdb_file_list_in_both_orders(self, out, reverse):
        files = sorted((out / "rows").glob("*/*/*.parquet"), reverse=reverse)
        sql = f"SELECT case_id, schema_findings FROM {scan_parquet_sql(files)} ORDER BY case_id"
        assert duckdb.connect().execute(sql).fetchall() == self.EXPECTED

    def test_pyarrow(self, out):
        table = read_table(out, "rows").sort_by("case_id")
        assert list(zip(table.column("case_id").to_pylist(), table.column("schema_findings").to_pylist())) == self.EXPECTED
        assert table.schema.names == ROW_SCHEMA.names

    def test_column_missing_from_every_file_still_readable(self, tmp_path):
        write_partition(tmp_path, "rows", "r1", "run-1", table_from_rows(rows(2, "old"), OLD_ROW_SCHEMA))
        assert connect(tmp_path).execute("SELECT count(schema_findings), count(*) FROM rows").fetchone() == (0, 2)
        assert read_table(tmp_path, "rows").column("schema_findings").to_pylist() == [None, None]


class TestZeroCallRows:
    """H16: observed calls [A], [], null: every row counts (DuckDB UNNEST drops empty and NULL lists)."""

    @pytest.fixture
    def con(self, tmp_path) -> duckdb.DuckDBPyConnection:
        a = {"name": "A", "args_json": "{}", "args_raw": None, "parse_error": None}
        records = [
            {"case_id": "one", "trial": 0, "observed_calls": [a]},
            {"case_id": "empty", "trial": 0, "observed_calls": []},
            {"case_id": "null", "trial": 0, "observed_calls": None},
        ]
        write_partition(tmp_path, "rows", "r1", "run-1", table_from_rows(records, ROW_SCHEMA))
        return connect(tmp_path)

    def test_documented_average_counts_every_row(self, con):
        (mean,) = con.execute("SELECT avg(coalesce(len(observed_calls), 0)) FROM rows").fetchone()
        assert mean == pytest.approx(1 / 3)

    def test_per_row_listing_shows_all_three(self, con):
        listing = con.execute(
            "SELECT case_id, coalesce(len(observed_calls), 0) AS calls FROM rows ORDER BY case_id"
        ).fetchall()
        assert listing == [("empty", 0), ("null", 0), ("one", 1)]

    def test_the_naive_queries_are_wrong(self, con):
        # The trap: UNNEST yields no row for [] or NULL, so a per-row count built on it sees only "one" ...
        per_row = "SELECT case_id, count(*) AS n FROM (SELECT case_id, unnest(observed_calls) FROM rows) GROUP BY 1"
        assert con.execute(f"SELECT avg(n), count(*) FROM ({per_row})").fetchone() == (1.0, 1)
        # ... and avg(len(...)) skips the NULL list: 1/2, not 1/3.
        assert con.execute("SELECT avg(len(observed_calls)) FROM rows").fetchone() == (0.5,)


class TestEmptyResults:
    def test_views_exist_with_every_column_before_any_file(self, tmp_path):
        con = connect(tmp_path / "results-not-created-yet")
        for kind, schema in [("rows", ROW_SCHEMA), ("traces", ENVELOPE_SCHEMA)]:
            assert con.execute(f"SELECT count(*) FROM {kind}").fetchone() == (0,)
            assert list(describe(con, kind)) == schema.names
        call_type = 'STRUCT("name" VARCHAR, args_json VARCHAR, args_raw VARCHAR, parse_error VARCHAR)[]'
        assert describe(con, "rows")["observed_calls"] == call_type
        assert describe(con, "traces")["captured_at"] == "TIMESTAMP WITH TIME ZONE"
        assert con.execute("SELECT avg(coalesce(len(observed_calls), 0)) FROM rows").fetchone() == (None,)

    def test_read_table_of_nothing(self, tmp_path):
        table = read_table(tmp_path, "traces")
        assert table.num_rows == 0 and table.schema == ENVELOPE_SCHEMA

    def test_unknown_kind(self, tmp_path):
        with pytest.raises(ValueError, match="unknown partition kind"):
            read_table(tmp_path, "reports")


class TestConnect:
    def test_persistent_database_and_quoted_path(self, tmp_path):
        out = tmp_path / "it's results"
        write_partition(out, "rows", "r1", "run-1", table_from_rows(rows(2, "c"), ROW_SCHEMA))
        con = connect(out, str(tmp_path / "tooleval.duckdb"))
        assert con.execute("SELECT count(*) FROM rows").fetchone() == (2,)
        con.close()
        reopened = duckdb.connect(str(tmp_path / "tooleval.duckdb"))
        assert reopened.execute("SELECT count(*) FROM rows").fetchone() == (2,)

    def test_partition_filter_prunes_files(self, four_revisions):
        plan = connect(four_revisions).execute(
            "EXPLAIN SELECT count(*) FROM rows WHERE dataset_revision = '001'"
        ).fetchall()[0][1]
        assert "Scanning Files: 1/4" in plan

    def test_call_struct_type_roundtrips(self, four_revisions):
        assert read_table(four_revisions, "rows").schema.field("observed_calls").type == pa.list_(CALL_TYPE)
