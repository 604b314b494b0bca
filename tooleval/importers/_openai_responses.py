"""Import OpenAI Responses API output (JSON lines) as a tooleval dataset.

A record (one JSON line) is one of:

* a single output item, e.g. ``{"type": "function_call", "call_id", "name", "arguments": "<JSON text>"}``
  (what a Responses API ``output`` holds for one tool call);
* a JSON list of items;
* an object holding ``output`` (a Response object, or a wrapper with case fields), or ``response`` (a Response
  object) — optionally with the request's ``input`` (text, or a list of input items), which opens the
  conversation.

Items become chat-completions messages: consecutive ``function_call`` items become one assistant message with
one ``tool_calls`` entry each (``call_id`` as the id, ``arguments`` copied as written, so malformed text stays
raw), ``function_call_output`` a ``tool`` message, ``message`` items (and bare ``{role, content}`` input items)
a message whose content blocks' text is joined. An output with text only has zero calls. Items of other types
(``reasoning``, ``web_search_call``...) are not calls to score; they are kept in the trace's
``metadata.other_items`` with their position among the items (the request's input items first).
"""

from __future__ import annotations

from typing import Any

from tooleval.importers._conversations import Converted, conversation_importer, split_fields
from tooleval.importers._stream import SkipLine

__all__ = ["import_openai_responses", "responses_messages"]

_MESSAGE_KEYS = frozenset({"output", "input", "response", "type", "call_id", "name", "arguments", "status",
                           "content", "role", "object"})


def _text(content: Any) -> Any:
    """Join the text of content blocks (``output_text``, ``input_text``, ``text``, ``refusal``)."""
    if not isinstance(content, list):
        return content
    parts = [
        block.get("text", block.get("refusal")) if isinstance(block, dict) else block
        for block in content
    ]
    return "".join(p for p in parts if isinstance(p, str))


def responses_messages(items: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turn Responses API items into chat messages.

    Returns:
        ``(messages, other_items)``: the chat messages, and the items that are neither messages nor calls, each
        as ``{"position": i, "item": item}``.

    Raises:
        SkipLine: an item is not an object, or a ``function_call`` has no name.
    """
    messages: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise SkipLine("an item is not a JSON object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "function_call":
            if not isinstance(item.get("name"), str):
                raise SkipLine("a function_call has no name")
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments")}}
            last = messages[-1] if messages else None
            if last is None or last.get("role") != "assistant" or not last.get("tool_calls") or last.get("content"):
                last = {"role": "assistant", "content": None, "tool_calls": []}
                messages.append(last)
            last["tool_calls"].append(call)
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text(item.get("output"))})
        elif kind == "message":
            messages.append({"role": item.get("role", "assistant"), "content": _text(item.get("content"))})
        else:
            others.append({"position": position, "item": item})
    return messages, others


def _convert(record: Any) -> Converted:
    if isinstance(record, list):
        messages, others = responses_messages(record)
        return Converted(messages, {}, {"other_items": others} if others else {})
    if not isinstance(record, dict):
        raise SkipLine("not a JSON object or list")
    if "type" in record and "output" not in record:
        messages, others = responses_messages([record])
        return Converted(messages, {}, {"other_items": others} if others else {})
    response = record.get("response", record)
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise SkipLine("no output items")
    request = record.get("input", response.get("input"))
    opening: list[Any] = [{"role": "user", "content": request}] if isinstance(request, str) else request or []
    if not isinstance(opening, list):
        raise SkipLine("input is not text or a list of items")
    messages, others = responses_messages([*opening, *response["output"]])
    fields = split_fields(record, _MESSAGE_KEYS)
    if isinstance(response.get("id"), str) and "response_id" not in fields:
        fields["response_id"] = response["id"]
        fields.pop("id", None)
    return Converted(messages, fields, {"other_items": others} if others else {})


import_openai_responses = conversation_importer("openai-responses", _convert, "OpenAI Responses API output")
