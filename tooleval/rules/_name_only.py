"""Calls whose arguments were never captured: the advisory rule ``args_not_captured`` (docs/rules.md "Arguments
that were never captured").

A span recorded with content capture off (OpenTelemetry GenAI, OpenInference) names the tool the model called but
not the arguments. Such a call is kept by name (:meth:`tooleval.models.Call.not_captured`) and matched by name
only; its row is a **name-only row** (row column ``name_only``): it leaves the argument-level figures (mean F1,
exact-match rows) for its own (``name_only_rows``, ``mean_name_f1``), and the default gate fails it unless
gate.toml says ``accept_name_only = true``. The violation itself is advisory, so that the choice is the gate's.
"""

from __future__ import annotations

from tooleval.models import Call
from tooleval.rules._policy import Violation

__all__ = ["NAME_ONLY_RULE", "name_only", "name_only_violations"]

NAME_ONLY_RULE = "args_not_captured"
"""The rule of an observed call whose arguments the source did not record."""


def name_only(observed: list[Call]) -> bool:
    """True when some observed call's arguments were not captured (the row is then matched by name for it)."""
    return any(not call.args_captured for call in observed)


def name_only_violations(observed: list[Call]) -> list[Violation]:
    """One advisory ``args_not_captured`` violation per observed call without captured arguments, in call order;
    ``detail`` is ``call #n name: arguments not captured (content capture off); matched by name only``."""
    return [Violation(NAME_ONLY_RULE, "advisory", call.name,
                      f"call #{index + 1} {call.name}: arguments not captured (content capture off at the "
                      "source); matched by name only")
            for index, call in enumerate(observed) if not call.args_captured]
