"""DuckDB reads published Parquet parts on object storage through one listing of each folder, not a metadata
request per file per query (moto's S3 server on 127.0.0.1, every request it answers logged)."""

from __future__ import annotations

import duckdb
import fsspec
import pytest

from tooleval.storage import Publication, ROW_SCHEMA, connect, source_connection, table_from_rows
from tooleval.storage._listed import ListedFiles, urls_in_sql

from tests.storage.s3_server import fresh_prefix, moto_s3

pytestmark = pytest.mark.slow  # moto's S3 server

PARTS = 3


@pytest.fixture(scope="module")
def server():
    log: list[tuple[str, str, str]] = []
    with moto_s3(log=log) as endpoint:
        yield endpoint, log


@pytest.fixture
def published(server, monkeypatch):
    """A run of 3 parts of 2 rows each (f1 0.0, 0.5 in part 0; 1.0, 1.5 in part 1; ...) and the request log."""
    endpoint, log = server
    with fresh_prefix(endpoint, monkeypatch, "listed") as out:
        with Publication(out) as publication:
            tables = [table_from_rows([{"case_id": f"c{part}-{i}", "trial": 0, "f1": part + i / 2} for i in range(2)],
                                      ROW_SCHEMA) for part in range(PARTS)]
            files, _ = publication.add_parts("rows", "rev", "run1", tables, ROW_SCHEMA)
            assert len(files) == PARTS
        yield out, log


def _part_heads(log: list[tuple[str, str, str]], since: int) -> list[str]:
    return [path for method, path, _ in log[since:] if method == "HEAD" and path.endswith(".parquet")]


def test_queries_over_a_bucket_send_no_request_per_part_and_read_every_row(published):
    out, log = published
    since = len(log)
    con = connect(out)
    # sum of f1 over 3 parts: (0 + 0.5) + (1 + 1.5) + (2 + 2.5) = 7.5, over 6 rows
    for _ in range(3):  # each query would have asked ~6 HEADs per part before
        assert con.execute("SELECT count(*), sum(f1) FROM rows").fetchone() == (6, 7.5)
    assert _part_heads(log, since) == []
    lists = [q for method, path, q in log[since:] if method == "GET" and "list-type" in q]
    assert lists  # the folders were listed instead


def test_a_pattern_in_the_last_part_is_answered_from_the_listing(published):
    out, log = published
    folder = f"{out}/rows/dataset_revision=rev/run_id=run1"
    since = len(log)
    con = source_connection(f"read_parquet('{folder}/*.parquet')")
    assert con.execute(f"SELECT count(*) FROM read_parquet('{folder}/*.parquet')").fetchone() == (6,)
    assert _part_heads(log, since) == []


def test_a_file_written_after_the_listing_is_asked_of_the_store(published):
    out, log = published
    fs = fsspec.filesystem("s3")
    folder = f"{out}/rows/dataset_revision=rev/run_id=run1"
    before = sorted(p for p in fs.ls(folder) if p.endswith(".parquet"))
    listed = ListedFiles(fs, [f"s3://{p}" for p in before])
    late = f"{folder}/late.parquet"
    with fs.open(late, "wb") as handle:  # a copy of part 0, written after the listing: 2 more rows
        handle.write(fs.cat_file(before[0]))
    assert listed.exists(late) and listed.size(late) == fs.size(before[0])
    con = duckdb.connect()
    con.register_filesystem(listed)
    files = ", ".join(f"'s3://{p}'" for p in [*before, late.removeprefix("s3://")])
    assert con.execute(f"SELECT count(*) FROM read_parquet([{files}])").fetchone() == (8,)


def test_quoted_urls_are_read_back_from_sql():
    sql = "read_parquet(['s3://b/o''k/p.parquet', 'gs://c/d.parquet', '/local/e.parquet'])"
    assert urls_in_sql(sql) == ["s3://b/o'k/p.parquet", "gs://c/d.parquet"]
