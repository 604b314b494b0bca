"""Argument rules attached to one reference call, ``optional`` + ``one_of`` on a key the reference leaves out, and
``number_type`` (how a number was written), on the matching core."""

from __future__ import annotations

import json

from tooleval.models import Call, Case
from tooleval.rules import ArgumentRules, evaluate_row, match_with_rules
from tooleval.rules._match import written_arguments


def _case(expected: list[dict], **extra) -> Case:
    return Case(case_id="c", input="", expected_calls=expected, **extra)


def _messages(*calls: tuple[str, str]) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": text}}
        for i, (name, text) in enumerate(calls)]}]


class TestRulesOfOneReferenceCall:
    CASE = _case([{"name": "get", "args": {"p": "human HbA1c"}, "argument_rules": {"p": {"one_of": ["HbA1c"]}}},
                  {"name": "get", "args": {"p": "normal hemoglobin"}},
                  {"name": "get", "args": {"p": "rat hemoglobin"}}])

    def _match(self, *names: str):
        observed = [Call.from_raw("get", {"p": name}) for name in names]
        return match_with_rules(self.CASE.expected_calls, observed, ArgumentRules.for_case(self.CASE, {}))

    def test_the_alternative_is_accepted_for_its_own_call(self):
        assert self._match("HbA1c", "rat hemoglobin", "normal hemoglobin").exact_match

    def test_it_does_not_spread_to_the_other_calls_of_the_tool(self):
        result = self._match("HbA1c", "HbA1c", "HbA1c")
        assert (result.tp, result.fp, result.fn, result.exact_match) == (1, 2, 2, False)

    def test_the_rules_reach_the_wrong_argument_pairs(self):
        result = self._match("HbA1c", "normal hemoglobin", "mouse hemoglobin")
        assert [pair.paths for pair in result.wrong_args] == [["p"]]

    def test_a_case_without_any_other_rule_still_uses_them(self):
        assert ArgumentRules.for_case(self.CASE, {}) is not None


def test_a_left_out_key_with_acceptable_values_is_absent_or_one_of_them():
    case = _case([{"name": "f", "args": {}, "argument_rules": {"unit": {"optional": True, "one_of": [""]}}}])
    rules = ArgumentRules.for_case(case, {})
    verdicts = {json.dumps(args): match_with_rules(case.expected_calls, [Call.from_raw("f", args)], rules).exact_match
                for args in ({}, {"unit": ""}, {"unit": "cm"})}
    assert verdicts == {"{}": True, '{"unit": ""}': True, '{"unit": "cm"}': False}


class TestNumberType:
    CASE = _case([{"name": "sum", "args": {"xs": [1, 2]}, "argument_rules": {"xs[]": {"number_type": "float"}}}])

    def _row(self, text: str):
        messages = _messages(("sum", text))
        observed = [Call.from_raw("sum", text)]
        return evaluate_row(self.CASE, {}, messages, observed).match

    def test_floats_written_as_floats_match(self):
        assert self._row('{"xs": [1.0, 2.0]}').exact_match

    def test_ints_where_floats_are_asked_differ_at_their_paths(self):
        result = self._row('{"xs": [1, 2.0]}')
        assert not result.exact_match and [pair.paths for pair in result.wrong_args] == [["xs[0]"]]

    def test_without_the_text_the_rule_is_not_checked(self):
        observed = [Call.from_raw("sum", '{"xs": [1, 2]}')]
        assert evaluate_row(self.CASE, {}, None, observed).match.exact_match

    def test_written_arguments_keep_the_written_types(self):
        assert written_arguments(_messages(("a", '{"x": 1.0}'), ("b", "not json"))) == [{"x": 1.0}, None]
        assert isinstance(written_arguments(_messages(("a", '{"x": 1.0}')))[0]["x"], float)
