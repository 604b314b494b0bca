"""The viewer's web application (Starlette) and its server (uvicorn): the runs, a run's rows, a row's evidence and
two runs compared, each page one stable URL whose query string holds its filters."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tooleval.view._data import PAGE_SIZES, SORTS, RowFilter, Store, ViewError, diff_table, mark_calls
from tooleval.view._templates import render

__all__ = ["create_app", "serve", "LOOPBACK"]

LOOPBACK = "127.0.0.1"
"""The one address the viewer serves unless ``--host`` names another."""

_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                       "form-action 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
"""No page loads anything from elsewhere, and a browser that is asked to is told not to."""


def _page(store: Store, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(name, out=str(store.out), status=status, **context), status_code=status,
                        headers=_HEADERS)


def _messages(envelope: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The envelope's conversation as ``{role, name, text, calls: [{name, arguments}]}`` (text parts joined)."""
    if envelope is None or envelope.get("messages_json") is None:
        return None
    try:
        messages = json.loads(envelope["messages_json"])
    except ValueError:
        return None
    shown = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", json.dumps(p))) if isinstance(p, dict) else str(p) for p in content)
        elif content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        calls = []
        for call in message.get("tool_calls") or []:
            body = call.get("function", call) if isinstance(call, dict) else {}
            arguments = body.get("arguments", body.get("args"))
            calls.append({"name": body.get("name"), "arguments": arguments if isinstance(arguments, str)
                          else json.dumps(arguments, ensure_ascii=False)})
        shown.append({"role": message.get("role"), "name": message.get("name") or message.get("tool_call_id"),
                      "text": content, "calls": calls})
    return shown


def create_app(out: str | Path) -> Starlette:
    """The viewer of the results ``out`` (a folder, or an fsspec URL such as ``s3://bucket/prefix``: see
    :class:`~tooleval.view._data.Store`) as an ASGI application.

    Routes: ``/`` (runs), ``/runs/{run}`` (headline and rows: query string :class:`RowFilter`),
    ``/runs/{run}/row?case=C&trial=T``, ``/runs/{run}/report`` (the published report.html),
    ``/compare?base=B&head=H``. A request the viewer cannot answer gets a page that says why, with a 4xx status.
    """
    store = Store(out)

    async def runs(request: Request) -> Response:
        listed = store.runs()
        trends: dict[str, list] = {}
        for info in reversed(listed):
            trends.setdefault(info["dataset"] or info["dataset_revision"], []).append(info)
        return _page(store, "runs", runs=listed, trends=trends)

    async def run(request: Request) -> Response:
        ref = store.run(request.path_params["run_id"])
        filters = RowFilter.parse(request.query_params)
        summary = ref.summary
        gate = summary.get("gate")
        return _page(store, "run", run=ref, head=store.headline(ref), page=store.page(ref, filters), filters=filters,
                     gate=None if not gate else ("PASS" if gate.get("passed") else "FAIL"),
                     drift=(summary.get("drift") or {}).get("verdict"), sorts=list(SORTS), sizes=PAGE_SIZES)

    async def row(request: Request) -> Response:
        ref = store.run(request.path_params["run_id"])
        params = request.query_params
        unknown = set(params) - {"case", "trial"}
        case_id, trial = params.get("case"), params.get("trial", "")
        if unknown or case_id is None or not trial.isdigit():
            raise ViewError(400, "a row is named by case=<case id>&trial=<whole number>.",
                            "open a row from the run's rows table.")
        found = store.row(ref, case_id, int(trial))
        record, envelope = found["row"], found["envelope"]
        redacted = sorted(set((envelope or {}).get("redacted_fields") or [])
                          | set((ref.summary.get("redaction") or {}).get("fields") or []))
        handoff = (f"tooleval handoff --out {shlex.quote(str(store.out))} --run-id {shlex.quote(ref.run_id)} "
                   f"--case={shlex.quote(case_id)} --trial {int(trial)}")
        diffs = [{"name": p.get("name"), "rows": diff_table(p)} for p in record.get("wrong_args") or []]
        return _page(store, "row", run=ref, row=record, envelope=envelope, calls=mark_calls(record), diffs=diffs,
                     messages=_messages(envelope), redaction=redacted, handoff=handoff,
                     others=store.other_runs(ref, case_id, int(trial)))

    async def report(request: Request) -> Response:
        ref = store.run(request.path_params["run_id"])
        html = store.document(ref.run_id, "report.html")
        if html is None:
            raise ViewError(404, f"run {ref.run_id!r} has no report.html.",
                            f"tooleval report --run-id {ref.run_id} writes it again.")
        # the report is one self-contained file: its plots draw with the script inlined in it
        return HTMLResponse(html, headers={"X-Content-Type-Options": "nosniff"})

    async def compare(request: Request) -> Response:
        params = request.query_params
        base, head = params.get("base"), params.get("head")
        if set(params) - {"base", "head"} or not base or not head:
            raise ViewError(400, "compare needs base=<run id>&head=<run id>.", "pick two runs on the runs page.")
        return _page(store, "compare", c=store.compare(base, head))

    async def view_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ViewError)
        return _page(store, "error", status=exc.status, problem=exc.problem, fix=exc.fix)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return _page(store, "error", status=status, problem=f"no page at {request.url.path}.",
                     fix="the runs page links every page.")

    async def crashed(request: Request, exc: Exception) -> Response:
        # a fault of the viewer itself: said in one line, never a traceback page
        return _page(store, "error", status=500, problem=f"the viewer failed on this page: {type(exc).__name__}: "
                                                         f"{exc}".splitlines()[0], fix="")

    routes = [Route("/", runs), Route("/runs/{run_id}", run), Route("/runs/{run_id}/row", row),
              Route("/runs/{run_id}/report", report), Route("/compare", compare)]
    app = Starlette(routes=routes, exception_handlers={ViewError: view_error, 404: not_found, 405: not_found,
                                                       Exception: crashed})
    app.state.store = store  # serve names where the results are read from as the pages do
    return app


def serve(out: str | Path, host: str = LOOPBACK, port: int = 8765) -> None:
    """Serve the viewer of ``out`` (a folder or an fsspec URL) on ``host:port`` until interrupted; says where, and
    says so loudly when the address is not the loopback one (anyone who can reach it can read the runs).

    Raises:
        OSError: the address cannot be bound (the port is taken, the host is not this machine's).
    """
    import socket

    import uvicorn

    app = create_app(out)  # made first: a location that cannot be read is not left holding a bound port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))  # bound here, so a taken port is an error this command names, not uvicorn's exit
    except OSError:
        sock.close()
        raise
    sys.stdout.write(f"tooleval view: serving {app.state.store.out} at http://{host}:{port}/ (Ctrl-C stops)\n")
    if host not in (LOOPBACK, "localhost", "::1"):
        sys.stdout.write(f"warning: --host {host} serves the runs to every machine that can reach this address.\n")
    sys.stdout.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
