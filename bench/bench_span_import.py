"""Peak memory of ``tooleval import otlp`` on a large OTLP JSON-lines file (a benchmark, not a timed test).

    python bench/make_span_traces.py openllmetry /tmp/spans/seed.jsonl 100
    python bench/make_big_otlp.py /tmp/spans/seed.jsonl /tmp/spans/big.jsonl 1e9
    python bench/bench_span_import.py /tmp/spans/big.jsonl /tmp/spans/big-ds

Runs the import in a child process and prints its exit code, wall time and peak RSS (``ru_maxrss`` of the
child: the importer alone, not this script).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    command = [sys.executable, "-m", "tooleval.cli", "import", "otlp", str(src), "--out", str(out),
               "--references", str(src) + ".refs.jsonl"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    sys.stdout.write(done.stdout + done.stderr)
    sys.stdout.write(f"input {src.stat().st_size:,} bytes; exit {done.returncode}; wall {elapsed:.0f} s; "
                     f"peak RSS {peak_kib:,} kB ({peak_kib / 1024:.0f} MiB)\n")


if __name__ == "__main__":
    main()
