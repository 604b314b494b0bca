"""What the rules read of a trajectory, as plain columns: the transcript view.

The policy rules need more than the call list, but far less than the chat messages: each message's role, the text
of the user's and the assistant's messages, which messages' text starts with ``Error:``, the boolean flags user
messages carry, where each observed call sits and whether its result was an error, the result text of the calls
whose tools declare confidential fields, and each call's arguments as written. Trace capture, which decodes a trace
once, computes this view from the decoded messages (:meth:`Transcript.of_messages`) and writes it as typed columns
beside the envelope (:func:`view_arrays`); the scoring stage rebuilds it from those columns instead of decoding the
envelope's messages a second time. Every rule reads a :class:`Transcript`, so the two ways to obtain one give the
same verdicts by construction.

Fields (per message, in message order, unless said otherwise):

* ``roles``: one character per message: ``u`` for a user message, ``a`` for an assistant message, ``.`` for any
  other (a tool result, a system prompt, a message that is not an object): what the rules tell apart;
* ``texts``: :func:`message_text` of a ``user`` or ``assistant`` message, ``None`` for any other (what no rule
  reads: a tool result's text is read only through ``results``);
* ``error_messages``: the indexes of the messages whose text starts with ``Error:`` (a failed signal tool);
* ``flags``: ``(message_index, key, value, in_metadata)`` for each top-level key and each key of the ``metadata``
  object of a user message that holds ``true`` or ``false``;
* ``steps`` (one per observed call): ``(message_index, result_index, failed)`` as :func:`align_calls` aligns them
  (as :func:`tooleval.rules.trajectory` does); ``None`` when they could not be aligned (``steps_error`` says why);
* ``results`` (one per step): the text of the call's result message when its tool is one whose results are kept
  (every tool unless the capture was told which declare confidential fields), else ``None``;
* ``written`` (one per tool call of the assistant messages, in call order): the call's argument text as written
  when it was text, the JSON text of its arguments when they were given as an object, ``None`` otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Collection, Sequence

import orjson
import pyarrow as pa

from tooleval.storage import VIEW_FIELDS


__all__ = ["Transcript", "written_texts", "read_written", "view_arrays", "transcript_values", "transcript_columns",
           "align_calls", "message_text"]


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message: its string content, or the ``text`` parts of a content list."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _is_error(message: dict[str, Any], text: str | None = None) -> bool:
    if message.get("error") is True:
        return True
    # only the head of a result decides (a result can be long JSON): casefold maps each character on its own,
    # so the folded head starts with "error:" exactly when the whole folded text does
    text = message_text(message) if text is None else text
    head = text[:64].lstrip()
    if len(head) < 6 and len(text) > 64:  # the first 64 characters were (nearly) all whitespace
        head = text.lstrip()
    return head[:6].casefold().startswith("error:")


def align_calls(messages: list[dict[str, Any]], names: Sequence[str],
                texts: Sequence[str] | None = None) -> list[tuple[int, int | None, bool]]:
    """:func:`trajectory` as plain values: ``(message_index, result_index, failed)`` of each observed call, given
    the observed calls' tool ``names`` in order (``texts``: each message's :func:`message_text`, when the caller
    has them).

    Raises:
        ValueError: when the messages hold a different sequence of tool names than ``names``.
    """
    blocks = []
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        block = message.get("tool_calls")
        if block:
            blocks.append((m_index, block))
    return _align(messages, names, texts, blocks)


def _align(messages: list[Any], names: Sequence[str], texts: Sequence[str] | None,
           blocks: list[tuple[int, Any]]) -> list[tuple[int, int | None, bool]]:
    """:func:`align_calls` given ``blocks``: ``(index, tool_calls)`` of each assistant message (a dict) whose
    ``tool_calls`` is not empty, in message order."""
    steps: list[tuple[int, int | None, bool]] = []
    position = 0
    n_messages = len(messages)
    n_observed = len(names)
    for m_index, block in blocks:
        block = list(block)
        results: list[int | None] = [None] * len(block)
        cursor = m_index + 1
        if cursor < n_messages:
            ids = [(tc.get("id") if isinstance(tc, dict) else None) for tc in block]
            while cursor < n_messages:
                reply = messages[cursor]
                if not isinstance(reply, dict) or reply.get("role") != "tool":
                    break
                call_id = reply.get("tool_call_id")
                slot = ids.index(call_id) if call_id is not None and ids.count(call_id) == 1 else None
                if slot is None or results[slot] is not None:
                    slot = next((k for k, r in enumerate(results) if r is None), None)
                if slot is not None:
                    results[slot] = cursor
                cursor += 1
        for tool_call, result in zip(block, results):
            if position >= n_observed:
                raise ValueError("the messages hold more tool calls than the observed calls")
            name = names[position]
            body = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else {}
            if body.get("name") != name:
                said = body.get("name")
                raise ValueError(f"observed call #{position} is {name!r} but the messages say {said!r}")
            failed = result is not None and _is_error(messages[result], None if texts is None else texts[result])
            steps.append((m_index, result, failed))
            position += 1
    if position != n_observed:
        raise ValueError(f"{n_observed} observed calls but {position} tool calls in the messages")
    return steps


def _written_of(tool_calls: Any, into: list) -> None:
    """Each tool call's arguments as written (see the module docstring), appended to ``into`` in call order."""
    for tool_call in tool_calls:
        body = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else {}
        raw = body.get("arguments", body.get("args")) if isinstance(body, dict) else None
        if isinstance(raw, str):
            into.append(raw)
        elif isinstance(raw, dict):
            # orjson writes what the standard library's reader reads back as the same values (a float stays a
            # float), and the values of a decoded trace hold no NaN; what it cannot write (an integer beyond 64
            # bits, a lone surrogate) the standard library writes
            try:
                into.append(orjson.dumps(raw).decode())
            except (TypeError, orjson.JSONEncodeError):
                try:
                    into.append(json.dumps(raw))
                except (ValueError, RecursionError):  # nested past the recursion limit: not readable as written
                    into.append(None)
        else:
            into.append(None)


@dataclass(slots=True)
class Transcript:
    """A trajectory as the rules read it (the module docstring gives each field's shape): a record of columns.

    Build it with :meth:`of_messages` from decoded chat messages, or directly from the columns trace capture wrote
    (then ``names``, the observed calls' tool names, stand in for the calls of each assistant message).
    """

    roles: str
    texts: Sequence[str | None]
    error_messages: Collection[int]
    flags: Sequence[tuple[int, str, bool, bool]]
    steps: Sequence[tuple[int, int | None, bool]] | None
    results: Sequence[str | None] | None
    written: Sequence[str | None]
    steps_error: str | None = None
    names: Sequence[str] | None = None
    calls_by_message: dict[int, list] | None = field(default=None, repr=False)
    """Message index -> the tool names of its calls (from the messages; derived from the steps when ``None``)."""

    @classmethod
    def of_messages(cls, messages: list[Any], names: Sequence[str] | None = None,
                    kept: Collection[str] | None = None, *, for_capture: bool = False) -> "Transcript":
        """The view of decoded chat ``messages``.

        Args:
            messages: The trajectory's OpenAI chat messages.
            names: The tool names of the observed calls read from ``messages``, in order; ``None``: no steps (then
                ``steps_error`` says so).
            kept: The tools whose result texts are kept (those that declare confidential fields); ``None``: all.
            for_capture: Leave out what the columns do not hold (each message's call names: a reader derives
                them from the steps and ``names``).
        """
        roles: list[str] = []
        texts: list[str | None] = []
        full: list[str] = []
        errors: list[int] = []
        flags: list[tuple[int, str, bool, bool]] = []
        written: list[str | None] = []
        calls_of: dict[int, list] | None = None if for_capture else {}
        blocks: list[tuple[int, Any]] = []
        for index, message in enumerate(messages):
            if type(message) is not dict:
                if isinstance(message, dict):  # a dict of another type: read the slow way, alike
                    message = dict(message)
                else:
                    roles.append(".")
                    texts.append(None)
                    full.append("")
                    continue
            role = message.get("role")
            content = message.get("content")
            text = content if type(content) is str else message_text(message)
            full.append(text)
            if text[:6] == "Error:":
                errors.append(index)
            if role == "user":
                roles.append("u")
                texts.append(text)
                for key, value in message.items():
                    if value is True or value is False:
                        flags.append((index, key, value, False))
                metadata = message.get("metadata")
                if isinstance(metadata, dict):
                    for key, value in metadata.items():
                        if value is True or value is False:
                            flags.append((index, key, value, True))
            elif role == "assistant":
                roles.append("a")
                texts.append(text)
                tool_calls = message.get("tool_calls")
                if tool_calls:
                    blocks.append((index, tool_calls))
                    _written_of(tool_calls, written)
                    if calls_of is not None:
                        calls_of[index] = [name if isinstance(name, str) else None for name in (
                            (c.get("function") or c).get("name") for c in tool_calls if isinstance(c, dict))]
            else:
                roles.append(".")
                texts.append(None)
        steps, results, error = None, None, "no observed calls were given"
        if names is not None:
            try:
                steps, error = _align(messages, names, full, blocks), None
            except ValueError as exc:
                error = str(exc)
        if steps is not None:
            results = [None if r is None or (kept is not None and name not in kept) else full[r]
                       for name, (_, r, _) in zip(names, steps)]
        return cls("".join(roles), texts, errors, flags, steps, results, written, error, names,
                   calls_by_message=calls_of)

    def calls_of(self, index: int) -> list[str | None]:
        """The tool names of the calls that message ``index`` made, in order (``[]`` for none)."""
        if self.calls_by_message is None:  # from the steps: each tool call of an assistant message is one call
            self.calls_by_message = {}
            for name, (message, _, _) in zip(self.names or (), self.steps or ()):
                self.calls_by_message.setdefault(message, []).append(name)
        return self.calls_by_message.get(index, [])

    def replies(self) -> list[tuple[int, str]]:
        """``(index, text)`` of every assistant message with non-blank text (what the user was told)."""
        return [(i, text) for i, (role, text) in enumerate(zip(self.roles, self.texts))
                if role == "a" and text.strip()]

    def last_proposal(self, call_message_index: int) -> int:
        """Index of the last assistant message with text at or before ``call_message_index``, or -1."""
        roles, texts = self.roles, self.texts
        for i in range(call_message_index, -1, -1):
            if roles[i] == "a" and texts[i].strip():
                return i
        return -1

    def user_reply(self, call_message_index: int) -> int | None:
        """Index of the user's last message since the last proposal before the call's message, or ``None``."""
        roles = self.roles
        for i in range(call_message_index - 1, self.last_proposal(call_message_index), -1):
            if roles[i] == "u":
                return i
        return None

    def signal_tool_called(self, call_message_index: int, tool: str) -> bool:
        """Whether ``tool`` was called, without an ``Error:`` result, since the last proposal before the call (the
        results of a message's calls are the messages that follow it, by position: call ids repeat)."""
        start = self.last_proposal(call_message_index)
        n, errors = len(self.roles), self.error_messages
        for i in range(max(start, 0), call_message_index):
            if self.roles[i] != "a":
                continue
            for position, name in enumerate(self.calls_of(i)):
                result = i + 1 + position
                if name == tool and not (result < n and result in errors):
                    return True
        return False

    def metadata_signal(self, index: int, key: str) -> bool | None:
        """The boolean under ``key`` on message ``index`` (top level first, then its ``metadata``), or ``None``."""
        found = [(value, in_metadata) for at, name, value, in_metadata in self.flags if at == index and name == key]
        for value, in_metadata in found:
            if not in_metadata:
                return value
        return found[0][0] if found else None

    def result_text(self, step: int) -> str | None:
        """The result text of observed call ``step``, when it has a result and its tool's results were kept."""
        return None if self.results is None else self.results[step]

    def written_arguments(self) -> list[object]:
        """The calls' arguments as written, read as :func:`tooleval.rules.written_arguments` reads them."""
        return read_written(self.written)


def written_texts(messages: list[Any]) -> list[str | None]:
    """The ``written`` field of ``messages`` alone (see the module docstring), without the rest of the view."""
    written: list[str | None] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("tool_calls"):
            _written_of(message["tool_calls"], written)
    return written


def read_written(texts: Sequence[str | None]) -> list[object]:
    """Each call's arguments as written, from its ``written`` text: read with plain ``json.loads`` (``1.0`` stays a
    float); ``None`` where there is no text or it is not a JSON object."""
    out: list[object] = []
    for text in texts:
        value = None
        if text is not None:
            try:
                value = json.loads(text)
            except ValueError:
                value = None
        out.append(value if isinstance(value, dict) else None)
    return out


def view_arrays(records: list[dict[str, Any]]) -> list[pa.Array]:
    """The :data:`VIEW_FIELDS` columns of a batch of envelope records built by
    :func:`tooleval.capture.build_envelope` (a record without them, an envelope of a failed generation, gives
    nulls), built column by column rather than record by record (Arrow converts the lists of tuples itself)."""
    return [pa.array([record.get(field.name) for record in records], field.type) for field in VIEW_FIELDS]


_TRANSCRIPT_NAMES = ("message_roles", "message_texts", "error_messages", "user_flags", "steps", "steps_error",
                     "result_texts", "written_arguments")


def transcript_values(messages: list[Any] | None, names: Sequence[str],
                      kept: Collection[str] | None = None) -> tuple:
    """The transcript fields of a trace's messages as the values of the capture stage's first eight view columns
    (:data:`VIEW_FIELDS`, in their order); all ``None`` without messages."""
    if messages is None:
        return (None,) * len(_TRANSCRIPT_NAMES)
    view = Transcript.of_messages(messages, names, kept, for_capture=True)
    return (view.roles, view.texts, view.error_messages, view.flags, view.steps, view.steps_error, view.results,
            view.written)


def transcript_columns(messages: list[Any] | None, names: Sequence[str],
                       kept: Collection[str] | None = None) -> dict[str, Any]:
    """The transcript fields of a trace's messages as the values of the capture stage's view columns
    (:data:`VIEW_FIELDS`, :func:`view_arrays` turns a batch of them into columns); all null without messages."""
    return dict(zip(_TRANSCRIPT_NAMES, transcript_values(messages, names, kept)))
