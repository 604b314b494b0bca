"""Stage files are written and read a batch at a time (issue 9 item 1): a stage body never holds a whole shard's
rows as Python objects, and the rows, their order and the schema are the same as one table's."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tooleval.storage import stages
from tooleval.storage.stages import (GENERATION_SCHEMA, STAGE_ROW_GROUP, StageRef, iter_stage_batches,
                                     write_stage_table)


def _record(i: int) -> dict:
    return {"case_id": f"c{i:05d}", "trial": i % 3, "seed": i, "payload_json": None if i % 7 else "{}",
            "error": "e" if i % 11 == 0 else None, "line_digest": None}


def test_a_generator_is_written_one_row_group_at_a_time(tmp_path, monkeypatch):
    total = 2 * STAGE_ROW_GROUP + 5  # 8,197 rows: two full row groups and one of 5
    produced = 0
    pulled_ahead: list[int] = []  # rows produced but not yet written, at each write

    def records():
        nonlocal produced
        for i in range(total):
            produced += 1
            yield _record(i)

    written = 0
    original = pq.ParquetWriter.write_table

    def recording_write(self, table, *args, **kwargs):
        nonlocal written
        pulled_ahead.append(produced - written)
        written += table.num_rows
        return original(self, table, *args, **kwargs)

    monkeypatch.setattr(stages.pq.ParquetWriter, "write_table", recording_write)
    ref = write_stage_table(tmp_path, "generation", records(), GENERATION_SCHEMA)
    assert pulled_ahead == [STAGE_ROW_GROUP, STAGE_ROW_GROUP, 5]  # never more than one row group in hand
    assert ref.rows == total
    file = pq.ParquetFile(ref.path)
    assert [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)] == [4096, 4096, 5]
    assert file.schema_arrow == GENERATION_SCHEMA
    assert file.read().to_pylist() == [_record(i) for i in range(total)]


def test_batches_read_back_in_order_and_an_empty_stage_keeps_its_schema(tmp_path):
    ref = write_stage_table(tmp_path, "generation", [_record(i) for i in range(STAGE_ROW_GROUP + 1)],
                            GENERATION_SCHEMA)
    batches = list(iter_stage_batches(ref, columns=["case_id"]))
    assert [len(b) for b in batches] == [STAGE_ROW_GROUP, 1]
    assert [r["case_id"] for b in batches for r in b] == [f"c{i:05d}" for i in range(STAGE_ROW_GROUP + 1)]
    empty = write_stage_table(tmp_path, "generation", iter(()), GENERATION_SCHEMA)
    assert empty.rows == 0 and list(iter_stage_batches(empty)) == []
    assert pq.read_table(empty.path).schema == GENERATION_SCHEMA
    # the same rows give the same bytes, so the same digest (stage caching keys on it)
    again = write_stage_table(tmp_path / "again", "generation", (_record(i) for i in range(STAGE_ROW_GROUP + 1)),
                              GENERATION_SCHEMA)
    assert again.digest == ref.digest
    assert isinstance(again, StageRef) and pa.types.is_string(pq.read_schema(again.path).field("case_id").type)


def test_row_groups_of_long_rows_end_at_the_text_budget_and_readers_follow_them(tmp_path, monkeypatch):
    """Issue 9, memory: 4,096 tau rows are ~65 MB of trace text, so a row group ends at STAGE_GROUP_TEXT
    characters too. Here the budget is 10,000 characters and each payload 3,000: groups of 4 rows (12,000 >=
    10,000 closes a group), and every reader — the stage batches, the scoring task's checked read — gets one
    group at a time even when its batch size is larger. The same rows give the same bytes."""
    from tasks.scoring import _read_checked

    monkeypatch.setattr(stages, "STAGE_GROUP_TEXT", 10_000)
    rows = [dict(_record(i), payload_json="x" * 3_000) for i in range(10)]
    ref = write_stage_table(tmp_path, "generation", iter(rows), GENERATION_SCHEMA)
    file = pq.ParquetFile(ref.path)
    assert [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)] == [4, 4, 2]
    assert [len(b) for b in iter_stage_batches(ref)] == [4, 4, 2]
    batches, intact = _read_checked(ref)
    assert [len(b) for b in batches] == [4, 4, 2] and intact
    assert [r for b in iter_stage_batches(ref) for r in b] == rows
    again = write_stage_table(tmp_path / "again", "generation", iter(rows), GENERATION_SCHEMA)
    assert again.digest == ref.digest


def test_payloads_are_written_without_a_dictionary(tmp_path):
    """A generation payload is one trace's text, unique in its file: its column has no dictionary page (which the
    reader would decode for nothing), while a short column that repeats keeps its dictionary."""
    rows = [dict(_record(i), case_id="c" * 5_000, payload_json=f"{i}" + "x" * 3_000) for i in range(40)]
    ref = write_stage_table(tmp_path, "generation", iter(rows), GENERATION_SCHEMA)
    group = pq.ParquetFile(ref.path).metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert not any("DICTIONARY" in e for e in encodings["payload_json"])
    assert any("DICTIONARY" in e for e in encodings["case_id"])
    assert [r for b in iter_stage_batches(ref) for r in b] == rows


def test_text_budget_counts_the_json_text_columns_only(monkeypatch, tmp_path):
    # budget 10,000: 5,000-character ids do not count, 3,000-character payloads do: groups of 4 rows as above
    monkeypatch.setattr(stages, "STAGE_GROUP_TEXT", 10_000)
    rows = [dict(_record(i), case_id="c" * 5_000, payload_json="x" * 3_000) for i in range(10)]
    ref = write_stage_table(tmp_path, "generation", iter(rows), GENERATION_SCHEMA)
    file = pq.ParquetFile(ref.path)
    assert [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)] == [4, 4, 2]
    assert stages._text_columns(GENERATION_SCHEMA) == ("payload_json",)
