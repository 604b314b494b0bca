"""tooleval's own implementation of ragas 0.4.3's ``ToolCallF1`` set-F1, for the row-level column at speed.

The ragas column's contract (docs/design.md "ragas column") allows an equivalent implementation of ragas' set-F1
for ``ragas_tool_call_f1`` only if tests prove it equal to ragas itself (``tests/scoring/test_ragas_f1.py``: every bundled
row, every case of ``tests/golden``, 10,000 synthetic rows) and the legacy path, which still calls ragas on every row,
re-proves it per row on every run (the drift check, :mod:`tooleval.runs.drift`: one differing row is drift).

What ragas 0.4.3 does (``ragas/metrics/collections/tool_call_f1/{metric,util}.py``), reproduced here step by step:

* each call becomes ``(name, make_hashable(args))``: dicts -> ``frozenset`` of ``(key, value)``, lists and tuples
  -> ``tuple``, recursively; scalars as they are, so Python equality decides (``True == 1``, ``10 == 10.0``);
* reference and observed calls are *sets* (duplicates collapse); ``tp = |A & E|``, ``fp = |A - E|``,
  ``fn = |E - A|``;
* precision and recall are 0.0 on a zero denominator, F1 is 0.0 when both are 0 (so two empty lists score 0.0);
* the value is ``round(f1, 4)``.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["RAGAS_F1_VERSION", "ragas_set_f1", "ragas_set_f1_many", "ragas_call_set", "ragas_set_f1_of_sets"]

RAGAS_F1_VERSION = "0.4.3"
"""The ragas release whose ToolCallF1 this reproduces; a different installed ragas fails the drift check's
version comparison and the equality tests, never silently."""


_ATOMS = frozenset({str, int, float, bool, type(None)})
"""Types :func:`_hashable` returns as they are (the JSON scalars): checked by exact type, so that the walk does not
recurse into each scalar (a subclass still takes the full path below)."""


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return frozenset([(k, v if type(v) in _ATOMS else _hashable(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return tuple([v if type(v) in _ATOMS else _hashable(v) for v in value])
    if isinstance(value, set):
        return frozenset(_hashable(v) for v in value)
    return value


def ragas_set_f1(expected: Sequence[dict[str, Any]], observed: Sequence[dict[str, Any]]) -> float:
    """ragas 0.4.3 ``ToolCallF1`` of one row, without building ragas' message objects.

    Args:
        expected: Reference calls ``[{"name": str, "args": dict}]`` as ragas is given them.
        observed: Observed calls in the same form (see :func:`tooleval.scoring.ragas_metric.ragas_args`).

    Returns:
        The F1 in [0, 1], rounded to 4 decimals (0.0 when both lists are empty, as ragas scores it).
    """
    return ragas_set_f1_of_sets(ragas_call_set(expected), ragas_call_set(observed))


def ragas_call_set(calls: Sequence[dict[str, Any]]) -> frozenset:
    """The set ragas compares: ``(name, make_hashable(args))`` of each call ``{"name": str, "args": dict}``. A
    caller scoring many rows of one case builds the reference's once."""
    return frozenset([(c["name"], _hashable(c["args"])) for c in calls])


def ragas_set_f1_of_sets(reference: frozenset, actual: frozenset) -> float:
    """:func:`ragas_set_f1` from the two :func:`ragas_call_set` sets (reference first)."""
    tp = len(actual & reference)
    fp = len(actual) - tp
    fn = len(reference) - tp
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return round(f1, 4)


def ragas_set_f1_many(pairs: Iterable[tuple[Sequence[dict], Sequence[dict]]]) -> list[float]:
    """:func:`ragas_set_f1` of each ``(expected, observed)`` pair."""
    return [ragas_set_f1(expected, observed) for expected, observed in pairs]
