"""Soak: kill the real ``tooleval run`` at random moments and check what survives (issue 12's closing figure).

Each attempt replaces run ``soak`` of the bundled dataset in one results folder, alternating between its 200
recorded traces and their first 120 (so the old and the new run are told apart by their row count), and sends
SIGKILL (or ``--signal INT``/``TERM``) to the process group after a random delay between 0.4 and 1.05 times the
duration of an uninterrupted, cached run (measured first). After each kill it checks:

* the temporary Prefect server the process started is gone within 10 s (no orphan);
* a reader (``tooleval sql``) sees the old run or the new run: 200 or 120 rows with as many traces, never a mix;
* ``tooleval drift`` on the run agrees (exit 0) whenever the run exists;
* nothing printed a traceback, and (``--signal INT``) the process exited 130 or died of SIGINT during shutdown
  (both ``$? = 130`` in a shell), or 0/1 when it had finished.

Run from the repository root (a few minutes):

    .venv/bin/python bench/kill_soak.py --kills 10
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "datasets" / "tau-bench-airline"


def tooleval(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tooleval.cli", *args], env=env, cwd=REPO, text=True,
                          capture_output=True, timeout=600)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--signal", choices=["KILL", "INT", "TERM"], default="KILL")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="tooleval-soak-"))
    out, home = work / "out", work / "prefect-home"
    full = BUNDLED / "traces.jsonl.gz"
    short = work / "short.jsonl"
    with gzip.open(full, "rt", encoding="utf-8") as handle:
        short.write_text("".join(line for i, line in enumerate(handle) if i < 120))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(TOOLEVAL_PREFECT_HOME=str(home), COLUMNS="300")
    for traces in (short, full):  # two whole runs first: both stage caches warm, and the "old" run published
        started = time.monotonic()
        first = tooleval("run", "--out", str(out), "--run-id", "soak", "--traces", str(traces), env=env)
        duration = time.monotonic() - started  # a cached run: what each attempt below costs
        print(f"uninterrupted run ({traces.name}): exit {first.returncode} in {duration:.1f} s", flush=True)
    survived, results = 0, []
    for attempt in range(args.kills):
        traces = short if attempt % 2 else full
        process = subprocess.Popen([sys.executable, "-m", "tooleval.cli", "run", "--out", str(out), "--run-id",
                                    "soak", "--traces", str(traces)], env=env, cwd=REPO, text=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        delay = rng.uniform(0.4 * duration, 1.05 * duration)  # most kills land in scoring or publication
        time.sleep(delay)
        server = int((home / "server.pid").read_text()) if (home / "server.pid").exists() else None
        finished = process.poll() is not None
        signalled = time.monotonic()
        if not finished:
            os.killpg(process.pid, getattr(signal, f"SIG{args.signal}"))
        _, stderr = process.communicate(timeout=120)
        exit_s = round(time.monotonic() - signalled, 1)
        deadline = time.monotonic() + 10
        while server and alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphan = bool(server and alive(server))
        sql = tooleval("sql", "SELECT (SELECT count(*) FROM rows WHERE run_id = 'soak') AS r, "
                       "(SELECT count(*) FROM traces WHERE run_id = 'soak') AS t", "--out", str(out),
                       "--format", "jsonl", env=env)
        seen = json.loads(sql.stdout) if sql.returncode == 0 and sql.stdout.strip() else None
        consistent = seen is not None and seen["r"] == seen["t"] and seen["r"] in (0, 120, 200)
        drift_ok = True
        if seen and seen["r"]:
            drift_ok = tooleval("drift", "--run-id", "soak", "--out", str(out), env=env).returncode == 0
        # 130: tooleval's own exit; -2: death by SIGINT while Python shuts down (signal handlers are reset then),
        # which a shell reports as 130 too
        exit_ok = finished or args.signal != "INT" or process.returncode in (130, -signal.SIGINT)
        ok = not orphan and consistent and drift_ok and "Traceback" not in stderr and exit_ok
        survived += ok
        results.append({"attempt": attempt, "delay_s": round(delay, 1), "finished_before_kill": finished,
                        "exit": process.returncode, "exit_after_s": exit_s, "orphan_server": orphan, "rows/traces seen": seen,
                        "drift_ok": drift_ok, "survived": ok})
        print(json.dumps(results[-1]), flush=True)
    print(f"kills survived: {survived} / {args.kills} (signal {args.signal}; results in {work})")


if __name__ == "__main__":
    main()
