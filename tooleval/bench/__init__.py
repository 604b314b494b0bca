"""``tooleval bench``: rows/s of tooleval's row path and whole run against the floor (decode only), the loop a
ragas user writes and agentic-evals 0.9.0, on one synthetic corpus (needs the ``[bench]`` extra)."""

from tooleval.bench._run import BENCH_KEYS, BenchRuns, PrefectSession, run_bench

__all__ = ["BENCH_KEYS", "BenchRuns", "PrefectSession", "run_bench"]
