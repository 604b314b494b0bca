"""Span files written by the real producers, driven against the scripted chat server on 127.0.0.1.

* ``openllmetry``: opentelemetry-instrumentation-openai (OpenLLMetry) over the openai SDK; its current releases
  write the structured GenAI messages (``gen_ai.input.messages`` / ``gen_ai.output.messages``).
* ``openinference``: openinference-instrumentation-openai over the openai SDK (flattened ``llm.*_messages``), with
  OpenInference's own ``using_session`` and TOOL spans from its ``OITracer``.
* ``openllmetry-nocontent``: OpenLLMetry with content capture off (``TRACELOOP_TRACE_CONTENT=false``), and
  ``execute_tool`` spans without ``gen_ai.tool.call.arguments`` (opt-in in the GenAI conventions): what a team
  that does not record prompts and arguments has on disk.

Each agent run is one trace: a root ``agent`` span naming its case, a model call that asks for tools, one tool
span per call (an ``execute_tool`` GenAI span or an OpenInference TOOL span, as an application writes them with
the SDK), and a second model call that sees the tool results. The OpenTelemetry SDK exports every span with the
OTLP JSON file exporter (one ``ExportTraceServiceRequest`` a line).

Loaded by path (tests and ``bench/make_span_traces.py``), like the chat server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _chat_server():
    name = "tooleval_tests_chat_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _HERE.parent / "support" / "chat_server.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@dataclass
class Plan:
    """What each case's agent run does: ``calls[i]`` = the (name, arguments text) the model emits for case i."""

    calls: list[list[tuple[str, str]]]
    corrupt: dict[int, str] = field(default_factory=dict)
    """case index -> arguments text the tool span records instead of the model's (an adapter that rewrote it)."""
    retried: set[int] = field(default_factory=set)
    """case indexes whose first tool runs twice (an executor retry)."""


def default_plan(n: int) -> Plan:
    """n cases: each asks for a refund lookup, every third also a second call; case 7 has a corrupted tool span,
    case 11 a retried one."""
    calls = []
    for i in range(n):
        first = [("get_order", json.dumps({"order_id": f"A-{i}"}))]
        if i % 3 == 0:
            first.append(("refund", json.dumps({"order_id": f"A-{i}", "amount_cents": 250 + i})))
        calls.append(first)
    return Plan(calls, corrupt={7: json.dumps({"order_id": "A-7", "amount_cents": 9999})} if n > 7 else {},
                retried={11} if n > 11 else set())


def references(plan: Plan) -> list[dict]:
    """Case lines for ``--references``: each case expects exactly what its model emits."""
    return [{"case_id": f"case-{i}", "input": f"case-{i}: please help",
             "expected_calls": [{"name": n, "args": json.loads(a)} for n, a in calls]}
            for i, calls in enumerate(plan.calls)]


def produce(style: str, path: Path, plan: Plan) -> Path:
    """Run every case of ``plan`` through the real instrumentation of ``style``; write OTLP JSON lines to ``path``.

    Runs in a child process: an instrumentor patches the openai module for the whole process, and one left behind
    (uninstrumenting does not remove every wrapper) would open spans that the next producer's spans hang under.

    Args:
        style: ``openllmetry`` or ``openinference``.
        path: The OTLP JSON-lines file to write (appended, as the exporter does).
        plan: What each case's model emits.

    Raises:
        subprocess.CalledProcessError: The producer failed (its output is in the exception).
    """
    plan_file = Path(str(path) + ".plan.json")
    plan_file.write_text(json.dumps({"calls": plan.calls, "corrupt": plan.corrupt, "retried": sorted(plan.retried)}))
    try:
        subprocess.run([sys.executable, __file__, style, str(path), str(plan_file)], check=True,
                       capture_output=True, text=True, timeout=1800)
    finally:
        plan_file.unlink()
    return path


def _produce_here(style: str, path: Path, plan: Plan) -> Path:
    import openai
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    cs = _chat_server()
    cs.MAX_REQUESTS = max(cs.MAX_REQUESTS, 4 * len(plan.calls) + 10)
    routes = {}
    for i, calls in enumerate(plan.calls):
        emitted = [cs.call(name, arguments, f"call_{i}_{j}") for j, (name, arguments) in enumerate(calls)]
        routes[f"case-{i}: please help"] = [cs.completion(*emitted, response_id=f"chatcmpl-{i}-a"),
                                            cs.completion(content="done", response_id=f"chatcmpl-{i}-b")]
    stream = open(path, "a", encoding="utf-8")
    provider = TracerProvider(resource=Resource.create({"service.name": f"{style}-agent"}))
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(stream=stream), max_export_batch_size=64))
    with warnings.catch_warnings():
        # OpenLLMetry 0.62 declares a pydantic model with a class-based Config, deprecated since pydantic 2.0; the
        # producer is third-party code under test, so the deprecation is its own and does not fail our tests.
        warnings.filterwarnings("ignore", "Support for class-based `config` is deprecated", DeprecationWarning)
        if style.startswith("openllmetry"):
            os.environ["TRACELOOP_TRACE_CONTENT"] = "false" if style.endswith("-nocontent") else "true"
            from opentelemetry.instrumentation.openai import OpenAIInstrumentor
        else:
            from openinference.instrumentation.openai import OpenAIInstrumentor
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
    try:
        with cs.ChatServer(routes) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
            for i in range(len(plan.calls)):
                _run_case(style, provider, client, i, plan)
        provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        stream.close()
    return path


def _run_case(style: str, provider, client, i: int, plan: Plan) -> None:
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("get_order", "refund")]
    messages = [{"role": "user", "content": f"case-{i}: please help"}]
    if style == "openinference":
        from openinference.instrumentation import OITracer, TraceConfig, using_session

        tracer = OITracer(provider.get_tracer("agent"), config=TraceConfig())
        session = using_session(f"case-{i}")
    else:
        from contextlib import nullcontext

        tracer = provider.get_tracer("agent")
        session = nullcontext()
    with session, tracer.start_as_current_span("agent") as root:
        if style.startswith("openllmetry"):
            root.set_attribute("session.id", f"case-{i}")
        reply = client.chat.completions.create(model="scripted", messages=messages, tools=tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for j, call in enumerate(message.tool_calls or []):
            arguments = plan.corrupt.get(i, call.function.arguments) if j == len(message.tool_calls) - 1 \
                else call.function.arguments
            for _ in range(2 if (i in plan.retried and j == 0) else 1):
                _tool_span(style, tracer, call.function.name, call.id, arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
        client.chat.completions.create(model="scripted", messages=messages, tools=tools)


def _tool_span(style: str, tracer, name: str, call_id: str, arguments: str) -> None:
    if style == "openinference":
        with tracer.start_as_current_span(name, openinference_span_kind="tool") as span:
            span.set_tool(name=name, parameters={"type": "object"})
            span.set_attribute("tool.id", call_id)
            span.set_input(arguments, mime_type="application/json")
            span.set_output("ok")
    else:
        with tracer.start_as_current_span(f"execute_tool {name}") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", name)
            span.set_attribute("gen_ai.tool.call.id", call_id)
            if not style.endswith("-nocontent"):
                span.set_attribute("gen_ai.tool.call.arguments", arguments)


if __name__ == "__main__":
    _style, _path, _plan = sys.argv[1:4]
    _raw = json.loads(Path(_plan).read_text())
    _produce_here(_style, Path(_path), Plan([[tuple(c) for c in calls] for calls in _raw["calls"]],
                                            {int(k): v for k, v in _raw["corrupt"].items()}, set(_raw["retried"])))
