"""The gate's one-line verdict after a run: its count of blocking rows, in the singular for one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tooleval.cli import _report
from tooleval.cli._app import console


@pytest.mark.parametrize(("rows", "unscored", "said"), [
    (1, 0, "gate: FAIL (1 blocking row)"),
    (2, 0, "gate: FAIL (2 blocking rows)"),
    (1, 1, "gate: FAIL (1 blocking row, 1 unscored)"),
])
def test_the_count_of_blocking_rows_agrees_with_its_noun(rows, unscored, said):
    summary = {"gate": {"passed": False, "counts": {"blocking_rows": rows, "unscored_cases": unscored},
                        "reasons": []},
               "run_id": "r1"}
    with console.capture() as captured:
        _report.print_gate_line(SimpleNamespace(summary=summary, run_id="r1", out="results"))
    assert said in captured.get()
