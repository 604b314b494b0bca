"""OpenTelemetry GenAI spans -> model steps and tool runs (the ``otlp`` format).

Model spans are read in whichever of the three layouts GenAI instrumentations have written:

* **Structured messages** (semantic conventions 1.37+; OpenLLMetry 0.5x+, the official instrumentations):
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON text (or arrays), each message
  ``{"role", "parts": [...]}`` with ``text``, ``tool_call`` (``id``, ``name``, ``arguments`` as an object or
  text) and ``tool_call_response`` parts; ``gen_ai.system_instructions`` becomes a leading system message.
* **Indexed attributes** (OpenLLMetry before the structured messages): ``gen_ai.prompt.{i}.{role,content,
  tool_call_id}``, ``gen_ai.prompt.{i}.tool_calls.{j}.{id,name,arguments}``, ``gen_ai.completion.{i}.*`` likewise
  and the legacy ``gen_ai.completion.{i}.function_call.{name,arguments}``.
* **Events** (semantic conventions before 1.37): span events ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice`` (``message`` as an object or JSON
  text, with ``tool_calls[].function.{name,arguments}``), and the oldest ``gen_ai.content.prompt`` /
  ``gen_ai.content.completion`` events carrying ``gen_ai.prompt`` / ``gen_ai.completion`` JSON text.

A span is a model span when its ``gen_ai.operation.name`` is a model operation (``chat``, ``text_completion``,
``generate_content``) or when it carries any of those layouts. A model span whose content was not captured
(no messages in any layout) is a step with no output: see ``docs/importers.md`` "otlp". Tool runs are spans with
``gen_ai.operation.name = execute_tool``: ``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and
``gen_ai.tool.call.arguments`` (opt-in since 1.38; absent means not captured).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tooleval.importers._span_source import Span
from tooleval.importers._trajectory import ABSENT, ModelStep, ToolRun, UnknownLayout, chat_call

__all__ = ["read_span"]

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_INDEXED = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")
_INDEXED_CALL = re.compile(r"tool_calls\.(\d+)\.(.+)")
_ROLE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise UnknownLayout("GenAI messages that are not JSON") from exc
    return value


def _structured_message(message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or not isinstance(message.get("parts", []), list):
        raise UnknownLayout("gen_ai messages that are not {role, parts} objects")
    role = message.get("role")
    texts, calls, results = [], [], []
    for part in message.get("parts", []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            calls.append(chat_call(part.get("id"), part.get("name"), part.get("arguments", ABSENT)))
        elif kind == "tool_call_response":
            results.append({"role": "tool", "tool_call_id": part.get("id"),
                            "content": _text(part.get("response", part.get("result")))})
    if role == "tool":
        return results or [{"role": "tool", "content": "\n".join(texts)}]
    out: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return [out, *results]


def _text(value: Any) -> Any:
    return value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False)


def _structured(attributes: dict[str, Any]) -> tuple[list, list] | None:
    if "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes:
        return None
    inputs: list[dict[str, Any]] = []
    system = attributes.get("gen_ai.system_instructions")
    if system is not None:
        parts = _json(system)
        texts = [p.get("content", "") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else [parts]
        inputs.append({"role": "system", "content": "\n".join(map(str, texts))})
    for message in _json(attributes.get("gen_ai.input.messages")) or []:
        inputs.extend(_structured_message(message))
    outputs: list[dict[str, Any]] = []
    for message in _json(attributes.get("gen_ai.output.messages")) or []:
        outputs.extend(_structured_message({**message, "role": message.get("role") or "assistant"}
                                           if isinstance(message, dict) else message))
    return inputs, outputs


def _indexed(attributes: dict[str, Any]) -> tuple[list, list] | None:
    sides: dict[str, dict[int, dict[str, Any]]] = {"prompt": {}, "completion": {}}
    for key, value in attributes.items():
        match = _INDEXED.fullmatch(key)
        if match:
            sides[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    if not sides["prompt"] and not sides["completion"]:
        return None

    def message(fields: dict[str, Any], default_role: str) -> dict[str, Any]:
        out: dict[str, Any] = {"role": fields.get("role", default_role), "content": fields.get("content")}
        calls: dict[int, dict[str, Any]] = {}
        for key, value in fields.items():
            match = _INDEXED_CALL.fullmatch(key)
            if match:
                calls.setdefault(int(match[1]), {})[match[2]] = value
        tool_calls = [chat_call(c.get("id"), c.get("name"), c.get("arguments", ABSENT))
                      for _, c in sorted(calls.items())]
        if "function_call.name" in fields:
            tool_calls.append(chat_call(None, fields["function_call.name"],
                                        fields.get("function_call.arguments", ABSENT)))
        if tool_calls:
            out["tool_calls"] = tool_calls
        if "tool_call_id" in fields:
            out["tool_call_id"] = fields["tool_call_id"]
        return out

    return ([message(f, "user") for _, f in sorted(sides["prompt"].items())],
            [message(f, "assistant") for _, f in sorted(sides["completion"].items())])


def _event_message(role: str, attributes: dict[str, Any]) -> dict[str, Any]:
    body = _json(attributes.get("message", attributes.get("gen_ai.event.content", attributes)))
    if not isinstance(body, dict):
        raise UnknownLayout("a gen_ai event whose message is not an object")
    out: dict[str, Any] = {"role": body.get("role") or role, "content": _text(body.get("content"))}
    calls = _json(body.get("tool_calls")) or []
    if calls:
        out["tool_calls"] = [chat_call(c.get("id"), (c.get("function") or {}).get("name"),
                                       (c.get("function") or {}).get("arguments", ABSENT)) for c in calls]
    if body.get("id") is not None and out["role"] == "tool":
        out["tool_call_id"] = body["id"]
    return out


def _events(span: Span) -> tuple[list, list] | None:
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    found = False
    for event in span.events:
        name, attributes = event["name"], event["attributes"]
        if name in _ROLE_EVENTS:
            found = True
            inputs.append(_event_message(_ROLE_EVENTS[name], attributes))
        elif name == "gen_ai.choice":
            found = True
            outputs.append(_event_message("assistant", attributes))
        elif name == "gen_ai.content.prompt":
            found = True
            inputs.extend(_json(attributes.get("gen_ai.prompt")) or [])
        elif name == "gen_ai.content.completion":
            found = True
            completion = _json(attributes.get("gen_ai.completion")) or []
            outputs.extend(c.get("message", c) if isinstance(c, dict) else c for c in completion)
    return (inputs, outputs) if found else None


def read_span(span: Span) -> ModelStep | ToolRun | None:
    """Read one span: a :class:`ModelStep`, a :class:`ToolRun`, or ``None`` for any other span.

    Raises:
        UnknownLayout: A span that says it is a model call, or carries ``gen_ai.prompt``/``gen_ai.completion``
            keys, in no layout listed in the module docstring.
    """
    attributes = span.attributes
    operation = attributes.get("gen_ai.operation.name")
    if operation == "execute_tool":
        arguments = attributes.get("gen_ai.tool.call.arguments", ABSENT)
        return ToolRun(span.span_id, span.start_ns, str(attributes.get("gen_ai.tool.name") or span.name),
                       None if arguments is ABSENT else arguments, attributes.get("gen_ai.tool.call.id"),
                       captured=arguments is not ABSENT)
    layout = _structured(attributes) or _indexed(attributes) or _events(span)
    if layout is None:
        if operation in MODEL_OPERATIONS:  # content capture off: a model call whose messages were not recorded
            return _step(span, [], [])
        if any(k.startswith(("gen_ai.prompt", "gen_ai.completion", "llm.prompts", "llm.completions"))
               for k in attributes):
            keys = sorted(k for k in attributes if k.startswith(("gen_ai.", "llm.")))[:4]
            raise UnknownLayout(f"a model span in an unknown attribute layout ({', '.join(keys)}, ...)")
        return None
    inputs, outputs = layout
    for message in outputs:
        if not isinstance(message, dict):
            raise UnknownLayout("GenAI output messages that are not objects")
        message["role"] = message.get("role") or "assistant"
    return _step(span, inputs, outputs)


def _step(span: Span, inputs: list, outputs: list) -> ModelStep:
    attributes = span.attributes
    response_id = attributes.get("gen_ai.response.id")
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    return ModelStep(span.span_id, span.start_ns, inputs, outputs,
                     response_id if isinstance(response_id, str) else None, model if isinstance(model, str) else None)
