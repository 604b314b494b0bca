"""A real viewer over HTTP for the viewer's tests: uvicorn in a thread on a port the system picks (127.0.0.1),
and the run's rows read back with pyarrow, independently of the viewer's DuckDB queries."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq


@contextmanager
def viewer(out: Path):
    """Yield the base URL of a viewer of ``out`` served by uvicorn on 127.0.0.1; stopped on exit."""
    import uvicorn

    from tooleval.view import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(out), log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the viewer did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def get(url: str) -> tuple[int, str]:
    """(status, body) of a GET, 4xx and 5xx included."""
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def parquet_rows(out: Path, run_id: str) -> list[dict]:
    files = sorted((out / "rows").glob(f"*/run_id={run_id}/*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def tools_of(row: dict) -> set[str]:
    return {c["name"] for c in (row["expected_calls"] or []) + (row["observed_calls"] or [])}


_PART = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(\d+)\]")


def at_path(value, path: str):
    """The value at a path such as ``flights[0].date`` (keys and list positions only), or ``"(absent)"``."""
    for key, index in _PART.findall(path):
        if key:
            if not isinstance(value, dict) or key not in value:
                return "(absent)"
            value = value[key]
        else:
            if not isinstance(value, list) or int(index) >= len(value):
                return "(absent)"
            value = value[int(index)]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
