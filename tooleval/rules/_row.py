"""One call per row for the scoring stage: rule-aware match, plan choice and policy checks together.

:func:`evaluate_row` is what ``tooleval.scoring.rows.score_envelopes`` calls for each envelope; :meth:`RowRules.columns`
returns the row columns it computes (the metric columns, now rule-aware, the policy columns and the match mode's
verdict).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from tooleval.capture import Transcript
from tooleval.models import Call, Case, ToolSpec
from tooleval.rules._arguments import ArgumentRules
from tooleval.rules._confirmation import ConfirmationDetector
from tooleval.rules._match import RuleMatch, match_plans, written_arguments
from tooleval.rules._modes import MatchMode
from tooleval.rules._name_only import name_only, name_only_violations
from tooleval.rules._policy import PolicyConfig, Violation, check_policies
from tooleval.rules._schema import SchemaFinding, schema_findings, schema_violations

__all__ = ["RowRules", "evaluate_row", "tool_families", "case_tools", "case_rules"]


def case_tools(case: Case, tools: Mapping[str, ToolSpec]) -> Mapping[str, ToolSpec]:
    """``tools`` with the case's own tool specs (:attr:`Case.tools`) in place of those of the same name."""
    if not case.tools:
        return tools
    return {**tools, **{spec.name: spec for spec in case.tools}}


def case_rules(case: Case, tools: Mapping[str, ToolSpec]) -> ArgumentRules | None:
    """The case's resolved argument rules as :func:`evaluate_row` resolves them (over :func:`case_tools`), for a
    caller that scores several rows of one case and resolves them once (``None``: the case has none)."""
    return ArgumentRules.for_case(case, case_tools(case, tools))


def tool_families(calls: Iterable[Call], tools: Mapping[str, ToolSpec]) -> list[str]:
    """Sorted families (tools.json ``family``) of the tools among ``calls``; tools without one are left out."""
    return sorted({tools[c.name].family for c in calls if c.name in tools and tools[c.name].family})


@dataclass(frozen=True)
class RowRules:
    """Everything the policy rules and argument rules add to one row."""

    match: RuleMatch
    violations: list[Violation]
    reference_calls: list[Call]
    """The chosen plan's calls (``expected_calls`` unless an accepted plan scored higher)."""
    tool_families: list[str]
    schema_findings: list[SchemaFinding] | None = None
    """Observed calls against their tools.json schemas: evidence only, never an f1 change (a schema is
    the tool's, not the case's reference); ``None`` when the dataset declares no tools (nothing to check against)."""
    mode: MatchMode = MatchMode()
    """The case's match mode, which decided ``match.calls_match``."""
    name_only: bool = False
    """Some observed call's arguments were not captured: matched by name only (row column ``name_only``)."""

    @property
    def blocking(self) -> bool:
        """True when any violation is blocking (before gate.toml re-grades or waives anything)."""
        return any(v.severity == "blocking" for v in self.violations)

    def apply(self, row: Any) -> None:
        """Set :meth:`columns` on ``row`` (a :class:`tooleval.storage.Row`), attribute by attribute."""
        for name, value in self.columns().items():
            setattr(row, name, value)

    def columns(self) -> dict[str, Any]:
        """Row columns: the rule-aware metric columns (same names and shapes as today) plus ``violations``,
        ``blocking``, ``coercions``, ``chosen_plan``, ``reference_calls``, ``tool_families``, ``schema_findings``,
        ``match_mode``, ``calls_match`` and ``name_only``; ``mismatch_categories`` gains ``schema`` when a call
        departs from its
        schema."""
        m = self.match
        return {
            "missing_calls": [c.to_record() for c in m.missing_calls],
            "extra_calls": [c.to_record() for c in m.extra_calls],
            "wrong_args": [pair.to_record() for pair in m.wrong_args],
            "duplicate_calls": m.duplicate_calls,
            "malformed_calls": m.malformed_calls,
            "tp": m.tp,
            "fp": m.fp,
            "fn": m.fn,
            "precision": m.precision,
            "recall": m.recall,
            "f1": m.f1,
            "exact_match": m.exact_match,
            "mismatch_categories": list(m.mismatch_categories) + (["schema"] if self.schema_findings else []),
            "violations": [v.to_record() for v in self.violations],
            "blocking": self.blocking,
            "coercions": [c.to_record() for c in m.coercions],
            "chosen_plan": m.chosen_plan,
            "reference_calls": [c.to_record() for c in self.reference_calls],
            "tool_families": list(self.tool_families),
            "schema_findings": None if self.schema_findings is None else [f.to_record() for f in self.schema_findings],
            "match_mode": self.mode.label,
            "calls_match": m.calls_match,
            "name_only": self.name_only,
        }


def evaluate_row(
    case: Case,
    tools: Mapping[str, ToolSpec],
    messages: list[dict[str, Any]] | Transcript | None,
    observed: list[Call],
    *,
    policy: PolicyConfig | None = None,
    confirmation: ConfirmationDetector | None = None,
    rules: ArgumentRules | None = None,
    match: RuleMatch | None = None,
) -> RowRules:
    """Match, choose the plan and check the policies of one (case, trial).

    Args:
        case: The case.
        tools: ``tools.json`` specs by name.
        messages: The trajectory (the envelope's ``messages_json``, parsed), or its transcript view
            (:class:`tooleval.capture.Transcript`, as trace capture wrote it); ``None`` when there is none.
        observed: The envelope's calls (``tooleval.capture.envelope.envelope_calls``), i.e. the calls of ``messages``.
        policy: The dataset's ``[policy]`` (:func:`tooleval.rules.load_policy`).
        confirmation: A custom confirmation detector.
        rules: :func:`case_rules` of this very ``case`` and ``tools``, when the caller keeps them across the rows
            of a case (they hold per-path lookups worth keeping); resolved here when ``None``.
        match: The row's match against ``case.plans[0]`` when the caller computed it already (a case with one plan,
            no argument rules and the plain unordered mode, whose rows a scorer matches a whole batch at once);
            ``None``: matched here over every plan (:func:`match_plans`).

    Raises:
        ValueError: when ``observed`` is not the call sequence of ``messages``, or a tool's ``parameters`` is not a
            valid JSON Schema (score the row as an error).
    """
    tools = case_tools(case, tools)
    rules = ArgumentRules.for_case(case, tools) if rules is None else rules
    plans = case.plans  # the scoring stage passes the case with its references redacted as its traces were
    written = None
    if rules is not None and rules.written_numbers:
        written = messages.written_arguments() if isinstance(messages, Transcript) else written_arguments(messages)
    mode = MatchMode.of_case(case)
    if match is None:
        match, chosen = match_plans(plans, observed, rules, mode, written)
    else:
        chosen = match.chosen_plan
    violations = check_policies(case, tools, messages, observed, match, policy=policy, confirmation=confirmation,
                                rules=rules)
    findings = schema_findings(observed, tools) if tools else None
    violations += schema_violations(findings or [], observed)
    violations += name_only_violations(observed)
    families = tool_families([*plans[chosen], *observed], tools)
    return RowRules(match, violations, list(plans[chosen]), families, findings, mode, name_only(observed))
