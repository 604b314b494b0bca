"""MLflow stores written by MLflow itself: ``mlflow.openai.autolog()`` over the openai SDK against the scripted chat
server, tools traced with ``@mlflow.trace(span_type="TOOL")``, feedback logged with ``mlflow.log_feedback``.

Run as a child process (``produce(store_uri, truth_path)``): autologging patches the openai module and MLflow sets
its tracer for the whole process. Besides the store it writes ``truth``: for each case, the trace id and the span
ids and types as MLflow's own client reads them back (``mlflow.get_trace``), so the tests compare the importer's
provenance with MLflow's view, not with the importer's own reading.

The cases (each one agent run = one MLflow trace, named by a ``tooleval.case_id`` trace tag):

* ``case-0``: one call ``get_order {"order_id": "A-0"}``, executed; session ``s-0``; feedback ``correct = 1.0``.
* ``case-1``: two parallel calls (``get_order`` and ``refund``), both executed; an LLM judge's feedback ``"no"``.
* ``case-2``: one call with malformed arguments (``{"order_id": "A-2"``): the agent cannot parse it, runs nothing.
* ``case-3``: one call, executed in a TOOL span opened by ``mlflow.start_span`` whose inputs were never set (the
  executor's arguments not captured).
* ``no-model``: an AGENT span with a TOOL span and no model call (skipped by the importer: no model span).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent

CALLS = {
    "case-0": [("get_order", '{"order_id": "A-0"}')],
    "case-1": [("get_order", '{"order_id": "A-1"}'), ("refund", '{"order_id": "A-1", "amount_cents": 251}')],
    "case-2": [("get_order", '{"order_id": "A-2"')],
    "case-3": [("get_order", '{"order_id": "A-3"}')],
}
"""case -> the (name, arguments text) the scripted model emits."""


def produce(store_uri: str, truth: Path) -> Path:
    """Write the cases above into the MLflow store at ``store_uri`` (``sqlite:///...`` or ``file:///...mlruns``).

    Raises:
        subprocess.CalledProcessError: MLflow failed (its output is in the exception).
    """
    env = {**os.environ, "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false", "MLFLOW_ALLOW_FILE_STORE": "true",
           "MLFLOW_TRACKING_URI": store_uri, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    subprocess.run([sys.executable, __file__, store_uri, str(truth)], check=True, capture_output=True, text=True,
                   timeout=600, env=env, cwd=truth.parent)
    return truth


def _chat_server():
    spec = importlib.util.spec_from_file_location("tooleval_tests_chat_server_mlflow",
                                                  _HERE.parent / "support" / "chat_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _produce_here(store_uri: str, truth: Path) -> None:
    import mlflow
    import openai
    from mlflow.entities import AssessmentSource

    cs = _chat_server()
    mlflow.set_tracking_uri(store_uri)
    mlflow.set_experiment("support-agent")
    mlflow.openai.autolog()
    routes = {}
    for case, calls in CALLS.items():
        emitted = [cs.call(name, arguments, f"call_{case}_{j}") for j, (name, arguments) in enumerate(calls)]
        routes[f"{case}: please help"] = [cs.completion(*emitted, response_id=f"chatcmpl-{case}-a"),
                                          cs.completion(content="done", response_id=f"chatcmpl-{case}-b")]
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("get_order", "refund")]

    @mlflow.trace(span_type="TOOL")
    def get_order(order_id: str) -> dict:
        return {"order_id": order_id, "status": "shipped"}

    @mlflow.trace(span_type="TOOL")
    def refund(order_id: str, amount_cents: int) -> dict:
        return {"refunded": amount_cents}

    def run(client, case: str) -> str:
        @mlflow.trace(span_type="AGENT", name="support_agent")
        def agent(question: str) -> str:
            mlflow.update_current_trace(tags={"tooleval.case_id": case},
                                        metadata={"mlflow.trace.session": "s-0"} if case == "case-0" else None)
            messages = [{"role": "user", "content": question}]
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                try:
                    arguments = json.loads(call.function.arguments)
                except ValueError:
                    return "the model's arguments were not JSON"
                if case == "case-3":  # an executor span that records no inputs
                    with mlflow.start_span(name=call.function.name, span_type="TOOL") as span:
                        result = get_order.__wrapped__(**arguments)
                        span.set_outputs(result)
                else:
                    result = {"get_order": get_order, "refund": refund}[call.function.name](**arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
            return client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                                  tools=tools).choices[0].message.content

        agent(f"{case}: please help")
        return mlflow.get_last_active_trace_id()

    @mlflow.trace(span_type="AGENT", name="support_agent")
    def no_model() -> dict:
        mlflow.update_current_trace(tags={"tooleval.case_id": "no-model"})
        return get_order("A-9")

    found = {}
    with cs.ChatServer(routes) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        for case in CALLS:
            found[case] = run(client, case)
    no_model()
    found["no-model"] = mlflow.get_last_active_trace_id()
    mlflow.log_feedback(trace_id=found["case-0"], name="correct", value=1.0,
                        source=AssessmentSource(source_type="HUMAN", source_id="reviewer"))
    mlflow.log_feedback(trace_id=found["case-1"], name="tool_use_ok", value="no",
                        source=AssessmentSource(source_type="LLM_JUDGE", source_id="judge"))
    out = {}
    for case, trace_id in found.items():
        trace = mlflow.get_trace(trace_id)
        out[case] = {"trace_id": trace_id,
                     "spans": [{"span_id": s.span_id, "parent_id": s.parent_id, "type": s.span_type,
                                "start_ns": s.start_time_ns} for s in trace.data.spans]}
    truth.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    _produce_here(sys.argv[1], Path(sys.argv[2]))
