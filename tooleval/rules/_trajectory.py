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

from tooleval.capture import Transcript, align_calls, message_text
from tooleval.models import Call

__all__ = ["Step", "trajectory", "aligned_steps", "message_text", "assistant_replies", "messages_from_calls"]


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
    aligned = align_calls(messages, [call.name for call in observed])
    return [Step(i, call, m, r, failed) for i, (call, (m, r, failed)) in enumerate(zip(observed, aligned))]


def aligned_steps(transcript: Transcript, observed: list[Call]) -> list[Step]:
    """The observed calls as :class:`Step` values, from a transcript view's steps (what :func:`trajectory` gives
    for the messages the view was taken from).

    Raises:
        ValueError: the view's calls do not align with ``observed`` (the reason capture recorded, or a different
            number of calls).
    """
    steps = transcript.steps
    if transcript.steps_error is not None:
        raise ValueError(transcript.steps_error)
    if steps is None or len(steps) != len(observed):
        held = "no" if steps is None else len(steps)
        raise ValueError(f"{len(observed)} observed calls but {held} tool calls in the messages")
    return [_step(i, call, m, r, failed) for i, (call, (m, r, failed)) in enumerate(zip(observed, steps))]


def _step(index: int, call: Call, message_index: int, result_index: int | None, failed: bool) -> Step:
    """``Step(index, call, message_index, result_index, failed)``, its fields set at once: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (~2 µs a step; the scoring stage makes one per call
    of every row a policy rule reads). The same object: equality and repr read the same fields."""
    step = _new(Step)
    step.__dict__.update(index=index, call=call, message_index=message_index, result_index=result_index,
                         failed=failed)
    return step


_new = object.__new__
