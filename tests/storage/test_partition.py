"""Partition names, replacement of a partition (H13) and staged publication (tooleval.storage._partition)."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tooleval.errors import InputFileError

from tooleval.storage import (
    ENVELOPE_SCHEMA,
    ROW_SCHEMA,
    Publication,
    UnsafeNameError,
    connect,
    partition_dir,
    read_table,
    scan_parquet_sql,
    table_from_rows,
    validate_partition_value,
    write_partition,
)


def rows_table(n: int, prefix: str = "c"):
    return table_from_rows([{"case_id": f"{prefix}{i}", "trial": 0, "f1": 1.0} for i in range(n)], ROW_SCHEMA)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def staging_leftovers(out: Path) -> list[Path]:
    """Files of uncommitted or superseded publications: anything a commit marker does not name, and the
    ``.staging`` of older versions."""
    named = set()
    for marker in out.glob("runs/*/commit.json"):
        data = json.loads(marker.read_text())
        named |= {out / f for files in data["partitions"].values() for f in files}
        named |= {out / f for f in data["documents"].values()}
    versioned = [p for p in out.glob("*/*/*/*.parquet") if p not in named]
    documents = [p for p in out.glob("runs/*/.publications/**/*") if p.is_file() and p not in named]
    old = list((out / ".staging").rglob("*")) if (out / ".staging").exists() else []
    return versioned + documents + old


def one_part(folder: Path) -> Path:
    """The single partition file of ``folder`` (``part-<32 hex publication id>.parquet``)."""
    files = sorted(folder.iterdir())
    assert len(files) == 1 and re.fullmatch(r"part-[0-9a-f]{32}\.parquet", files[0].name), files
    return files[0]


class TestValidatePartitionValue:
    @pytest.mark.parametrize("value", ["001", "1", "2024-01-01", "1e3", "a", "v1.2_rc-3", "a..b", "x" * 64])
    def test_good(self, value):
        assert validate_partition_value(value, what="run id") == value

    @pytest.mark.parametrize(
        "value",
        ["", ".", "..", "../x", "a/b", "/a", "a\\b", "a b", "café", "x" * 65, "-a", "_a", ".hidden", "a\n", "a:b"],
    )
    def test_bad(self, value):
        with pytest.raises(UnsafeNameError) as info:
            validate_partition_value(value, what="dataset revision")
        message = str(info.value)
        assert repr(value) in message and "[A-Za-z0-9._-]" in message and "Fix:" in message
        assert info.value.value == value and info.value.what == "dataset revision"

    @pytest.mark.parametrize("value", [1, None, b"001"])
    def test_non_string_refused(self, value):
        with pytest.raises(UnsafeNameError, match="must be a string"):
            validate_partition_value(value, what="run id")

    def test_error_is_a_value_error_and_pickles(self):
        error = UnsafeNameError("../x", "run id")
        clone = pickle.loads(pickle.dumps(error))
        assert isinstance(clone, ValueError)
        assert (clone.value, clone.what, str(clone)) == ("../x", "run id", str(error))
        assert "e.g. 'x'" in str(clone)  # the suggested fix is itself a safe name


class TestPartitionDir:
    def test_layout(self, tmp_path):
        assert partition_dir(tmp_path, "rows", "001", "run-1") == tmp_path / "rows/dataset_revision=001/run_id=run-1"

    def test_unknown_kind(self, tmp_path):
        with pytest.raises(ValueError, match="unknown partition kind 'reports'"):
            partition_dir(tmp_path, "reports", "001", "run-1")

    def test_unsafe_run_id(self, tmp_path):
        with pytest.raises(UnsafeNameError, match="run id '../r'"):
            partition_dir(tmp_path, "rows", "001", "../r")


class TestReplacePartition:
    """H13 at storage level: a rerun replaces, never appends; an empty rerun leaves one zero-row file."""

    def test_rerun_replaces_and_empty_rerun_keeps_schema(self, tmp_path):
        write_partition(tmp_path, "rows", "r1", "other-run", rows_table(2, "o"))
        write_partition(tmp_path, "rows", "r0", "run-1", rows_table(4, "z"))
        before = snapshot(tmp_path / "rows/dataset_revision=r1/run_id=other-run")
        before |= snapshot(tmp_path / "rows/dataset_revision=r0")

        target = write_partition(tmp_path, "rows", "r1", "run-1", rows_table(3))
        write_partition(tmp_path, "rows", "r1", "run-1", rows_table(3))
        assert read_table(tmp_path, "rows", revision="r1", run_id="run-1").num_rows == 3  # not 6
        one_part(target)

        write_partition(tmp_path, "rows", "r1", "run-1", rows_table(0))
        assert pq.read_metadata(one_part(target)).num_rows == 0
        assert pq.read_schema(one_part(target)).remove_metadata() == ROW_SCHEMA
        con = connect(tmp_path)
        query = "SELECT count(*) FROM rows WHERE dataset_revision = ? AND run_id = ?"
        assert con.execute(query, ["r1", "run-1"]).fetchone() == (0,)
        assert con.execute(query, ["r1", "other-run"]).fetchone() == (2,)
        assert read_table(tmp_path, "rows", run_id="run-1").num_rows == 4  # r0's run-1 only

        after = snapshot(tmp_path / "rows/dataset_revision=r1/run_id=other-run")
        after |= snapshot(tmp_path / "rows/dataset_revision=r0")
        assert after == before  # other runs and revisions byte-identical
        assert staging_leftovers(tmp_path) == []

    def test_partition_columns_stamped_into_file(self, tmp_path):
        target = write_partition(tmp_path, "rows", "001", "run-1", rows_table(2))  # rows carry run_id None
        stored = pq.read_table(one_part(target))
        assert stored.column("dataset_revision").to_pylist() == ["001", "001"]
        assert stored.column("run_id").to_pylist() == ["run-1", "run-1"]

    def test_conflicting_partition_column_refused_before_writing(self, tmp_path):
        table = table_from_rows([{"case_id": "a", "trial": 0, "run_id": "run-2"}], ROW_SCHEMA)
        with pytest.raises(ValueError, match=r"column 'run_id' holds \['run-2'\], but the partition is 'run-1'"):
            write_partition(tmp_path, "rows", "001", "run-1", table)
        assert not (tmp_path / "rows").exists() and staging_leftovers(tmp_path) == []


class TestPublication:
    def test_exception_leaves_previous_partition_and_removes_staging(self, tmp_path):
        target = write_partition(tmp_path, "rows", "r1", "run-1", rows_table(2))
        before = snapshot(target)
        with pytest.raises(RuntimeError, match="boom"):
            with Publication(tmp_path) as pub:
                pub.add_table("rows", "r1", "run-1", rows_table(5))
                pub.add_json("runs/run-1/summary.json", {"rows": 5})
                raise RuntimeError("boom")
        assert snapshot(target) == before
        assert not (tmp_path / "runs/run-1/summary.json").exists()
        assert read_table(tmp_path, "rows").num_rows == 2
        assert staging_leftovers(tmp_path) == []

    def test_commit_swaps_two_kinds_and_json(self, tmp_path):
        write_partition(tmp_path, "rows", "r1", "run-1", rows_table(1, "old"))
        (tmp_path / "runs/run-1/summary.json").write_text('{"rows": 1}')
        with Publication(tmp_path) as pub:
            pub.add_table("traces", "r1", "run-1", _traces(2))
            pub.add_table("rows", "r1", "run-1", rows_table(2, "new"))
            pub.add_json("runs/run-1/summary.json", {"rows": 2, "mean_f1": 1.0})
            # a reader can aggregate over the staged rows before commit
            staged = scan_parquet_sql(pub.staged_path("rows", "r1", "run-1"))
            assert connect(tmp_path / "none").execute(f"SELECT count(*) FROM {staged}").fetchone() == (2,)
            assert read_table(tmp_path, "rows").column("case_id").to_pylist() == ["old0"]  # not yet swapped
        assert read_table(tmp_path, "rows").column("case_id").to_pylist() == ["new0", "new1"]
        assert read_table(tmp_path, "traces").column("case_id").to_pylist() == ["t0", "t1"]
        assert json.loads((tmp_path / "runs/run-1/summary.json").read_text()) == {"rows": 2, "mean_f1": 1.0}
        assert staging_leftovers(tmp_path) == []

    def test_unsafe_names_refused_before_anything_is_written(self, tmp_path):
        pub = Publication(tmp_path)
        for revision, run_id in [("../r1", "run-1"), ("r1", "a/b"), ("r 1", "run-1")]:
            with pytest.raises(UnsafeNameError):
                pub.add_table("rows", revision, run_id, rows_table(1))
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize("relpath", ["/etc/x.json", "../x.json", "runs/../../x.json", "runs//x", "./x",
                                         "rows/x.json", ".staging/x", "a\\b.json", ""])  # fmt: skip
    def test_unsafe_json_path_refused(self, tmp_path, relpath):
        with pytest.raises(ValueError, match="unsafe relative path"):
            Publication(tmp_path).add_json(relpath, {})

    def test_nan_refused_in_json(self, tmp_path):
        with pytest.raises(ValueError):
            Publication(tmp_path).add_json("runs/r/summary.json", {"mean_f1": float("nan")})

    def test_failed_commit_discards_everything_written(self, tmp_path):
        target = write_partition(tmp_path, "rows", "r1", "run-1", rows_table(2))
        before = snapshot(target)
        pub = Publication(tmp_path)
        pub.add_table("rows", "r1", "run-1", rows_table(7))
        pub.add_table("traces", "r1", "run-1", _traces(1))
        pub.add_json("runs/run-1/summary.json", {"rows": 7})
        marker = tmp_path / "runs/run-1/commit.json"
        marker.unlink()
        marker.mkdir()  # a folder where the marker goes: the commit cannot be written
        with pytest.raises(InputFileError, match="commit marker is unreadable"):
            pub.commit()
        marker.rmdir()
        assert snapshot(target) == before  # the new rows file was deleted again
        assert not (tmp_path / "traces/dataset_revision=r1/run_id=run-1").exists()
        assert not list((tmp_path / "runs/run-1/.publications").glob("*"))  # nothing staged is left
        assert not (tmp_path / "runs/run-1/summary.json").exists()

    def test_single_use(self, tmp_path):
        pub = Publication(tmp_path)
        pub.add_table("rows", "r1", "run-1", rows_table(1))
        with pytest.raises(ValueError, match="already staged"):
            pub.add_table("rows", "r1", "run-1", rows_table(1))
        pub.commit()
        with pytest.raises(RuntimeError, match="already committed or aborted"):
            pub.commit()
        with pytest.raises(RuntimeError):
            pub.add_json("runs/r/x.json", {})
        with pytest.raises(KeyError):
            pub.staged_path("rows", "r1", "run-2")


def _traces(n: int):
    return table_from_rows([{"case_id": f"t{i}", "trial": 0, "envelope_version": 1} for i in range(n)], ENVELOPE_SCHEMA)


class TestPartWriter:
    """A partition written shard by shard as shards finish (out of order), visible only at commit."""

    def test_parts_named_by_index_and_read_in_part_order(self, tmp_path):
        with Publication(tmp_path) as pub:
            writer = pub.part_writer("rows", "r1", "run-1", ROW_SCHEMA)
            writer.add(rows_table(2, "b"), 1)  # shard 1 finished first
            assert connect(tmp_path).execute("SELECT count(*) FROM rows").fetchone() == (0,)  # not committed yet
            writer.add(rows_table(1, "a"), 0)
            files, rows = writer.close()
        assert rows == 3
        assert [Path(f).name.split("-")[1] for f in files] == ["0", "1"]
        stored = read_table(tmp_path, "rows", run_id="run-1")
        assert sorted(stored.column("case_id").to_pylist()) == ["a0", "b0", "b1"]
        assert set(stored.column("run_id").to_pylist()) == {"run-1"}  # stamped into every part

    def test_a_part_index_is_written_once(self, tmp_path):
        with pytest.raises(ValueError, match="part 0 of .* is already written"):
            with Publication(tmp_path) as pub:
                writer = pub.part_writer("rows", "r1", "run-1", ROW_SCHEMA)
                writer.add(rows_table(1), 0)
                writer.add(rows_table(1), 0)
        assert not list(tmp_path.glob("rows/**/*.parquet"))  # the aborted publication left nothing

    def test_no_part_closes_as_one_empty_file_with_the_schema(self, tmp_path):
        with Publication(tmp_path) as pub:
            files, rows = pub.part_writer("rows", "r1", "run-1", ROW_SCHEMA).close()
        assert rows == 0 and len(files) == 1
        assert pq.read_schema(files[0]).names == ROW_SCHEMA.names
