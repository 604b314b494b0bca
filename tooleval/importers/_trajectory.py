"""One trace's trajectory, from its spans: the model's steps and the executor's tool runs, in time order.

The format modules (:mod:`~tooleval.importers._genai`, :mod:`~tooleval.importers._openinference`) read each span
into a :class:`ModelStep` (a model span: the messages it was sent and the assistant message it returned) or a
:class:`ToolRun` (a tool-execution span: what the executor received). :func:`assemble` turns them into a recorded
trace's ``messages``, ``request`` and ``executor_calls``:

* ``messages`` = the first step's input, then each step's reply, each followed by the tool results the *next*
  step was sent (the messages after the last assistant message of its input). So an agent loop that resends
  the whole conversation is not counted twice.
* ``request`` = ``{"messages": the first step's input}``: what the join check compares with the case input.
* ``executor_calls`` = one ``{"name", "args", "executions"}`` per tool call id (a call run twice, a retry, has
  ``executions: 2``), or ``None`` when there is no tool span, or when any tool span lacks its arguments: an
  executor boundary half-known would report a divergence that did not happen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ModelStep", "ToolRun", "assemble", "chat_call", "UnknownLayout"]


class UnknownLayout(Exception):
    """A model span whose attributes hold no message layout this importer reads (the reason names the keys)."""


@dataclass
class ModelStep:
    """One model span, in chat-completions form."""

    span_id: str
    start_ns: int
    input: list[dict[str, Any]]
    """Messages the model was sent (``[]`` when content capture was off)."""
    output: list[dict[str, Any]]
    """Assistant messages it returned (``tool_calls[].function.arguments`` as JSON text)."""
    response_id: str | None = None
    model: str | None = None


@dataclass
class ToolRun:
    """One tool-execution span."""

    span_id: str
    start_ns: int
    name: str
    arguments: Any = None
    """JSON text or an object as the span recorded it; ``None`` when the span did not record them."""
    call_id: str | None = None
    captured: bool = True
    """False when the span carries no arguments at all (content capture off)."""
    extra: dict[str, Any] = field(default_factory=dict)


def chat_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A chat-completions tool call; ``arguments`` kept as text (an object is serialised, text copied as is).

    A call whose arguments were not recorded keeps ``arguments`` absent and says ``arguments_captured: false``.
    """
    function: dict[str, Any] = {"name": name}
    call: dict[str, Any] = {"id": call_id, "type": "function", "function": function}
    if arguments is _ABSENT:
        call["arguments_captured"] = False
        return call
    function["arguments"] = arguments if isinstance(arguments, str) or arguments is None else json.dumps(
        arguments, ensure_ascii=False)
    return call


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


_ABSENT = _Absent()
ABSENT = _ABSENT
"""Marks arguments the source did not record (distinct from ``null`` or ``""``)."""


def _tool_results(step_input: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max((i for i, m in enumerate(step_input) if m.get("role") == "assistant"), default=None)
    if last is None:
        return []
    return [m for m in step_input[last + 1:] if m.get("role") == "tool"]


def _executor(runs: list[ToolRun]) -> list[dict[str, Any]] | None:
    if not runs or not all(run.captured for run in runs):
        return None
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for run in runs:
        arguments = run.arguments if isinstance(run.arguments, str) or run.arguments is None else json.dumps(
            run.arguments, ensure_ascii=False)
        if run.call_id and run.call_id in by_id:
            by_id[run.call_id]["executions"] += 1
            continue
        record = {"name": run.name, "args": arguments, "executions": 1, "span_id": run.span_id}
        if run.call_id:
            record["call_id"] = run.call_id
            by_id[run.call_id] = record
        calls.append(record)
    return calls


def assemble(steps: list[ModelStep], runs: list[ToolRun]) -> dict[str, Any]:
    """The recorded-trace fields of one trajectory (see the module docstring).

    Args:
        steps: Model steps, any order (sorted here by start time, then span id).
        runs: Tool runs, any order.

    Returns:
        ``{"messages", "request", "executor_calls", "response_id", "model"}``; ``executor_calls`` is ``None``
        when the executor's side is not known.
    """
    steps = sorted(steps, key=lambda s: (s.start_ns, s.span_id))
    runs = sorted(runs, key=lambda r: (r.start_ns, r.span_id))
    messages: list[dict[str, Any]] = list(steps[0].input)
    for index, step in enumerate(steps):
        messages.extend(step.output)
        if index + 1 < len(steps):
            messages.extend(_tool_results(steps[index + 1].input))
    response_ids = [s.response_id for s in steps if s.response_id]
    return {
        "messages": messages,
        "request": {"messages": steps[0].input} if steps[0].input else None,
        "executor_calls": _executor(runs),
        "response_id": response_ids[-1] if response_ids else None,
        "model": next((s.model for s in steps if s.model), None),
    }
