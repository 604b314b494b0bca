"""Trajectory match modes: whether a row's calls match its reference under the case's ``match_mode``.

The names follow agentevals' trajectory match modes (``strict``, ``unordered``, ``subset``, ``superset``).

Every mode keeps multiset semantics (a call counts as often as it occurs) and uses the same call equality as the
matching (:func:`tooleval.rules.match_with_rules`: canonical keys, or rule-aware equality under argument rules), so
the figures ``tp``, ``fp``, ``fn`` and ``f1`` are the same in every mode and only the verdict ``calls_match``
depends on it:

* ``unordered`` (the default) — fp = 0 and fn = 0: the row's ``exact_match``.
* ``strict`` — the same calls in the same order: as many calls as the reference, call *i* equal to reference call
  *i* (two parallel calls made in the other order fail it; they pass ``unordered``).
* ``subset`` — fp = 0: every observed call is a reference call (an agent may stop early, never do more).
* ``superset`` — fn = 0: every reference call was made (extra calls, such as reads, allowed).
* ``unordered`` with ``first_fit`` pairing — also each reference call, in the reference's order, takes the first
  equal observed call not yet taken, and every one finds one: BFCL's parallel checker, whose verdict depends on
  the order of the calls where one observed call equals two reference calls (a maximum matching would pair them
  the other way).
* ``subset`` / ``superset`` with ``ordered`` — also in the reference's order: the observed calls are a subsequence
  of the reference (``subset``), or the reference is a subsequence of the observed calls (``superset``). A greedy
  scan that takes the earliest equal call decides a subsequence exactly, whatever the equality (an embedding that
  uses a later call can always use the earliest one instead).

With accepted plans a row's calls match when they match **any** reference plan under the mode (the plans are the
accepted ways to do the task: ``[A, B]`` and ``[B, A]`` under ``strict`` accept both orders); the row's figures and
evidence stay those of the best-F1 plan (``chosen_plan``), so that they do not depend on the mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tooleval.models import MATCH_MODES

__all__ = ["MatchMode", "UNORDERED", "MODE_LABELS"]

MODE_LABELS = ("unordered", "strict", "subset", "superset", "subset_ordered", "superset_ordered",
               "unordered_first_fit")
"""The values of the row column ``match_mode``: the mode's name, with ``_ordered`` for an ordered subset or
superset and ``_first_fit`` for first-fit pairing."""


@dataclass(frozen=True)
class MatchMode:
    """A match mode: ``name`` (:data:`tooleval.models.MATCH_MODES`) and ``ordered`` (``subset`` / ``superset``
    only).

    Raises:
        ValueError: an unknown name, or ``ordered`` with ``unordered`` or ``strict``.
    """

    name: str = "unordered"
    ordered: bool = False
    first_fit: bool = False
    """``unordered`` only: pair by first fit in the reference's order (:attr:`tooleval.models.Case.pairing`)."""

    def __post_init__(self) -> None:
        if self.name not in MATCH_MODES:
            raise ValueError(f"unknown match mode {self.name!r}; the modes are {', '.join(MATCH_MODES)}")
        if self.first_fit and self.name != "unordered":
            raise ValueError(f"first-fit pairing applies to the unordered mode, not {self.name!r}")
        if self.ordered and self.name not in ("subset", "superset"):
            raise ValueError(f"ordered applies to the subset and superset modes, not {self.name!r} "
                             "(strict is already ordered)")

    @property
    def label(self) -> str:
        """The row column ``match_mode``: ``superset`` or ``superset_ordered`` (:data:`MODE_LABELS`)."""
        if self.first_fit:
            return f"{self.name}_first_fit"
        return f"{self.name}_ordered" if self.ordered else self.name

    @classmethod
    def from_label(cls, label: str) -> "MatchMode":
        """The mode a ``match_mode`` column value names (inverse of :attr:`label`).

        Raises:
            ValueError: not one of :data:`MODE_LABELS`.
        """
        if label not in MODE_LABELS:
            raise ValueError(f"unknown match mode {label!r}; the modes are {', '.join(MODE_LABELS)}")
        name, _, suffix = label.partition("_")
        return cls(name, suffix == "ordered", suffix == "first_fit")

    @classmethod
    def of_case(cls, case) -> "MatchMode":
        """The mode of a :class:`tooleval.models.Case` (its ``match_mode`` and ``ordered``)."""
        key = (cls, case.match_mode, case.ordered, getattr(case, "pairing", "maximum") == "first_fit")
        mode = _OF_CASE.get(key)
        if mode is None:  # a handful of modes exist: each is built (and validated) once, then shared (frozen)
            mode = _OF_CASE[key] = cls(*key[1:])
        return mode

    def holds(self, n_expected: int, n_observed: int, fp: int, fn: int, equal: Callable[[int, int], bool]) -> bool:
        """Whether the observed calls match one reference plan under this mode.

        Args:
            n_expected: Calls in the reference plan.
            n_observed: Calls observed.
            fp: Observed calls the maximum matching left unmatched.
            fn: Reference calls it left unmatched.
            equal: ``equal(i, j)``: reference call *i* equals observed call *j* (0-based), by the matching's own
                equality.
        """
        if self.name == "unordered":
            return fp == 0 and fn == 0 and (not self.first_fit or _first_fit(n_expected, n_observed, equal))
        if self.name == "strict":
            return n_expected == n_observed and all(equal(i, i) for i in range(n_expected))
        if self.name == "subset":
            return fp == 0 and (not self.ordered or _subsequence(n_observed, n_expected, lambda j, i: equal(i, j)))
        return fn == 0 and (not self.ordered or _subsequence(n_expected, n_observed, equal))


_OF_CASE: dict[tuple, MatchMode] = {}
""":meth:`MatchMode.of_case` by (class, name, ordered, first fit)."""

UNORDERED = MatchMode()
"""The default mode: today's rule, ``calls_match`` = ``exact_match``."""


def _subsequence(n_short: int, n_long: int, equal: Callable[[int, int], bool]) -> bool:
    """Whether items ``0..n_short-1`` occur, in order, at increasing positions of ``0..n_long-1``
    (``equal(short, long)``), each taking the earliest equal position after the previous one."""
    position = 0
    for item in range(n_short):
        while position < n_long and not equal(item, position):
            position += 1
        if position == n_long:
            return False
        position += 1
    return True


def _first_fit(n_expected: int, n_observed: int, equal: Callable[[int, int], bool]) -> bool:
    """Whether each reference call ``0..n_expected-1``, in order, finds an equal observed call among those not taken
    by an earlier one, taking the first (BFCL's ``parallel_function_checker_no_order``)."""
    taken: set[int] = set()
    for i in range(n_expected):
        j = next((j for j in range(n_observed) if j not in taken and equal(i, j)), None)
        if j is None:
            return False
        taken.add(j)
    return True
