"""OpenInference spans (Arize Phoenix, openinference-instrumentation-*) -> model steps and tool runs.

* **LLM spans** (``openinference.span.kind = LLM``): flattened messages
  ``llm.{input,output}_messages.{i}.message.{role,content,tool_call_id}``, text blocks
  ``message.contents.{k}.message_content.text``, and calls
  ``message.tool_calls.{j}.tool_call.{id,function.name,function.arguments}`` (arguments as JSON text). The
  response id is the ``id`` of ``output.value`` when that is the provider's JSON response.
* **TOOL spans** (``openinference.span.kind = TOOL``): ``tool.name`` (else the span name), the arguments the
  tool received as ``input.value`` (else ``tool.parameters``), and ``tool.id`` / ``tool_call.id`` / ``message.
  tool_call_id`` as the call id.

Other span kinds (CHAIN, AGENT, RETRIEVER, ...) are structure, not calls, and are ignored. An LLM span with no
messages (inputs and outputs hidden by the tracer's ``TraceConfig``) is a step with no output.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tooleval.importers._span_source import Span
from tooleval.importers._trajectory import ABSENT, ModelStep, ToolRun, UnknownLayout, chat_call

__all__ = ["read_span"]

_MESSAGE = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)")
_CALL = re.compile(r"tool_calls\.(\d+)\.tool_call\.(.+)")
_BLOCK = re.compile(r"contents\.(\d+)\.message_content\.(.+)")


def _message(fields: dict[str, Any]) -> dict[str, Any]:
    calls: dict[int, dict[str, Any]] = {}
    blocks: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        if match := _CALL.fullmatch(key):
            calls.setdefault(int(match[1]), {})[match[2]] = value
        elif match := _BLOCK.fullmatch(key):
            blocks.setdefault(int(match[1]), {})[match[2]] = value
    content = fields.get("content")
    if content is None and blocks:
        content = "\n".join(str(b["text"]) for _, b in sorted(blocks.items()) if b.get("type", "text") == "text"
                            and "text" in b)
    out: dict[str, Any] = {"role": fields.get("role"), "content": content}
    if calls:
        out["tool_calls"] = [chat_call(c.get("id"), c.get("function.name"), c.get("function.arguments", ABSENT))
                             for _, c in sorted(calls.items())]
        if any(c["function"]["name"] is None for c in out["tool_calls"]):
            raise UnknownLayout("an OpenInference tool call without function.name")
    if fields.get("tool_call_id") is not None:
        out["tool_call_id"] = fields["tool_call_id"]
    return out


def _response_id(attributes: dict[str, Any]) -> str | None:
    output = attributes.get("output.value")
    if not isinstance(output, str) or not output.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(output)
    except ValueError:
        return None
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def read_span(span: Span) -> ModelStep | ToolRun | None:
    """Read one span: a :class:`ModelStep` (LLM), a :class:`ToolRun` (TOOL), or ``None`` (any other kind).

    Raises:
        UnknownLayout: An LLM span whose tool calls lack ``function.name``.
    """
    attributes = span.attributes
    kind = str(attributes.get("openinference.span.kind") or "").upper()
    if kind == "TOOL":
        arguments = attributes.get("input.value", attributes.get("tool.parameters", ABSENT))
        call_id = next((attributes[k] for k in ("tool.id", "tool_call.id", "message.tool_call_id")
                        if attributes.get(k) is not None), None)
        return ToolRun(span.span_id, span.start_ns, str(attributes.get("tool.name") or span.name),
                       None if arguments is ABSENT else arguments, call_id, captured=arguments is not ABSENT)
    if kind != "LLM":
        return None
    sides: dict[str, dict[int, dict[str, Any]]] = {"input": {}, "output": {}}
    for key, value in attributes.items():
        if match := _MESSAGE.fullmatch(key):
            sides[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    inputs = [_message(f) for _, f in sorted(sides["input"].items())]
    outputs = [_message(f) for _, f in sorted(sides["output"].items())]
    for message in outputs:
        message["role"] = message.get("role") or "assistant"
    model = attributes.get("llm.model_name")
    return ModelStep(span.span_id, span.start_ns, inputs, outputs, _response_id(attributes),
                     model if isinstance(model, str) else None)
