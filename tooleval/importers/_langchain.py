"""Import LangChain message dicts (JSON lines) as a tooleval dataset.

A record (one JSON line) is a conversation: a JSON list of messages, an object ``{"messages": [...], ...}`` (with case
and trace fields), or a single message (an ``AIMessage`` whose calls sit only in ``.tool_calls``, with arguments
already an object, is one). A message may be serialised in any of the three shapes LangChain writes:

* ``message.model_dump()`` / ``dict(message)``: ``{"type": "ai", "content", "tool_calls", ...}``;
* ``messages_to_dict``: ``{"type": "ai", "data": {...}}``;
* ``dumpd``: ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``.

Types map to chat roles (``human`` -> user, ``ai`` -> assistant, ``system``, ``tool``, ``function`` -> tool,
``chat`` -> its own role). An AI message's calls are read from **both** ``tool_calls`` (arguments already an
object) and ``additional_kwargs.tool_calls`` (OpenAI wire form, arguments as text): a call present in both
(same id) is kept once, in its raw-text form, so that malformed text stays raw; calls found in only one place
are all kept. ``invalid_tool_calls`` (``args`` is the text LangChain could not parse) are kept as calls with
that text, which the scorer reads as malformed calls. Content given as a list of blocks is flattened to its
text blocks joined (as ``BaseMessage.text`` does); the blocks themselves are kept in ``content_blocks``.
"""

from __future__ import annotations

from typing import Any

from tooleval.importers._conversations import Converted, conversation_importer, split_fields
from tooleval.importers._stream import SkipLine

__all__ = ["import_langchain", "langchain_message"]

_ROLES = {
    "human": "user", "humanmessage": "user", "humanmessagechunk": "user",
    "ai": "assistant", "aimessage": "assistant", "aimessagechunk": "assistant",
    "system": "system", "systemmessage": "system",
    "tool": "tool", "toolmessage": "tool", "function": "tool", "functionmessage": "tool",
    "chat": None, "chatmessage": None,
}
_MESSAGE_KEYS = frozenset({"messages"})


def _fields(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(type, fields)`` of a serialised message, whichever of LangChain's shapes it is in."""
    if message.get("lc") == 1 and isinstance(message.get("id"), list) and isinstance(message.get("kwargs"), dict):
        return str(message["id"][-1]), message["kwargs"]
    if isinstance(message.get("data"), dict) and "type" in message:
        return str(message["type"]), message["data"]
    return str(message.get("type")), message


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_calls`` / ``invalid_tool_calls`` entry in OpenAI wire form (object args stay objects)."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise SkipLine("a tool call has no name")
    return {"id": call.get("id"), "type": "function", "function": {"name": call["name"], "arguments": call.get("args")}}


def _calls(fields: dict[str, Any]) -> list[dict[str, Any]]:
    raw = (fields.get("additional_kwargs") or {}).get("tool_calls") or []
    parsed = [*(fields.get("tool_calls") or []), *(fields.get("invalid_tool_calls") or [])]
    if not isinstance(raw, list) or not isinstance(parsed, list):
        raise SkipLine("tool_calls is not a list")
    calls = []
    for call in raw:
        body = call.get("function") if isinstance(call, dict) else None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise SkipLine("a tool call has no name")
        calls.append({"id": call.get("id"), "type": "function", "function": dict(body)})
    known = {call["id"] for call in calls if call["id"] is not None}
    for call in parsed:
        wire = _wire_call(call)
        if wire["id"] is None or wire["id"] not in known:
            calls.append(wire)
    return calls


def _content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    texts = (block if isinstance(block, str) else block.get("text") if isinstance(block, dict)
             and block.get("type", "text") == "text" else None for block in content)
    return "".join(t for t in texts if isinstance(t, str))


def langchain_message(message: Any) -> dict[str, Any]:
    """One serialised LangChain message as an OpenAI chat message (calls and content as the module says).

    Raises:
        SkipLine: not a message of a known type, or a call without a name.
    """
    if not isinstance(message, dict):
        raise SkipLine("a message is not a JSON object")
    kind, fields = _fields(message)
    if kind.lower() not in _ROLES:
        raise SkipLine(f"unknown message type {kind[:40]!r}")
    role = _ROLES[kind.lower()] or fields.get("role")
    if not isinstance(role, str):
        raise SkipLine("a chat message has no role")
    out: dict[str, Any] = {"role": role, "content": _content(fields.get("content"))}
    if isinstance(fields.get("content"), list):
        out["content_blocks"] = fields["content"]
    if role == "assistant":
        calls = _calls(fields)
        if calls:
            out["tool_calls"] = calls
    if role == "tool":
        out["tool_call_id"] = fields.get("tool_call_id")
    for key in ("name", "id", "status", "response_metadata", "usage_metadata", "artifact"):
        if fields.get(key) not in (None, {}, []):
            out[key] = fields[key]
    return out


def _convert(record: Any) -> Converted:
    if isinstance(record, dict) and "messages" not in record:
        record = [record]
    if isinstance(record, list):
        return Converted([langchain_message(m) for m in record])
    if not isinstance(record, dict) or not isinstance(record["messages"], list):
        raise SkipLine("messages is not a list")
    return Converted([langchain_message(m) for m in record["messages"]], split_fields(record, _MESSAGE_KEYS))


import_langchain = conversation_importer("langchain", _convert, "LangChain conversations")
