"""Results on an fsspec URL (issue 10): locations, and the readers honouring commit markers over a filesystem.

fsspec's in-memory filesystem stands in for object storage here (the S3 path itself, through moto's server, is
tests/flows/test_cluster.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest

from tooleval.storage import (ROW_SCHEMA, OutFolderError, as_location, committed_files, connect, is_remote,
                              table_from_rows)
from tooleval.storage import write_partition
from tooleval.storage._fs import LocalTree, RemoteTree, tree_of


def _rows(prefix: str, n: int):
    return table_from_rows([{"case_id": f"{prefix}{i}", "trial": 0, "f1": i / 10} for i in range(n)], ROW_SCHEMA)


class TestLocation:
    @pytest.mark.parametrize(("value", "expected"), [
        ("results", Path("results")),
        ("file:///tmp/res", Path("/tmp/res")),
        ("s3://bucket/nightly/", "s3://bucket/nightly"),
        ("S3://bucket", "s3://bucket"),
        ("gs://b/p", "gs://b/p"),
    ])
    def test_as_location(self, value, expected):
        assert as_location(value) == expected

    def test_url_without_bucket_refused(self):
        with pytest.raises(ValueError, match="names no bucket"):
            as_location("s3://")

    def test_is_remote(self):
        assert [is_remote(v) for v in ("s3://b/p", "memory://x", "file:///x", "/x", Path("s3:/b"))] == [
            True, True, False, False, False]

    def test_tree_kind(self, tmp_path):
        assert isinstance(tree_of(tmp_path), LocalTree) and isinstance(tree_of("file://" + str(tmp_path)), LocalTree)
        assert isinstance(tree_of(f"memory://t-{uuid.uuid4().hex}"), RemoteTree)


class TestRemoteReaders:
    @pytest.fixture
    def remote(self, tmp_path):
        """A local results folder with run a (3 rows, committed) and run b (2 rows, committed), copied to memory://,
        plus a file of an uncommitted publication in run a's folder (readers must not see it)."""
        write_partition(tmp_path, "rows", "001", "a", _rows("a", 3))
        write_partition(tmp_path, "rows", "001", "b", _rows("b", 2))
        fs = fsspec.filesystem("memory")
        root = f"/res-{uuid.uuid4().hex}"
        fs.put(str(tmp_path / "rows"), f"{root}/rows", recursive=True)
        fs.put(str(tmp_path / "runs"), f"{root}/runs", recursive=True)
        with fs.open(f"{root}/rows/dataset_revision=001/run_id=a/part-{uuid.uuid4().hex}.parquet", "wb") as handle:
            pq.write_table(_rows("half", 5), handle)
        yield f"memory://{root}"
        fs.rm(root, recursive=True)

    def test_committed_files_are_urls_named_by_the_markers(self, remote, tmp_path):
        files = committed_files(remote, "rows")
        local = committed_files(tmp_path, "rows")
        assert len(files) == len(local) == 2  # one file per run; the uncommitted 5-row file is not among them
        assert all(isinstance(f, str) and f.startswith("memory://") for f in files)
        assert [f.rsplit("/", 1)[1] for f in files] == [p.name for p in local]

    def test_duckdb_reads_through_the_registered_filesystem(self, remote):
        con = connect(remote)
        assert con.execute("SELECT run_id, count(*), round(sum(f1), 4) FROM rows GROUP BY run_id ORDER BY run_id"
                           ).fetchall() == [("a", 3, 0.3), ("b", 2, 0.1)]  # 0+.1+.2 and 0+.1
        # partition values stay strings over a URL too
        assert con.execute("SELECT DISTINCT typeof(dataset_revision), dataset_revision FROM rows").fetchall() == [
            ("VARCHAR", "001")]


def test_a_full_disk_under_a_partition_file_is_said_as_anywhere_else(tmp_path, monkeypatch):
    """A partition file that cannot be written for want of space names that cause and its fix, as every other
    write of a run does (a full disk while a run publishes was a bare "cannot write the partition file")."""
    def full(table, where, **options):  # what Arrow raised when a tmpfs filled under a run's publication
        open(where, "wb").close()  # the temporary file exists, as on a disk that filled while it was written
        raise OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    with pytest.raises(OutFolderError, match="no space left on the device") as raised:
        LocalTree(tmp_path).write_parquet("rows/part-0.parquet", table_from_rows([{"case_id": "c", "trial": 0}], ROW_SCHEMA))
    assert "free some space" in str(raised.value)
    assert not list(tmp_path.rglob("*.tmp"))


class TestPartitionParquet:
    """A published partition file keeps min/max statistics for its flat columns (what readers prune by) and
    none for the leaves of its nested ones; its values are the table's."""

    def test_flat_columns_have_statistics_and_nested_leaves_none(self, tmp_path):
        table = table_from_rows([{"case_id": "c-2", "trial": 1,
                                  "expected_calls": [{"name": "get_weather", "args_json": '{"city":"Oslo"}'}]},
                                 {"case_id": "c-1", "trial": 0, "expected_calls": []}], ROW_SCHEMA)
        LocalTree(tmp_path).write_parquet("part-0.parquet", table)
        file = pq.ParquetFile(tmp_path / "part-0.parquet")
        group = file.metadata.row_group(0)
        columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        case_id = columns["case_id"]
        assert case_id.is_stats_set and (case_id.statistics.min, case_id.statistics.max) == ("c-1", "c-2")
        nested = [path for path in columns if path.startswith("expected_calls.")]
        assert nested and not any(columns[path].is_stats_set for path in nested)
        assert file.read().equals(table)
