"""Figures a test measures as it runs (how many generated rows a property compared, say), printed once at the
end of the session by the conftest's terminal summary, whichever worker ran the test.

A test adds to a figure with :func:`add`; each pytest-xdist worker hands its figures to the controller when it
finishes (``workeroutput``), and the controller sums them.
"""

from __future__ import annotations

import string
from collections import Counter

FIGURES: Counter[str] = Counter()
"""The figures of this process: name -> sum of what the tests added."""

LINES = {
    "redaction_rows": "redaction property: {redaction_rows} generated rows compared with and without redaction "
                      "(plus the bundled and example datasets)",
    "scan_datasets": "secret scan: {scan_datasets} generated datasets, {scan_secrets} planted secrets, 0 found raw",
}
"""One summary line per figure that starts it, formatted with every figure (one no test added to reads 0)."""


def add(name: str, amount: int = 1) -> None:
    """Add ``amount`` to the figure ``name``."""
    FIGURES[name] += amount


def summary_lines(figures: Counter[str]) -> list[str]:
    """The summary line of each figure of :data:`LINES` that some test added to, in :data:`LINES` order."""
    values = {field: 0 for line in LINES.values() for _, field, _, _ in string.Formatter().parse(line) if field}
    values.update(figures)
    return [line.format_map(values) for name, line in LINES.items() if figures.get(name)]
