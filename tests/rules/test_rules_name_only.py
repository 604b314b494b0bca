"""Calls whose arguments were never captured under the rules: rule-aware matching and match modes, the policy
rules that need arguments, the tool schema check, the row's violation, and the gate (blocking by default,
advisory with ``accept_name_only = true``). Values worked by hand beside each assertion."""

from __future__ import annotations

from datetime import date

import pytest

from tooleval.models import Call, Case, ToolSpec
from tooleval.rules import GateConfig, MatchMode, evaluate_gate, evaluate_row, match_with_rules
from tooleval.rules._arguments import ArgumentRules
from tooleval.errors import InputFileError

TODAY = date(2026, 6, 1)
U = Call.not_captured


def call(name: str, **args) -> Call:
    return Call.from_raw(name, args)


def unrecorded(name: str, call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name}, "arguments_captured": False}


def case(**fields) -> Case:
    return Case.model_validate({"case_id": "c", "input": "hi", **fields})


class TestRuleAwareMatching:
    def test_rules_do_not_stop_a_match_by_name(self):
        # with a tolerance rule on refund.cents the rule-aware matcher runs; refund(?) still matches by name
        tools = {"refund": ToolSpec(name="refund", argument_rules={"cents": {"tolerance": 5}})}
        the_case = case(expected_calls=[{"name": "get_order", "args": {"id": "A"}},
                                        {"name": "refund", "args": {"id": "A", "cents": 9800}}])
        rules = ArgumentRules.for_case(the_case, tools)
        assert rules is not None
        result = match_with_rules(the_case.expected_calls, [call("get_order", id="A"), U("refund")], rules)
        assert (result.tp, result.fp, result.fn, result.exact_match, result.calls_match) == (2, 0, 0, False, True)
        assert (result.duplicate_calls, result.coercions, result.wrong_args) == (0, [], [])

    @pytest.mark.parametrize("observed, strict", [
        ([U("a"), U("b")], True),   # names in the reference's order: equal under strict
        ([U("b"), U("a")], False),  # swapped
    ])
    def test_ordered_modes_compare_names(self, observed, strict):
        expected = [call("a", x=1), call("b", x=2)]
        for rules in (None, ArgumentRules.for_case(case(expected_calls=[], argument_rules={"a": {"x": "ignore"}}),
                                                   {})):
            result = match_with_rules(expected, observed, rules, MatchMode("strict"))
            assert result.calls_match is strict and result.tp == 2 and not result.exact_match


class TestPoliciesAndRow:
    def test_rules_that_need_arguments_leave_unknown_ones_alone(self):
        """Two refund(?) calls of a non-idempotent tool that requires ``cents``, in a case that forbids repeats:
        unknown arguments are neither repeats nor absent; a declared but unknown tool is still named."""
        tools = {"refund": ToolSpec(name="refund", idempotent=False, required_arguments=["cents"],
                                    parameters={"type": "object", "properties": {"cents": {"type": "integer"}},
                                                "required": ["cents"]})}
        the_case = case(expected_calls=[{"name": "refund", "args": {"cents": 1}},
                                        {"name": "refund", "args": {"cents": 2}}],
                        no_repeated_calls=True, require_exact=True)
        messages = [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None,
                     "tool_calls": [unrecorded("refund", "c1"), unrecorded("refund", "c2"),
                                    unrecorded("cancel", "c3")]}]
        observed = [U("refund"), U("refund"), U("cancel")]
        rules = evaluate_row(the_case, tools, messages, observed)
        # tp 2 (both refunds by name), fp 1 (cancel); require_exact fires on that extra call only
        assert (rules.match.tp, rules.match.fp, rules.match.fn) == (2, 1, 0)
        names = [(v.rule, v.severity, v.tool) for v in rules.violations]
        assert names == [("f1_below_floor", "blocking", None), ("tool_schema", "advisory", "cancel"),
                         ("args_not_captured", "advisory", "refund"), ("args_not_captured", "advisory", "refund"),
                         ("args_not_captured", "advisory", "cancel")]
        assert [f.kind for f in rules.schema_findings] == ["undeclared_tool"]  # only the undeclared tool
        assert rules.violations[2].detail == ("call #1 refund: arguments not captured (content capture off at the "
                                              "source); matched by name only")
        columns = rules.columns()
        assert (columns["name_only"], columns["exact_match"], columns["blocking"]) == (True, False, True)

    def test_a_captured_row_is_not_name_only(self):
        the_case = case(expected_calls=[{"name": "a", "args": {}}])
        rules = evaluate_row(the_case, {}, None, [call("a")])
        assert (rules.name_only, rules.match.exact_match, rules.violations) == (False, True, [])


def row(case_id: str, f1: float, *, name_only: bool, calls_match: bool = True, slice_: str = "s") -> dict:
    violations = [{"rule": "args_not_captured", "severity": "advisory", "tool": "a", "detail": "d"}] \
        if name_only else []
    return {"case_id": case_id, "trial": 0, "slice": slice_, "violations": violations, "error_kind": None,
            "missing_calls": [], "extra_calls": [], "wrong_args": [], "f1": f1,
            "exact_match": calls_match and not name_only, "fp": 0, "fn": 0, "tool_families": [],
            "blocking": False, "match_mode": "unordered", "calls_match": calls_match, "name_only": name_only}


ROWS = [row("x", 1.0, name_only=False), row("y", 1.0, name_only=True), row("z", 0.5, name_only=True,
                                                                            calls_match=False)]


class TestGate:
    def test_the_default_gate_fails_name_only_rows(self):
        verdict = evaluate_gate(ROWS, GateConfig(), today=TODAY)
        assert not verdict.passed
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [
            ("y", ["args_not_captured"]), ("z", ["args_not_captured", "reference_mismatch"])]
        assert verdict.counts["failures_by_rule"] == {"args_not_captured": 2, "reference_mismatch": 1}
        assert verdict.counts["exact_match_rows"] == 1

    def test_the_evidence_says_the_arguments_were_not_captured(self):
        extra = row("w", 0.0, name_only=True, calls_match=False)
        extra["extra_calls"] = [U("refund").to_record(), call("refund", id="A").to_record()]
        (outcome,) = evaluate_gate([extra], GateConfig(), today=TODAY).failing_rows
        assert outcome.evidence()["extra_calls"] == [{"name": "refund", "arguments_captured": False},
                                                     {"name": "refund", "args": {"id": "A"}}]

    def test_accept_name_only_passes_rows_that_match_by_name(self):
        config = GateConfig.from_toml("schema_version = 1\naccept_name_only = true\n", "gate.toml")
        verdict = evaluate_gate(ROWS, config, today=TODAY)
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [("z", ["reference_mismatch"])]
        assert verdict.counts["advisory_violations"] == 2
        assert evaluate_gate(ROWS[:2], config, today=TODAY).passed

    def test_severity_and_waivers_name_the_rule(self):
        advisory = GateConfig.from_toml('schema_version = 1\n[severity]\nargs_not_captured = "advisory"\n')
        assert evaluate_gate(ROWS[:2], advisory, today=TODAY).passed
        blocking = GateConfig.from_toml('schema_version = 1\naccept_name_only = true\n'
                                        '[severity]\nargs_not_captured = "blocking"\n')
        assert not evaluate_gate(ROWS[:2], blocking, today=TODAY).passed  # [severity] wins
        waived = GateConfig.from_toml('schema_version = 1\n[[waivers]]\nrule = "args_not_captured"\nowner = "o"\n'
                                      'reason = "capture off until the fix"\nexpires = 2026-12-31\n')
        verdict = evaluate_gate(ROWS[:2], waived, today=TODAY)
        assert verdict.passed and [o.case_id for o in verdict.waived] == ["y"]

    def test_slices_leave_name_level_f1_out(self):
        """Slice ``s``: x (1.0, exact) is argument-level; y (1.0) and z (0.5) are name-only -> mean f1 1.0 over 1
        row, min 1.0, exact-match rows 1; the slice still counts 3 rows."""
        verdict = evaluate_gate(ROWS, GateConfig.from_toml('schema_version = 1\naccept_name_only = true\n'
                                                           '[slices.s]\nmin_mean_f1 = 0.9\n'), today=TODAY)
        (result,) = [s for s in verdict.slices if s.kind == "slice"]
        assert (result.rows, result.mean_f1, result.min_f1, result.exact_match_rows) == (3, 1.0, 1.0, 1)
        assert result.passed  # with the name-level 0.5 the mean would be 0.8333, below the floor

    def test_accept_name_only_must_be_a_boolean(self):
        with pytest.raises(InputFileError, match="accept_name_only"):
            GateConfig.from_toml('schema_version = 1\naccept_name_only = "yes"\n', "gate.toml")
