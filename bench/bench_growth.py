"""Benchmark: which shard tasks re-run after adding 1 % of cases to a 100,000-row synthetic bfcl corpus (issue 9).

Writes ``tooleval synth --rows 100000`` and ``--rows 101000`` (seed 0: the larger corpus is the smaller one plus
appended cases) under the folder given, runs both into one results folder (default workers and shard size) and
prints one JSON line per run with its rows, seconds, shards and each stage's task states. Run from the repository
root:

    .venv/bin/python bench/bench_growth.py /tmp/bench-growth
"""
import json, sys, time
from tooleval.runs.spec import RunSpec
from pathlib import Path
def main():
    root = Path(sys.argv[1])
    from tooleval.cli._app import prefect_environment
    prefect_environment(root / "out")
    from tooleval.synth import write_synth
    from flows.evaluate import run_evaluate
    small = write_synth(100_000, 0, "bfcl", root / "small").path
    grown = write_synth(101_000, 0, "bfcl", root / "grown").path  # the same cases first, then 1 % more
    for name, data in (("night-1", small), ("night-2", grown)):
        started = time.perf_counter()
        rows = sum(1 for _ in open(data / "traces.jsonl", "rb"))
        (result, _) = run_evaluate(RunSpec(dataset=str(data), out=str(root / "out"), run_id=name, progress=False), rows_hint=rows)
        print(json.dumps({"run": name, "rows": result.summary["rows"], "seconds": round(time.perf_counter() - started, 1),
                          "shards": result.summary["timing"]["shards"], "stage_states": result.stage_states}), flush=True)


if __name__ == "__main__":
    main()
