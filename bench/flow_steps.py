"""Benchmark: where a run's flow spends its wall time, step by step — the plan, the shard phase, stopping the
process pool, and each publication step (aggregate, gate and drift, report, publish) — for one row-path run
(no legacy pass, as ``tooleval bench`` times its run (a)) on the machine's cores.

Each step is timed by wrapping the flow's own functions (nothing in the product is changed); the shards'
publication (``add_shard``) overlaps the shard phase and is summed separately. Run from the repository root, on a
``tooleval synth`` folder (OUT: a scratch results folder, removed first if it exists; the redaction key is made
there unless TOOLEVAL_REDACTION_KEY is set):

    TOOLEVAL_PREFECT_SERVER_IDLE_S=0 .venv/bin/python bench/flow_steps.py DATASET OUT [WORKERS [SHARD_SIZE]]

Prints one line per step as it ends (seconds, and seconds since the flow was called), then the totals, the flow's
wall time, its shard phase and the share of the flow outside the shards (``outside_shards_share``), and the share
of the workers' time outside the stage bodies (``prefect_overhead_share``, as the benchmark computes it).
"""
import functools
import gzip
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

STEPS: dict[str, float] = {}


def _timed(owner, name: str, started: list[float], quiet: bool = False) -> None:
    """Replace ``owner.name`` by a wrapper that adds its seconds to :data:`STEPS` (and prints them unless quiet)."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - began
            STEPS[name] = STEPS.get(name, 0.0) + seconds
            if not quiet:
                print(f"step {name}: {seconds:.2f} s (at {time.perf_counter() - started[0]:.1f} s)", flush=True)

    setattr(owner, name, wrapper)


def main() -> None:
    dataset, out = sys.argv[1], Path(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count() or 1
    shard_size = int(sys.argv[4]) if len(sys.argv) > 4 else None  # None: the run's default
    shutil.rmtree(out, ignore_errors=True)
    from tooleval.cli._app import prefect_environment, prefect_session
    from tooleval.dataset import find_traces_file

    prefect_environment(out)  # before Prefect is imported
    import flows._publish as publish
    import flows.evaluate as evaluate

    started = [time.perf_counter()]
    for name in ("plan_run", "_run_shards", "_stop_worker_processes"):
        _timed(evaluate, name, started)
    for name in ("aggregate", "gate_and_drift", "report", "publish"):
        _timed(publish.RunPublisher, name, started)
    _timed(publish.RunPublisher, "add_shard", started, quiet=True)
    traces = find_traces_file(Path(dataset))  # traces.jsonl or traces.jsonl.gz
    with (gzip.open(traces, "rb") if traces.name.endswith(".gz") else traces.open("rb")) as handle:
        rows = sum(1 for line in handle if line.strip())
    with prefect_session(out):
        started[0] = time.perf_counter()
        result, _ = evaluate.run_evaluate(evaluate.RunSpec(out=str(out), run_id="flow-steps", legacy_pass=False,
                                                           dataset=dataset, workers=workers, shard_size=shard_size),
                                          rows_hint=rows)
        total = time.perf_counter() - started[0]
    timing = result.summary["timing"]
    flow, stages = timing["flow_wall_s"], timing["stages_wall_s"]
    print("steps (s): " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in STEPS.items()))
    print(f"rows {rows}: flow call {total:.1f} s = {rows / total:,.0f} rows/s; flow wall {flow:.1f} s, shard phase "
          f"{stages:.1f} s, outside_shards_share {(flow - stages) / flow:.3f}, prefect_overhead_share "
          f"{1 - timing['body_s'] / timing['workers'] / total:.3f}")


if __name__ == "__main__":  # the process pool's workers import this file again: only the parent runs
    main()
