"""Policy rules and the release gate. Pure core: no Prefect import.

* Matching under argument rules and accepted plans: :func:`match_with_rules`, :func:`match_plans`
  (:class:`ArgumentRules`, :class:`RuleMatch`, :class:`Coercion`), and the verdict of a trajectory match mode
  (:class:`MatchMode`: ``unordered``, ``strict``, ``subset``, ``superset``, ordered or not).
* Policy checks of one row: :func:`check_policies` -> :class:`Violation` records (13 rules, :data:`RULE_NAMES`),
  with a configurable :class:`ConfirmationDetector` (default :class:`KeywordConfirmation`).
* Tool schema checks: :func:`schema_findings` -> :class:`SchemaFinding` records (row column ``schema_findings``,
  mismatch category ``schema``) and rule ``tool_schema``, advisory unless gate.toml's ``[tool_schema]
  blocking_tools`` names the tool.
* Both at once for the scoring stage: :func:`evaluate_row` -> :class:`RowRules` (``.columns()``), over a
  :class:`ToolTable` (the tool specs by name, with their table-wide summaries computed once).
* The gate: :class:`GateConfig` (gate.toml, :func:`load_gate_config`, :func:`load_policy`),
  :func:`evaluate_gate` -> :class:`GateVerdict`, :func:`write_junit`.

Formats and decisions: docs/rules.md.
"""

from tooleval.rules._arguments import ANY_ITEM, ANY_KEY, ArgumentRules, parse_pattern, rule_diff_paths
from tooleval.rules._confirmation import ConfirmationConfig, ConfirmationDetector, KeywordConfirmation
from tooleval.rules._gate import GateTally, evaluate_gate
from tooleval.rules._gate_config import (
    GATE_RULES,
    MISMATCH_RULE,
    ROW_OUTCOMES,
    F1Advisory,
    Floor,
    GateConfig,
    QuarantineEntry,
    ToolSchemaGate,
    Waiver,
    load_gate_config,
    load_policy,
)
from tooleval.rules._junit import write_junit
from tooleval.rules._match import Coercion, RuleMatch, match_plans, match_with_rules
from tooleval.rules._modes import MODE_LABELS, UNORDERED, MatchMode
from tooleval.rules._policy import (RULE_NAMES, PolicyConfig, Violation, check_policies, trajectory_case,
                                   trajectory_tool, write_violations)
from tooleval.rules._schema import FINDING_KINDS, SCHEMA_RULE, SchemaFinding, schema_findings, schema_violations
from tooleval.rules._row import RowRules, case_rules, case_tools, evaluate_row, tool_families
from tooleval.rules._tools import ToolTable, confidential_tools
from tooleval.rules._trajectory import Step, trajectory
from tooleval.rules._verdict import GateVerdict, RowOutcome, SliceResult, worst_key

__all__ = [
    "ToolTable",
    "ArgumentRules",
    "rule_diff_paths",
    "ANY_ITEM",
    "ANY_KEY",
    "parse_pattern",
    "case_rules",
    "case_tools",
    "confidential_tools",
    "worst_key",
    "Coercion",
    "RuleMatch",
    "match_with_rules",
    "match_plans",
    "MatchMode",
    "MODE_LABELS",
    "UNORDERED",
    "RULE_NAMES",
    "Violation",
    "PolicyConfig",
    "check_policies",
    "trajectory_case",
    "trajectory_tool",
    "write_violations",
    "ConfirmationDetector",
    "ConfirmationConfig",
    "KeywordConfirmation",
    "Step",
    "trajectory",
    "FINDING_KINDS",
    "SCHEMA_RULE",
    "SchemaFinding",
    "schema_findings",
    "schema_violations",
    "ToolSchemaGate",
    "RowRules",
    "evaluate_row",
    "tool_families",
    "GATE_RULES",
    "MISMATCH_RULE",
    "ROW_OUTCOMES",
    "GateConfig",
    "Floor",
    "F1Advisory",
    "Waiver",
    "QuarantineEntry",
    "load_gate_config",
    "load_policy",
    "GateTally",
    "GateVerdict",
    "RowOutcome",
    "SliceResult",
    "evaluate_gate",
    "write_junit",
]
