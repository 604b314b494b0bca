"""The dataset's tool specs by name, with what every row asks of the whole table computed once.

Scoring asks, for each row, which tools declare argument rules and which declare confidential fields; over a
tools.json of hundreds of tools that scan cost more than the row's own checks. A :class:`ToolTable` answers both from
sets built once per shard. It is a ``dict`` (same lookups at the same speed), so every function that takes
``Mapping[str, ToolSpec]`` accepts it; a plain dict still works everywhere and is scanned as before.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from tooleval.models import Case, ToolSpec

__all__ = ["ToolTable", "ruled_tools", "confidential_fields", "confidential_tools"]


class ToolTable(dict):
    """``{name: ToolSpec}`` built once from a dataset's tools; treat it as read-only (its summaries are not
    recomputed on change)."""

    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        super().__init__((tool.name, tool) for tool in tools)
        self.ruled: frozenset[str] = _ruled(self)
        """Names of the tools that declare ``argument_rules``."""
        self.confidential: dict[str, list[str]] = _confidential(self)
        """Tool name -> its ``confidential_fields``, for the tools that declare some."""
        self.required: frozenset[str] = frozenset(name for name, spec in self.items() if spec.required_arguments)
        """Names of the tools that declare ``required_arguments``."""


def _ruled(tools: Mapping[str, ToolSpec]) -> frozenset[str]:
    return frozenset(name for name, spec in tools.items() if spec.argument_rules)


def _confidential(tools: Mapping[str, ToolSpec]) -> dict[str, list[str]]:
    return {name: spec.confidential_fields for name, spec in tools.items() if spec.confidential_fields}


def ruled_tools(tools: Mapping[str, ToolSpec]) -> frozenset[str]:
    """Names of the tools in ``tools`` that declare ``argument_rules`` (precomputed for a :class:`ToolTable`)."""
    return tools.ruled if isinstance(tools, ToolTable) else _ruled(tools)


def confidential_fields(tools: Mapping[str, ToolSpec]) -> dict[str, list[str]]:
    """Tool name -> ``confidential_fields`` for the tools that declare some (precomputed for a :class:`ToolTable`)."""
    return tools.confidential if isinstance(tools, ToolTable) else _confidential(tools)


def confidential_tools(tools: Iterable[ToolSpec], cases: Iterable[Case] | Mapping[str, Case]) -> list[str]:
    """Sorted names of the tools that declare ``confidential_fields`` in ``tools`` (tools.json) or in any case's own
    tool specs: the calls whose results the leak rule reads, which trace capture keeps in its transcript view.
    ``cases``: the cases, or a dataset's :class:`tooleval.dataset.Cases` (read from its summary)."""
    names = {tool.name for tool in tools if tool.confidential_fields}
    summary = getattr(cases, "confidential_tools", None)  # a dataset's cases keep it from their full load
    if summary is not None:
        names.update(summary())
    else:
        for case in cases.values() if isinstance(cases, Mapping) else cases:
            names.update(tool.name for tool in case.tools or () if tool.confidential_fields)
    return sorted(names)
