"""What a test has in hand, as a recorded trace: the one shape the capture stage turns into an envelope.

:func:`observed_trace` accepts

* OpenAI chat-completions messages (``[{"role", "content", "tool_calls"?}]``), a chat completion
  (``{"choices": [{"message": ...}]}``) or ``{"messages": [...]}``;
* OpenAI Responses API output items (``[{"type": "function_call", "name", "arguments", "call_id"}, ...]``) or a
  Response (``{"output": [...]}``);
* LangChain messages (``AIMessage`` objects, or their ``model_dump`` / ``messages_to_dict`` / ``dumpd`` dicts);
* a list of calls ``[{"name", "args"}]`` (``arguments`` as JSON text works too) or of :class:`tooleval.models.Call`;
* a recorded trace line (``{"case_id", "trial", "messages", ...}``, docs/design.md "Recorded traces");
* a tooleval trace envelope (a dict with ``envelope_version``), which is already captured and is used as it is.

Pydantic objects (the openai and LangChain SDKs' messages, responses and completions) are read through their
``model_dump()``. The conversions are the importers' own (:mod:`tooleval.importers`), so a trajectory checked in a
test and the same trajectory imported for a run become the same calls.
"""

from __future__ import annotations

import json
from typing import Any

from tooleval.importers import langchain_message
from tooleval.importers import responses_messages
from tooleval.importers import SkipLine
from tooleval.models import Call

__all__ = ["observed_trace", "is_envelope"]

_LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat", "humanmessage", "aimessage",
                              "systemmessage", "toolmessage", "functionmessage", "chatmessage", "aimessagechunk",
                              "humanmessagechunk"})
_SHAPES = ("OpenAI chat messages, OpenAI Responses output items, LangChain messages, a list of {name, args} "
           "calls, a recorded trace or a tooleval trace envelope")


def is_envelope(value: Any) -> bool:
    """True for a tooleval trace envelope record (a dict with ``envelope_version`` and ``model_calls``)."""
    return isinstance(value, dict) and "envelope_version" in value and "model_calls" in value


def _plain(value: Any) -> Any:
    """An SDK object (pydantic: openai, LangChain) as its dict; anything else as it is."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Call):
        return dump()
    return value


def _is_langchain(message: dict) -> bool:
    if message.get("lc") == 1 or (isinstance(message.get("data"), dict) and "type" in message):
        return True
    kind = message.get("type")
    return isinstance(kind, str) and kind.lower() in _LANGCHAIN_TYPES and "role" not in message


def _call_messages(calls: list[Any]) -> list[dict[str, Any]]:
    """One assistant message carrying ``calls`` as OpenAI tool calls (argument objects as JSON text, the wire
    form a recorded trace holds)."""
    tool_calls = []
    for index, call in enumerate(calls):
        if isinstance(call, Call):
            arguments = call.args_raw if call.malformed else call.args_json
        else:
            arguments = call["arguments"] if "arguments" in call else call.get("args")
            if isinstance(arguments, (dict, list)):
                arguments = json.dumps(arguments, ensure_ascii=False)
        tool_calls.append({"id": f"call_{index + 1}", "type": "function",
                           "function": {"name": call.name if isinstance(call, Call) else call["name"],
                                        "arguments": arguments}})
    return [{"role": "assistant", "content": None, "tool_calls": tool_calls}] if tool_calls else []


def _messages(items: list[Any]) -> list[dict[str, Any]]:
    """Chat messages of a list of messages, items or calls (see the module docstring)."""
    items = [_plain(item) for item in items]
    if not items:
        return []
    if all(isinstance(item, Call) for item in items):
        return _call_messages(items)
    if not all(isinstance(item, dict) for item in items):
        raise TypeError(f"observed must be {_SHAPES}; got a list holding {type(items[0]).__name__}")
    try:
        if any(_is_langchain(item) for item in items):
            return [langchain_message(item) for item in items]
        if any("type" in item and "role" not in item or item.get("type") in ("message", "function_call",
                                                                               "function_call_output")
               for item in items):
            return responses_messages(items)[0]
    except SkipLine as exc:
        raise ValueError(f"observed: {exc.reason}") from None
    if all("name" in item and "role" not in item for item in items):
        return _call_messages(items)
    if all("role" in item for item in items):
        return items
    raise TypeError(f"observed must be {_SHAPES}; a list item has neither a 'role' nor a 'name'")


def observed_trace(observed: Any) -> dict[str, Any]:
    """A recorded-trace dict (``messages`` and whatever trace fields ``observed`` carries) for ``observed``.

    Args:
        observed: See the module docstring (not an envelope: test :func:`is_envelope` first).

    Returns:
        ``{"messages": [...], ...}``; a recorded trace line keeps its own keys (``case_id``, ``trial``, ``agent``,
        ``metadata``...).

    Raises:
        TypeError: ``observed`` is none of the accepted shapes.
        ValueError: a message, item or call cannot be read (a call without a name).
    """
    observed = _plain(observed)
    if isinstance(observed, dict):
        if isinstance(observed.get("messages"), list) and ("case_id" in observed or "trial" in observed):
            return dict(observed)  # a recorded trace line: its messages are chat messages already
        if isinstance(observed.get("messages"), list):
            return {**observed, "messages": _messages(observed["messages"])}
        if isinstance(observed.get("choices"), list) and observed["choices"]:  # a chat completion
            return {"messages": _messages([observed["choices"][0].get("message") or {}])}
        if isinstance(observed.get("output"), list):  # a Responses API Response
            return {"messages": _messages(observed["output"])}
        return {"messages": _messages([observed])}
    if isinstance(observed, (list, tuple)):
        return {"messages": _messages(list(observed))}
    raise TypeError(f"observed must be {_SHAPES}; got {type(observed).__name__}")
