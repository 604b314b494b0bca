"""Identity check of the row path: the same datasets run by two checkouts of tooleval, their rows and trace
envelopes compared column by column (``bench/compare_rows.py``), so that a change to how rows are computed is shown
to leave every row as it was.

Run from the repository root, with a baseline checkout made beside it (``git worktree add /tmp/base <commit>``):

    .venv/bin/python bench/identity_check.py BASELINE_CHECKOUT SCRATCH [DATASET ...]

Both checkouts run with this venv's Python (the baseline's package comes first on ``PYTHONPATH``) and the same
redaction key (``TOOLEVAL_REDACTION_KEY``, a fixed test key unless set), each dataset into
``SCRATCH/<checkout>/<dataset name>``. Without DATASET arguments: the bundled dataset and every dataset under
``datasets/examples/``. Synthetic corpora come from ``tooleval synth`` (``--rows 100000 --profile bfcl --seed 0``,
``--rows 20000 --profile tau --seed 0``) and are passed as DATASET folders.

Prints one line per dataset and table (compare_rows' figures) and exits 0 when every table of every dataset is
equal, 1 when one differs, 2 when a run fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEY = "tooleval-identity-check-key-0001"


def _run(checkout: Path, dataset: Path, out: Path, run_id: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(checkout), TOOLEVAL_REDACTION_KEY=os.environ.get(
        "TOOLEVAL_REDACTION_KEY", KEY))
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out", str(out),
                           "--run-id", run_id], cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: some rows have errors, which both checkouts must agree on
        raise SystemExit(f"{checkout}: run of {dataset} exited {done.returncode}\n{done.stdout[-2000:]}"
                         f"{done.stderr[-2000:]}")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    baseline, scratch = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    datasets = [Path(d).resolve() for d in argv[2:]] or [
        ROOT / "datasets" / "tau-bench-airline",
        *sorted(p.parent for p in (ROOT / "datasets" / "examples").glob("*/dataset.json"))]
    status = 0
    for dataset in datasets:
        outs = {}
        for name, checkout in (("base", baseline), ("cand", ROOT)):
            out = scratch / name / dataset.name
            _run(checkout, dataset, out, name)
            outs[name] = out
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "compare_rows.py"), str(outs["base"]), "base",
                               str(outs["cand"]), "cand"], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            print(f"{dataset.name}: {line}")
        if done.returncode != 0:
            status = 1
            print(done.stderr, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
