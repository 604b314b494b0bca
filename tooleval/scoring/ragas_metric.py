"""The ``ragas_tool_call_f1`` column: exactly what ragas' ``ToolCallF1().ascore(...)`` returns for a row.

ragas is called, not re-implemented. How a row is handed to ragas (docs/design.md "ragas column"):

* reference calls: ``ragas.messages.ToolCall(name, args)`` with the reference's parsed args;
* observed calls: one ``AIMessage`` carrying every observed call as ``ToolCall(name, args)`` with the args parsed
  from the argument text. They are tooleval's canonical values (integral floats as ints, ``-0.0`` as ``0``), which
  Python's ``==`` and ``hash`` treat exactly like the plain parsed values, so ragas' own equality decides as it
  would on the raw JSON (``True == 1`` and ``10 == 10.0``); a malformed call is passed as
  ``{"__malformed__": <raw text>}``.

ragas 0.4.3 compares *sets* (duplicates collapse), scores two empty lists 0.0 and rounds to 4 decimals; the
characterization tests in ``tests/scoring/test_ragas_metric.py`` pin that behaviour.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from functools import lru_cache
from importlib.metadata import version
from typing import Any, Iterable, Iterator, Sequence

from tooleval.models import Call

__all__ = ["ragas_version", "ragas_args", "ragas_tool_call_f1", "ragas_tool_call_f1_many", "hide_provider_sdks",
           "import_ragas_metric", "provider_sdks_hidden"]

# Model providers' SDKs that ragas' LLM layer imports whenever they are installed (instructor registers a client for
# each one it finds), although ToolCallF1 calls no model. With anthropic, google-genai and boto3 installed, they
# were ~3,500 of the ~6,900 modules a process held after importing ragas, ~66 MB of it and half of the import's time.
_PROVIDER_SDKS = ("anthropic", "boto3", "cerebras", "cohere", "fireworks", "google.generativeai", "google.genai",
                  "groq", "mistralai", "vertexai", "writerai", "xai_sdk")
_hide_providers = False


@lru_cache(maxsize=1)
def ragas_version() -> str:
    """The installed ragas version string (part of the scoring cache key)."""
    return version("ragas")


def hide_provider_sdks() -> None:
    """Have :func:`import_ragas_metric` import ragas without the model providers' SDKs, in this process.

    For a process tooleval owns, whose ragas only scores ToolCallF1: a run's pool workers, the ``tooleval``
    command. Not for a caller's process (a notebook that imports tooleval): there instructor would keep no client
    for a provider hidden while it was imported."""
    global _hide_providers
    _hide_providers = True


@contextmanager
def provider_sdks_hidden() -> Iterator[None]:
    """Inside: after :func:`hide_provider_sdks`, each SDK of :data:`_PROVIDER_SDKS` not yet imported is hidden (a
    ``None`` entry in ``sys.modules``: ``importlib.util.find_spec`` then finds nothing, which is how instructor
    decides whether to register a provider, and ``import`` raises ``ModuleNotFoundError``). Shown again on the way
    out, so that a later ``import anthropic`` in the process works as usual. Without it, nothing is hidden."""
    import sys

    hidden = [name for name in _PROVIDER_SDKS if name not in sys.modules] if _hide_providers else []
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_ragas_metric() -> None:
    """Import ragas' ToolCallF1 (and with it ``ragas.messages``) inside :func:`provider_sdks_hidden`, once per
    process. Raises what importing ragas raises."""
    import sys

    if "ragas.metrics.collections" in sys.modules:
        return
    with provider_sdks_hidden():
        import ragas.metrics.collections  # noqa: F401


def ragas_args(call: Call) -> dict[str, Any]:
    """The argument object ragas is given for ``call``.

    Well-formed calls: the canonical argument values (equal and hash-equal to the plain parsed JSON values, so
    ragas' own Python equality decides). Malformed calls: ``{"__malformed__": raw text}``. A call whose arguments
    were not captured: ``{}``, what ragas is given for a tool call without arguments (the legacy path reads the
    absent argument text as ``{}`` too), so ragas scores it as a call with empty arguments and the drift check
    compares like with like.
    """
    if call.malformed:
        return {"__malformed__": call.args_raw or ""}
    return call.args or {}


async def _score_one(metric: Any, expected: Sequence[dict], observed: Sequence[dict]) -> float:
    from ragas.messages import AIMessage, ToolCall

    reference = [ToolCall(name=c["name"], args=c["args"]) for c in expected]
    message = AIMessage(content="", tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in observed])
    result = await metric.ascore(user_input=[message], reference_tool_calls=reference)
    return float(result.value)


async def _score_all(pairs: list[tuple[list[dict], list[dict]]]) -> list[float]:
    import_ragas_metric()
    from ragas.metrics.collections import ToolCallF1

    # one row after the other in one coroutine, as a ragas user's loop awaits them: ToolCallF1 waits on nothing
    # (no I/O, no model), so a task per row (gather) bought no overlap and cost as much as ragas' own scoring
    metric = ToolCallF1()
    return [await _score_one(metric, expected, observed) for expected, observed in pairs]


def ragas_tool_call_f1_many(pairs: Iterable[tuple[list[dict], list[dict]]]) -> list[float]:
    """Score many rows with ragas' ToolCallF1 in one event loop.

    Args:
        pairs: ``(expected, observed)`` per row, each a list of ``{"name": str, "args": dict}`` in the form
            ragas is given (see :func:`ragas_args`).

    Returns:
        One float per row in [0, 1], rounded by ragas to 4 decimals.

    Raises:
        RuntimeError: when called from a running event loop (call it from synchronous code, e.g. a sync task).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_score_all(list(pairs)))
    raise RuntimeError("ragas_tool_call_f1_many() runs its own event loop; call it from synchronous code")


def ragas_tool_call_f1(expected: list[dict], observed: list[dict]) -> float:
    """Score one row; see :func:`ragas_tool_call_f1_many`."""
    return ragas_tool_call_f1_many([(expected, observed)])[0]
