"""Schemas and table building (tooleval.storage._schema), including the H15 argument round trip."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from tooleval.storage import (
    CALL_TYPE,
    ENVELOPE_SCHEMA,
    ENVELOPE_VERSION,
    ROW_SCHEMA,
    ROW_SCHEMA_VERSION,
    WRONG_ARGS_TYPE,
    Row,
    connect,
    read_table,
    table_from_rows,
    write_partition,
)

CALLS = pa.list_(CALL_TYPE)


def call(name: str, args: dict | None) -> dict:
    return {"name": name, "args_json": json.dumps(args, sort_keys=True), "args_raw": None, "parse_error": None}


class TestSchemas:
    def test_row_columns_in_design_order_with_types(self):
        expected = [
            ("dataset_revision", pa.string()), ("run_id", pa.string()), ("case_id", pa.string()),
            ("trial", pa.int32()), ("slice", pa.string()), ("row_schema_version", pa.int32()),
            ("scorer_version", pa.string()), ("ragas_version", pa.string()), ("agent_name", pa.string()),
            ("agent_version", pa.string()), ("expected_calls", CALLS), ("observed_calls", CALLS),
            ("missing_calls", CALLS), ("extra_calls", CALLS), ("wrong_args", pa.list_(WRONG_ARGS_TYPE)),
            ("duplicate_calls", pa.int32()), ("malformed_calls", pa.int32()), ("tp", pa.int32()),
            ("fp", pa.int32()), ("fn", pa.int32()), ("precision", pa.float64()), ("recall", pa.float64()),
            ("f1", pa.float64()), ("ragas_tool_call_f1", pa.float64()), ("exact_match", pa.bool_()),
            ("mismatch_categories", pa.list_(pa.string())), ("recorded_reward", pa.float64()),
            ("request_id", pa.string()), ("response_id", pa.string()), ("trace_digest", pa.string()),
            # row schema version 4: the error as a closed kind and a message (was one "kind: message" text)
            ("error_kind", pa.string()), ("error_message", pa.string()),
            # row schema version 2: provenance
            ("provenance_status", pa.string()), ("provenance_detail", pa.string()),
            ("first_divergent_boundary", pa.string()), ("failure_owner", pa.string()),
            ("tool_schema_version", pa.string()),
        ]  # fmt: skip
        assert [(f.name, f.type) for f in ROW_SCHEMA][: len(expected)] == expected
        assert all(field.nullable for field in ROW_SCHEMA)

    def test_call_structs_hold_json_text(self):
        assert CALL_TYPE.names == ["name", "args_json", "args_raw", "parse_error"]
        assert all(CALL_TYPE.field(i).type == pa.string() for i in range(4))
        assert WRONG_ARGS_TYPE.names == ["name", "expected_args_json", "observed_args_json", "paths"]
        assert WRONG_ARGS_TYPE.field("paths").type == pa.list_(pa.string())

    def test_envelope_columns(self):
        assert ENVELOPE_SCHEMA.names[:15] == [
            "envelope_version", "dataset_revision", "run_id", "case_id", "trial", "agent_name",
            "agent_version", "agent_model", "request_id", "response_id", "messages_json", "model_calls",
            "metadata_json", "captured_at", "trace_digest",
        ]  # fmt: skip
        assert ENVELOPE_SCHEMA.field("captured_at").type == pa.timestamp("us", tz="UTC")
        assert ENVELOPE_SCHEMA.field("model_calls").type == CALLS
        assert ENVELOPE_SCHEMA.field("envelope_version").type == pa.int32()

    def test_versions(self):
        assert (ROW_SCHEMA_VERSION, ENVELOPE_VERSION) == (7, 3)

    def test_match_mode_columns_close_the_row(self):
        """Row schema version 5: the case's match mode and whether the calls match under it; version 6 then
        whether some call matched by name only, its arguments not captured."""
        assert [(f.name, f.type) for f in ROW_SCHEMA][-5:-2] == [("match_mode", pa.string()),
                                                                ("calls_match", pa.bool_()), ("name_only", pa.bool_())]

    def test_the_gate_verdict_closes_the_row(self):
        """Row schema version 7: the release gate's verdict of the row and the rules behind it, set at
        publication."""
        assert [(f.name, f.type) for f in ROW_SCHEMA][-2:] == [("gate_verdict", pa.string()),
                                                              ("gate_rules", pa.list_(pa.string()))]

    def test_row_schema_is_derived_from_the_row_model(self):
        assert ROW_SCHEMA.names == [f.name for f in dataclasses.fields(Row)]
        assert list(Row(case_id="a", trial=0).record()) == ROW_SCHEMA.names


class TestTableFromRows:
    def test_values_and_exact_schema(self):
        table = table_from_rows(
            [{"case_id": "c1", "trial": 2, "f1": 0.5, "observed_calls": [call("a", {"x": 1})], "exact_match": False}],
            ROW_SCHEMA,
        )
        assert table.schema == ROW_SCHEMA
        (row,) = table.to_pylist()
        assert (row["case_id"], row["trial"], row["f1"], row["exact_match"]) == ("c1", 2, 0.5, False)
        assert row["observed_calls"] == [call("a", {"x": 1})]
        assert row["error_kind"] is None and row["run_id"] is None  # missing nullable keys read as null

    def test_empty_rows_give_zero_row_table_with_every_column(self):
        table = table_from_rows([], ROW_SCHEMA)
        assert table.num_rows == 0 and table.schema == ROW_SCHEMA

    def test_extra_key_is_named(self):
        with pytest.raises(ValueError, match=r"row 1: column\(s\) \['ragas_f1'\]"):
            table_from_rows([{"case_id": "a", "trial": 0}, {"case_id": "b", "trial": 0, "ragas_f1": 1.0}], ROW_SCHEMA)

    def test_extra_nested_key_is_named(self):
        bad = {"name": "a", "args": {"x": 1}}  # "args" instead of "args_json" would silently become null
        with pytest.raises(ValueError, match=r"column 'observed_calls'\[0\]: unknown key\(s\) \['args'\]"):
            table_from_rows([{"case_id": "a", "trial": 0, "observed_calls": [bad]}], ROW_SCHEMA)

    def test_extra_key_in_wrong_args_is_named(self):
        pair = {"name": "a", "expected_args_json": "{}", "observed_args_json": "{}", "paths": ["x"], "diff": 1}
        with pytest.raises(ValueError, match=r"column 'wrong_args'\[0\]: unknown key\(s\) \['diff'\]"):
            table_from_rows([{"case_id": "a", "trial": 0, "wrong_args": [pair]}], ROW_SCHEMA)

    def test_struct_where_a_list_is_needed_is_named(self):
        with pytest.raises(ValueError, match=r"column 'observed_calls'"):
            table_from_rows([{"case_id": "a", "trial": 0, "observed_calls": call("a", {})}], ROW_SCHEMA)

    @pytest.mark.parametrize("key", ["case_id", "trial"])
    def test_missing_key_column_is_named(self, key):
        row = {"case_id": "a", "trial": 0}
        del row[key]
        with pytest.raises(ValueError, match=f"row 0: key column '{key}' is missing"):
            table_from_rows([row], ROW_SCHEMA)

    def test_wrong_type_is_named(self):
        with pytest.raises(ValueError, match=r"column 'tp' \(int32\)"):
            table_from_rows([{"case_id": "a", "trial": 0, "tp": "three"}], ROW_SCHEMA)

    def test_naive_capture_time_refused(self):
        with pytest.raises(ValueError, match="timezone-aware"):
            table_from_rows([{"case_id": "a", "trial": 0, "captured_at": datetime(2025, 1, 1)}], ENVELOPE_SCHEMA)

    def test_utc_capture_time_kept(self):
        moment = datetime(2025, 1, 1, 12, 30, tzinfo=timezone.utc)
        table = table_from_rows([{"case_id": "a", "trial": 0, "captured_at": moment}], ENVELOPE_SCHEMA)
        assert table.column("captured_at").to_pylist() == [moment]


class TestArgumentsRoundTrip:
    """H15: {} stays {}, 1 stays a number, "1" stays a string, no invented keys (apache/arrow 9886)."""

    CALLS = [call("ping", {}), call("set", {"v": 1}), call("set", {"v": "1"})]

    def _write(self, tmp_path):
        rows = [{"case_id": "h15", "trial": 0, "observed_calls": self.CALLS}]
        write_partition(tmp_path, "rows", "r1", "run-1", table_from_rows(rows, ROW_SCHEMA))

    def _check(self, stored: list[dict]) -> None:
        assert [c["name"] for c in stored] == ["ping", "set", "set"]
        args = [json.loads(c["args_json"]) for c in stored]
        assert args == [{}, {"v": 1}, {"v": "1"}]
        assert type(args[1]["v"]) is int and type(args[2]["v"]) is str
        assert [sorted(a) for a in args] == [[], ["v"], ["v"]]  # no invented keys
        assert all(c["args_raw"] is None and c["parse_error"] is None for c in stored)

    def test_pyarrow(self, tmp_path):
        self._write(tmp_path)
        self._check(read_table(tmp_path, "rows").column("observed_calls").to_pylist()[0])

    def test_duckdb(self, tmp_path):
        self._write(tmp_path)
        (stored,) = connect(tmp_path).execute("SELECT observed_calls FROM rows").fetchone()
        self._check(stored)
