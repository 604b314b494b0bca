"""moto's S3 server on 127.0.0.1 for the lease and commit-marker tests, optionally posing as a store without
conditional writes.

moto's server checks a PUT's ``If-None-Match`` / ``If-Match`` and then stores the object in two steps, without a
lock between them, while it serves requests on several threads; S3 and MinIO do both atomically. Serialising the
writes (PUT, POST, DELETE) gives moto the same atomicity, which the race tests rely on; reads stay concurrent.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Iterator

from contextlib import contextmanager

__all__ = ["moto_s3"]


def _serialised(app: Callable, reject_conditions: bool, log: list | None = None) -> Callable:
    lock = threading.Lock()

    def wsgi(environ: dict, start_response: Callable) -> Any:
        method = environ.get("REQUEST_METHOD", "GET")
        if log is not None:
            log.append((method, environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")))
        conditional = "HTTP_IF_MATCH" in environ or "HTTP_IF_NONE_MATCH" in environ
        if reject_conditions and conditional and method in ("PUT", "DELETE"):
            # what an S3-compatible store without conditional writes answers
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header '
                    b'you provided implies functionality that is not implemented</Message></Error>')
            start_response("501 Not Implemented", [("Content-Type", "application/xml"),
                                                   ("Content-Length", str(len(body)))])
            return [body]
        if method in ("PUT", "POST", "DELETE"):
            with lock:
                return list(app(environ, start_response))  # the whole answer made while holding the lock
        return app(environ, start_response)

    return wsgi


@contextmanager
def moto_s3(reject_conditions: bool = False, log: list | None = None) -> Iterator[str]:
    """Serve moto's S3 on a free port of 127.0.0.1 in this process (threads) for the block; yields its URL.

    Args:
        reject_conditions: Answer ``501 NotImplemented`` to every conditional PUT or DELETE, as a store
            without conditional writes does.
        log: A list that gets ``(method, path, query string)`` of every request, in order.
    """
    from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    class QuietHandler(MotoRequestHandler):
        """No request line logged: in a test that runs commands in its own process, werkzeug's log records reach
        whatever handler the command installed (Prefect's console, on a stream the test runner may have closed)."""

        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            return None

    # S3's own app, not moto's dispatcher: the dispatcher finds the service of every request anew, under one lock,
    # scanning moto's package folder each time (a fifth of the server's time in a run's thousands of requests)
    app = _serialised(create_backend_app("s3"), reject_conditions, log)
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


AWS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
"""Credentials moto's server accepts (any), for the tests' environment."""


@contextmanager
def fresh_prefix(endpoint: str, monkeypatch: Any, bucket_prefix: str = "results") -> Iterator[str]:
    """A new bucket on ``endpoint`` and its ``s3://<bucket>/nightly`` prefix, with this process's environment
    pointed at the server (``monkeypatch`` undoes it) and s3fs's cached filesystems dropped before and after (a
    cached one keeps the endpoint it was made with)."""
    import uuid

    import fsspec
    from s3fs import S3FileSystem

    for name, value in {**AWS, "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(name, value)
    S3FileSystem.clear_instance_cache()
    bucket = f"{bucket_prefix}-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3").mkdir(bucket)
    try:
        yield f"s3://{bucket}/nightly"
    finally:
        S3FileSystem.clear_instance_cache()
