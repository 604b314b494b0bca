"""One walk over a trace's messages for trace capture: its call records, its transcript view and whether its values
hold a float, read together instead of by a walk each (:func:`tooleval.models.call_records_from_messages`,
:meth:`tooleval.capture.Transcript.of_messages` and :func:`tooleval.canonical.holds_no_float` walked them in turn).

The walk takes the shape nearly every recorded trace has: each message a plain object, and each tool call of an
assistant message a plain object whose body (its ``function``, or itself) is an object naming its tool with text and
not saying ``arguments_captured``. Then the observed calls' names are the names the alignment of calls and results
reads, in the same order, so the alignment's checks hold by construction and only its pairing of calls with
results remains. Any other shape returns ``None``: the caller takes the separate functions, which name what is
wrong with it.

Most messages are looked into only through the values the walk reads anyway: a message of two texts (its role and
content), a tool's result of four (role, call id, tool name, content) and an assistant's message of its role, its
text (or null) and its calls hold no flag, float or nested value beside the calls; a call of text values only (its
name and arguments, and around them an id and a type) holds no float. Any other message or call is looked into
value by value, as every message once was.
"""

from __future__ import annotations

import json
from typing import Any, Collection, NamedTuple

import orjson

from tooleval.canonical import compact_arguments, float_arguments, holds_no_float
from tooleval.capture.transcript import _is_error, message_text
from tooleval.models import Call

__all__ = ["MessagesWalk", "walk_messages"]


class MessagesWalk(NamedTuple):
    """What one walk over a trace's messages gives (the transcript fields as the module
    :mod:`tooleval.capture.transcript` documents them)."""

    calls: list[dict[str, str | None]]
    """Each observed call's record (shared with the memo: never modified)."""
    view: tuple
    """The first eight view columns' values (:data:`tooleval.storage.VIEW_FIELDS`, in their order)."""
    no_float: bool
    """Whether the messages hold no float (:func:`tooleval.canonical.holds_no_float` of them)."""


_TEXT_LIKE = frozenset((str, type(None), int))
"""The types of a message's values that need no second look (no flag, no float, nothing nested)."""


def walk_messages(messages: list[Any], memo: dict[tuple[str, str], dict[str, str | None]],
                  kept: Collection[str] | None) -> MessagesWalk | None:
    """The call records, the transcript view and the float verdict of ``messages`` in one walk, or ``None`` for a
    trace of another shape than the module docstring's.

    Args:
        messages: The trace's chat messages (a list).
        memo: ``(tool name, argument text) -> call record`` of the calls read before (added to here).
        kept: The tools whose result texts the view keeps; ``None``: every tool's.
    """
    records: list[dict[str, str | None]] = []
    names: list[str] = []
    roles = ""
    texts: list[str | None] = []
    full: list[str] = []
    errors: list[int] = []
    flags: list[tuple[int, str, bool, bool]] = []
    written: list[str | None] = []
    blocks: list[tuple[int, list]] = []
    deep: list[Any] = []
    no_float = True
    for index, message in enumerate(messages):
        if type(message) is not dict:
            return None
        role = message.get("role")
        content = message.get("content")
        text = content if type(content) is str else "" if content is None else message_text(message)
        full.append(text)
        if text[:6] == "Error:":
            errors.append(index)
        if role == "user":
            roles += "u"
            texts.append(text)
        elif role == "assistant":
            roles += "a"
            texts.append(text)
            tool_calls = message.get("tool_calls")
            if tool_calls:
                if type(tool_calls) is not list:
                    return None
                plain_calls = True
                for tool_call in tool_calls:
                    if type(tool_call) is not dict or "arguments_captured" in tool_call:
                        return None
                    body = tool_call.get("function", tool_call)
                    if type(body) is not dict:
                        return None
                    name = body.get("name")
                    if type(name) is not str:
                        return None
                    raw = body["arguments"] if "arguments" in body else body.get("args")
                    if type(raw) is str:
                        written.append(raw)
                        record = memo.get((name, raw))
                        if record is None:
                            compact = compact_arguments(raw) or float_arguments(raw)
                            record = Call.from_raw(name, raw).to_record() if compact is None else \
                                {"name": name, "args_json": compact[1], "args_raw": None, "parse_error": None}
                            memo[name, raw] = record
                    else:
                        written.append(_written(raw))
                        record = Call.from_raw(name, raw).to_record()
                    records.append(record)
                    names.append(name)
                    # a call of text values only: its name and arguments, and around them an id and a type
                    plain_calls = plain_calls and len(body) == 2 and type(raw) is str and (
                        body is tool_call or len(tool_call) == 3 and type(tool_call.get("id")) is str
                        and type(tool_call.get("type")) is str)
                blocks.append((index, tool_calls))
                if len(message) == 3 and type(role) is str and (type(content) is str or content is None
                                                                  and "content" in message):
                    if not plain_calls:  # its three values read: text, text or null, and the calls
                        deep.append(tool_calls)
                    continue
        else:
            roles += "."
            texts.append(None)
            if len(message) == 4 and type(content) is str and type(role) is str \
                    and type(message.get("tool_call_id")) is str and type(message.get("name")) is str:
                continue  # a tool's result: its four values read, text each
        if len(message) == 2 and type(content) is str and type(role) is str:
            continue  # a text message: both its values were read above
        if not _TEXT_LIKE.issuperset(map(type, message.values())):
            # a flag, a nested value or a float: looked at value by value (a message of text-like values has no
            # flag, nor a metadata object to hold one)
            user = role == "user"
            for key, value in message.items():
                kind = type(value)
                if kind is str or value is None or kind is int:
                    continue
                if kind is bool:
                    if user:
                        flags.append((index, key, value, False))
                elif kind is dict or kind is list:
                    deep.append(value)
                else:
                    no_float = False
            metadata = message.get("metadata") if user else None
            if isinstance(metadata, dict):
                for key, value in metadata.items():
                    if value is True or value is False:
                        flags.append((index, key, value, True))
    no_float = no_float and (not deep or holds_no_float(deep))  # one walk over all of them
    steps = _steps(messages, full, blocks)
    results = [None if result is None or (kept is not None and name not in kept) else full[result]
               for name, (_, result, _) in zip(names, steps)]
    view = (roles, texts, errors, flags, steps, None, results, written)
    return _NEW_WALK(MessagesWalk, (records, view, no_float))


_NEW_WALK = tuple.__new__
""":class:`MessagesWalk` built without the Python frame of its generated ``__new__``."""


def _written(raw: Any) -> str | None:
    """A call's arguments as written when they are not text (:func:`tooleval.capture.transcript._written_of`)."""
    if isinstance(raw, dict):
        try:
            return orjson.dumps(raw).decode()
        except (TypeError, orjson.JSONEncodeError):
            try:
                return json.dumps(raw)
            except (ValueError, RecursionError):
                return None
    return None


def _steps(messages: list[dict[str, Any]], full: list[str],
           blocks: list[tuple[int, list]]) -> list[tuple[int, int | None, bool]]:
    """``(message index, result index, failed)`` of each call, as :func:`tooleval.capture.transcript.align_calls`
    pairs calls with the tool messages that follow their assistant message (the names agree by construction)."""
    steps: list[tuple[int, int | None, bool]] = []
    n_messages = len(messages)
    for m_index, block in blocks:
        cursor = m_index + 1
        if len(block) == 1:  # the first tool message that follows holds its result, whatever its id says
            if cursor < n_messages and (reply := messages[cursor]).get("role") == "tool":
                text = full[cursor]  # :func:`_failed` inlined: one call for most traces
                steps.append((m_index, cursor, reply.get("error") is True
                              or text[:1] in _MAY_BEGIN_ERROR and _is_error(reply, text)))
            else:
                steps.append((m_index, None, False))
            continue
        results: list[int | None] = [None] * len(block)
        if cursor < n_messages:
            ids = [tool_call.get("id") for tool_call in block]
            while cursor < n_messages:
                reply = messages[cursor]
                if reply.get("role") != "tool":
                    break
                call_id = reply.get("tool_call_id")
                slot = ids.index(call_id) if call_id is not None and ids.count(call_id) == 1 else None
                if slot is None or results[slot] is not None:
                    slot = next((k for k, r in enumerate(results) if r is None), None)
                if slot is not None:
                    results[slot] = cursor
                cursor += 1
        for result in results:
            steps.append((m_index, result, result is not None and _failed(messages[result], full[result])))
    return steps


def _failed(message: dict[str, Any], text: str) -> bool:
    """:func:`tooleval.capture.transcript._is_error` of a result message and its text, looked into only when its
    first character may begin an error: a text that says ``Error:`` (in any case) after white space begins with
    ``e``, ``E`` or a white space character (no other character's case folding begins with ``e``)."""
    return message.get("error") is True or text[:1] in _MAY_BEGIN_ERROR and _is_error(message, text)


_MAY_BEGIN_ERROR = frozenset("Ee\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                             "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
"""``e``, ``E`` and the characters ``str.lstrip`` strips (``str.isspace``), as the tests find them over all of
Unicode."""
