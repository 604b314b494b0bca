"""``tooleval bench``: tooleval against its peers on one synthetic corpus, in one process tree and one run.

Keys of the JSON object, in :data:`BENCH_KEYS` order (rates are rows / seconds of wall time):

* ``rows``, ``profile`` — the synthetic corpus (:func:`tooleval.synth.write_synth`); ``input_mb`` — its traces
  file, MB (10**6 bytes);
* ``startup_s`` — Prefect's start-up (tooleval's local Prefect server, found or started as ``tooleval run`` does,
  and a trivial first flow run), s: paid before the two runs, so that neither pays it;
* ``floor_rows_per_s`` (d) — read and decode the traces file with the fastest JSON parser installed;
* ``tooleval_rows_per_s`` (a) — ``tooleval run``'s row path (generation, capture, scoring, aggregation,
  publication; no legacy pass), cold (fresh results folder, fresh process pool), timed from the flow call to its
  return: the flow run's own set-up and teardown in, Prefect's start-up out;
* ``run_rows_per_s`` (a') — the whole run, cold, with the legacy pass (ragas on every row) and the drift check,
  timed the same way;
* ``ragas_loop_rows_per_s`` (b) and ``agentic_evals_rows_per_s`` (c) — :mod:`tooleval.bench._peers`, over the
  corpus's first ``peer_rows`` rows (all of them up to :data:`PEER_ROWS`; agentic-evals needs about an hour for
  a million rows), timed warm (:func:`time_warm`), each peer's one read of its references (``cases.jsonl``)
  charged to the corpus's rows pro rata, as a peer scoring the whole corpus pays it once;
* ``peak_rss_mb`` — the largest summed RSS (MB, 2**20 bytes) of this process and all its descendants
  (process-pool workers included; tooleval's Prefect server while the runs are timed) over the whole benchmark:
  the floor, the start-up, both runs and the peers' warm-up and timed loops (each in a fresh child process after
  the runs); sampled every 0.1 s (:class:`tooleval.bench._rss.TreeRss`); the peers run in child processes, one at a time;
* ``prefect_overhead_share`` — for run (a): 1 − (seconds inside stage task bodies, summed over the tasks that
  ran, / workers) / (a)'s wall time as timed above;
* ``peer_rows`` — the rows (b) and (c) were timed on: ``min(rows, --peer-rows)``;
* ``peers_timed`` — ``"warm"``: (b) and (c) ran each in a fresh child process, after their imports and after one
  untimed pass over ``peer_warmup_rows`` rows (in the benchmark's own process, after the two runs, the ragas loop
  measured ~20 % slower);
* ``peer_warmup_rows`` — rows of that untimed pass: the first ``min(peer_rows, PEER_WARMUP_ROWS)``, read again by
  the timed pass (neither peer keeps results between calls: the pass warms imports and code paths and reads the
  references, not answers);
* ``run_rss_mb`` — the largest summed RSS (MB) of the same process tree (this process — the flow's —, the
  process-pool workers, the Prefect server) sampled during runs (a) and (a') only: no floor, no start-up flow,
  no peers. The figure targets judge; never above ``peak_rss_mb``;
* ``flow_wall_s`` — run (a)'s flow wall time, s: from the start of the flow function's body to the end of the
  publication, measured inside the flow (``timing["flow_wall_s"]`` of :func:`flows.evaluate.evaluate`), so
  Prefect's start-up and the flow run's set-up and teardown are excluded;
* ``stages_wall_s`` — run (a)'s shard phase wall time, s: every shard submitted and its outcome collected
  (``timing["stages_wall_s"]``);
* ``outside_shards_share`` — for run (a): (``flow_wall_s`` − ``stages_wall_s``) / ``flow_wall_s``, the share of
  the flow's own time spent outside the shards (the plan, stopping the pool, the publication), in [0, 1);
* ``a_over_b_warm``, ``a_prime_over_b_warm`` — (a) / (b) and (a') / (b), the rates' ratios with the ragas loop
  timed warm (computed from unrounded rates).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from tooleval.bench._rss import TreeRss

__all__ = ["BENCH_KEYS", "BenchRuns", "PEER_ROWS", "PEER_WARMUP_ROWS", "PrefectSession", "ReferenceRead",
           "run_bench", "time_warm"]


class PrefectSession(Protocol):
    """The Prefect the benchmark's runs use, given by the command that starts it (the command line's
    :class:`tooleval.cli.LocalPrefect`), so that the runs meet Prefect as ``tooleval run``'s do."""

    def environment(self, out: Path) -> dict[str, str]:
        """Set the Prefect environment of the results folder ``out`` (before Prefect is imported)."""

    def session(self, out: Path) -> AbstractContextManager[Callable[[], int | None]]:
        """Run flows inside; yields a function returning the Prefect server's process id (or ``None``)."""

BENCH_KEYS = ("rows", "profile", "input_mb", "startup_s", "floor_rows_per_s", "tooleval_rows_per_s", "run_rows_per_s",
              "ragas_loop_rows_per_s", "agentic_evals_rows_per_s", "peak_rss_mb", "prefect_overhead_share",
              "peer_rows", "peers_timed", "peer_warmup_rows", "run_rss_mb", "flow_wall_s", "stages_wall_s",
              "outside_shards_share", "a_over_b_warm", "a_prime_over_b_warm")
PEER_ROWS = 100_000
"""Default rows the two peers (b, c) are timed on: their rates are steady long before this."""
PEER_WARMUP_ROWS = 500
"""Rows of each peer's untimed warm-up pass: enough to pay its imports and first-call set-up (ragas' import alone
is 1-2 s, which a peer timed cold on 20,000 rows would carry as a tenth of its time)."""


def _timed(fn: Callable[[], Any], log: Callable[[str], None], what: str) -> tuple[Any, float]:
    log(f"bench: {what} ...")
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    log(f"bench: {what}: {seconds:.1f} s")
    return value, seconds


_FRESH_PEER = """
import sys
from pathlib import Path
from tooleval.bench import _peers
from tooleval.bench._run import ReferenceRead, time_warm
from tooleval.runs.children import exit_with_parent
exit_with_parent()  # the benchmark killed with SIGKILL: its peer does not time on for nobody
name, dataset, rows, warmup, what, corpus_rows = sys.argv[1:]
log = lambda line: print(line, file=sys.stderr, flush=True)
print(time_warm(getattr(_peers, name), Path(dataset), int(rows), int(warmup), what, log,
                references=ReferenceRead(_peers.read_references, int(corpus_rows))))
"""


def _time_warm_fresh(loop: str, dataset: Path, rows: int, warmup: int, what: str,
                     log: Callable[[str], None], corpus_rows: int | None = None) -> float:
    """:func:`time_warm` of the peer ``loop`` (a function name of :mod:`tooleval.bench._peers`) in a fresh child
    process of this interpreter, its progress lines passed on to ``log``: timed in the benchmark's own process,
    after two runs had filled its heap, the ragas loop ran ~20 % slower on bfcl rows (7,610 rows/s against
    9,100-9,900 in a fresh process), which flattered the ratios. The child is a descendant, so the whole
    benchmark's peak RSS still counts it. The peer's read of its references is charged to the ``corpus_rows``
    rows of the corpus (``None``: to the timed rows alone), as :func:`time_warm` says.

    Raises:
        RuntimeError: the child failed (its last error line quoted) or did not do the rows asked for.
    """
    import subprocess
    import sys

    from tooleval.runs.children import end_processes, ended_on_signals

    tail = ""
    with subprocess.Popen([sys.executable, "-c", _FRESH_PEER, loop, str(dataset), str(rows), str(warmup), what,
                           str(corpus_rows or rows)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        # SIGTERM or SIGHUP end the peer with the benchmark; Ctrl-C (or any error) ends it before the wait below
        with ended_on_signals(lambda: [child.pid]):
            try:
                for line in child.stderr:  # type: ignore[union-attr]
                    line = line.rstrip("\n")
                    if line.startswith("bench: "):
                        log(line)
                    elif line.strip():
                        tail = line
                out = child.stdout.read()  # type: ignore[union-attr]
            except BaseException:
                end_processes([child.pid])
                raise
    if child.returncode != 0:
        raise RuntimeError(f"{what} failed in its own process: {tail}")
    return float(out.strip().splitlines()[-1])


def _read_once(path: Path, lines: int) -> None:
    """Read the first ``lines`` lines of ``path`` and drop them (nothing when the file is missing)."""
    try:
        with path.open("rb", buffering=1 << 20) as handle:
            for _ in zip(range(lines), handle):
                pass
    except OSError:
        pass


@dataclass(frozen=True)
class ReferenceRead:
    """A peer's one read of its references (``cases.jsonl``), which :func:`time_warm` times on its own and
    charges to the timed rows pro rata, as a peer scoring the whole corpus pays it once."""

    load: Callable[[Path], Any]
    """The read (:func:`tooleval.bench._peers.read_references`): the loop does it once per corpus and keeps it."""
    corpus_rows: int | None = None
    """Rows of the whole corpus (``None``: the timed rows, which are then charged the whole read)."""


@dataclass(frozen=True)
class BenchRuns:
    """The options of the benchmark's two runs, as ``tooleval run`` takes them."""

    workers: int | None = None
    """``--workers`` of the runs (default: the cores)."""
    shard_size: int | None = None
    """``--shard-size`` of the runs (default: tooleval's default)."""


def time_warm(loop: Callable[..., int], dataset: Path, rows: int, warmup: int, what: str,
              log: Callable[[str], None] = lambda _: None, clock: Callable[[], float] = time.perf_counter,
              references: ReferenceRead | None = None) -> float:
    """Seconds of ``loop(dataset, limit=rows)`` timed warm: in this process, after one untimed pass
    ``loop(dataset, limit=warmup)`` that pays the loop's imports and first-call set-up, and after the ``rows``
    lines it reads were read once (so they come from the page cache, as the runs' traces do after the floor read
    the file: on 200,000 tau rows, 3.3 GB, the runs had pushed the peers' first 330 MB out of the cache, and the
    ragas loop measured 925 rows/s reading them from disk against 3,222 from the cache).

    Args:
        loop: A peer of :mod:`tooleval.bench._peers`: takes the dataset folder and ``limit``, returns the rows done.
        dataset: Dataset folder with ``traces.jsonl``.
        rows: Rows to time (>= 1).
        warmup: Rows of the untimed pass (>= 1).
        what: The peer's name in the progress lines.
        log: Progress lines.
        clock: Seconds (monotonic); the tests pass a fake one.
        references: The peer's read of its references, which the loop does once per corpus and keeps: the
            warm-up pass reads them, the timed pass reuses them, and one read timed on its own is charged to the
            timed rows pro rata, ``load_s * rows / corpus_rows``. Charged to the timed rows whole, it halved the
            ragas loop's rate on the first 20,000 rows of a 1,000,000-row bfcl corpus (142,858 cases: 13,955
            rows/s, against 21,000-29,000 for the same rows of a 200,000-row corpus). ``None``: the loop's own
            time only.

    Raises:
        RuntimeError: the loop did not do the rows asked for (a rate over the wrong count would be wrong).
    """
    log(f"bench: {what} warm-up ({warmup:,} rows, untimed) ...")
    loop(dataset, limit=warmup)
    _read_once(dataset / "traces.jsonl", rows)
    log(f"bench: {what} ({rows:,} rows, warm) ...")
    started = clock()
    done = loop(dataset, limit=rows)
    seconds = clock() - started
    if done != rows:
        raise RuntimeError(f"{what} did {done:,} rows of the {rows:,} asked for")
    log(f"bench: {what} ({rows:,} rows, warm): {seconds:.1f} s")
    if references is not None:
        started = clock()
        references.load(dataset)
        load_s = clock() - started
        share = rows / max(references.corpus_rows or rows, rows)
        seconds += load_s * share
        log(f"bench: {what}: reading the references once, {load_s:.2f} s, charged {share:.3g} of it to these rows")
    return seconds


def run_bench(rows: int, profile: str, *, seed: int = 0, workdir: str | Path | None = None,
              runs: BenchRuns = BenchRuns(), peer_rows: int = PEER_ROWS,
              log: Callable[[str], None] = lambda _: None, prefect: "PrefectSession") -> dict[str, Any]:
    """Measure every figure of the module docstring on one synthetic corpus of ``rows`` rows.

    Args:
        rows: Rows of the synthetic corpus (:func:`tooleval.synth.write_synth`).
        profile: ``bfcl`` or ``tau``.
        seed: Corpus seed.
        workdir: Folder for the corpus and the two runs' results (default: a temporary folder, removed after).
        runs: ``--workers`` and ``--shard-size`` of the two runs (:class:`BenchRuns`).
        peer_rows: The peers (b, c) are timed on the corpus's first ``min(rows, peer_rows)`` rows (>= 1).
        log: Progress lines (one per measurement, then the ratios with the peers labelled warm).
        prefect: The Prefect the runs use, as ``tooleval run`` would (the command line's
            :class:`tooleval.cli.LocalPrefect`): its environment and its local server.

    Returns:
        A dict with exactly :data:`BENCH_KEYS` (rates in rows/s, times in s, sizes in MB), plus nothing else.
    """
    from tooleval.bench._peers import floor
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
        prefect.environment(root / "row-path")  # one Prefect home for both runs (before Prefect is imported)
        sample = min(rows, peer_rows)
        warmup = min(sample, PEER_WARMUP_ROWS)
        with TreeRss() as rss:
            _, floor_s = _timed(lambda: floor(traces), log, "floor (read + decode)")
            startup_s, (row_path, row_s), (_, run_s), runs_rss = _runs(data, root, runs, rss, log, prefect)
            ragas_s = _time_warm_fresh("ragas_loop", data, sample, warmup, "ragas loop", log, corpus_rows=rows)
            agentic_s = _time_warm_fresh("agentic_evals_loop", data, sample, warmup, "agentic-evals evaluate_suite",
                                         log, corpus_rows=rows)
        timing = row_path.summary["timing"]
        overhead = 1 - (timing["body_s"] / timing["workers"]) / row_s
        flow_s, stages_s = timing["flow_wall_s"], timing["stages_wall_s"]
        a, a_prime, b = rows / row_s, rows / run_s, sample / ragas_s
        ratios = {"a_over_b_warm": _figure(a / b), "a_prime_over_b_warm": _figure(a_prime / b)}
        log(f"bench: a/b = {ratios['a_over_b_warm']}, a'/b = {ratios['a_prime_over_b_warm']} (peers timed warm: "
            f"after their imports and an untimed pass over {warmup:,} rows)")
        return {
            "rows": rows, "profile": profile, "input_mb": round(traces.stat().st_size / 1e6, 1),
            "startup_s": round(startup_s, 2), "floor_rows_per_s": round(rows / floor_s),
            "tooleval_rows_per_s": round(a), "run_rows_per_s": round(a_prime),
            "ragas_loop_rows_per_s": round(b), "agentic_evals_rows_per_s": round(sample / agentic_s),
            "peak_rss_mb": round(rss.peak_mb), "prefect_overhead_share": round(overhead, 3), "peer_rows": sample,
            "peers_timed": "warm", "peer_warmup_rows": warmup, "run_rss_mb": round(runs_rss.peak_mb),
            "flow_wall_s": round(flow_s, 2), "stages_wall_s": round(stages_s, 2),
            "outside_shards_share": round((flow_s - stages_s) / flow_s, 3), **ratios,
        }
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def _figure(value: float) -> float:
    """``value`` to three significant digits (a ratio of two noisy rates carries no more)."""
    return float(f"{value:.3g}")


def _runs(data: Path, root: Path, runs: BenchRuns, rss: TreeRss, log: Callable[[str], None],
          prefect: "PrefectSession"):
    """Prefect's start-up, then runs (a) and (a') inside one window of ``rss`` (the start-up flow outside it)."""
    from prefect import flow

    from flows.evaluate import RunSpec, run_evaluate

    @flow(name="tooleval-bench-startup")
    def startup() -> None:
        """Waits for the Prefect server and makes the first flow run (paid once per process)."""

    with (data / "traces.jsonl").open("rb") as handle:
        rows = sum(1 for _ in handle)
    common = dict(dataset=str(data), workers=runs.workers or os.cpu_count() or 1, shard_size=runs.shard_size,
                  progress=False)
    # The runs go to tooleval's own Prefect server, as ``tooleval run``'s do. Under Prefect's in-process temporary
    # server the pool's workers were not given its address, and each worker started a temporary server of its own
    # (~220 MB each, started inside the run's plan).
    began = time.perf_counter()
    with prefect.session(root / "row-path") as server_pid:
        _timed(startup, log, "Prefect start-up")
        startup_s = time.perf_counter() - began
        with rss.tracking(server_pid()), rss.window() as runs_rss:
            row_spec = RunSpec(out=str(root / "row-path"), run_id="bench-a", legacy_pass=False, **common)
            whole_spec = RunSpec(out=str(root / "whole-run"), run_id="bench-a-prime", **common)
            (row_path, _), row_s = _timed(lambda: run_evaluate(row_spec, rows_hint=rows), log, "(a) row path")
            whole, run_s = _timed(lambda: run_evaluate(whole_spec, rows_hint=rows), log,
                                  "(a') whole run with legacy and drift")
    if whole[0].drift is None or whole[0].drift["verdict"] != "ok":
        raise RuntimeError(f"the benchmark's whole run found drift: {whole[0].drift and whole[0].drift['reasons']}")
    return startup_s, (row_path, row_s), (whole, run_s), runs_rss
