"""One chat-completions call with retries (tenacity) and a record of every attempt.

The SDK's own retries are off (the client is built with ``max_retries=0``) so that every attempt is visible:
tenacity retries 429, 5xx, timeouts and connection errors with exponential backoff plus jitter (a ``Retry-After``
header is honoured up to ``backoff_max_s``), and never other 4xx nor a 2xx body that is not a chat completion.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

# The SDK, one of the heaviest imports, is imported only when a live agent calls: a replay run never needs it.
if TYPE_CHECKING:
    import openai

    from tooleval.agents._openai import OpenAIAgentConfig

__all__ = ["BadResponse", "classify", "chat_call"]


class BadResponse(Exception):
    """A 2xx response that is not a chat completion (never retried)."""


def classify(exc: BaseException) -> tuple[str, int | None]:
    """``(status, http status)`` of a failed attempt.

    Returns:
        status is one of ``timeout``, ``connection_error``, ``rate_limited`` (429), ``server_error`` (5xx),
        ``client_error`` (other 4xx), ``bad_response`` (a 2xx that is not a chat completion) or ``error``
        (anything else); the HTTP status is ``None`` when no response arrived.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error", None
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        return ("rate_limited" if code == 429 else "server_error" if code >= 500 else "client_error"), code
    return ("bad_response" if isinstance(exc, BadResponse) else "error"), None


def _retryable(exc: BaseException) -> bool:
    return classify(exc)[0] in ("timeout", "connection_error", "rate_limited", "server_error")


class _Backoff:
    """tenacity wait: exponential with jitter, or the server's ``Retry-After`` seconds if longer; capped."""

    def __init__(self, config: "OpenAIAgentConfig") -> None:
        self.cap = config.backoff_max_s
        self.base = wait_exponential_jitter(initial=config.backoff_initial_s, max=self.cap,
                                            jitter=config.backoff_initial_s)

    def __call__(self, state: Any) -> float:
        wait = self.base(state)
        exc = state.outcome.exception() if state.outcome else None
        response = getattr(exc, "response", None)
        try:
            wait = max(wait, float(response.headers.get("retry-after")))
        except (AttributeError, TypeError, ValueError):
            pass
        return min(wait, self.cap)


def _attempt(step: int, number: int, started: datetime, t0: float, exc: BaseException | None,
             response: Any) -> dict[str, Any]:
    """One ``metadata.attempts`` entry (see :func:`chat_call`)."""
    response = getattr(exc, "response", None) or response
    headers = getattr(response, "headers", None) or {}
    status, http_status = ("ok", None) if exc is None else classify(exc)
    http_status = http_status or getattr(response, "status_code", None)
    return {"step": step, "attempt": number, "status": status, "http_status": http_status,
            "error": None if exc is None else f"{type(exc).__name__}: {exc}",
            "started_at": started.isoformat(timespec="milliseconds"),
            "elapsed_s": round(time.monotonic() - t0, 4), "provider_request_id": headers.get("x-request-id")}


def chat_call(client: openai.OpenAI, config: "OpenAIAgentConfig", kwargs: dict[str, Any], step: int,
              attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """Make one model call (``client.chat.completions.create(**kwargs)``), retrying transient failures.

    Args:
        client: An SDK client built with ``max_retries=0`` (tenacity does the retrying).
        config: Supplies ``max_retries`` (attempts = max_retries + 1), ``backoff_initial_s``, ``backoff_max_s``.
        kwargs: Keyword arguments of ``chat.completions.create``.
        step: The loop step this call belongs to (1-based), recorded on each attempt.
        attempts: Appended with one entry per attempt, successful or not: ``{step, attempt (1-based), status
            ("ok" or a :func:`classify` status), http_status, error, started_at (ISO 8601 UTC), elapsed_s
            (seconds), provider_request_id (the server's ``x-request-id`` header, when sent)}``.

    Returns:
        The response body as parsed JSON (the raw text is kept exactly: tool-call arguments stay text).

    Raises:
        openai.APIError: the last error once retries are exhausted, or at once for a non-retryable one.
        BadResponse: a 2xx body that is not a chat completion with ``choices[0].message`` (not retried).
    """
    retrying = Retrying(stop=stop_after_attempt(config.max_retries + 1), wait=_Backoff(config),
                        retry=retry_if_exception(_retryable), reraise=True)
    for attempt in retrying:
        with attempt:
            number, raw = attempt.retry_state.attempt_number, None
            started, t0 = datetime.now(timezone.utc), time.monotonic()
            try:
                raw = client.chat.completions.with_raw_response.create(**kwargs)
                try:
                    body = json.loads(raw.text)
                    message = body["choices"][0]["message"]
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise BadResponse(f"not a chat completion: {raw.text[:200]!r}") from exc
                if not isinstance(message, dict):
                    raise BadResponse("choices[0].message is not an object")
            except Exception as exc:
                attempts.append(_attempt(step, number, started, t0, exc, raw))
                raise
            attempts.append(_attempt(step, number, started, t0, None, raw))
            return body
    raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover
