"""Benchmark: tooleval's row scoring against its peer, ragas' ToolCallF1, on the same rows, side by side.

Rows are the bundled tau-bench airline rows (200), repeated to ``--rows``. Three figures per side, measured in one
process: rows per second of the metric alone (tooleval: canonicalisation already done, ``match_calls``;
ragas: ``ToolCallF1().ascore`` over message objects, the way the row-level path calls it; best of two passes),
and the tracemalloc peak of a third pass.
Prints a table and the ratio tooleval / ragas. Run from the repository root:

    .venv/bin/python bench/bench_scoring.py --rows 20000
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
import tracemalloc
from pathlib import Path

from tooleval.dataset import load_dataset
from tooleval.matching import match_calls
from tooleval.models import calls_from_messages
from tooleval.scoring.ragas_metric import ragas_args, ragas_tool_call_f1_many

BUNDLED = Path(__file__).resolve().parents[1] / "datasets" / "tau-bench-airline"


def load_rows(n: int) -> list[tuple[list, list]]:
    cases = load_dataset(BUNDLED).cases
    with gzip.open(BUNDLED / "traces.jsonl.gz", "rt", encoding="utf-8") as handle:
        pairs = [(cases[str(t["case_id"])].expected_calls, calls_from_messages(t["messages"]))
                 for t in map(json.loads, handle)]
    return [pairs[i % len(pairs)] for i in range(n)]


def measure(label: str, work) -> tuple[str, float, float]:
    """Time one pass (best of two, no tracing), then trace a third pass for its Python allocation peak."""
    seconds = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        work()
        seconds = min(seconds, time.perf_counter() - start)
    tracemalloc.start()
    work()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return label, seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    args = parser.parse_args()
    rows = load_rows(args.rows)
    ragas_inputs = [([{"name": c.name, "args": ragas_args(c)} for c in e],
                     [{"name": c.name, "args": ragas_args(c)} for c in o]) for e, o in rows]
    results = [
        measure("tooleval match_calls", lambda: [match_calls(e, o) for e, o in rows]),
        measure("ragas ToolCallF1 (peer)", lambda: ragas_tool_call_f1_many(ragas_inputs)),
    ]
    print(f"{'metric':<26}{'rows':>8}{'seconds':>10}{'rows/s':>12}{'peak MiB':>10}")
    for label, seconds, peak in results:
        print(f"{label:<26}{len(rows):>8}{seconds:>10.2f}{len(rows) / seconds:>12.0f}{peak:>10.1f}")
    ratio = (len(rows) / results[0][1]) / (len(rows) / results[1][1])
    print(f"ratio tooleval / ragas (rows/s): {ratio:.2f}x")


if __name__ == "__main__":
    main()
