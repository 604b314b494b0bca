"""``tooleval bench``: tooleval against its peers on one synthetic corpus, in one process tree and one run.

Figures (issue 9 item 5), each rows / seconds of wall time:

* ``floor_rows_per_s`` — read and decode the traces file with the fastest JSON parser installed;
* ``tooleval_rows_per_s`` (a) — ``tooleval run``'s row path (generation, capture, scoring, aggregation,
  publication; no legacy pass), cold, timed from the flow call to its return; Prefect's start-up (the temporary
  API server, paid once per process) is measured apart as ``startup_s`` by a trivial flow run first;
* ``run_rows_per_s`` (a') — the whole run, cold, with the legacy pass (ragas on every row) and the drift check;
* ``ragas_loop_rows_per_s`` (b) and ``agentic_evals_rows_per_s`` (c) — :mod:`tooleval.bench._peers`, over the
  corpus's first ``peer_rows`` rows (all of them up to :data:`PEER_ROWS`; agentic-evals needs about an hour for
  a million rows);
* ``peak_rss_mb`` — the largest summed RSS of this process and all its descendants (process-pool workers and the
  Prefect server included), sampled every 0.1 s;
* ``prefect_overhead_share`` — for run (a): 1 − (seconds inside stage task bodies, summed over the tasks that
  ran, / workers) / the flow's wall time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["BENCH_KEYS", "PEER_ROWS", "run_bench"]

BENCH_KEYS = ("rows", "profile", "input_mb", "startup_s", "floor_rows_per_s", "tooleval_rows_per_s", "run_rows_per_s",
              "ragas_loop_rows_per_s", "agentic_evals_rows_per_s", "peak_rss_mb", "prefect_overhead_share",
              "peer_rows")
PEER_ROWS = 100_000
"""Default rows the two peers (b, c) are timed on: their rates are steady long before this."""


class _TreeRss:
    """Peak summed RSS (MB) of this process and its descendants, sampled on a thread."""

    def __init__(self, interval: float = 0.1) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak_mb = 0.0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for proc in [self._process, *self._process.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)
            self._stop.wait(self._interval)

    def __enter__(self) -> "_TreeRss":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _timed(fn: Callable[[], Any], log: Callable[[str], None], what: str) -> tuple[Any, float]:
    log(f"bench: {what} ...")
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    log(f"bench: {what}: {seconds:.1f} s")
    return value, seconds


def run_bench(rows: int, profile: str, *, seed: int = 0, workdir: str | Path | None = None,
              workers: int | None = None, shard_size: int | None = None, peer_rows: int = PEER_ROWS,
              log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Measure every figure of the module docstring on one synthetic corpus of ``rows`` rows.

    Args:
        rows: Rows of the synthetic corpus (:func:`tooleval.synth.write_synth`).
        profile: ``bfcl`` or ``tau``.
        seed: Corpus seed.
        workdir: Folder for the corpus and the two runs' results (default: a temporary folder, removed after).
        workers: ``--workers`` of the runs (default: the cores).
        shard_size: ``--shard-size`` of the runs (default: tooleval's default).
        peer_rows: The peers (b, c) are timed on the corpus's first ``min(rows, peer_rows)`` rows (>= 1).
        log: Progress lines (one per measurement).

    Returns:
        A dict with exactly :data:`BENCH_KEYS` (rates in rows/s, times in s, sizes in MB), plus nothing else.
    """
    from tooleval.bench._peers import agentic_evals_loop, floor, ragas_loop
    from tooleval.cli._app import prefect_environment
    from tooleval.synth import write_synth

    own = workdir is None
    root = Path(workdir or tempfile.mkdtemp(prefix="tooleval-bench-"))
    try:
        data = root / f"{profile}-{rows}-s{seed}"
        if not (data / "traces.jsonl").is_file():
            _timed(lambda: write_synth(rows, seed, profile, data), log, f"synth {rows:,} {profile} rows")
        traces = data / "traces.jsonl"
        for name in ("row-path", "whole-run"):
            shutil.rmtree(root / name, ignore_errors=True)
        prefect_environment(root / "row-path")  # one Prefect home for both runs (before Prefect is imported)
        with _TreeRss() as rss:
            _, floor_s = _timed(lambda: floor(traces), log, "floor (read + decode)")
            startup_s, (row_path, row_s), (_, run_s) = _runs(data, root, workers, shard_size, log)
            sample = min(rows, peer_rows)
            _, ragas_s = _timed(lambda: ragas_loop(data, limit=sample), log, f"ragas loop ({sample:,} rows)")
            _, agentic_s = _timed(lambda: agentic_evals_loop(data, limit=sample), log,
                                  f"agentic-evals evaluate_suite ({sample:,} rows)")
        timing = row_path.summary["timing"]
        overhead = 1 - (timing["body_s"] / timing["workers"]) / row_s
        return {
            "rows": rows, "profile": profile, "input_mb": round(traces.stat().st_size / 1e6, 1),
            "startup_s": round(startup_s, 2), "floor_rows_per_s": round(rows / floor_s),
            "tooleval_rows_per_s": round(rows / row_s), "run_rows_per_s": round(rows / run_s),
            "ragas_loop_rows_per_s": round(sample / ragas_s), "agentic_evals_rows_per_s": round(sample / agentic_s),
            "peak_rss_mb": round(rss.peak_mb), "prefect_overhead_share": round(overhead, 3), "peer_rows": sample,
        }
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def _runs(data: Path, root: Path, workers: int | None, shard_size: int | None, log: Callable[[str], None]):
    from prefect import flow
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from flows.evaluate import run_evaluate

    @flow(name="tooleval-bench-startup")
    def startup() -> None:
        """Starts Prefect's temporary API server (paid once per process)."""

    with (data / "traces.jsonl").open("rb") as handle:
        rows = sum(1 for _ in handle)
    common = dict(dataset=str(data), workers=workers or os.cpu_count() or 1, shard_size=shard_size, progress=False,
                  rows_hint=rows)
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        _, startup_s = _timed(startup, log, "Prefect start-up")
        (row_path, _), row_s = _timed(lambda: run_evaluate(out=str(root / "row-path"), run_id="bench-a",
                                                           legacy_pass=False, **common), log, "(a) row path")
        whole, run_s = _timed(lambda: run_evaluate(out=str(root / "whole-run"), run_id="bench-a-prime", **common),
                              log, "(a') whole run with legacy and drift")
    if whole[0].drift is None or whole[0].drift["verdict"] != "ok":
        raise RuntimeError(f"the benchmark's whole run found drift: {whole[0].drift and whole[0].drift['reasons']}")
    return startup_s, (row_path, row_s), (whole, run_s)
