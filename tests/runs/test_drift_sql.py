"""``tooleval drift``'s per-row comparison done by DuckDB (:func:`drift_partial_sql`, issue 9: no Python object
per row) gives the same report as the in-memory :func:`drift_partial` on the bundled rows, with and without
injected faults (a differing value, a key on one side only, a key twice)."""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.paths import BUNDLED
from tooleval.capture.envelope import build_envelope
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import load_dataset
from tooleval.models import RecordedTrace
from tooleval.runs.drift import DRIFT_COLUMNS, drift_partial, drift_partial_sql, drift_report
from tooleval.runs.legacy import legacy_score
from tooleval.scoring.rows import score_envelopes

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def bundled():
    dataset = load_dataset(BUNDLED)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), dataset.revision, AT)
                 for line in iter_trace_lines(BUNDLED / "traces.jsonl.gz")]
    rows = [{k: r[k] for k in DRIFT_COLUMNS} for r in score_envelopes(dataset.cases, envelopes)]
    return rows, legacy_score(envelopes, dataset.cases, "scorer-x")


def _both(legacy, rows, tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    values = pa.table({"case_id": [r.case_id for r in legacy.per_row], "trial": [r.trial for r in legacy.per_row],
                       "value": pa.array([r.value for r in legacy.per_row], pa.float64())})
    by_sql = drift_report([drift_partial_sql(duckdb.connect(), values, f"read_parquet('{path}')")], legacy)
    in_memory = drift_report([drift_partial(legacy.per_row, rows)], legacy)
    return by_sql, in_memory


def test_agreement_is_the_same_report(bundled, tmp_path):
    rows, legacy = bundled
    by_sql, in_memory = _both(legacy, rows, tmp_path)
    assert by_sql["verdict"] == in_memory["verdict"] == "ok"
    assert by_sql["coverage"] == in_memory["coverage"] and by_sql["coverage"]["new"] == 200
    assert by_sql["new"]["value"] == pytest.approx(in_memory["new"]["value"], abs=1e-12)
    assert round(by_sql["new"]["value"], 4) == 0.3449  # the bundled mean ragas ToolCallF1 (README facts)


def test_faults_are_named_alike(bundled, tmp_path):
    rows, legacy = bundled
    changed = [dict(rows[3], ragas_tool_call_f1=round(1.0 - rows[3]["ragas_tool_call_f1"], 4))]
    faulty = rows[:3] + changed + rows[4:10] + rows[11:] + [rows[20]]  # row 10 missing, row 20 twice
    by_sql, in_memory = _both(legacy, faulty, tmp_path)
    assert by_sql["verdict"] == in_memory["verdict"] == "drift"
    assert by_sql["reasons"][:3] == in_memory["reasons"][:3]
    assert by_sql["coverage"] == in_memory["coverage"]
    assert by_sql["coverage"]["only_legacy"] == [{"case_id": rows[10]["case_id"], "trial": rows[10]["trial"]}]
    assert by_sql["coverage"]["duplicated_new"] == [{"case_id": rows[20]["case_id"], "trial": rows[20]["trial"]}]
    assert by_sql["rows_differing"] == in_memory["rows_differing"]
    assert [(d["case_id"], d["trial"]) for d in by_sql["rows_differing"]] == [(rows[3]["case_id"], rows[3]["trial"])]
    assert by_sql["rows_differing_count"] == 1
