"""Benchmark: the row path's stage bodies — generation, trace capture, scoring — timed without Prefect, in one
process, on the first shards of a dataset's plan, with an optional cProfile of them (to profile a worker's work
before and after a change to the row path).

Run from the repository root (OUT: a scratch results folder; its redaction key is made there unless
TOOLEVAL_REDACTION_KEY is set):

    .venv/bin/python bench/row_path_stages.py DATASET OUT [MAX_ROWS] [--profile FILE] [--gc-paused]

Prints seconds and microseconds per row for each stage and rows per second overall, in wall time and in this
process's CPU time (the figure to read on a busy machine, where wall time counts other processes' turns) (the redactor's one-time
build, about a second, falls in the first generation). ``--gc-paused`` runs each shard's stages with the cyclic
garbage collector paused, as a worker runs them (``flows/_shards.run_shard``); without it the collector's full
passes over the bench's heap fall in whichever stage allocates when they come (mostly scoring).
"""
import cProfile
import contextlib
import os
import sys
import time

sys.path.insert(0, os.getcwd())
from tooleval.dataset import load_dataset_cached
from tooleval.rules import confidential_tools
from tooleval.runs.spec import RunSpec
from tooleval.runs.plan import plan_run
from tooleval.runs.shards import cyclic_gc_paused, run_scopes, scoring_key
from tooleval.storage.stages import stage_dir
from tooleval.versions import scorer_version
from tooleval.scoring.ragas_metric import ragas_version
from tasks import ReplayedLines, capture_shard, generate_shard, score_shard

dataset, out = sys.argv[1], sys.argv[2]
max_rows = int(sys.argv[3]) if len(sys.argv) > 3 and not sys.argv[3].startswith("-") else 10**9
prof = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
paused = cyclic_gc_paused if "--gc-paused" in sys.argv else contextlib.nullcontext
plan = plan_run(RunSpec(dataset=dataset, traces=None, out=out, run_id="stages", workers=2))
gscope, sscope = run_scopes(plan)
loaded = load_dataset_cached(plan.dataset.path)
kept = confidential_tools(loaded.tools, loaded.cases)  # as the flow passes them
dirs = {n: str(stage_dir(plan.out, n)) for n in ("generation", "capture", "scoring")}
for d in dirs.values():
    os.makedirs(d, exist_ok=True)
t = {"generation": 0.0, "capture": 0.0, "scoring": 0.0}; rows = 0
cpu = dict.fromkeys(t, 0.0)
profiler = cProfile.Profile() if prof else None
for shard in plan.index.shards():
    items, offsets = plan.shard_items(shard)
    if profiler: profiler.enable()
    with paused():
        a, ca = time.perf_counter(), time.process_time()
        g = generate_shard.fn(plan.agent, items, plan.dataset, plan.redaction, plan.out, dirs["generation"],
                              plan.executor, scope=gscope)
        b, cb = time.perf_counter(), time.process_time()
        replay = ReplayedLines(plan.agent, items, offsets, plan.dataset, plan.out) if plan.agent.kind == "replay" else None
        c = capture_shard.fn(g, plan.dataset.tool_schema_version, scorer_version(), dirs["capture"], plan.redaction,
                             gscope, replay=replay, kept_results=kept)
        d, cd = time.perf_counter(), time.process_time()
        s = score_shard.fn(c, plan.dataset, plan.redaction, scorer_version(), ragas_version(), plan.out,
                           dirs["scoring"], scope=scoring_key(sscope, items))
        e, ce = time.perf_counter(), time.process_time()
    if profiler: profiler.disable()
    t["generation"] += b - a; t["capture"] += d - b; t["scoring"] += e - d; rows += len(items)
    cpu["generation"] += cb - ca; cpu["capture"] += cd - cb; cpu["scoring"] += ce - cd
    if rows >= max_rows: break
total = sum(t.values())
print(f"rows {rows}: " + ", ".join(f"{k} {v:.2f}s ({1e6*v/rows:.0f} us/row)" for k, v in t.items())
      + f"; total {total:.2f}s = {rows/total:.0f} rows/s")
total_cpu = sum(cpu.values())
print(f"cpu  {rows}: " + ", ".join(f"{k} {v:.2f}s ({1e6*v/rows:.0f} us/row)" for k, v in cpu.items())
      + f"; total {total_cpu:.2f}s = {rows/total_cpu:.0f} rows/s")
if profiler:
    profiler.dump_stats(prof)
