"""Benchmark: the viewer's page times and peak memory over one large published run (docs/viewer.md).

Starts ``tooleval view --out OUT`` as its own process (``python -X importtime``, so every module the server ever
imports is listed on its stderr, lazy imports during requests included) and requests, over HTTP on 127.0.0.1,
``--requests`` different URLs of each page:

* ``runs``: ``/`` (the page has no parameters; the viewer caches no answer, so each request reads the files again);
* ``rows``: ``/runs/RUN?page=N``, a different page each time, spread over the whole run;
* ``filtered``: ``/runs/RUN?category=wrong_args&tool=T``, a different tool each time (then later pages of the
  tools, when the run has fewer tools than requests);
* ``sorted``: ``/runs/RUN?sort=f1&order=asc|desc&page=N``, a different page (and order) each time;
* ``row``: ``/runs/RUN/row?case=C&trial=T``, a different row each time (a seeded sample of the run's rows).

The first page of the run is requested once before these and timed on its own (it builds the run's index). Every
answer must be a 200. Prints per page the median and the worst time to the first and to the last byte
(milliseconds; connection included), the server's peak RSS (MB: the kernel's high-water mark, ``VmHWM``), the
load average before and after, and whether the server imported Prefect or ragas (it must not). The targets are
each page's median under 300 ms and the server under 400 MB; a missed target is printed as ``MISSED`` and is exit
1. Run from the repository root over a run made with ``tooleval synth --rows 1000000 --profile bfcl --seed 0``
and ``tooleval run --workers 2``:

    .venv/bin/python bench/bench_viewer.py --out /tmp/bench-viewer/out

``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
TARGET_MS = 300.0
TARGET_MB = 400.0
PAGE_SIZE = 50  # the rows table's default page size


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_get(port: int, path: str) -> tuple[int, float, float, int]:
    """GET ``path``: (status, ms to the first byte of the answer, ms to its last byte, body bytes)."""
    started = time.perf_counter()
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        con.request("GET", path)
        response = con.getresponse()  # returns once the status line (the first bytes) has arrived
        first = time.perf_counter()
        body = response.read()
        last = time.perf_counter()
    finally:
        con.close()
    return response.status, (first - started) * 1000, (last - started) * 1000, len(body)


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (``VmHWM`` in /proc), in MB (10**6 bytes)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", text, re.M).group(1)) * 1024 / 1e6


def _run_facts(out: Path, run_id: str | None, requests: int, seed: int) -> dict:
    """The run benchmarked (the newest when ``run_id`` is None), its rows, its tools with a ``wrong_args`` row
    (most such rows first) and a seeded sample of its (case id, trial) keys, read with DuckDB from the committed
    files (the same reader every command uses), before the server starts."""
    import duckdb

    from tooleval.runs.catalog import list_runs
    from tooleval.storage import committed_files, scan_rows_sql

    listed = list_runs(out)
    if not listed:
        raise SystemExit(f"no published run under {out}")
    info = next((i for i in listed if i.run_id == run_id), None) if run_id else listed[0]
    if info is None:
        raise SystemExit(f"no run {run_id!r} under {out}")
    source = scan_rows_sql(committed_files(out, "rows", info.dataset_revision, info.run_id))
    con = duckdb.connect()
    try:
        rows = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
        tools = [t for t, _ in con.execute(
            f"SELECT t, count(*) AS n FROM (SELECT unnest(list_distinct(list_concat("
            f"[c.name FOR c IN coalesce(expected_calls, [])], [c.name FOR c IN coalesce(observed_calls, [])]))) AS t "
            f"FROM {source} WHERE list_contains(mismatch_categories, 'wrong_args')) GROUP BY t ORDER BY n DESC, t"
        ).fetchall()]
        keys = con.execute(f"SELECT case_id, trial FROM {source} USING SAMPLE reservoir({requests} ROWS) "
                           f"REPEATABLE ({seed})").fetchall()
    finally:
        con.close()
    return {"run_id": info.run_id, "rows": rows, "tools": tools, "keys": keys}


def urls(facts: dict, requests: int, seed: int) -> dict[str, list[str]]:
    """``requests`` different URLs of each page (no two alike, so no answer can come from an earlier one)."""
    rng = random.Random(seed)
    run = f"/runs/{facts['run_id']}"
    pages = max(1, -(-facts["rows"] // PAGE_SIZE))
    spread = sorted(rng.sample(range(1, pages + 1), min(requests, pages)))
    filtered = []
    for page in range(1, requests + 1):  # every tool on page 1, then every tool on page 2, ...
        filtered += [f"{run}?{urlencode({'category': 'wrong_args', 'tool': t, 'page': page})}" for t in facts["tools"]]
    return {
        "runs": ["/"] * requests,
        "rows": [f"{run}?page={p}" for p in spread],
        "filtered": filtered[:requests],
        "sorted": [f"{run}?sort=f1&order={'desc' if i % 2 else 'asc'}&page={p}" for i, p in enumerate(spread)],
        "row": [f"{run}/row?{urlencode({'case': c, 'trial': t})}" for c, t in facts["keys"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="results folder with the published run")
    parser.add_argument("--run-id", help="the run (default: the newest)")
    parser.add_argument("--requests", type=int, default=20, help="different requests per page (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    facts = _run_facts(args.out, args.run_id, args.requests, args.seed)
    planned = urls(facts, args.requests, args.seed)
    load_before = os.getloadavg()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    # the import log goes to a file: a pipe nobody reads until the end would fill and stall the server
    imports_log = tempfile.TemporaryFile("w+")
    server = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "tooleval.cli", "view", "--out",
                               str(args.out), "--port", str(port)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=imports_log, text=True)
    results: dict[str, dict] = {}
    try:
        server.stdout.readline()  # "tooleval view: serving ..." once the socket is bound
        deadline = time.monotonic() + 120
        while True:
            try:
                timed_get(port, "/no-such-page")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the viewer did not start")
                time.sleep(0.1)
        started_mb = _peak_rss_mb(server.pid)
        # the first page of a run builds its index (docs/viewer.md): timed on its own, with a page size no
        # measured request uses, so that no measured request is this one
        status, _, first_open_ms, _ = timed_get(port, f"/runs/{facts['run_id']}?size=25")
        if status != 200:
            raise SystemExit(f"first open: status {status}")
        for page, paths in planned.items():
            firsts, lasts, sizes = [], [], []
            for path in paths:
                status, first, last, size = timed_get(port, path)
                if status != 200:
                    raise SystemExit(f"{path}: status {status}")
                firsts.append(first), lasts.append(last), sizes.append(size)
            results[page] = {"requests": len(paths), "median_first_ms": statistics.median(firsts),
                             "median_last_ms": statistics.median(lasts), "max_last_ms": max(lasts),
                             "median_kb": statistics.median(sizes) / 1000, "example": paths[0]}
        peak_mb = _peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.communicate(timeout=60)
        imports_log.seek(0)
        imports = imports_log.read()
    modules = {m.split(".")[0] for m in re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", imports, re.M)}
    if "duckdb" not in modules:  # the log was not read as it is written: no check of the imports is made
        raise SystemExit("the server's import log lists no duckdb: -X importtime's format was not understood")
    imported = sorted(modules & {"prefect", "ragas"})
    load_after = os.getloadavg()
    missed = [p for p, r in results.items() if r["median_last_ms"] >= TARGET_MS] + (
        ["rss"] if peak_mb >= TARGET_MB else []) + (["imports"] if imported else [])
    report = {"run_id": facts["run_id"], "rows": facts["rows"], "first_open_ms": first_open_ms, "pages": results, "started_mb": round(started_mb, 1),
              "peak_rss_mb": round(peak_mb, 1), "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in load_after], "cores": os.cpu_count(),
              "prefect_or_ragas_imported": imported, "missed": missed}
    if args.json:
        print(json.dumps(report))
    else:
        print(f"run {facts['run_id']}: {facts['rows']:,} rows; {args.requests} different requests per page; "
              f"load average {' '.join(f'{x:.2f}' for x in load_before)} before, "
              f"{' '.join(f'{x:.2f}' for x in load_after)} after ({os.cpu_count()} cores)")
        print(f"first open of the run (builds its index): {first_open_ms / 1000:.1f} s")
        print(f"{'page':<9} {'median first byte':>18} {'median last byte':>17} {'worst last byte':>16} {'size':>9}")
        for page, r in results.items():
            verdict = "ok" if r["median_last_ms"] < TARGET_MS else "MISSED"
            print(f"{page:<9} {r['median_first_ms']:>15.1f} ms {r['median_last_ms']:>14.1f} ms "
                  f"{r['max_last_ms']:>13.1f} ms {r['median_kb']:>6.1f} kB  {verdict}")
        print(f"server peak RSS {peak_mb:.1f} MB (after start {started_mb:.1f} MB; target < {TARGET_MB:.0f}) "
              f"{'ok' if peak_mb < TARGET_MB else 'MISSED'}")
        print(f"prefect or ragas imported by the server: {', '.join(imported) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
