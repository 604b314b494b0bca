"""The live OpenAI-compatible agent against a real scripted HTTP server on 127.0.0.1 (issue 6).

Covers: tool calls, parallel calls, malformed argument text kept raw, 429 then success, a persistent 500 (that row
errs, the others are fine), timeouts, a 400 (exactly one request), connection errors, a non-completion body, the
concurrency limit, the multi-step loop with a registered Python executor and its max-steps bound.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from tests.support import chat_server as chat
from tooleval.agents import (
    OpenAIAgentConfig,
    ToolExecutor,
    WorkItem,
    generation_digest,
    openai_generate,
    request_id_for,
)
from tooleval.dataset import case_digest
from tooleval.capture.envelope import build_envelope
from tooleval.errors import InputFileError
from tooleval.models import Call, Case, RecordedTrace, ToolSpec, calls_from_messages
from tooleval.versions import tooleval_version


KEY_ENV = "TOOLEVAL_TEST_OPENAI_KEY"
SECRET = "sk-test-secret-123"
TOOLS = [
    ToolSpec(name="get_order", description="Look up an order.", side_effect="read",
             parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
    ToolSpec(name="refund", side_effect="write", family="payments",
             parameters={"type": "object", "properties": {"id": {"type": "string"}, "cents": {"type": "integer"}}}),
]


def make_case(case_id: str) -> Case:
    return Case(case_id=case_id, input=f"question {case_id}",
                expected_calls=[{"name": "get_order", "args": {"id": case_id}}])


def make_items(cases: dict[str, Case], trials: int = 1) -> list[WorkItem]:
    return [WorkItem(case_id=c.case_id, case_digest=case_digest(c), trial=t, seed=1000 + t)
            for c in cases.values() for t in range(trials)]


def make_config(server, **overrides) -> OpenAIAgentConfig:
    settings = {"base_url": server.base_url, "model": "scripted-model", "api_key_env": KEY_ENV,
                "request_timeout_s": 2.0, "max_retries": 2, "backoff_initial_s": 0.01, "backoff_max_s": 0.05}
    return OpenAIAgentConfig(**{**settings, **overrides})


def payload(record: dict) -> dict:
    return json.loads(record["payload_json"])


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture
def serve():
    servers = []

    def start(routes, default=None):
        server = chat.ChatServer(routes, default).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_single_step_tool_call_is_recorded_as_a_trace(serve):
    cases = {"A": make_case("A")}
    server = serve({"question A": [chat.completion(chat.call("get_order", '{"id": "A"}'), response_id="resp-A")]})
    config = make_config(server)
    items = make_items(cases)
    [record] = openai_generate(config, items, cases, TOOLS)

    assert record["error"] is None and (record["case_id"], record["trial"], record["seed"]) == ("A", 0, 1000)
    trace = payload(record)
    RecordedTrace.model_validate(trace)
    assert trace["agent"] == {"name": "openai", "version": tooleval_version(), "model": "scripted-model"}
    assert trace["request_id"] == request_id_for(items[0], generation_digest(config, TOOLS))
    assert trace["request_id"].startswith("tooleval-") and trace["response_id"] == "resp-A"
    assert [m["role"] for m in trace["messages"]] == ["user", "assistant"]
    assert calls_from_messages(trace["messages"]) == [Call.from_raw("get_order", {"id": "A"})]
    meta = trace["metadata"]
    assert (meta["seed"], meta["steps"], meta["stop_reason"]) == (1000, 1, "no_executor")
    assert [(a["step"], a["attempt"], a["status"], a["http_status"]) for a in meta["attempts"]] == [(1, 1, "ok", 200)]
    assert meta["attempts"][0]["provider_request_id"] == "srv-1" and meta["attempts"][0]["elapsed_s"] >= 0

    [seen] = server.requests
    assert seen.headers["x-client-request-id"] == trace["request_id"]
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert (seen.body["model"], seen.body["seed"], seen.body["temperature"]) == ("scripted-model", 1000, 0.0)
    assert seen.body["messages"] == [{"role": "user", "content": "question A"}]
    assert seen.body["tools"][0] == {"type": "function", "function": {
        "name": "get_order", "description": "Look up an order.", "parameters": TOOLS[0].parameters}}
    assert "side_effect" not in json.dumps(seen.body["tools"])
    assert SECRET not in record["payload_json"]


def test_parallel_tool_calls_in_one_message_keep_their_order(serve):
    cases = {"A": make_case("A")}
    reply = chat.completion(chat.call("get_order", '{"id": "A"}', "c1"),
                            chat.call("refund", '{"id": "A", "cents": 5}', "c2"))
    server = serve({"question A": [reply]})
    [record] = openai_generate(make_config(server), make_items(cases), cases, TOOLS)
    calls = calls_from_messages(payload(record)["messages"])
    assert [(c.name, c.args) for c in calls] == [("get_order", {"id": "A"}), ("refund", {"id": "A", "cents": 5})]


def test_malformed_argument_text_is_kept_raw(serve):
    cases = {"B": make_case("B")}
    raw = '{"id": "B"'
    server = serve({"question B": [chat.completion(chat.call("get_order", raw))]})
    [record] = openai_generate(make_config(server), make_items(cases), cases, TOOLS)
    assert record["error"] is None
    trace = payload(record)
    assert trace["messages"][1]["tool_calls"][0]["function"]["arguments"] == raw
    envelope = build_envelope(RecordedTrace.model_validate(trace), "r1", datetime.now(timezone.utc))
    [call] = envelope["model_calls"]
    assert call["args_raw"] == raw and call["parse_error"] is not None and call["args_json"] is None


def test_429_storm_is_ridden_out_with_backoff(serve):
    cases = {"A": make_case("A")}
    storm = [chat.error(429, "slow down", {"retry-after": "0.01"})] * 3
    storm.append(chat.completion(chat.call("get_order", "{}")))
    server = serve({"question A": storm})
    [record] = openai_generate(make_config(server, max_retries=4), make_items(cases), cases, TOOLS)
    assert record["error"] is None and server.count == 4
    attempts = payload(record)["metadata"]["attempts"]
    assert [(a["attempt"], a["status"], a["http_status"]) for a in attempts] == [
        (1, "rate_limited", 429), (2, "rate_limited", 429), (3, "rate_limited", 429), (4, "ok", 200)]
    assert "slow down" in attempts[0]["error"]


def test_persistent_500_errs_that_row_and_the_batch_goes_on(serve):
    cases = {cid: make_case(cid) for cid in ("A", "B", "C")}
    ok = chat.completion(chat.call("get_order", '{"id": "x"}'))
    server = serve({"question A": [ok], "question B": [chat.error(500, "boom")], "question C": [ok]})
    records = openai_generate(make_config(server, max_retries=2, concurrency=2), make_items(cases), cases, TOOLS)
    assert [r["case_id"] for r in records] == ["A", "B", "C"]
    assert records[0]["error"] is None and records[2]["error"] is None
    assert records[1]["error"].startswith("generation_error: server_error after 3 attempt(s): InternalServerError")
    failed = payload(records[1])
    assert [a["status"] for a in failed["metadata"]["attempts"]] == ["server_error"] * 3
    assert failed["messages"] == [{"role": "user", "content": "question B"}] and failed["response_id"] is None
    assert server.count_for("question B") == 3 and server.count == 5


def test_timeouts_are_retried_and_a_persistent_timeout_is_a_row_error(serve):
    cases = {"A": make_case("A"), "B": make_case("B")}
    server = serve({"question A": [chat.completion(delay_s=5.0), chat.completion(content="late but fine")],
                    "question B": [chat.completion(delay_s=5.0)]})
    config = make_config(server, request_timeout_s=0.5, max_retries=1)
    first, second = openai_generate(config, make_items(cases), cases, TOOLS)
    assert first["error"] is None
    assert [a["status"] for a in payload(first)["metadata"]["attempts"]] == ["timeout", "ok"]
    assert payload(first)["metadata"]["attempts"][0]["elapsed_s"] >= 0.45
    assert second["error"].startswith("generation_error: timeout after 2 attempt(s): APITimeoutError")
    assert server.count == 4


def test_400_is_not_retried(serve):
    cases = {"A": make_case("A"), "B": make_case("B")}
    server = serve({"question A": [chat.error(400, "bad tool schema")],
                    "question B": [chat.completion(content="hello")]})
    bad, good = openai_generate(make_config(server, max_retries=5), make_items(cases), cases, TOOLS)
    assert server.count_for("question A") == 1
    assert bad["error"].startswith("generation_error: client_error after 1 attempt(s): BadRequestError")
    assert "bad tool schema" in bad["error"]
    assert payload(bad)["metadata"]["attempts"][0]["http_status"] == 400
    assert good["error"] is None and payload(good)["metadata"]["stop_reason"] == "no_tool_calls"


def test_a_body_that_is_not_a_completion_is_an_error_without_retry(serve):
    cases = {"A": make_case("A")}
    server = serve({"question A": [chat.Reply(200, "<html>gateway</html>")]})
    [record] = openai_generate(make_config(server), make_items(cases), cases, TOOLS)
    assert record["error"].startswith("generation_error: bad_response after 1 attempt(s)") and server.count == 1


def test_connection_errors_are_retried_then_reported(serve):
    cases = {"A": make_case("A")}
    server = serve({})
    server.stop()  # nothing listens on that port any more
    [record] = openai_generate(make_config(server, max_retries=1), make_items(cases), cases, TOOLS)
    assert record["error"].startswith("generation_error: connection_error after 2 attempt(s)")


def test_unknown_case_is_a_row_error_without_a_request(serve):
    server = serve({})
    item = WorkItem(case_id="ghost", case_digest="0" * 64, trial=0, seed=0)
    [record] = openai_generate(make_config(server), [item], {}, TOOLS)
    assert record["error"].startswith("generation_error: bad_input: ") and server.count == 0


def test_multi_step_loop_with_a_registered_python_executor(serve):
    cases = {"A": make_case("A")}
    script = [chat.completion(chat.call("get_order", '{"id": "A"}', "c1"), response_id="r1"),
              chat.completion(chat.call("refund", '{"id": "A", "cents": 9800}', "c2"),
                              chat.call("nope", "{}", "c3"), response_id="r2"),
              chat.completion(content="Refunded.", response_id="r3")]
    server = serve({"question A": script})
    refunds = []
    executor = ToolExecutor()
    executor.register("get_order", lambda id: {"id": id, "total_cents": 9800})
    executor.register("refund", lambda id, cents: refunds.append((id, cents)) or "ok")
    [record] = openai_generate(make_config(server, max_steps=5), make_items(cases), cases, TOOLS, executor=executor)

    assert record["error"] is None and refunds == [("A", 9800)] and server.count == 3
    trace = payload(record)
    assert [m["role"] for m in trace["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "tool",
                                                      "assistant"]
    assert trace["messages"][2] == {"role": "tool", "tool_call_id": "c1",
                                    "content": '{"id": "A", "total_cents": 9800}'}
    assert trace["messages"][5]["content"] == "Error: unknown tool"
    meta = trace["metadata"]
    assert (trace["response_id"], meta["steps"], meta["stop_reason"]) == ("r3", 3, "no_tool_calls")
    assert [(c["name"], c["args"]) for c in trace["executor_calls"]] == [
        ("get_order", '{"id": "A"}'), ("refund", '{"id": "A", "cents": 9800}'), ("nope", "{}")]
    second = server.requests[1].body["messages"]
    assert second[1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"id": "A"}'}}]}
    assert second[2]["role"] == "tool" and len(server.requests[2].body["messages"]) == 6
    assert {s.headers["x-client-request-id"] for s in server.requests} == {trace["request_id"]}


def test_max_steps_bounds_the_loop_and_no_executor_means_one_step(serve):
    cases = {"A": make_case("A")}
    server = serve({"question A": [chat.completion(chat.call("get_order", '{"id": "A"}'))]})  # repeats forever
    executor = ToolExecutor({("get_order", '{"id": "A"}'): {"status": "open"}})
    [record] = openai_generate(make_config(server, max_steps=3), make_items(cases), cases, TOOLS, executor=executor)
    meta = payload(record)["metadata"]
    assert server.count == 3 and (meta["steps"], meta["stop_reason"]) == (3, "max_steps")
    assert [a["step"] for a in meta["attempts"]] == [1, 2, 3]
    [single] = openai_generate(make_config(server, max_steps=3), make_items(cases), cases, TOOLS)
    assert server.count == 4 and payload(single)["metadata"]["stop_reason"] == "no_executor"


def test_concurrency_is_limited_and_records_keep_items_order(serve):
    cases = {f"c{i}": make_case(f"c{i}") for i in range(6)}
    server = serve({f"question c{i}": [chat.completion(content=f"a{i}", delay_s=0.15)] for i in range(6)})
    items = make_items(cases)
    records = openai_generate(make_config(server, concurrency=2), items, cases, TOOLS)
    assert [(r["case_id"], r["trial"]) for r in records] == [(i.case_id, i.trial) for i in items]
    assert all(r["error"] is None for r in records) and server.count == 6
    assert server.max_in_flight in (1, 2)  # the concurrency limit held


def test_missing_api_key_is_a_usage_error_before_any_request(serve, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    cases = {"A": make_case("A")}
    server = serve({})
    with pytest.raises(InputFileError, match=KEY_ENV):
        openai_generate(make_config(server), make_items(cases), cases, TOOLS)
    assert server.count == 0


def test_digests_cover_what_shapes_a_generation_and_never_the_key():
    base = OpenAIAgentConfig(base_url="http://h/v1", model="m")
    assert base.digest() == OpenAIAgentConfig(base_url="http://h/v1", model="m").digest()
    for change in ({"model": "m2"}, {"temperature": 0.7}, {"max_steps": 2}, {"base_url": "http://other/v1"}):
        assert base.model_copy(update=change).digest() != base.digest()
    for change in ({"concurrency": 9}, {"request_timeout_s": 5}, {"max_retries": 0}, {"api_key_env": "OTHER"}):
        assert base.model_copy(update=change).digest() == base.digest()
    assert "api_key" not in base.model_dump() and len(base.digest()) == 64
    with_tools = generation_digest(base, TOOLS)
    assert with_tools != generation_digest(base, TOOLS[:1]) != generation_digest(base, [])
    executor = ToolExecutor({("get_order", '{"id":"A"}'): "x"})
    assert generation_digest(base, TOOLS, executor) != with_tools
    with pytest.raises(ValueError):
        OpenAIAgentConfig(base_url="http://h/v1", model="m", api_key="sk-no")  # the key never enters the config
