"""Compare the capture stage files of two results folders, value for value: every column of
``tooleval.storage.CAPTURE_SCHEMA`` (the envelope columns and the view columns that scoring reads) but
``captured_at``, the rows of each side's stage files together, sorted by ``(case_id, trial)`` and paired by position.
(``bench/compare_rows.py`` compares what a run publishes: rows and envelopes, not the view columns.)

Run from the repository root, after ``bench/row_path_stages.py`` (or a run) wrote each folder with the same
redaction key:

    .venv/bin/python bench/compare_stages.py OUT_A OUT_B [STAGE]

``STAGE``: the stage folder's name under ``<out>/.tooleval/stages`` (default ``capture``). Prints the row counts,
the columns compared and, per differing column, how many rows differ and the first differing row's key; exit 0
when every compared column is equal, 1 when not, 2 on usage errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

LEFT_OUT = {"captured_at"}


def stage_table(out: str, stage: str) -> pa.Table:
    """Every stage file of ``stage`` under ``out``, concatenated."""
    files = sorted((Path(out) / ".tooleval" / "stages" / stage).glob("*.arrow"))
    if not files:
        raise SystemExit(f"no {stage} stage files under {out}")
    tables = [ipc.open_file(pa.memory_map(str(path))).read_all() for path in files]
    return pa.concat_tables(tables).sort_by([("case_id", "ascending"), ("trial", "ascending")])


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    stage = argv[2] if len(argv) == 3 else "capture"
    a, b = stage_table(argv[0], stage), stage_table(argv[1], stage)
    print(f"rows_a {a.num_rows} rows_b {b.num_rows}")
    if a.schema != b.schema:
        print(f"schemas differ:\n{a.schema}\n---\n{b.schema}")
        return 1
    if a.num_rows != b.num_rows:
        return 1
    names = [name for name in a.schema.names if name not in LEFT_OUT]
    keys = list(zip(a["case_id"].to_pylist(), a["trial"].to_pylist()))
    differing = 0
    for name in names:
        left, right = a[name].to_pylist(), b[name].to_pylist()
        rows = [i for i, (x, y) in enumerate(zip(left, right)) if x != y]
        if rows:
            differing += 1
            print(f"{name}: {len(rows)} rows differ, first {keys[rows[0]]}: {left[rows[0]]!r:.300} != "
                  f"{right[rows[0]]!r:.300}")
    print(f"columns compared {len(names)}, differing {differing}")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
