"""Rule-aware matching reproduces ``match_calls`` exactly without rules, and accepted plans choose the best F1."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tests.support.datasets import handed_cases
from tests.support.rules import call, calls
from tooleval.matching import MatchResult, match_calls
from tooleval.models import Call, Case, calls_from_messages
from tooleval.rules import ArgumentRules, RuleMatch, match_plans, match_with_rules

SCORING = handed_cases("scoring")
NO_OP = ArgumentRules.from_mapping({})  # rules object with no tool: the general path, plain key equality


def _inputs(case: dict) -> tuple[list[Call], list[Call]]:
    expected = Case(case_id=case["id"], input="", expected_calls=case["expected_calls"]).expected_calls
    observed = calls_from_messages([{"role": "assistant", "content": "", "tool_calls": case["observed_tool_calls"]}])
    return expected, observed


def _same(result: RuleMatch, reference: MatchResult) -> None:
    for f in fields(MatchResult):
        assert getattr(result, f.name) == getattr(reference, f.name), f.name


def test_the_no_op_rules_take_the_rule_path():
    assert NO_OP is not None and dict(NO_OP.tools) == {}  # not None: match_with_rules does not delegate


def test_every_handed_scoring_case_is_here():
    # tests/golden/handed.jsonl holds 17 scoring cases (H01a-c, H02-H05, H06a-c, H07a-b, H08, H09a-c, H17)
    assert len(SCORING) == 17


@pytest.mark.parametrize("case", SCORING, ids=[c["id"] for c in SCORING])
def test_without_rules_equals_match_calls(case: dict):
    expected, observed = _inputs(case)
    reference = match_calls(expected, observed)
    _same(match_with_rules(expected, observed, None), reference)
    _same(match_with_rules(expected, observed, NO_OP), reference)  # the bipartite path, no rule on any tool
    # a rule set on every tool that touches no existing path also changes nothing
    names = {c.name for c in expected + observed}
    idle = ArgumentRules.from_mapping({name: {"zz_not_an_argument": "ignore"} for name in names})
    _same(match_with_rules(expected, observed, idle), reference)
    result = match_with_rules(expected, observed, None)
    assert result.coercions == [] and result.chosen_plan == 0
    right = case["right"]
    for key in ("tp", "fp", "fn", "duplicate_calls", "malformed_calls"):
        if key in right:
            assert getattr(result, key) == right[key], key
    if "f1" in right:
        assert result.f1 == pytest.approx(right["f1"], abs=5e-5)


def test_unmatched_occurrences_are_the_later_ones():
    # expected [A, B, A], observed [A]: match_calls consumes the first A, so missing is [B, A] in that order
    a, b = call("get", id="a"), call("get", id="b")
    expected, observed = calls(a, b, a), calls(a)
    assert [c.args for c in match_with_rules(expected, observed, NO_OP).missing_calls] == [{"id": "b"}, {"id": "a"}]


class TestAcceptedPlans:
    CITY = call("search_airport_by_city", city="Boston")
    IATA = call("resolve_iata_code", query="Boston")

    def test_best_f1_is_chosen_and_recorded(self):
        # plan 0 gives tp 0 (f1 0); plan 1 gives tp 1 (f1 1.0)
        result, index = match_plans([calls(self.CITY), calls(self.IATA)], calls(self.IATA), None)
        assert index == 1 and result.chosen_plan == 1 and result.f1 == 1.0 and result.missing_calls == []

    def test_ties_go_to_the_earlier_plan(self):
        # both plans score f1 0.0 against an unrelated call: plan 0 is kept
        result, index = match_plans([calls(self.CITY), calls(self.IATA)], calls(call("web_search", q="x")), None)
        assert index == 0 and result.chosen_plan == 0
        # equal non-zero f1: observed [CITY, IATA] against [CITY] and [IATA] -> 2/3 each -> plan 0
        result, index = match_plans([calls(self.CITY), calls(self.IATA)], calls(self.CITY, self.IATA), None)
        assert index == 0 and result.f1 == pytest.approx(2 / 3)

    def test_case_plans_put_expected_calls_first(self):
        case = Case(case_id="x", input="", expected_calls=[self.CITY], accepted_plans=[[self.IATA]])
        assert [[c.name for c in plan] for plan in case.plans] == [["search_airport_by_city"], ["resolve_iata_code"]]

    def test_no_plan_is_an_error(self):
        with pytest.raises(ValueError):
            match_plans([], [], None)
