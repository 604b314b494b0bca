"""An Inspect AI ``.eval`` log written by inspect_ai itself: a real task (dataset, ``use_tools`` + ``generate``,
the ``includes`` scorer) run by ``eval()`` against the scripted ``mockllm/model``, whose outputs call real
``@tool`` functions that Inspect executes.

Run as a child process (``produce(log_dir, truth_path)``): importing inspect_ai patches the standard library's
``zipfile`` (its ``zipfile_zstd`` dependency teaches it Zstandard), so the tests' own process never imports it and
the importer is tested on the log as a plain Python reads it. Besides the log it writes ``truth``: Inspect's own
reading of the log (``read_eval_log``): the eval's ids and, per sample and epoch, its uuid, the tool calls the
assistant made and the score, so the tests compare the importer's provenance with Inspect's view.

The samples (each run for two epochs; the script answers from the conversation, so epochs and the order Inspect runs
samples in do not change what the model says):

* ``1``: ``Where is A-104?`` - one call ``get_order {"order_id": "A-104"}``, executed (``shipped``); the answer
  ``It shipped.`` contains the target: ``includes`` grades ``C``.
* ``two``: ``Where is B-7?`` - the model asks for ``B-8``; the tool raises ``ToolError`` (a tool error in the log);
  the answer ``I could not find it.`` grades ``I``.
* ``3``: ``Refund A-104.`` - two parallel calls, ``get_order`` right and ``refund`` whose arguments the model
  garbled (Inspect records the ``parse_error`` and the empty arguments beside it, and answers it with a parsing
  error instead of running the tool); the answer ``Refund refused.`` grades ``I``.

Every scripted output carries its own token usage: without one, mockllm counts tokens with tiktoken, whose encoding
is a download this machine cannot make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EPOCHS = 2
EXPECTED = {
    "1": [{"name": "get_order", "args": {"order_id": "A-104"}}],
    "two": [{"name": "get_order", "args": {"order_id": "B-7"}}],
    "3": [{"name": "get_order", "args": {"order_id": "A-104"}},
          {"name": "refund", "args": {"order_id": "A-104", "amount_cents": 2500}}],
}
"""sample id -> the calls its case expects (the samples' ``expected_calls`` metadata)."""

GARBLED = '{"order_id": "A-104", "amount_cents": 25'
"""The refund arguments the model of sample ``3`` emits: cut-off JSON."""


def produce(log_dir: Path, truth: Path) -> Path:
    """Write the log into ``log_dir`` and Inspect's reading of it to ``truth``; return the log's path.

    Raises:
        subprocess.CalledProcessError: inspect_ai failed (its output is in the exception).
    """
    home = truth.parent / "inspect-home"
    # Inspect's data and cache folders (platformdirs) go under the test's folder, never the user's home.
    env = {**os.environ, "XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_CONFIG_HOME": str(home / "config"), "INSPECT_DISPLAY": "none", "DO_NOT_TRACK": "1"}
    subprocess.run([sys.executable, __file__, str(log_dir), str(truth)], check=True, capture_output=True, text=True,
                   timeout=600, env=env, cwd=truth.parent)
    return Path(json.loads(truth.read_text())["log"])


def _produce_here(log_dir: Path, truth: Path) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import (ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage, get_model)
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import ToolCall, ToolError, tool

    @tool
    def get_order():
        async def execute(order_id: str) -> str:
            """Look an order up.

            Args:
                order_id: The order's id.
            """
            if order_id == "A-104":
                return "shipped"
            raise ToolError(f"no order {order_id}")

        return execute

    @tool
    def refund():
        async def execute(order_id: str, amount_cents: int) -> str:
            """Refund an order.

            Args:
                order_id: The order's id.
                amount_cents: The amount to refund, in cents.
            """
            return f"refunded {amount_cents} on {order_id}"

        return execute

    def calls(*tool_calls: ToolCall) -> ModelOutput:
        message = ChatMessageAssistant(content="", tool_calls=list(tool_calls), model="mockllm/model",
                                       source="generate")
        return ModelOutput(model="mockllm/model",
                           choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")])

    def answer(text: str) -> ModelOutput:
        return ModelOutput.from_content("mockllm/model", text)

    def script(messages, tools, tool_choice, config) -> ModelOutput:
        question = messages[0].text
        if messages[-1].role == "tool":
            output = answer({"Where is A-104?": "It shipped.", "Where is B-7?": "I could not find it.",
                             "Refund A-104.": "Refund refused."}[question])
        elif question == "Where is A-104?":
            output = ModelOutput.for_tool_call("mockllm/model", "get_order", {"order_id": "A-104"},
                                               tool_call_id="call_1")
        elif question == "Where is B-7?":
            output = ModelOutput.for_tool_call("mockllm/model", "get_order", {"order_id": "B-8"},
                                               tool_call_id="call_1")
        else:
            output = calls(ToolCall(id="call_1", function="get_order", arguments={"order_id": "A-104"}),
                           ToolCall(id="call_2", function="refund", arguments={},
                                    parse_error=f"Expecting ',' delimiter: {GARBLED}"))
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    task = Task(name="orders",
                dataset=[Sample(id=1, input="Where is A-104?", target="shipped",
                                metadata={"expected_calls": EXPECTED["1"]}),
                         Sample(id="two", input="Where is B-7?", target="shipped",
                                metadata={"expected_calls": EXPECTED["two"]}),
                         Sample(id=3, input="Refund A-104.", target="refunded",
                                metadata={"expected_calls": EXPECTED["3"]})],
                solver=[use_tools(get_order(), refund()), generate()], scorer=includes())
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=script), log_dir=str(log_dir),
                 log_format="eval", display="none", epochs=EPOCHS)
    if log.status != "success":
        raise SystemExit(f"the eval ended {log.status}: {log.error}")
    read = read_eval_log(log.location)
    samples = {f"{s.id}/{s.epoch}": {"uuid": s.uuid, "score": next(iter(s.scores.values())).value,
                                     "calls": [{"id": c.id, "function": c.function, "arguments": c.arguments,
                                                "parse_error": c.parse_error}
                                               for m in s.messages if m.role == "assistant"
                                               for c in m.tool_calls or []]}
               for s in read.samples or []}
    truth.write_text(json.dumps({"log": log.location, "task": read.eval.task, "run_id": read.eval.run_id,
                                 "eval_id": read.eval.eval_id, "model": read.eval.model, "samples": samples}))


if __name__ == "__main__":
    _produce_here(Path(sys.argv[1]), Path(sys.argv[2]))
