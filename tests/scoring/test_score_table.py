"""Scoring a batch of envelopes as columns (:func:`tooleval.scoring.score_table`): the counts computed over the
whole batch at once are each row's own, whatever else the batch holds.

Every expected value is worked by hand in the comment beside it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from tests.support.datasets import tool_call, trace
from tests.support.paths import BUNDLED
from tooleval.capture.envelope import build_envelope
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import load_dataset
from tooleval.models import Case, RecordedTrace
from tooleval.rules import ToolTable, load_policy
from tooleval.scoring import ScoringSources, score_table
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import ENVELOPE_SCHEMA, ROW_SCHEMA

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)

CASES = {
    "dup": Case.model_validate({"case_id": "dup", "input": "x", "expected_calls": [
        {"name": "get", "args": {"id": 1}}, {"name": "put", "args": {"id": 2}}]}),
    "none": Case.model_validate({"case_id": "none", "input": "y", "expected_calls": []}),
    "same": Case.model_validate({"case_id": "same", "input": "z", "expected_calls": [
        {"name": "get", "args": {"id": 1}}]}),
}


def _envelope(case_id: str, calls: list[dict], trial: int = 0) -> dict:
    return build_envelope(RecordedTrace.model_validate(trace(case_id, trial, calls)), None, AT)


def _batch() -> list[dict]:
    return [
        # expected get(1), put(2); observed get(1), get(1), cut(): tp 1 (one get matches), fp 2, fn 1 (put),
        # duplicate_calls 1 (get observed twice, expected once: 2 - max(1, 1)); ragas sets {get1, put2} and
        # {get1, cut}: 1 in common, precision 1/2, recall 1/2, f1 0.5
        _envelope("dup", [tool_call("get", '{"id": 1}'), tool_call("get", '{"id": 1.0}'), tool_call("cut", "{}")]),
        # nothing expected, nothing made: a correct abstention, f1 1.0, precision and recall undefined; ragas
        # scores two empty sets 0.0
        _envelope("none", []),
        # the same call as the first row's, in another case: tp 1, exact; ragas 1.0
        _envelope("same", [tool_call("get", '{"id": 1}')]),
        # malformed arguments: no match, one malformed call, fp 1, fn 1, f1 0 (2*0 / (0 + 1 + 1))
        _envelope("same", [tool_call("get", "{oops")], trial=1),
    ]


def _figures(rows: list[dict]) -> list[tuple]:
    return [(r["tp"], r["fp"], r["fn"], r["precision"], r["recall"], r["f1"], r["exact_match"],
             r["duplicate_calls"], r["malformed_calls"], r["ragas_tool_call_f1"], r["mismatch_categories"])
            for r in rows]


def test_each_row_of_a_batch_has_its_own_counts():
    assert _figures(score_envelopes(CASES, _batch())) == [
        (1, 2, 1, 1 / 3, 0.5, 0.4, False, 1, 0, 0.5, ["missing", "extra", "duplicate"]),
        (0, 0, 0, None, None, 1.0, True, 0, 0, 0.0, []),
        (1, 0, 0, 1.0, 1.0, 1.0, True, 0, 0, 1.0, []),
        (0, 1, 1, 0.0, 0.0, 0.0, False, 0, 1, 0.0, ["missing", "extra", "malformed"]),
    ]
    # row 1: precision tp / observed = 1/3, recall 1/2, f1 2*1 / (2*1 + 2 + 1) = 0.4


def test_a_batch_scores_as_its_rows_alone():
    # the bundled rows scored as one batch and each as a batch of its own: the same rows, column for column
    loaded = load_dataset(BUNDLED)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), loaded.revision, AT)
                 for line in iter_trace_lines(BUNDLED / "traces.jsonl.gz")]
    options = {"tools": ToolTable(loaded.tools), "policy": load_policy(loaded.path)}
    together = score_envelopes(loaded.cases, envelopes, **options)
    alone = [row for envelope in envelopes for row in score_envelopes(loaded.cases, [envelope], **options)]
    assert len(together) == 200 and together == alone


def test_the_table_has_the_row_schema_and_takes_the_envelope_columns_over():
    envelopes = _batch()
    table = pa.Table.from_pylist(envelopes, schema=ENVELOPE_SCHEMA)
    rows = score_table(table, ScoringSources(CASES))
    assert rows.schema == ROW_SCHEMA and rows.num_rows == 4
    assert rows.column("trace_digest").to_pylist() == [e["trace_digest"] for e in envelopes]
    assert rows.column("case_id").to_pylist() == ["dup", "none", "same", "same"]
    assert rows.column("agent_name").to_pylist() == ["test-agent"] * 4


def test_a_shards_memo_is_freed_as_soon_as_its_sources_are():
    # a worker pauses the cyclic collector for a shard: were the memo in a reference cycle (through the sources'
    # lazy case-input map, say), every case entry and call of the shard would stay alive until the collector's
    # next pass, which then traced them all (~0.4 s a 28,000-row shard); reference counting alone must free it
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        sources = ScoringSources(CASES)
        score_table(pa.Table.from_pylist(_batch(), schema=ENVELOPE_SCHEMA), sources)
        memo = weakref.ref(sources.memo)
        assert len(memo().cases) == 3  # the three cases' entries were made
        del sources
        assert memo() is None
    finally:
        gc.enable()
