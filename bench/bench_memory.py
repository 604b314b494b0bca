"""Benchmark: peak RSS of the whole ``tooleval run`` process tree against corpus size (issue 9 item 1).

For each ``--rows`` N: writes ``tooleval synth --rows N --seed 0 --profile P`` (kept under ``--workdir`` for
reruns), runs ``tooleval run --dataset D --out O --run-id memN`` (cold: a fresh results folder) in a child
process, and samples the summed RSS of that process and all its descendants (process-pool workers and the
temporary Prefect server included) every ``--interval`` seconds. It then runs ``tooleval gate`` on the
published run the same way. Prints one line per corpus: rows, wall seconds and peak tree RSS (MB) of the run and
of the gate, and the phase of the run in which the peak fell (the last progress line printed before it).

Memory bounded by shard size and worker count shows as a flat peak across N. Run from the repository root:

    .venv/bin/python bench/bench_memory.py --rows 20000 100000 300000 --workdir /tmp/bench-mem

``--json`` prints one JSON object per corpus instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
TOOLEVAL = [sys.executable, "-m", "tooleval.cli"]


def _role(proc: psutil.Process, root: psutil.Process) -> str:
    """``flow`` (the command's own process), ``prefect-server`` (tooleval's server daemon, or a temporary server
    Prefect started), ``worker`` (process-pool workers and their resource tracker) or ``other``."""
    if proc.pid == root.pid:
        return "flow"
    command = " ".join(proc.cmdline())
    if "uvicorn" in command or "_prefect_daemon" in command or "prefect" in command and "server" in command:
        return "prefect-server"
    return "worker" if "multiprocessing" in command else "other"


def _label(proc: psutil.Process) -> str:
    """A short name of a process for the breakdown at the peak: its script or module and first argument."""
    words = [w for w in proc.cmdline() if not w.startswith("-")][1:3]
    return " ".join(Path(w).name if "/" in w else w[:40] for w in words) or proc.name()


def measured(command: list[str], interval: float, env: dict[str, str], trace: Path | None = None) -> dict:
    """Run ``command`` to its end; return its exit code, wall seconds, peak tree RSS (MB) with its split by
    process role, the output line last printed before the peak, and the peak before and after the run's
    ``done:`` progress line (the stages, then planning's aftermath: publication)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                             cwd=REPO)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout), daemon=True)
    reader.start()
    root = psutil.Process(child.pid)
    peak, phase, parts, processes = 0.0, "", {}, []
    role_peaks: dict[str, float] = {}
    samples = trace.open("w") if trace else None
    by_phase = {"stages": 0.0, "publication": 0.0}
    while child.poll() is None:
        sizes: dict[str, float] = {}
        each: list[tuple[str, int, float]] = []
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for proc in tree:
            try:
                role = _role(proc, root)
                mb = proc.memory_info().rss / 2**20
                sizes[role] = sizes.get(role, 0.0) + mb
                each.append((f"{role}: {_label(proc)}", proc.pid, round(mb)))
            except psutil.Error:
                pass
        total = sum(sizes.values())
        for role, mb in sizes.items():
            role_peaks[role] = max(role_peaks.get(role, 0.0), mb)
        if samples:
            samples.write(json.dumps({"t": round(time.perf_counter() - started, 2), "total": round(total),
                                      **{r: round(mb) for r, mb in sizes.items()},
                                      "line": lines[-1].strip()[:80] if lines else ""}) + "\n")
        bucket = "publication" if any(line.startswith("done:") for line in lines[-50:]) or \
            by_phase["publication"] else "stages"
        by_phase[bucket] = max(by_phase[bucket], total)
        if total > peak:
            peak, phase = total, (lines[-1].strip() if lines else "start-up")
            parts = {role: round(mb) for role, mb in sizes.items()}
            processes = sorted(each, key=lambda e: -e[2])
        time.sleep(interval)
    reader.join()
    if samples:
        samples.close()
    return {"exit": child.returncode, "seconds": round(time.perf_counter() - started, 1), "peak_mb": round(peak),
            "peak_stages_mb": round(by_phase["stages"]), "peak_publication_mb": round(by_phase["publication"]),
            "phase": phase[:120], "peak_by_process": parts,
            "peak_processes": processes, "role_peaks_mb": {r: round(mb) for r, mb in role_peaks.items()}, "tail": [line.rstrip() for line in lines[-3:]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[20000, 100000])
    parser.add_argument("--profile", default="bfcl", choices=["bfcl", "tau"])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-mem"))
    parser.add_argument("--workers", type=int, default=None, help="--workers of the run (default: the cores)")
    parser.add_argument("--shard-size", type=int, default=None, help="--shard-size of the run (default: tooleval's)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    parser.add_argument("--dataset", type=Path, default=None,
                        help="an existing dataset folder to run (read only) instead of a synthetic one under --workdir")
    parser.add_argument("--trace", action="store_true",
                        help="write every sample (seconds, MB per role, last output line) to WORKDIR/rss-*.jsonl")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="200", TOOLEVAL_WARM_RUNNER="0")  # a warm runner would run it outside this tree
    args.workdir.mkdir(parents=True, exist_ok=True)
    for rows in args.rows:
        data = args.dataset or args.workdir / f"{args.profile}-{rows}"
        if args.dataset is None and not (data / "traces.jsonl").is_file():
            subprocess.run([*TOOLEVAL, "synth", "--rows", str(rows), "--seed", "0", "--profile", args.profile,
                            "--out", str(data)], check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
        out = args.workdir / f"out-{args.profile}-{rows}"
        shutil.rmtree(out, ignore_errors=True)
        run_id = f"mem{rows}"
        command = [*TOOLEVAL, "run", "--dataset", str(data), "--out", str(out), "--run-id", run_id]
        if args.workers is not None:
            command += ["--workers", str(args.workers)]
        if args.shard_size is not None:
            command += ["--shard-size", str(args.shard_size)]
        trace = args.workdir / f"rss-{args.profile}-{rows}.jsonl" if args.trace else None
        run = measured(command, args.interval, env, trace)
        gate = measured([*TOOLEVAL, "gate", "--run-id", run_id, "--out", str(out)], args.interval, env)
        result = {"rows": rows, "profile": args.profile, "run": run, "gate": gate}
        if args.json:
            print(json.dumps({k: v for k, v in result.items()}), flush=True)
        else:
            print(f"{rows:>9,} rows  run: exit {run['exit']}, {run['seconds']:>7.1f} s, peak {run['peak_mb']:>5,} MB "
                  f"(stages {run['peak_stages_mb']:,}, publication {run['peak_publication_mb']:,}; at peak "
                  f"{run['peak_by_process']})  gate: exit {gate['exit']}, {gate['seconds']:>6.1f} s, "
                  f"peak {gate['peak_mb']:>5,} MB", flush=True)
            print(f"    at the peak: {run['peak_processes']}; each role's own peak: {run['role_peaks_mb']}",
                  flush=True)


if __name__ == "__main__":
    main()
