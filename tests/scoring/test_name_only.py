"""Calls whose arguments were never captured (docs/rules.md "Arguments that were never captured"): read from a
recorded trace, kept through the envelope, matched by name only, scored apart from the argument-level figures,
handed to ragas and the legacy path alike, and read back from rows of older schema versions.

Every expected value is worked by hand in the comment beside it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.datasets import TINY_CASES, tool_call, trace
from tests.support.paths import GOLDEN
from tooleval.capture.envelope import build_envelope, envelope_calls
from tooleval.capture.provenance import first_divergent_boundary
from tooleval.models import Call, Case, RecordedTrace, calls_from_messages
from tooleval.runs.aggregate import summarize_rows
from tooleval.runs.legacy import legacy_calls, legacy_score
from tooleval.matching import match_calls
from tooleval.scoring.ragas_f1 import ragas_set_f1
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import ROW_SCHEMA, read_versioned, scan_rows_sql

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def unrecorded(name: str, call_id: str = "c") -> dict:
    """A tool call as the span importers write it when content capture was off."""
    return {"id": call_id, "type": "function", "function": {"name": name}, "arguments_captured": False}


def call(name: str, **args) -> Call:
    return Call.from_raw(name, args)


U = Call.not_captured


class TestReadingTheTrace:
    def test_the_marker_makes_a_call_without_arguments(self):
        messages = [{"role": "assistant", "tool_calls": [unrecorded("get_order"), tool_call("refund", "{}")]}]
        first, second = calls_from_messages(messages)
        assert (first.name, first.args, first.args_captured, first.malformed) == ("get_order", None, False, False)
        assert (second.args, second.args_captured) == ({}, True)  # no marker: empty text is {} as before

    def test_null_arguments_with_the_marker_and_the_flat_shape(self):
        flat = {"name": "get_order", "arguments": None, "arguments_captured": False}
        nested = {**unrecorded("refund"), "function": {"name": "refund", "arguments": None}}
        calls = calls_from_messages([{"role": "assistant", "tool_calls": [flat, nested]}])
        assert [(c.name, c.args_captured) for c in calls] == [("get_order", False), ("refund", False)]

    @pytest.mark.parametrize("body, said", [
        ({**unrecorded("get_order"), "function": {"name": "get_order", "arguments": '{"id": "A"}'}},
         "says arguments_captured: false but gives arguments"),
        ({**tool_call("get_order", "{}"), "arguments_captured": "no"}, "must be true or false, not string"),
    ])
    def test_a_contradictory_marker_is_a_bad_trace(self, body, said):
        with pytest.raises(ValueError, match=said):
            calls_from_messages([{"role": "assistant", "tool_calls": [body]}])
        envelope = build_envelope(RecordedTrace.model_validate(trace("A", 0, [body])), "r1", AT)
        assert envelope["error"].startswith("bad_trace: messages[1].tool_calls[0]")

    def test_the_envelope_keeps_it_and_reads_it_back(self):
        line = trace("A", 0, [unrecorded("get_order"), tool_call("refund", '{"id": "A", "cents": 9800}')])
        envelope = build_envelope(RecordedTrace.model_validate(line), "r1", AT)
        assert envelope["model_calls"][0] == {"name": "get_order", "args_json": None, "args_raw": None,
                                              "parse_error": None}
        for written_here in (False, True):
            calls = envelope_calls(envelope, written_here=written_here)
            assert [(c.name, c.args_captured) for c in calls] == [("get_order", False), ("refund", True)]
        assert Call.from_record(U("x").to_record()) == U("x")


class TestMatchingByName:
    def test_all_names_matched_is_f1_one_but_never_exact(self):
        # reference [get_order(A), refund(A, 9800)], calls [get_order(?), refund(?)]: two name matches
        result = match_calls([call("get_order", id="A"), call("refund", id="A", cents=9800)],
                             [U("get_order"), U("refund")])
        assert (result.tp, result.fp, result.fn, result.f1, result.exact_match) == (2, 0, 0, 1.0, False)
        assert (result.missing_calls, result.extra_calls, result.wrong_args) == ([], [], [])

    def test_captured_calls_match_by_key_first_so_the_matching_stays_maximum(self):
        # reference [g(1), g(2)], calls [g(?), g(1)]: g(1) takes g(1) by key, g(?) the remaining g(2) -> tp 2
        result = match_calls([call("g", x=1), call("g", x=2)], [U("g"), call("g", x=1)])
        assert (result.tp, result.fp, result.fn) == (2, 0, 0)

    def test_a_missing_tool_and_a_wrong_name(self):
        # reference [get_order, refund], calls [get_order(?)]: tp 1, fn 1 -> f1 2/(2+1) = 2/3
        result = match_calls([call("get_order", id="A"), call("refund", id="A")], [U("get_order")])
        assert (result.tp, result.fp, result.fn) == (1, 0, 1) and result.f1 == pytest.approx(2 / 3)
        assert [c.name for c in result.missing_calls] == ["refund"] and result.mismatch_categories == ["missing"]
        # reference [get_order], calls [refund(?)]: no pairing (no paths to differ), tp 0, fp 1, fn 1
        result = match_calls([call("get_order", id="B")], [U("refund")])
        assert (result.tp, result.fp, result.fn, result.f1, result.wrong_args) == (0, 1, 1, 0.0, [])

    def test_unknown_arguments_are_not_duplicates(self):
        # reference [g(1), g(2)], calls [g(?), g(?), g(?)]: 2 name matches, 1 extra; nothing known to repeat
        result = match_calls([call("g", x=1), call("g", x=2)], [U("g"), U("g"), U("g")])
        assert (result.tp, result.fp, result.duplicate_calls) == (2, 1, 0)
        assert result.mismatch_categories == ["extra"]
        # captured duplicates still count: reference [g(1)], calls [g(1), g(1), g(?)] -> 1 duplicate, g(?) extra
        result = match_calls([call("g", x=1)], [call("g", x=1), call("g", x=1), U("g")])
        assert (result.tp, result.fp, result.duplicate_calls) == (1, 2, 1)


class TestRagasAndLegacy:
    def test_ragas_gets_empty_arguments_as_the_legacy_path_does(self):
        """ragas has no unknown argument: both paths give it ``{}``, so the row's column and the legacy value are
        equal (reference [get_order(A)], call get_order({}) -> 0.0; reference [ping()], call ping({}) -> 1.0)."""
        line = trace("A", 0, [unrecorded("get_order"), unrecorded("refund")])
        assert legacy_calls(json.dumps(line["messages"])) == [{"name": "get_order", "args": {}},
                                                              {"name": "refund", "args": {}}]
        cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
        envelope = build_envelope(RecordedTrace.model_validate(line), "r1", AT)
        (row,) = score_envelopes(cases, [envelope])
        legacy = legacy_score([envelope], cases, "v")
        assert row["ragas_tool_call_f1"] == legacy.per_row[0].value == 0.0
        assert (row["f1"], row["exact_match"], row["name_only"]) == (1.0, False, True)
        assert ragas_set_f1([{"name": "ping", "args": {}}], [{"name": "ping", "args": {}}]) == 1.0


class TestBoundary:
    def test_an_unrecorded_model_call_stands_for_the_executed_call_of_its_tool(self):
        executed = [(call("get_order", id="A"), 1), (call("refund", id="A"), 1)]
        assert first_divergent_boundary([U("get_order"), call("refund", id="A")], None, executed) is None
        # another tool was executed than the one the model named: the adapter's divergence
        assert first_divergent_boundary([U("cancel"), call("refund", id="A")], None, executed) == "adapter"
        # a captured call that differs still diverges
        assert first_divergent_boundary([U("get_order"), call("refund", id="B")], None, executed) == "adapter"
        # run twice: the executor's
        assert first_divergent_boundary([U("get_order")], None, [(call("get_order", id="A"), 2)]) == "executor"


NAME_ONLY_TRACES = [
    # A trial 2: get_order(?) and refund(A, 9800): both match -> tp 2, f1 1.0, not exact; one violation
    trace("A", 2, [unrecorded("get_order"), tool_call("refund", '{"id": "A", "cents": 9800}')]),
    # B trial 1: refund(?) where get_order(B) is expected -> tp 0, fp 1, fn 1, f1 0.0
    trace("B", 1, [unrecorded("refund")]),
]


def _rows(extra_traces: list[dict]) -> list[dict]:
    from tests.support.datasets import TINY_TRACES

    cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
    envelopes = [build_envelope(RecordedTrace.model_validate(t), "r1", AT) for t in [*TINY_TRACES, *extra_traces]]
    return score_envelopes(cases, envelopes)


class TestRowsAndFigures:
    def test_the_rows(self):
        rows = {(r["case_id"], r["trial"]): r for r in _rows(NAME_ONLY_TRACES)}
        a2, b1 = rows["A", 2], rows["B", 1]
        assert (a2["tp"], a2["fp"], a2["fn"], a2["f1"], a2["exact_match"], a2["calls_match"]) == (
            2, 0, 0, 1.0, False, True)
        assert (a2["name_only"], a2["failure_owner"], a2["blocking"]) == (True, None, False)
        assert [(v["rule"], v["severity"], v["tool"]) for v in a2["violations"]] == [
            ("args_not_captured", "advisory", "get_order")]
        assert a2["observed_calls"][0] == {"name": "get_order", "args_json": None, "args_raw": None,
                                           "parse_error": None}
        # ragas: {get_order({}), refund(A, 9800)} against {get_order(A), refund(A, 9800)}: tp 1, fp 1, fn 1 -> 0.5
        assert a2["ragas_tool_call_f1"] == 0.5
        assert (b1["tp"], b1["fp"], b1["fn"], b1["f1"], b1["wrong_args"], b1["failure_owner"]) == (
            0, 1, 1, 0.0, [], "agent")
        assert all(rows[k]["name_only"] is False for k in [("A", 0), ("A", 1), ("B", 0), ("C", 0)])

    def test_summary_figures_keep_name_only_rows_apart(self, tmp_path):
        """Tiny rows A#0 1.0 (exact), A#1 0.5, B#0 0.0, C#0 1.0 (exact) and the name-only A#2 1.0, B#1 0.0."""
        figures = summarize_rows(scan_rows_sql(_write(tmp_path / "with", _rows(NAME_ONLY_TRACES))))
        assert figures["rows"] == 6
        assert figures["mean_f1"] == pytest.approx((1.0 + 0.5 + 0.0 + 1.0) / 4)  # 0.625: argument-level rows only
        assert figures["exact_match_rows"] == 2  # A#0 and C#0; A#2 matched by name only
        assert (figures["name_only_rows"], figures["mean_name_f1"]) == (2, pytest.approx((1.0 + 0.0) / 2))
        # call counts cover every row: tp 2 + 1 + 0 + 0 + 2 + 0 = 5
        assert figures["tp"] == 5
        without = summarize_rows(scan_rows_sql(_write(tmp_path / "plain", _rows([]))))
        assert (without["name_only_rows"], without["mean_name_f1"], without["exact_match_rows"]) == (0, None, 2)


def _write(root, rows):
    """One run's rows partition under ``root``, as a run publishes it; returns the Parquet file."""
    part = root / "rows" / "dataset_revision=r1" / "run_id=run"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=ROW_SCHEMA), part / "part-0.parquet")
    return part / "part-0.parquet"


class TestOlderRows:
    @pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
    def test_older_rows_read_name_only_false_when_scored(self, tmp_path, version):
        """No scorer before row schema 6 matched by name: a scored row reads ``name_only`` false, an error row
        (f1 null) null — through pyarrow and through DuckDB alike."""
        part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=old"
        part.mkdir(parents=True)
        path = part / "part-0.parquet"
        path.write_bytes((GOLDEN / f"rows_v{version}.parquet").read_bytes())
        f1 = pq.read_table(path, columns=["f1"])["f1"].to_pylist()
        expected = [None if value is None else False for value in f1]
        assert read_versioned(path, "rows")["name_only"].to_pylist() == expected
        assert read_versioned(path, "rows", ["name_only"])["name_only"].to_pylist() == expected
        source = scan_rows_sql(path)
        from tooleval.storage import source_connection

        assert [r[0] for r in source_connection(source).execute(f"SELECT name_only FROM {source}").fetchall()] == \
            expected
        figures = summarize_rows(source)
        assert (figures["name_only_rows"], figures["mean_name_f1"]) == (0, None)
