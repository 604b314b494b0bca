"""The observed trajectory as ordered steps: each tool call with its position and outcome.

Order rules (``sequence_rules``, confirmation, leaks) need more than the call list: where each call sits among the
chat messages and whether it failed. A call *failed* when its tool result says so — content starting with
``Error:`` (tau-bench, ``../shared/data/README.md``) or an ``error: true`` flag (tau2-bench). A failed attempt is
still a call that was made (it counts for budgets, repeats and confirmation), but it is not a successful
prerequisite and it had no side effect.

Tool results are linked to calls within the block of tool messages that follows the assistant message: by
``tool_call_id`` when that id is unique in the block, else by position (ids repeat within tau-bench runs, so
calls are never keyed by id alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tooleval.models import Call

__all__ = ["Step", "trajectory", "message_text", "assistant_replies", "messages_from_calls"]


@dataclass(frozen=True)
class Step:
    """One observed call in trajectory order."""

    index: int
    """0-based position among the observed calls."""
    call: Call
    message_index: int
    """Index of the assistant message that made the call."""
    result_index: int | None
    """Index of its tool result message; ``None`` when the trajectory holds none."""
    failed: bool
    """True when the result was an error; a call without a result is not failed."""


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message: its string content, or the ``text`` parts of a content list."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def assistant_replies(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(index, text)`` of every assistant message with non-blank text (what the user was told)."""
    replies = []
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "assistant":
            text = message_text(m)
            if text.strip():
                replies.append((i, text))
    return replies


def messages_from_calls(observed: list[Call]) -> list[dict[str, Any]]:
    """A stand-in transcript for rows that have calls but no messages: one assistant message holding every call.

    With it no call has a result (none failed), no user confirmed anything and there is no reply text.
    """
    if not observed:
        return []
    tool_calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": c.name, "arguments": c.args_raw if c.malformed else c.args_json}}
        for i, c in enumerate(observed)
    ]
    return [{"role": "assistant", "content": None, "tool_calls": tool_calls}]


def _is_error(message: dict[str, Any]) -> bool:
    if message.get("error") is True:
        return True
    # only the head of a result decides (a result can be long JSON): casefold maps each character on its own,
    # so the folded head starts with "error:" exactly when the whole folded text does
    text = message_text(message)
    head = text[:64].lstrip()
    if len(head) < 6 and len(text) > 64:  # the first 64 characters were (nearly) all whitespace
        head = text.lstrip()
    return head[:6].casefold().startswith("error:")


def trajectory(messages: list[dict[str, Any]], observed: list[Call]) -> list[Step]:
    """Align the observed calls with the messages they came from.

    Args:
        messages: The trajectory's OpenAI chat messages.
        observed: The calls :func:`tooleval.models.calls_from_messages` reads from ``messages`` (the row's
            ``observed_calls``), in the same order.

    Returns:
        One :class:`Step` per observed call.

    Raises:
        ValueError: when the messages hold a different sequence of tool names than ``observed``.
    """
    steps: list[Step] = []
    position = 0
    n_messages = len(messages)
    n_observed = len(observed)
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        block = message.get("tool_calls")
        if not block:
            continue
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
            call = observed[position]
            body = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else {}
            if body.get("name") != call.name:
                said = body.get("name")
                raise ValueError(f"observed call #{position} is {call.name!r} but the messages say {said!r}")
            failed = result is not None and _is_error(messages[result])
            steps.append(Step(position, call, m_index, result, failed))
            position += 1
    if position != n_observed:
        raise ValueError(f"{len(observed)} observed calls but {position} tool calls in the messages")
    return steps
