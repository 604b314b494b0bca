"""The live agent: any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama) through the openai SDK.

For each work item the agent sends the case's input messages with the dataset's tools, and records the
assistant messages exactly as the server returned them (tool-call ``arguments`` stay JSON *text*, malformed text
included). With a :class:`~tooleval.agents.ToolExecutor`, each response's tool calls are executed and the results
sent back, for up to ``max_steps`` model calls; without one, generation is single-step.

Robustness: the SDK's own retries are off (``max_retries=0``); tenacity retries 429, 5xx, timeouts and connection
errors with exponential backoff plus jitter (a ``Retry-After`` header is honoured up to ``backoff_max_s``), and
never other 4xx. Every attempt is recorded in the payload's ``metadata.attempts``. A failed item becomes a record
with ``error`` set and a payload holding what was captured; the batch goes on. Calls run on a thread pool of
``concurrency`` workers, and each finished successful record is written to the :class:`GenerationStore` at once.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from tooleval.agents._calls import chat_call, classify
from tooleval.agents._executor import ToolExecutor
from tooleval.agents._replay import WorkItem
from tooleval.agents._store import GenerationStore, item_key
from tooleval.canonical import canonical_json
from tooleval.errors import InputFileError
from tooleval.models import Case, ToolSpec
from tooleval.versions import tooleval_version

# The SDK, one of the heaviest imports, is imported only when a live agent runs: a replay run never needs it.
if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIAgentConfig", "openai_generate", "openai_tools", "generation_digest", "request_id_for"]

_log = logging.getLogger(__name__)
_GENERATION_FIELDS = ("kind", "base_url", "model", "temperature", "max_steps")


class OpenAIAgentConfig(BaseModel):
    """Configuration of the live agent. Holds the *name* of the key's environment variable, never the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["openai"] = "openai"
    base_url: str = Field(min_length=1)
    """Server root including ``/v1``, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``."""
    model: str = Field(min_length=1)
    """Model name as the server knows it (``gpt-4o``, ``meta-llama/Llama-3.1-8B-Instruct``, ``llama3.1``)."""
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature in [0, 2]; with the per-trial ``seed`` it decides how much trials may differ."""
    max_steps: int = Field(1, ge=1, le=100)
    """Model calls per item when an executor is configured (1 = single step); ignored without one."""
    request_timeout_s: float = Field(60.0, gt=0)
    """Per-request timeout in seconds (httpx: connect, read, write and pool each)."""
    max_retries: int = Field(5, ge=0)
    """Retries after the first attempt of each model call; attempts = max_retries + 1."""
    backoff_initial_s: float = Field(1.0, ge=0)
    """First backoff in seconds; doubles per retry, plus up to this much random jitter."""
    backoff_max_s: float = Field(30.0, ge=0)
    """Cap of one backoff in seconds (also caps a server's ``Retry-After``)."""
    concurrency: int = Field(4, ge=1, le=256)
    """Items generated at once (worker threads sharing one HTTP client)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (read when a request is about to be made)."""

    def digest(self) -> str:
        """sha256 (64 hex) of the canonical JSON of the fields that shape a generation: kind, base_url, model,
        temperature, max_steps.

        Operational fields (timeouts, retries, backoff, concurrency, the key's variable) are left out on purpose:
        resuming with a longer timeout or less concurrency must reuse finished work. ``base_url`` is in: another
        endpoint may serve other weights under the same model name, so moving endpoints regenerates."""
        content = {name: getattr(self, name) for name in _GENERATION_FIELDS}
        return hashlib.sha256(canonical_json(content).encode()).hexdigest()

    def api_key(self) -> str:
        """The API key from ``$<api_key_env>``.

        Raises:
            InputFileError: the variable is unset or empty (a usage error: exit 2, nothing written).
        """
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise InputFileError(None, None, f"environment variable {self.api_key_env} is not set.",
                                 f"export {self.api_key_env}=<key> (any non-empty value for a server without auth).")
        return key


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """``tools.json`` specs as OpenAI function tools ``[{"type": "function", "function": {name, description?,
    parameters}}]``; tooleval's own fields (``side_effect``, ``family``, ...) are not sent."""
    offered = []
    for spec in tools:
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = spec.parameters or {"type": "object", "properties": {}}
        offered.append({"type": "function", "function": function})
    return offered


def generation_digest(config: OpenAIAgentConfig, tools: list[ToolSpec], executor: ToolExecutor | None = None) -> str:
    """The agent digest of the cache key: config digest + offered tools + executor digest (64 hex)."""
    content = {"agent": config.digest(), "tools": openai_tools(tools),
               "executor": None if executor is None else executor.digest()}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def request_id_for(item: WorkItem, agent_digest: str) -> str:
    """Our request id: ``"tooleval-"`` + 32 hex of :func:`item_key`; sent as ``X-Client-Request-Id``."""
    return "tooleval-" + item_key(item, agent_digest)[:32]


class _BadInput(Exception):
    """The item cannot be asked: its case is missing or its input is not chat messages or text."""


def _input_messages(case: Case | None, case_id: str) -> list[dict[str, Any]]:
    if case is None:
        raise _BadInput(f"case {case_id!r} is not in the dataset")
    if isinstance(case.input, str):
        return [{"role": "user", "content": case.input}]
    if isinstance(case.input, list) and all(isinstance(m, dict) and "role" in m for m in case.input):
        return [dict(m) for m in case.input]
    raise _BadInput(f"case input is neither text nor a list of chat messages: {type(case.input).__name__}")


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):  # some servers return an object; the wire format is text
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id"), "type": "function", "function": {"name": function.get("name"),
                                                                    "arguments": arguments}}


def _wire(message: dict[str, Any]) -> dict[str, Any]:
    """What is sent back of a recorded message: an assistant message loses provider-specific extras."""
    if message.get("role") != "assistant":
        return message
    wire: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        wire["tool_calls"] = [_wire_call(call) for call in message["tool_calls"]]
    return wire


def _generate_one(client: openai.OpenAI, config: OpenAIAgentConfig, item: WorkItem, case: Case | None,
                  tools: list[dict], executor: ToolExecutor | None, agent_digest: str) -> dict[str, Any]:
    """Generate one item; never raises: a failure is the record's ``error``, with what was captured so far."""
    request_id = request_id_for(item, agent_digest)
    messages: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    executor_calls: list[dict[str, Any]] = []
    usage: list[Any] = []
    response_id, steps, stop_reason, error = None, 0, None, None
    request_messages: list[dict[str, Any]] | None = None
    started_at = datetime.now(timezone.utc)
    try:
        messages = _input_messages(case, item.case_id)
        request_messages = [dict(m) for m in messages]
        limit = config.max_steps if executor is not None else 1
        for step in range(1, limit + 1):
            kwargs: dict[str, Any] = {"model": config.model, "messages": [_wire(m) for m in messages],
                                      "temperature": config.temperature, "seed": item.seed,
                                      "extra_headers": {"X-Client-Request-Id": request_id}}
            if tools:
                kwargs["tools"] = tools
            body = chat_call(client, config, kwargs, step, attempts)
            steps, response_id = step, body.get("id")
            usage.append(body.get("usage"))
            message = dict(body["choices"][0]["message"])
            message.setdefault("role", "assistant")
            messages.append(message)
            if not message.get("tool_calls"):
                stop_reason = "no_tool_calls"
                break
            if executor is None:
                stop_reason = "no_executor"
                break
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                result = executor.execute(function.get("name"), function.get("arguments"))
                messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
                executor_calls.append({"name": function.get("name"), "args": function.get("arguments"),
                                       "result": result})
        else:
            stop_reason = "max_steps"
    except Exception as exc:  # the batch goes on: one failed item becomes a row with its error
        kind = "bad_input" if isinstance(exc, _BadInput) else classify(exc)[0]
        failed = sum(1 for attempt in attempts if attempt["step"] == steps + 1)
        tried = f" after {failed} attempt(s)" if failed else ""
        error = f"generation_error: {kind}{tried}: {type(exc).__name__}: {exc}"
    trace = {"case_id": item.case_id, "trial": item.trial,
             "agent": {"name": "openai", "version": tooleval_version(), "model": config.model},
             "request_id": request_id, "response_id": response_id, "messages": messages,
             "request": None if request_messages is None else {"messages": request_messages},
             "generation_started_at": started_at.isoformat(),
             "generation_finished_at": datetime.now(timezone.utc).isoformat(),
             "metadata": {"attempts": attempts, "seed": item.seed, "steps": steps, "stop_reason": stop_reason,
                          "temperature": config.temperature, "usage": usage, "error": error}}
    if executor is not None:
        trace["executor_calls"] = executor_calls
    return {"case_id": item.case_id, "trial": item.trial, "seed": item.seed,
            "payload_json": json.dumps(trace, ensure_ascii=False), "error": error}


def openai_generate(config: OpenAIAgentConfig, items: list[WorkItem], cases: dict[str, Case],
                    tools: list[ToolSpec], *, executor: ToolExecutor | None = None,
                    store: GenerationStore | None = None,
                    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Generate every work item against the live server, reusing the store's finished records.

    Args:
        config: The live agent's configuration.
        items: Work items (one per case and trial); each item's ``seed`` is sent as the request's ``seed``.
        cases: The dataset's cases by ``case_id`` (an item whose case is missing becomes an error record).
        tools: The dataset's tool specs, offered as OpenAI function tools (none offered when empty).
        executor: Answers tool calls for a multi-step loop of up to ``config.max_steps`` model calls; ``None``
            means single-step generation.
        store: Per-item cache; items found there make no request, finished successes are written at once.
        transform: Applied to each new record before it is stored or returned (the pipeline redacts here, so
            raw values never reach the store); records found in the store were transformed when stored.

    Returns:
        Generation records ``{case_id, trial, seed, payload_json, error}`` in ``items`` order, one per item.
        ``payload_json`` is a recorded trace (docs/design.md "Recorded traces") as JSON text, also for failed items:
        ``{case_id, trial, agent: {name: "openai", version, model}, request_id, response_id (the last response's
        ``id``), messages (input + assistant messages as returned + tool results), executor_calls (only with an
        executor: ``[{name, args (argument text as returned), result}]``), metadata: {attempts (see
        :func:`tooleval.agents._calls.chat_call`), seed, steps, stop_reason ("no_tool_calls" | "no_executor" |
        "max_steps" | null on error), temperature, usage (per step, as sent by the server), error}}``.
        ``error`` is ``"generation_error: <kind>[ after N attempt(s)]: <exception>: <message>"`` with kind one of
        timeout, connection_error, rate_limited, server_error, client_error, bad_response, bad_input, error.

    Raises:
        InputFileError: the API key's environment variable is unset (only when something must be generated).
    """
    agent_digest = generation_digest(config, tools, executor)
    offered = openai_tools(tools)
    keys = [item_key(item, agent_digest) for item in items]
    records: list[dict[str, Any] | None] = [store.get(k) if store else None for k in keys]
    todo = [i for i, record in enumerate(records) if record is None]
    if not todo:
        return records  # type: ignore[return-value]
    import openai

    client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key(), max_retries=0,
                           timeout=config.request_timeout_s)

    def work(index: int) -> dict[str, Any]:
        item = items[index]
        record = _generate_one(client, config, item, cases.get(item.case_id), offered, executor, agent_digest)
        if transform is not None:
            record = transform(record)
        if store is not None and record["error"] is None:
            try:
                store.put(keys[index], record)
            except OSError as exc:  # the record is still returned; only its caching failed
                _log.warning("could not store generation %s: %s", keys[index], exc)
        return record

    with client, ThreadPoolExecutor(max_workers=min(config.concurrency, len(todo))) as pool:
        for index, record in zip(todo, pool.map(work, todo)):
            records[index] = record
    return records  # type: ignore[return-value]
