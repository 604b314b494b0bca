"""Duplicate-aware multiset matching of observed tool calls against reference calls.

Semantics are docs/design.md "Scoring semantics" (decided; each rule has a test in ``tests/core/test_matching.py``):

* A call's key is ``(name, canonical args)`` (:attr:`tooleval.models.Call.key`).
* ``tp`` = size of the multiset intersection of expected and observed keys; ``fp = observed - tp``;
  ``fn = expected - tp``. Duplicates count: expected ``[A]``, observed ``[A, A, A]`` gives tp 1, fp 2.
* ``f1 = 2tp / (2tp + fp + fn)``, and 1.0 when both lists are empty (a correct abstention). ``precision`` and
  ``recall`` are ``None`` when their denominator is 0.
* ``duplicate_calls`` = sum over keys of ``max(0, observed(k) - max(expected(k), 1))``; a malformed call's key is
  ``(name, raw text)``.
* Unmatched expected and observed calls with the same tool name are paired by an optimal assignment that
  minimises the number of differing argument paths (``scipy.optimize.linear_sum_assignment``): a greedy pairing
  depends on list order, so the same calls in another order would report other wrong arguments. Each pair is one
  ``wrong_args`` entry and still counts as one fn plus one fp. Malformed calls take no part in the pairing.
* ``mismatch_categories``: ``missing`` when fn > 0, ``extra`` when fp > 0, ``wrong_args`` when a pair exists,
  ``duplicate`` when duplicate_calls > 0, ``malformed`` when a malformed call was observed (tooleval's decision,
  documented in README "Scoring").
* An observed call whose arguments were not captured (:attr:`tooleval.models.Call.args_captured` false) matches
  by **name only**: once the calls with arguments have matched by key, each such call matches one still
  unmatched reference call of its tool (a multiset over names, so the matching stays maximum). It takes no part
  in the wrong-argument pairing nor in ``duplicate_calls`` (two calls of one tool whose arguments are unknown
  are not known to repeat), and a row holding one is never an ``exact_match`` (docs/rules.md "Arguments that
  were never captured").
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tooleval.canonical import diff_paths
from tooleval.models import NOT_CAPTURED_KEY, Call

__all__ = ["WrongArgs", "MatchResult", "match_calls", "match_calls_evidence", "match_evidence", "f1_score", "duplicate_count",
           "call_diff_paths", "optimal_pairs", "pair_wrong_args"]


@dataclass(frozen=True)
class WrongArgs:
    """An unmatched expected call paired with an unmatched observed call of the same tool."""

    name: str
    expected: Call
    observed: Call
    paths: list[str]
    """Differing argument paths, e.g. ``["amount_cents"]`` or ``["flights[0].date"]``."""

    def to_record(self) -> dict:
        """Parquet struct ``{name, expected_args_json, observed_args_json, paths}``."""
        return {
            "name": self.name,
            "expected_args_json": self.expected.args_json,
            "observed_args_json": self.observed.args_json,
            "paths": list(self.paths),
        }


@dataclass(frozen=True)
class MatchResult:
    """Row-level evidence of one comparison. Counts are calls; ratios are in [0, 1] and unrounded."""

    tp: int
    fp: int
    fn: int
    precision: float | None
    recall: float | None
    f1: float
    exact_match: bool
    duplicate_calls: int
    malformed_calls: int
    missing_calls: list[Call] = field(default_factory=list)
    extra_calls: list[Call] = field(default_factory=list)
    wrong_args: list[WrongArgs] = field(default_factory=list)
    mismatch_categories: list[str] = field(default_factory=list)


def f1_score(tp: int, fp: int, fn: int) -> float:
    """``2tp / (2tp + fp + fn)``; 1.0 when tp = fp = fn = 0 (a correct abstention: nothing expected,
    nothing called)."""
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2 * tp / denominator


def _remove_matched(calls: list[Call], budget: dict) -> list[Call]:
    """Return the calls left after consuming ``budget[key]`` occurrences of each key, in original order."""
    left = dict(budget)
    unmatched = []
    for call in calls:
        key = call.key
        if left.get(key, 0) > 0:
            left[key] -= 1
        else:
            unmatched.append(call)
    return unmatched


def _match_names(missing: list[Call], extra: list[Call]) -> tuple[int, list[Call], list[Call]]:
    """Match each observed call without captured arguments to the first unmatched reference call of its tool:
    ``(matches, missing left, extra left)``, both lists in their original order."""
    if not missing or all(call.args_captured for call in extra):  # nearly every row: nothing is matched by name
        return 0, missing, extra
    waiting: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(missing):
        waiting[call.name].append(i)
    matched_expected: set[int] = set()
    left: list[Call] = []
    for call in extra:
        if not call.args_captured and waiting.get(call.name):
            matched_expected.add(waiting[call.name].pop(0))
        else:
            left.append(call)
    return len(matched_expected), [c for i, c in enumerate(missing) if i not in matched_expected], left


def optimal_pairs(costs: list[list[int]]) -> list[tuple[int, int]]:
    """A least-cost assignment of the rows of ``costs`` to its columns: ``(row, column)`` pairs, as
    ``scipy.optimize.linear_sum_assignment`` returns them.

    A single row (or column) is assigned its first cheapest column (row) here, without an array or scipy: the
    optimum, and scipy's own choice among equal costs (its first; ``tests/core/test_matching.py`` compares every
    shape and tie with scipy itself). Most rows pair one missing call with one extra call of its tool (97 % of the
    assignments on a bfcl corpus are 1 x 1). A larger matrix goes to scipy's compiled solver
    (:func:`_linear_sum_assignment`).

    Args:
        costs: A non-empty rectangular matrix of differing-path counts, one list per row.
    """
    if len(costs) == 1:
        line = costs[0]
        return [(0, line.index(min(line)))]
    if len(costs[0]) == 1:
        line = [row[0] for row in costs]
        return [(line.index(min(line)), 0)]
    assigned_rows, assigned_cols = _linear_sum_assignment()(np.array(costs, dtype=float))
    return list(zip(assigned_rows.tolist(), assigned_cols.tolist()))


_SOLVER: list[Callable] = []


def _linear_sum_assignment() -> Callable:
    """``scipy.optimize.linear_sum_assignment``, loaded when first needed. Importing ``scipy.optimize`` costs
    about 0.7 s per process (every worker pays it on its first shard), while the function is the whole of one
    compiled module, ``scipy/optimize/_lsap``, which loads in a millisecond on its own: that module is loaded
    alone unless ``scipy.optimize`` is already imported, or the module cannot be found or loaded (another scipy
    layout), when the package is imported as usual. Both are the same compiled function (``tests/core/test_matching.py``
    compares them)."""
    if not _SOLVER:
        solver = None
        if "scipy.optimize" not in sys.modules:
            solver = _lsap_alone()
        if solver is None:
            from scipy.optimize import linear_sum_assignment as solver
        _SOLVER.append(solver)
    return _SOLVER[0]


def _lsap_alone() -> Callable | None:
    """scipy's compiled ``_lsap`` module's ``linear_sum_assignment``, loaded without the ``scipy.optimize``
    package (and not registered in ``sys.modules``, so a later ``import scipy.optimize`` loads its own); ``None``
    when it cannot be found or loaded."""
    try:
        found = importlib.util.find_spec("scipy")
        folder = Path(next(iter(found.submodule_search_locations)), "optimize")
        suffixes = importlib.machinery.EXTENSION_SUFFIXES
        path = next(folder / f"_lsap{suffix}" for suffix in suffixes if (folder / f"_lsap{suffix}").is_file())
        loader = importlib.machinery.ExtensionFileLoader("scipy.optimize._lsap", str(path))
        module = importlib.util.module_from_spec(
            importlib.util.spec_from_file_location("scipy.optimize._lsap", path, loader=loader))
        loader.exec_module(module)
        return module.linear_sum_assignment
    except (ImportError, OSError, StopIteration, AttributeError, TypeError):
        return None


_DIFFS: dict[tuple[str, str], list[str]] = {}
_DIFFS_LIMIT = 65536


def call_diff_paths(expected: Call, observed: Call) -> list[str]:
    """``diff_paths`` of two well-formed calls' arguments (a new list of differing argument paths, as
    :class:`WrongArgs` holds them), kept per pair of canonical argument texts: the text is the arguments' value (a
    call's key), and the trials of a case repeat their wrong calls."""
    key = (expected.args_json, observed.args_json)
    paths = _DIFFS.get(key)
    if paths is None:
        paths = diff_paths(expected.args, observed.args)
        if None not in key:
            if len(_DIFFS) >= _DIFFS_LIMIT:
                _DIFFS.clear()
            _DIFFS[key] = paths
    return list(paths)


def pair_wrong_args(missing: list[Call], extra: list[Call]) -> list[WrongArgs]:
    """The wrong-argument pairs of a row: its unmatched expected calls (``missing``, in order) and unmatched
    observed calls (``extra``, in order) of the same tool paired by an optimal assignment over the number of
    differing argument paths (:func:`optimal_pairs`); malformed calls and calls without captured arguments take no
    part. Pairs in the order of their missing call, then their extra call."""
    by_name_expected: dict[str, list[int]] = defaultdict(list)
    by_name_observed: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(missing):
        by_name_expected[call.name].append(i)
    for j, call in enumerate(extra):
        if call.args_known:
            by_name_observed[call.name].append(j)
    pairs: list[tuple[int, int, list[str]]] = []
    for name, rows in by_name_expected.items():
        cols = by_name_observed.get(name)
        if not cols:
            continue
        paths = [[call_diff_paths(missing[i], extra[j]) for j in cols] for i in rows]
        costs = [[len(p) for p in row] for row in paths]
        pairs += [(rows[r], cols[c], paths[r][c]) for r, c in optimal_pairs(costs)]
    pairs.sort(key=lambda pair: (pair[0], pair[1]))
    return [WrongArgs(missing[i].name, missing[i], extra[j], p) for i, j, p in pairs]


def match_calls(expected: list[Call], observed: list[Call]) -> MatchResult:
    """Compare observed tool calls with the reference as multisets.

    Args:
        expected: Reference calls (well-formed; order is kept in ``missing_calls``).
        observed: Calls the agent made, in trajectory order; malformed calls included.

    Returns:
        A :class:`MatchResult`. ``missing_calls`` holds every unmatched expected call and ``extra_calls`` every
        unmatched observed call (including those paired in ``wrong_args`` and malformed ones).
    """
    return MatchResult(**match_calls_evidence(expected, observed))


def match_calls_evidence(expected: list[Call], observed: list[Call]) -> dict:
    """:func:`match_calls` as the keyword arguments of a :class:`MatchResult` (:func:`match_evidence`), for a
    caller that builds a subclass of it."""
    expected_counts = Counter([call.key for call in expected])
    observed_counts = Counter([call.key for call in observed])
    # the multiset intersection (Counter's ``&``, without building a Counter): counts are positive
    matched = {key: min(count, other) for key, count in expected_counts.items()
               if (other := observed_counts.get(key, 0)) > 0}
    tp = sum(matched.values())
    if tp == len(expected) and tp == len(observed):  # every call matched by key: nothing is left to pair
        missing: list[Call] = []
        extra: list[Call] = []
        wrong: list[WrongArgs] = []
    else:
        missing = _remove_matched(expected, matched)
        extra = _remove_matched(observed, matched)
        by_name, missing, extra = _match_names(missing, extra)
        tp += by_name
        wrong = pair_wrong_args(missing, extra)
    duplicates = duplicate_count(expected_counts, observed_counts)
    return match_evidence(expected, observed, tp, missing, extra, wrong, duplicates)


def duplicate_count(expected: Counter, observed: Counter) -> int:
    """``duplicate_calls`` from the key counts: Σ max(0, observed(k) − max(expected(k), 1)) over the keys of calls
    whose arguments were captured (a key tagged as not captured is skipped)."""
    return sum(max(0, n - max(expected.get(k, 0), 1)) for k, n in observed.items() if k[1] != NOT_CAPTURED_KEY)


def match_evidence(
    expected: list[Call],
    observed: list[Call],
    tp: int,
    missing: list[Call],
    extra: list[Call],
    wrong: list[WrongArgs],
    duplicates: int,
) -> dict:
    """The :class:`MatchResult` fields that follow from a matching: counts, ratios, ``exact_match`` and
    ``mismatch_categories`` (shared by the plain and the rule-aware matcher, so both define them alike)."""
    fp, fn = len(observed) - tp, len(expected) - tp
    malformed = sum(1 for call in observed if call.malformed)
    name_only = any(not call.args_captured for call in observed)
    flags = (("missing", fn > 0), ("extra", fp > 0), ("wrong_args", bool(wrong)),
             ("duplicate", duplicates > 0), ("malformed", malformed > 0))
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / len(observed) if observed else None,
        "recall": tp / len(expected) if expected else None,
        "f1": f1_score(tp, fp, fn),
        "exact_match": fp == 0 and fn == 0 and not name_only,  # unknown arguments are never an exact match
        "duplicate_calls": duplicates,
        "malformed_calls": malformed,
        "missing_calls": missing,
        "extra_calls": extra,
        "wrong_args": wrong,
        "mismatch_categories": [name for name, present in flags if present],
    }
