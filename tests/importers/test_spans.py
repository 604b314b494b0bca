"""``tooleval import otlp`` / ``openinference``: files written by the real producers (OpenLLMetry and
openinference-instrumentation-openai over the openai SDK, exported by the OpenTelemetry SDK's OTLP JSON file
exporter) against the scripted chat server on 127.0.0.1; hand-written files only for what those producers cannot
write (indexed attributes, gen_ai.choice events, content capture off, Phoenix Parquet, broken files)."""

from __future__ import annotations

import importlib.util
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.importers import read_jsonl, score, write_lines
from tooleval.cli import app
from tooleval.errors import InputFileError
from tooleval.importers import import_openinference, import_otlp

runner = CliRunner()
CASES = 14


def _producers():
    name = "tooleval_tests_span_producers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("span_producers.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> dict[str, Path]:
    """One OTLP JSON-lines file per real producer, and the references file of the plan they ran."""
    producers = _producers()
    folder = tmp_path_factory.mktemp("spans")
    plan = producers.default_plan(CASES)
    styles = ("openllmetry", "openinference")
    with ThreadPoolExecutor(len(styles)) as pool:  # each producer is a child process of its own: both run at once
        paths = pool.map(lambda style: producers.produce(style, folder / f"{style}.jsonl", plan), styles)
        files = dict(zip(styles, paths))
    files["references"] = write_lines(folder / "refs.jsonl", producers.references(plan))
    return files


IMPORTERS = {"openllmetry": import_otlp, "openinference": import_openinference}


@pytest.mark.parametrize("style", ["openllmetry", "openinference"])
class TestRealProducers:
    def test_every_trace_is_one_case_with_its_calls(self, produced, tmp_path, style) -> None:
        report = IMPORTERS[style](produced[style], tmp_path / "ds", references=produced["references"])
        assert (report.read, report.converted, report.skipped_total) == (CASES, CASES, 0)
        assert report.calls == sum(1 + (i % 3 == 0) for i in range(CASES))
        traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "ds" / "traces.jsonl.gz")}
        assert sorted(traces) == sorted(f"case-{i}" for i in range(CASES))
        zero = traces["case-0"]
        calls = [c for m in zero["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            ("get_order", {"order_id": "A-0"}), ("refund", {"order_id": "A-0", "amount_cents": 250})]
        assert [m["role"] for m in zero["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
        spans = zero["metadata"]["spans"]
        assert len(spans["trace_id"]) == 32 and len(spans["model_span_ids"]) == 2 and len(spans["tool_span_ids"]) == 2
        assert zero["response_id"] == "chatcmpl-0-b" and spans["response_ids"] == ["chatcmpl-0-a", "chatcmpl-0-b"]
        assert zero["request"] == {"messages": [{"role": "user", "content": "case-0: please help"}]}
        assert [(c["name"], c["executions"]) for c in zero["executor_calls"]] == [("get_order", 1), ("refund", 1)]

    def test_boundaries_and_failure_owner(self, produced, tmp_path, style) -> None:
        IMPORTERS[style](produced[style], tmp_path / "ds", references=produced["references"])
        rows = {row["case_id"]: row for row in score(tmp_path / "ds")}
        assert rows["case-0"]["exact_match"] and rows["case-0"]["first_divergent_boundary"] is None
        assert rows["case-0"]["provenance_status"] == "ok"
        # the tool span received arguments the model never emitted: the adapter rewrote them
        assert (rows["case-7"]["first_divergent_boundary"], rows["case-7"]["failure_owner"]) == ("adapter", "adapter")
        # the same payload ran twice: an executor retry, not an agent duplicate
        assert (rows["case-11"]["first_divergent_boundary"], rows["case-11"]["failure_owner"]) == (
            "executor", "executor")
        assert rows["case-11"]["duplicate_calls"] == 0

    def test_deterministic(self, produced, tmp_path, style) -> None:
        for out in ("a", "b"):
            IMPORTERS[style](produced[style], tmp_path / out, references=produced["references"], name="d")
        for name in ("dataset.json", "cases.jsonl", "traces.jsonl.gz"):
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_one_document_streams_like_lines(produced, tmp_path) -> None:
    """A pretty-printed single ExportTraceServiceRequest (ijson) gives the same traces as the lines it merges."""
    merged = {"resourceSpans": [rs for line in read_jsonl(produced["openllmetry"]) for rs in line["resourceSpans"]]}
    document = tmp_path / "doc.json"
    document.write_text(json.dumps(merged, indent=2), encoding="utf-8")
    import_otlp(document, tmp_path / "doc", references=produced["references"])
    import_otlp(produced["openllmetry"], tmp_path / "lines", references=produced["references"])
    strip = lambda t: {**t, "metadata": {**t["metadata"], "source": None}}  # noqa: E731
    assert [strip(t) for t in read_jsonl(tmp_path / "doc" / "traces.jsonl.gz")] == [
        strip(t) for t in read_jsonl(tmp_path / "lines" / "traces.jsonl.gz")]


# --- hand-written OTLP: what the producers here cannot write -------------------------------------------------

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _v(value):
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value if isinstance(value, str) else json.dumps(value)}


def span(span_id: str, parent: str | None = None, start: int = 1, trace: str = TRACE, events=(), **attributes):
    record = {"traceId": trace, "spanId": span_id, "name": "s", "startTimeUnixNano": str(start),
              "attributes": [{"key": k.replace("__", "."), "value": _v(v)} for k, v in attributes.items()],
              "events": [{"name": n, "attributes": [{"key": k, "value": _v(v)} for k, v in a.items()]}
                         for n, a in events]}
    if parent:
        record["parentSpanId"] = parent
    return record


def request(*spans) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": _v("svc")}]},
                               "scopeSpans": [{"spans": list(spans)}]}]}


EXPECTED = json.dumps([{"name": "get_order", "args": {"order_id": "A-1"}}])
ROOT = dict(tooleval__case_id="c1", tooleval__expected_calls=EXPECTED)


def _calls(path: Path) -> list[tuple]:
    (trace,) = read_jsonl(path / "traces.jsonl.gz")
    return [(c["function"]["name"], c["function"].get("arguments"), c.get("arguments_captured", True))
            for m in trace["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]


def test_indexed_attributes(tmp_path) -> None:
    """OpenLLMetry before the structured messages: gen_ai.prompt.{i}.* and gen_ai.completion.{i}.tool_calls.{j}.*"""
    model = span("b7ad6b7169203331", "a7ad6b7169203331", 2, **{
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "where is A-1?",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.id": "call_1",
        "gen_ai.completion.0.tool_calls.0.name": "get_order",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"order_id": "A-1"}', "gen_ai.response.id": "chatcmpl-x"})
    src = write_lines(tmp_path / "s.jsonl", [request(span("a7ad6b7169203331", **ROOT)), request(model)])
    report = import_otlp(src, tmp_path / "ds")
    assert (report.converted, report.skipped_total) == (1, 0)
    assert _calls(tmp_path / "ds") == [("get_order", '{"order_id": "A-1"}', True)]
    assert score(tmp_path / "ds")[0]["exact_match"]


def test_choice_events(tmp_path) -> None:
    """Semantic conventions before 1.37: the reply as a gen_ai.choice span event."""
    choice = {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "A-1"}'}}]}}
    model = span("b7ad6b7169203331", "a7ad6b7169203331", 2, gen_ai__operation__name="chat",
                 events=[("gen_ai.user.message", {"content": "where is A-1?"}),
                         ("gen_ai.choice", {"message": json.dumps(choice["message"]), "index": 0})])
    src = write_lines(tmp_path / "s.jsonl", [request(span("a7ad6b7169203331", **ROOT), model)])
    import_otlp(src, tmp_path / "ds")
    assert _calls(tmp_path / "ds") == [("get_order", '{"order_id": "A-1"}', True)]
    (trace,) = read_jsonl(tmp_path / "ds" / "traces.jsonl.gz")
    assert trace["messages"][0] == {"role": "user", "content": "where is A-1?"}


def test_content_capture_off_keeps_names_from_tool_spans(tmp_path) -> None:
    """No messages recorded and no tool arguments: the tool spans name the calls, marked not captured."""
    model = span("b7ad6b7169203331", "a7ad6b7169203331", 2, gen_ai__operation__name="chat")
    tool = span("c7ad6b7169203331", "a7ad6b7169203331", 3, gen_ai__operation__name="execute_tool",
                gen_ai__tool__name="get_order", gen_ai__tool__call__id="call_1")
    src = write_lines(tmp_path / "s.jsonl", [request(span("a7ad6b7169203331", **ROOT), model, tool)])
    import_otlp(src, tmp_path / "ds")
    assert _calls(tmp_path / "ds") == [("get_order", None, False)]
    (trace,) = read_jsonl(tmp_path / "ds" / "traces.jsonl.gz")
    assert trace["metadata"]["model_calls_from_tool_spans"] is True
    assert "executor_calls" not in trace  # the executor's payloads are not known either


def test_bad_input_is_skipped_with_file_and_place(tmp_path) -> None:
    good = request(span("a7ad6b7169203331", **ROOT), span("b7ad6b7169203331", "a7ad6b7169203331", 2, **{
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "1", "name": "get_order", "arguments": {"order_id": "A-1"}}]}])}))
    orphan = request(span("d7ad6b7169203331", "ffffffffffffffff", trace="1" * 32, **ROOT))
    cycle = request(span("e7ad6b7169203331", "f7ad6b7169203331", trace="2" * 32),
                    span("f7ad6b7169203331", "e7ad6b7169203331", trace="2" * 32))
    unknown = request(span("a8ad6b7169203331", trace="3" * 32, **{"gen_ai.completion": "it is in transit"}))
    src = write_lines(tmp_path / "s.jsonl", [good, orphan, "{not json", cycle, {"spans": []}, unknown])
    result = runner.invoke(app, ["import", "otlp", str(src), "--out", str(tmp_path / "ds")], env={"COLUMNS": "250"})
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    for reason, where in [("a span's parent is missing from the trace", "s.jsonl:2"),
                          ("not valid JSON", "s.jsonl:3"), ("the spans' parents form a cycle", "s.jsonl:4"),
                          ("not an OTLP ExportTraceServiceRequest", "s.jsonl:5"),
                          ("a model span in an unknown attribute layout", "s.jsonl:6")]:
        (line,) = [line for line in result.output.splitlines() if reason in line]
        assert where in line, line
    assert "converted 1, skipped 5" in result.output


def test_truncated_document_writes_nothing(produced, tmp_path) -> None:
    text = json.dumps(read_jsonl(produced["openllmetry"])[0], indent=1)
    broken = tmp_path / "cut.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")
    result = runner.invoke(app, ["import", "otlp", str(broken), "--out", str(tmp_path / "ds")])
    assert result.exit_code == 2 and "cut.json" in result.output and "not a complete JSON document" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "ds").exists()
    with pytest.raises(InputFileError):
        import_otlp(broken, tmp_path / "ds")


def test_duplicate_spans_kept_once_and_case_attribute(tmp_path) -> None:
    root = span("a7ad6b7169203331", my__case="x-1", tooleval__expected_calls=EXPECTED)
    model = span("b7ad6b7169203331", "a7ad6b7169203331", 2, **{
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "1", "name": "get_order", "arguments": {"order_id": "A-1"}}]}])})
    src = write_lines(tmp_path / "s.jsonl", [request(root, model), request(model)])
    report = import_otlp(src, tmp_path / "ds", case_attribute="my.case")
    assert report.converted == 1 and "(1 exported twice, kept once)" in report.notes[0]
    assert [t["case_id"] for t in read_jsonl(tmp_path / "ds" / "traces.jsonl.gz")] == ["x-1"]


def test_phoenix_parquet(tmp_path) -> None:
    """Phoenix's spans dataframe nests OpenInference's keys; read back as the flattened layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"context.trace_id": TRACE, "context.span_id": "a7ad6b7169203331", "parent_id": None, "name": "agent",
         "span_kind": "CHAIN", "start_time": 1, "attributes.session": {"id": "c1"},
         "attributes.tooleval": {"expected_calls": EXPECTED}, "attributes.llm": None},
        {"context.trace_id": TRACE, "context.span_id": "b7ad6b7169203331", "parent_id": "a7ad6b7169203331",
         "name": "ChatCompletion", "span_kind": "LLM", "start_time": 2, "attributes.session": None,
         "attributes.tooleval": None,
         "attributes.llm": {"output_messages": [{"message": {"role": "assistant", "tool_calls": [{"tool_call": {
             "id": "1", "function": {"name": "get_order", "arguments": '{"order_id": "A-1"}'}}}]}}]}},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "spans.parquet")
    report = import_openinference(tmp_path / "spans.parquet", tmp_path / "ds")
    assert (report.converted, report.skipped_total) == (1, 0)
    assert score(tmp_path / "ds")[0]["exact_match"]
