"""openinference importer on Phoenix span exports: the v1 spans Phoenix's client and REST API return
(``context``, ``span_kind``, flat ``attributes``), written by arize-phoenix-client 3.5's own span builder (its ATIF
converter emits exactly the spans it uploads), saved as a JSON list, a pretty-printed list, the REST response body
and JSON lines; and the fix line of a file in no span shape, which must not send the user to --references."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from phoenix.client.helpers.atif import _convert_atif_trajectories_to_spans

from tests.support.importers import read_jsonl, score
from tooleval.errors import InputFileError
from tooleval.importers import import_openinference

ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}


def _trajectory(session: str, order_id: str) -> dict:
    return {"schema_version": "ATIF-v1.4", "session_id": session,
            "agent": {"name": "support", "version": "1.0", "model_name": "gpt-4o"},
            "steps": [{"step_id": 1, "source": "user", "message": "Where is A-104?"},
                      {"step_id": 2, "source": "agent", "model_name": "gpt-4o", "message": "Checking.",
                       "timestamp": "2026-01-01T00:00:01Z",
                       "tool_calls": [{"tool_call_id": "c1", "function_name": "get_order",
                                       "arguments": {"order_id": order_id}}],
                       "observation": {"results": [{"source_call_id": "c1", "content": "shipped"}]}},
                      {"step_id": 3, "source": "agent", "model_name": "gpt-4o", "message": "It shipped.",
                       "timestamp": "2026-01-01T00:00:02Z"}]}


@pytest.fixture(scope="module")
def phoenix_spans() -> list[dict]:
    spans = _convert_atif_trajectories_to_spans([_trajectory("s-right", "A-104"), _trajectory("s-wrong", "B-7")])
    return json.loads(json.dumps(spans))  # as the REST API sends them


def _refs(tmp_path: Path) -> Path:
    path = tmp_path / "refs.jsonl"
    path.write_text("".join(json.dumps({"case_id": c, "input": "Where is A-104?", "expected_calls": [ORDER]}) + "\n"
                            for c in ("s-right", "s-wrong")))
    return path


@pytest.mark.parametrize("shape", ["list", "pretty list", "response body", "json lines"])
def test_a_phoenix_span_export_is_imported_and_scored(tmp_path: Path, phoenix_spans: list[dict], shape: str) -> None:
    src = tmp_path / ("spans.jsonl" if shape == "json lines" else "spans.json")
    if shape == "list":
        src.write_text(json.dumps(phoenix_spans))
    elif shape == "pretty list":
        src.write_text(json.dumps(phoenix_spans, indent=2))
    elif shape == "response body":
        src.write_text(json.dumps({"data": phoenix_spans, "next_cursor": None}, indent=2))
    else:
        src.write_text("".join(json.dumps(span) + "\n" for span in phoenix_spans))
    report = import_openinference(src, tmp_path / "out", references=_refs(tmp_path))
    assert (report.read, report.converted, report.skipped_total, report.calls) == (2, 2, 0, 2)
    assert report.notes[0].startswith(f"{len(phoenix_spans)} spans read")
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    assert traces["s-right"]["metadata"]["spans"]["trace_id"] == phoenix_spans[0]["context"]["trace_id"]
    assert traces["s-right"]["executor_calls"][0]["name"] == "get_order"
    rows = {r["case_id"]: r for r in score(tmp_path / "out")}
    assert (rows["s-right"]["exact_match"], rows["s-wrong"]["exact_match"]) == (True, False)
    assert (rows["s-wrong"]["fp"], rows["s-wrong"]["fn"]) == (1, 1)


def test_a_bad_phoenix_span_is_skipped_with_its_place(tmp_path: Path, phoenix_spans: list[dict]) -> None:
    broken = [*phoenix_spans, {"name": "x", "span_kind": "LLM"}, {**phoenix_spans[0], "start_time": "yesterday"}]
    src = tmp_path / "spans.jsonl"
    src.write_text("".join(json.dumps(span) + "\n" for span in broken))
    report = import_openinference(src, tmp_path / "out", references=_refs(tmp_path))
    assert report.converted == 2
    assert report.skipped == {"not an OTLP ExportTraceServiceRequest or a Phoenix span (no resourceSpans list, no "
                              "context)": 1,
                              "a Phoenix span's start_time is not an ISO 8601 time": 1}
    assert report.examples["a Phoenix span's start_time is not an ISO 8601 time"] == [f"spans.jsonl:{len(broken)}"]


def test_a_file_in_no_span_shape_names_the_shapes_not_references(tmp_path: Path) -> None:
    src = tmp_path / "spans.json"
    src.write_text(json.dumps({"traces": []}))
    with pytest.raises(InputFileError) as info:
        import_openinference(src, tmp_path / "out")
    message = str(info.value)
    assert "spans.json" in message and "Phoenix spans" in message and "--references" not in message
    assert not (tmp_path / "out").exists()


def test_a_truncated_phoenix_list_stops_the_import(tmp_path: Path, phoenix_spans: list[dict]) -> None:
    src = tmp_path / "spans.json"
    src.write_text(json.dumps(phoenix_spans, indent=2)[:-200])
    with pytest.raises(InputFileError, match="not a complete JSON document"):
        import_openinference(src, tmp_path / "out", references=_refs(tmp_path))
    assert not (tmp_path / "out").exists()
