"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for the live agent's tests.

A real HTTP server (stdlib ``ThreadingHTTPServer`` on an ephemeral port, serving from a background thread), not a
monkeypatched client: the openai SDK, httpx, timeouts and status codes are exercised for real. Replies are
scripted per *case*: a request is routed by the content of its first user message, and each route's replies are
served in order, the last one repeating (so ``[error(500)]`` is a persistent 500). Every request is recorded
(body, headers, route) and counted. A hard cap on requests keeps a runaway retry loop bounded, and ``stop()`` wakes
delayed replies, shuts the server down and joins its thread.

Test modules import it (``from tests.support import chat_server``); the span and MLflow producers, scripts that
run in child processes of their own, load this file by its path.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_REQUESTS = 500
"""Requests past this many get a 400 (no retry), so no test can loop for long."""


@dataclass
class Reply:
    """One scripted HTTP reply: status, JSON body (or raw text), extra headers, and a delay before answering."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def call(name: str, arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    """A tool call as the server sends it: ``arguments`` is JSON text (malformed text allowed)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(*calls: dict[str, Any], content: str | None = None, response_id: str = "chatcmpl-1",
               delay_s: float = 0.0) -> Reply:
    """A 200 chat completion whose assistant message carries ``calls`` (several = parallel calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = list(calls)
    body = {"id": response_id, "object": "chat.completion", "created": 1767225600, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    return Reply(200, body, delay_s=delay_s)


def error(status: int, message: str = "scripted error", headers: dict[str, str] | None = None) -> Reply:
    """An OpenAI-style error reply."""
    return Reply(status, {"error": {"message": message, "type": "scripted", "code": status}}, headers or {})


@dataclass
class Seen:
    """One request the server received."""

    route: str | None
    body: dict[str, Any]
    headers: dict[str, str]


class ChatServer:
    """Serve scripted replies at ``<base_url>/chat/completions``; use as a context manager or start()/stop().

    Args:
        routes: First-user-message content -> replies served in order (the last repeats).
        default: Replies for requests whose route is not in ``routes`` (default: a 400 "unscripted").
    """

    def __init__(self, routes: dict[str, list[Reply]], default: list[Reply] | None = None) -> None:
        self.routes = {key: list(replies) for key, replies in routes.items()}
        self.default = list(default or [error(400, "unscripted request")])
        self.requests: list[Seen] = []
        self.in_flight = self.max_in_flight = 0
        self._served: dict[str | None, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # a client that timed out hung up: fine
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        """Requests received so far."""
        with self._lock:
            return len(self.requests)

    def count_for(self, route: str) -> int:
        with self._lock:
            return sum(1 for seen in self.requests if seen.route == route)

    def start(self) -> "ChatServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        messages = body.get("messages") or []
        route = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        with self._lock:
            self.requests.append(Seen(route, body, headers))
            if len(self.requests) > MAX_REQUESTS:
                return error(400, "request cap reached")
            replies = self.routes.get(route, self.default)
            index = self._served.get(route, 0)
            self._served[route] = index + 1
            return replies[min(index, len(replies) - 1)]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                done = False
                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        reply = error(404, f"no route {self.path}")
                    else:
                        reply = server._next(json.loads(raw), {k.lower(): v for k, v in self.headers.items()})
                    if reply.delay_s:
                        server._stop.wait(reply.delay_s)
                    text = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                    data = text.encode()
                    # no longer in flight once the reply is ready: decremented after the write, the client could
                    # already have sent its next request (counted as a third in flight under load)
                    done = _leave(server, done)
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("x-request-id", f"srv-{server.count}")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    _leave(server, done)

        return Handler


def _leave(server: "ChatServer", done: bool) -> bool:
    """Count one request out of flight, once (``done``: already counted out)."""
    if not done:
        with server._lock:
            server.in_flight -= 1
    return True
