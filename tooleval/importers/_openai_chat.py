"""Import OpenAI chat-completions conversations (JSON lines) as a tooleval dataset.

A record (one JSON line) is one of:

* ``{"messages": [...], ...}`` — the fine-tuning / eval-log shape; an optional ``choices`` (a chat-completion
  response object's) appends ``choices[0].message`` as the agent's reply;
* a chat-completion response object ``{"choices": [{"message": ...}], ...}`` alone;
* a bare JSON list of messages.

Assistant ``tool_calls[].function.arguments`` is copied as written: JSON text, ``""`` or ``null`` (both mean no
arguments), or text that is not a JSON object (kept raw: a malformed call when scored). Several calls in one
message are kept in order. The legacy ``function_call`` field (one call per message, before ``tool_calls``
existed) becomes a one-item ``tool_calls``, and legacy ``role: "function"`` result messages become
``role: "tool"`` messages with their ``name``. Other keys of a record are case and trace fields
(:mod:`tooleval.importers._conversations`).
"""

from __future__ import annotations

from typing import Any

from tooleval.importers._conversations import Converted, conversation_importer, split_fields
from tooleval.importers._stream import SkipLine

__all__ = ["import_openai_chat", "chat_messages"]

_MESSAGE_KEYS = frozenset({"messages", "choices"})


def _tool_call(call: Any) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise SkipLine("a tool call is not a JSON object")
    body = call.get("function", call)
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise SkipLine("a tool call has no name")
    return call


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise SkipLine("a message is not an object with a role")
    message = dict(message)
    if message["role"] == "function":  # legacy function result
        message["role"] = "tool"
        return message
    legacy = message.pop("function_call", None)
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise SkipLine("tool_calls is not a list")
    calls = [_tool_call(call) for call in calls or []]
    if legacy is not None:
        if not isinstance(legacy, dict) or not isinstance(legacy.get("name"), str):
            raise SkipLine("a function_call has no name")
        calls.append({"type": "function", "function": legacy, "legacy_function_call": True})
    if calls or "tool_calls" in message:
        message["tool_calls"] = calls
    return message


def chat_messages(messages: Any) -> list[dict[str, Any]]:
    """Normalise an OpenAI chat message list (legacy ``function_call`` / ``function`` role included).

    Raises:
        SkipLine: ``messages`` is not a list of messages with roles, or a tool call has no name.
    """
    if not isinstance(messages, list):
        raise SkipLine("messages is not a list")
    return [_message(m) for m in messages]


def _convert(record: Any) -> Converted:
    if isinstance(record, list):
        return Converted(chat_messages(record))
    if not isinstance(record, dict):
        raise SkipLine("not a JSON object or list")
    if "messages" not in record and "choices" not in record:
        raise SkipLine("no messages")
    messages = chat_messages(record.get("messages", []))
    choices = record.get("choices")
    if choices is not None:
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise SkipLine("choices is not a non-empty list")
        messages += chat_messages([choices[0].get("message")])
    fields = split_fields(record, _MESSAGE_KEYS)
    if choices is not None and "response_id" not in fields and isinstance(record.get("id"), str):
        fields["response_id"] = fields.pop("id")
    return Converted(messages, fields)


import_openai_chat = conversation_importer("openai-chat", _convert, "OpenAI chat-completions conversations")
