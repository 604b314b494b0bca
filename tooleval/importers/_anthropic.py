"""Import Anthropic Messages API conversations (JSON lines) as a tooleval dataset.

A record (one JSON line) is one of:

* a request body ``{"messages": [...], "system"?, "tools"?, "model"?, ...}``; an optional ``response`` (a
  Message object, as ``client.messages.create`` returns it) is appended as the agent's reply;
* a Message object alone (``{"type": "message", "role": "assistant", "content": [...], "id", ...}``);
* a Message Batches result line (``{"custom_id", "result": {"type": "succeeded", "message": {...}}}``): the
  message is the reply, ``custom_id`` the case id unless the line names one; a result of another type
  (``errored``, ``canceled``, ``expired``) is skipped with that reason;
* a bare JSON list of messages.

Content is a string or a list of blocks. ``tool_use`` blocks (``{"id", "name", "input"}``) of an assistant message
become its ``tool_calls`` in block order (parallel calls stay in one message); ``input`` as an object is written as
JSON text, ``input`` as text (what a client that accumulated a broken ``input_json_delta`` stream holds) is copied
as written, so the scorer reads it as a malformed call. A ``tool_use`` without ``input`` is a call whose arguments
were not recorded (``arguments_captured: false``), never ``{}``. ``tool_result`` blocks of a user message become
``tool`` messages (``tool_use_id`` as the id, text blocks joined, ``is_error`` kept), placed before the message's
text as the API requires them. Text blocks are joined; every other block (``thinking``, ``redacted_thinking``,
images, documents, server-side tools such as ``server_tool_use`` / ``web_search_tool_result``, which Anthropic ran
and the agent's executor did not) is kept in the trace's ``metadata.other_blocks`` with its message and block
position. ``system`` (text or text blocks) opens the conversation as a system message. The reply's ``id`` becomes
``response_id``, its ``model`` and ``stop_reason`` go to the trace's ``metadata``. Other keys of a record (a
request's ``tools``, ``max_tokens``; case fields) are read as for every conversation format
(:mod:`tooleval.importers._conversations`); a request's own ``metadata`` key is the case field of that name.
"""

from __future__ import annotations

import json
from typing import Any

from tooleval.importers._conversations import Converted, conversation_importer, split_fields
from tooleval.importers._stream import SkipLine

__all__ = ["anthropic_messages", "import_anthropic"]

# The keys that make the conversation; the rest of a record (a request's tools, model, max_tokens, a reply's
# usage) are case or trace fields as for every conversation format.
_MESSAGE_KEYS = frozenset({"messages", "response", "system", "content", "role", "type", "stop_reason",
                           "stop_sequence", "result", "custom_id"})


def _text(blocks: Any) -> str | None:
    """A string as is; the ``text`` of the text blocks of a list, joined; ``None`` when there is none."""
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return None
    parts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and
             isinstance(b.get("text"), str)]
    return "\n".join(parts) if parts else None


def _tool_call(block: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(block.get("name"), str):
        raise SkipLine("a tool_use block has no name")
    call: dict[str, Any] = {"id": block.get("id"), "type": "function", "function": {"name": block["name"]}}
    if "input" not in block:
        call["arguments_captured"] = False
        return call
    given = block["input"]
    call["function"]["arguments"] = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
    return call


def _assistant(index: int, content: Any, others: list[dict[str, Any]]) -> dict[str, Any]:
    if isinstance(content, str) or content is None:
        return {"role": "assistant", "content": content}
    calls: list[dict[str, Any]] = []
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            raise SkipLine("a content block is not a JSON object")
        if block.get("type") == "tool_use":
            calls.append(_tool_call(block))
        elif block.get("type") != "text":
            others.append({"message": index, "block": position, "item": block})
    message: dict[str, Any] = {"role": "assistant", "content": _text(content)}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(index: int, role: str, content: Any, others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return [{"role": role, "content": content}]
    results: list[dict[str, Any]] = []
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            raise SkipLine("a content block is not a JSON object")
        if block.get("type") == "tool_result":
            result: dict[str, Any] = {"role": "tool", "tool_call_id": block.get("tool_use_id"),
                                      "content": _text(block.get("content"))}
            if block.get("is_error") is not None:
                result["is_error"] = block["is_error"]
            results.append(result)
        elif block.get("type") != "text":
            others.append({"message": index, "block": position, "item": block})
    text = _text(content)
    return results + ([{"role": role, "content": text}] if text is not None or not results else [])


def anthropic_messages(messages: Any, system: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turn Anthropic Messages API messages into OpenAI chat-completions messages (rules: the module docstring).

    Args:
        messages: ``[{"role": "user" | "assistant", "content": str | [blocks]}]``.
        system: The request's ``system`` (text or text blocks), opening the conversation; ``None`` for none.

    Returns:
        ``(messages, other_blocks)``; each other block as ``{"message": i, "block": j, "item": block}``, ``i``
        counting the source's messages from 0.

    Raises:
        SkipLine: ``messages`` is not a list of objects with a role, a block is not an object, or a ``tool_use``
            block has no name.
    """
    if not isinstance(messages, list):
        raise SkipLine("messages is not a list")
    out: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    opening = _text(system)
    if opening is not None:
        out.append({"role": "system", "content": opening})
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise SkipLine("a message is not an object with a role")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise SkipLine("a message's content is not text or a list of blocks")
        if message["role"] == "assistant":
            out.append(_assistant(index, content, others))
        else:
            out.extend(_user(index, message["role"], content, others))
    return out, others


def _reply(record: dict[str, Any]) -> dict[str, Any] | None:
    """The Message object a record carries as the reply, if any (SkipLine for a failed batch result)."""
    if record.get("type") == "message":
        return record
    if "response" in record:
        reply = record["response"]
        if not isinstance(reply, dict) or not isinstance(reply.get("content"), list):
            raise SkipLine("response is not a Message object (no content list)")
        return reply
    result = record.get("result")
    if result is None:
        return None
    if not isinstance(result, dict):
        raise SkipLine("result is not a JSON object")
    if result.get("type") != "succeeded":
        raise SkipLine(f"batch result is {result.get('type')!r}, not succeeded")
    if not isinstance(result.get("message"), dict):
        raise SkipLine("a succeeded batch result has no message")
    return result["message"]


def _convert(record: Any) -> Converted:
    if isinstance(record, list):
        messages, others = anthropic_messages(record)
        return Converted(messages, {}, {"other_blocks": others} if others else {})
    if not isinstance(record, dict):
        raise SkipLine("not a JSON object or list")
    reply = _reply(record)
    if "messages" not in record and reply is None:
        raise SkipLine("no messages (no messages list, Message object or batch result)")
    history = record.get("messages", []) if reply is not record else []
    if reply is not None:
        history = [*history, {"role": reply.get("role", "assistant"), "content": reply.get("content")}] \
            if isinstance(history, list) else history
    messages, others = anthropic_messages(history, record.get("system"))
    fields = split_fields(record, _MESSAGE_KEYS)
    metadata: dict[str, Any] = {"other_blocks": others} if others else {}
    if "custom_id" in record and "case_id" not in fields:
        fields["case_id"] = record["custom_id"]
    if reply is not None:
        if isinstance(reply.get("id"), str) and "response_id" not in fields:
            fields["response_id"] = reply["id"]
            if reply is record:
                fields.pop("id", None)
        if reply.get("stop_reason") is not None:
            metadata["stop_reason"] = reply["stop_reason"]
        if isinstance(reply.get("model"), str):
            metadata["model"] = reply["model"]
    return Converted(messages, fields, metadata)


import_anthropic = conversation_importer("anthropic", _convert, "Anthropic Messages API conversations")
