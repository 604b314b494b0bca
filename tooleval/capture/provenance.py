"""Provenance: can a row's evidence be trusted, and which boundary diverged first.

**Join check** (:func:`join_check`) — ``provenance_status``:

* ``ok`` — the trace carries the generation request and the provider's response id, the request's messages equal
  this case's input, and the recomputed envelope digest equals the stored one.
* ``mismatch`` — the request equals *another* case's input (the collector joined that case's trace to this one;
  the detail names it and its request id), the request matches no case, or the digest does not recompute.
* ``missing`` — the trace has no recorded request or no response id (historical traces such as tau-bench's):
  never invented, never counted as a pass.

**First divergent boundary** (:func:`first_divergent_boundary`) — the model's calls (as emitted), the adapter's
(after parsing, validation and defaults) and the executor's payloads (with how many times each ran):

* ``adapter`` — the adapter's calls differ from the model's, or (no adapter record) the executor received
  payloads the model never emitted: a correct raw response was turned into a wrong payload.
* ``executor`` — the same payloads, but the executor ran one more often than it was emitted (a retry): not an
  agent duplicate.

A model call whose arguments were not captured is compared by its tool alone: it stands for a call of that tool
received at the next boundary, so a span recorded without content does not make a divergence of its own.

**Failure owner** (:func:`failure_owner`, seed 000 "Ownership follows the first divergent boundary"):
``evaluation_platform`` for a mismatched join, else ``adapter`` / ``executor`` for a divergent boundary, else
``agent`` when the row does not match its reference, else null.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tooleval.canonical import canonical_json
from tooleval.models import Call

__all__ = ["input_key", "join_check", "join_check_key", "first_divergent_boundary", "failure_owner"]


def input_key(value: Any) -> str | None:
    """Comparable form of a conversation: text becomes one user message; each message keeps role and content."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list):
        return canonical_json(value)
    return canonical_json([{"role": m.get("role"), "content": m.get("content")} if isinstance(m, dict) else m
                           for m in value])


def join_check(
    case_id: str,
    request_messages: Any,
    request_id: str | None,
    response_id: str | None,
    digest_ok: bool,
    inputs: dict[str, list[str]],
) -> tuple[str, str]:
    """Decide ``(provenance_status, provenance_detail)`` for one row.

    Args:
        case_id: The row's case.
        request_messages: The recorded generation request's messages (``None`` when not recorded).
        request_id: The generation request id recorded with the trace.
        response_id: The provider's response id (``None`` when not recorded).
        digest_ok: Whether the envelope digest recomputes to the stored value.
        inputs: :func:`input_key` of each case input -> the case ids with that input.

    Returns:
        ``("ok" | "missing" | "mismatch", detail)``.
    """
    key = None if request_messages is None else input_key(request_messages) or ""
    return join_check_key(case_id, key, request_id, response_id, digest_ok, inputs)


def join_check_key(case_id: str, request_key: str | None, request_id: str | None, response_id: str | None,
                   digest_ok: bool, inputs: dict[str, list[str]]) -> tuple[str, str]:
    """:func:`join_check` of a request already reduced to its :func:`input_key` (``None``: no request recorded),
    as trace capture writes it beside the envelope."""
    if not digest_ok:
        return "mismatch", "the envelope digest does not recompute: the trace changed after capture"
    if request_key is None:
        return "missing", "no generation request recorded with the trace"
    owners = inputs.get(request_key, [])
    if case_id not in owners:
        if owners:
            other = owners[0]
            named = f" (request {request_id})" if request_id else ""
            return "mismatch", f"the trace answers case {other}'s request{named}, not case {case_id}'s"
        return "mismatch", f"the recorded request matches no case input of this dataset, not case {case_id}'s"
    if not response_id:
        return "missing", "no provider response id recorded"
    return "ok", "request matches the case input; response id recorded; digest verified"


def _keys(calls: list[Call]) -> Counter:
    return Counter(call.key for call in calls)


def _emitted_keys(emitted: list[Call], received: Counter) -> Counter:
    """The keys of ``emitted``, where a call whose arguments were not captured takes the key of a ``received``
    call of the same tool that no captured call accounts for (its arguments are unknown, so only its tool can
    differ); one with no such call keeps its own key, which then differs."""
    keys = Counter(call.key for call in emitted if call.args_captured)
    spare = received - keys
    for call in emitted:
        if call.args_captured:
            continue
        key = next((k for k in sorted(spare) if k[0] == call.name and spare[k] > 0), call.key)
        keys[key] += 1
        spare[key] -= 1
    return keys


def first_divergent_boundary(
    model: list[Call], adapter: list[Call] | None, executor: list[tuple[Call, int]] | None
) -> str | None:
    """The first boundary where the calls differ (see the module docstring), or ``None``.

    Args:
        model: Calls as emitted in the assistant messages.
        adapter: Calls after the adapter; ``None`` when not recorded.
        executor: ``(payload, executions)`` per executor record; ``None`` when not recorded.
    """
    payload = model
    if adapter is not None:
        if _keys(adapter) != _emitted_keys(model, _keys(adapter)):
            return "adapter"
        payload = adapter
    if executor is None:
        return None
    received = Counter()
    ran = Counter()
    for call, executions in executor:
        received[call.key] += 1
        ran[call.key] += max(int(executions or 1), 1)
    emitted = _emitted_keys(payload, received)
    if set(received) != set(emitted) or any(received[k] < emitted[k] for k in emitted):
        return "adapter"
    if any(ran[k] > emitted[k] for k in ran):
        return "executor"
    return None


def failure_owner(provenance_status: str, boundary: str | None, exact_match: bool | None) -> str | None:
    """Who owns the row's failure (seed 000): see the module docstring."""
    if provenance_status == "mismatch":
        return "evaluation_platform"
    if boundary is not None:
        return boundary
    if exact_match is False:
        return "agent"
    return None
