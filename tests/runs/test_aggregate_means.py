"""The summary's means are the correctly rounded mean of the rows' values, the same float in every run, however
the rows are split into files and read by DuckDB's threads."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pyarrow.parquet as pq

from tooleval.runs.aggregate import summarize_rows
from tooleval.storage import ROW_SCHEMA, scan_rows_sql


def _rows(values: list[tuple[float | None, float | None, bool | None]]) -> list[dict]:
    return [{"dataset_revision": "r1", "run_id": "run", "case_id": f"c{i:03d}", "trial": 0, "f1": f1,
             "ragas_tool_call_f1": ragas, "name_only": name_only, "tp": 0, "fp": 0, "fn": 0}
            for i, (f1, ragas, name_only) in enumerate(values)]


def _files(tmp_path, rows: list[dict], parts: int) -> list[str]:
    part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=run"
    part.mkdir(parents=True)
    files = []
    for i in range(parts):
        path = part / f"part-{i}.parquet"
        pq.write_table(pa.Table.from_pylist(rows[i::parts], schema=ROW_SCHEMA), path)
        files.append(str(path))
    return files


def test_means_are_correctly_rounded(tmp_path):
    # ten rows of f1 0.1: the double 0.1 added one after the other gives 0.9999999999999999 (a mean of
    # 0.09999999999999999); the exact sum of the ten doubles (1.0000000000000000555) rounds to 1.0, so the mean
    # is 0.1. ragas: seven values (the rest null: no value), expected from their exact rational sum. Two name-only
    # rows of f1 0.5 and 0.25 stay apart: mean 0.375.
    ragas = [0.7, 0.1, 0.2, 1 / 3, 0.9, 0.1, 0.2]
    values = [(0.1, ragas[i] if i < len(ragas) else None, False) for i in range(10)]
    values += [(0.5, None, True), (0.25, None, True), (None, None, None)]
    figures = summarize_rows(scan_rows_sql(_files(tmp_path, _rows(values), parts=3)))
    assert figures["mean_f1"] == 0.1
    assert figures["mean_ragas_tool_call_f1"] == float(sum(Fraction(v) for v in ragas)) / 7
    assert (figures["name_only_rows"], figures["mean_name_f1"]) == (2, 0.375)
    assert list(figures)[13:17] == ["mean_f1", "mean_ragas_tool_call_f1", "name_only_rows", "mean_name_f1"]


def test_no_values_no_mean(tmp_path):
    figures = summarize_rows(scan_rows_sql(_files(tmp_path, _rows([(None, None, None)]), parts=1)))
    assert (figures["rows"], figures["mean_f1"], figures["mean_ragas_tool_call_f1"], figures["mean_name_f1"]) == (
        1, None, None, None)
