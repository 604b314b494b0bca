"""Every argument rule of issue 3, the path patterns, the precedence of case over tool rules, coercions, and the
maximum bipartite matching that non-transitive rules need. Expected values are worked out by hand in comments."""

from __future__ import annotations

import itertools
import random

import pytest

from tests.support.rules import call, calls
from tooleval.models import Case, ToolSpec
from tooleval.rules import ArgumentRules, match_with_rules, rule_diff_paths


def rules(mapping: dict, tools: list[ToolSpec] | None = None) -> ArgumentRules:
    return ArgumentRules.from_mapping(mapping, {t.name: t for t in tools or []})


def diff(tool_rules: dict, expected: dict, observed: dict, tools: list[ToolSpec] | None = None) -> list[str]:
    resolved = rules({"t": tool_rules}, tools)
    return rule_diff_paths(expected, observed, resolved.for_tool("t"))


class TestIgnore:
    def test_volatile_field_is_not_compared(self):
        rule = {"correlation_id": "ignore"}
        assert diff(rule, {"a": 1, "correlation_id": "x1"}, {"a": 1, "correlation_id": "x2"}) == []

    def test_absence_is_not_compared_either(self):
        assert diff({"correlation_id": "ignore"}, {"a": 1, "correlation_id": "x1"}, {"a": 1}) == []

    def test_other_fields_still_compared(self):
        rule = {"correlation_id": "ignore"}
        assert diff(rule, {"a": 1, "correlation_id": "x"}, {"a": 2, "correlation_id": "y"}) == ["a"]

    def test_without_the_rule_it_differs(self):
        assert rule_diff_paths({"correlation_id": "x1"}, {"correlation_id": "x2"}, None) == ["correlation_id"]


class TestOptional:
    # seed 000: send_invoice's optional locale, which the executor defaults to en-US
    def test_reference_has_it_call_omits_it(self):
        assert diff({"locale": "optional"}, {"id": "INV-7", "locale": "en-US"}, {"id": "INV-7"}) == []

    def test_call_has_it_reference_omits_it(self):
        assert diff({"locale": "optional"}, {"id": "INV-7"}, {"id": "INV-7", "locale": "en-US"}) == []

    def test_present_on_both_sides_is_compared(self):
        assert diff({"locale": "optional"}, {"locale": "en-US"}, {"locale": "fr-FR"}) == ["locale"]

    def test_null_versus_absent_accepted_only_with_the_rule(self):
        assert diff({"locale": "optional"}, {"locale": None}, {}) == []
        assert rule_diff_paths({"locale": None}, {}, None) == ["locale"]


class TestCoerce:
    SCHEMA = ToolSpec(name="t", parameters={"type": "object", "properties": {
        "amount": {"type": "number"}, "qty": {"type": "integer"}, "order_id": {"type": "string"},
        "notify": {"type": "boolean"}, "items": {"type": "array", "items": {"type": "object", "properties": {
            "price": {"type": "number"}}}}}})

    def match(self, rule: dict, observed_args: dict, expected_args: dict):
        resolved = rules({"t": rule}, [self.SCHEMA])
        return match_with_rules(calls(call("t", **expected_args)), calls(call("t", **observed_args)), resolved)

    def test_string_to_number_per_schema_is_recorded(self):
        result = self.match({"amount": "coerce"}, {"amount": "49.99"}, {"amount": 49.99})
        assert result.tp == 1 and result.exact_match
        assert [c.to_record() for c in result.coercions] == [
            {"call_index": 0, "tool": "t", "path": "amount", "from_value": '"49.99"', "to_value": "49.99"}]

    def test_without_the_rule_a_string_is_not_a_number(self):
        result = self.match({}, {"amount": "49.99"}, {"amount": 49.99})
        assert result.tp == 0 and result.coercions == []

    def test_integer_number_to_string_and_boolean(self):
        result = self.match({"*": "coerce"}, {"order_id": 7731, "notify": "TRUE", "qty": "2"},
                            {"order_id": "7731", "notify": True, "qty": 2})
        assert result.exact_match
        assert sorted((c.path, c.from_value, c.to_value) for c in result.coercions) == [
            ("notify", '"TRUE"', "true"), ("order_id", "7731", '"7731"'), ("qty", '"2"', "2")]

    def test_not_coerced_when_not_a_clean_number_or_not_integral(self):
        result = self.match({"*": "coerce"}, {"amount": "49.99 USD", "qty": "2.5"}, {"amount": 49.99, "qty": 2})
        assert result.tp == 0 and result.coercions == []

    def test_value_of_a_declared_type_is_left_alone(self):
        assert self.match({"*": "coerce"}, {"amount": 5}, {"amount": 5}).coercions == []

    def test_explicit_type_without_a_schema(self):
        resolved = rules({"u": {"n": {"coerce": "number"}}})
        result = match_with_rules(calls(call("u", n=3)), calls(call("u", n="3")), resolved)
        assert result.exact_match and [c.to_value for c in result.coercions] == ["3"]

    def test_star_coerce_reaches_nested_values_through_the_schema(self):
        result = self.match({"*": "coerce"}, {"items": [{"price": "1.5"}]}, {"items": [{"price": 1.5}]})
        assert result.exact_match and [c.path for c in result.coercions] == ["items[0].price"]

    def test_reference_calls_are_never_coerced(self):
        # the reference is the contract: a string in the reference stays a string
        result = self.match({"amount": "coerce"}, {"amount": 49.99}, {"amount": "49.99"})
        assert result.tp == 0 and result.coercions == []


class TestUnordered:
    def test_list_compared_as_multiset(self):
        assert diff({"tags": "unordered"}, {"tags": ["a", "b"]}, {"tags": ["b", "a"]}) == []

    def test_multiplicity_matters(self):
        assert diff({"tags": "unordered"}, {"tags": ["a", "a", "b"]}, {"tags": ["a", "b", "b"]}) == ["tags"]
        assert diff({"tags": "unordered"}, {"tags": ["a"]}, {"tags": ["a", "a"]}) == ["tags"]

    def test_without_the_rule_order_matters(self):
        assert rule_diff_paths({"tags": ["a", "b"]}, {"tags": ["b", "a"]}, None) == ["tags[0]", "tags[1]"]

    def test_items_use_their_own_rules(self):
        # [1.0, 2.0] vs [2.05, 0.95]: with tolerance 0.1 on items, 1.0~0.95 and 2.0~2.05 -> a perfect matching
        rule = {"xs": "unordered", "xs[]": {"tolerance": 0.1}}
        assert diff(rule, {"xs": [1.0, 2.0]}, {"xs": [2.05, 0.95]}) == []
        assert diff(rule, {"xs": [1.0, 2.0]}, {"xs": [2.5, 0.95]}) == ["xs"]


class TestTolerance:
    def test_absolute_tolerance(self):
        # |49.99 - 50.00| = 0.01 (0.010000000000005116 in binary floats) <= 0.01
        assert diff({"amount": {"tolerance": 0.01}}, {"amount": 49.99}, {"amount": 50.0}) == []
        assert diff({"amount": {"tolerance": 0.01}}, {"amount": 49.98}, {"amount": 50.0}) == ["amount"]

    def test_boolean_is_never_a_number(self):
        assert diff({"n": {"tolerance": 1}}, {"n": 1}, {"n": True}) == ["n"]

    def test_negative_tolerance_is_refused(self):
        with pytest.raises(ValueError):
            rules({"t": {"amount": {"tolerance": -1}}})


class TestStrings:
    def test_case_insensitive(self):
        assert diff({"city": "case_insensitive"}, {"city": "Boston"}, {"city": "BOSTON"}) == []
        assert rule_diff_paths({"city": "Boston"}, {"city": "BOSTON"}, None) == ["city"]

    def test_case_insensitive_is_inherited_by_nested_values(self):
        rule = {"address": "case_insensitive"}
        assert diff(rule, {"address": {"city": "Boston"}}, {"address": {"city": "boston"}}) == []

    def test_strip_chars_like_bfcl(self):
        assert diff({"phone": {"strip_chars": " -()"}}, {"phone": "(555) 123-4567"}, {"phone": "5551234567"}) == []
        assert diff({"phone": {"strip_chars": " "}}, {"phone": "555-1234"}, {"phone": "5551234"}) == ["phone"]

    def test_combined_rule_list(self):
        rule = {"name": ["case_insensitive", {"strip_chars": " ."}]}
        assert diff(rule, {"name": "J. Smith"}, {"name": "j smith"}) == []


class TestOneOf:
    def test_listed_values_and_the_reference_are_accepted(self):
        rule = {"currency": {"one_of": ["USD", "usd"]}}
        assert diff(rule, {"currency": "US dollars"}, {"currency": "usd"}) == []
        assert diff(rule, {"currency": "US dollars"}, {"currency": "US dollars"}) == []
        assert diff(rule, {"currency": "US dollars"}, {"currency": "EUR"}) == ["currency"]

    def test_values_are_canonical(self):
        assert diff({"n": {"one_of": [250.0]}}, {"n": 1}, {"n": 250}) == []


class TestPathsAndPrecedence:
    def test_star_means_every_argument(self):
        assert diff({"*": "case_insensitive"}, {"a": "X", "b": "Y"}, {"a": "x", "b": "y"}) == []

    def test_list_item_and_index_patterns(self):
        expected = {"flights": [{"date": "2024-05-01", "no": "A"}, {"date": "2024-05-02", "no": "B"}]}
        observed = {"flights": [{"date": "x", "no": "A"}, {"date": "y", "no": "B"}]}
        assert diff({"flights[].date": "ignore"}, expected, observed) == []
        assert diff({"flights[0].date": "ignore"}, expected, observed) == ["flights[1].date"]

    def test_nested_key_wildcard(self):
        assert diff({"meta.*": "ignore"}, {"meta": {"a": 1, "b": 2}, "x": 1}, {"meta": {"a": 3}, "x": 1}) == []

    def test_specific_path_beats_star_within_a_layer(self):
        rule = {"*": "ignore", "amount": {"tolerance": 0}}
        assert diff(rule, {"amount": 1, "note": "a"}, {"amount": 2, "note": "b"}) == ["amount"]

    def test_case_rule_wins_over_tool_rule(self):
        tool = ToolSpec(name="pay", argument_rules={"amount": {"tolerance": 1.0}})
        tools = {"pay": tool}
        loose = Case(case_id="a", input="", expected_calls=[])
        strict = Case(case_id="b", input="", expected_calls=[], argument_rules={"pay": {"amount": {"tolerance": 0.01}}})
        star = Case(case_id="c", input="", expected_calls=[], argument_rules={"pay": {"*": "ignore"}})
        e, o = {"amount": 49.5}, {"amount": 50.0}
        assert rule_diff_paths(e, o, ArgumentRules.for_case(loose, tools).for_tool("pay")) == []  # tool default
        assert rule_diff_paths(e, o, ArgumentRules.for_case(strict, tools).for_tool("pay")) == ["amount"]
        assert rule_diff_paths(e, {"amount": 1}, ArgumentRules.for_case(star, tools).for_tool("pay")) == []

    def test_no_rules_anywhere_gives_none(self):
        assert ArgumentRules.for_case(Case(case_id="a", input="", expected_calls=[]), {"t": ToolSpec(name="t")}) is None

    def test_unknown_rule_name_is_refused(self):
        with pytest.raises(ValueError, match="unknown argument rule"):
            rules({"t": {"a": "fuzzy"}})


class TestBipartiteMatching:
    def test_greedy_would_miss_a_match(self):
        # tolerance 0.5; expected E1=1.0, E2=1.5; observed O1=1.4, O2=0.9.
        # E1~O1 (0.4), E1~O2 (0.1), E2~O1 (0.1), E2~O2 (0.6: no). Greedy E1->O1 leaves E2 unmatched (tp 1);
        # the maximum matching E1->O2, E2->O1 has tp 2, so f1 = 4 / 4 = 1.0.
        resolved = rules({"t": {"x": {"tolerance": 0.5}}})
        result = match_with_rules(calls(call("t", x=1.0), call("t", x=1.5)),
                                  calls(call("t", x=1.4), call("t", x=0.9)), resolved)
        assert (result.tp, result.fp, result.fn, result.f1) == (2, 0, 0, 1.0)

    def test_tp_equals_a_brute_force_maximum(self):
        # independent computation: try every injective assignment of expected to observed calls
        rng = random.Random(3)
        resolved = rules({"t": {"x": {"tolerance": 0.3}}})
        for _ in range(60):
            xs = [round(rng.uniform(0, 2), 1) for _ in range(rng.randint(0, 4))]
            ys = [round(rng.uniform(0, 2), 1) for _ in range(rng.randint(0, 4))]
            close = [[abs(x - y) <= 0.3 + 1e-9 for y in ys] for x in xs]
            best = 0
            for k in range(min(len(xs), len(ys)) + 1):
                for rows in itertools.combinations(range(len(xs)), k):
                    for cols in itertools.permutations(range(len(ys)), k):
                        if all(close[r][c] for r, c in zip(rows, cols)):
                            best = max(best, k)
            result = match_with_rules(calls(*[call("t", x=x) for x in xs]), calls(*[call("t", x=y) for y in ys]),
                                      resolved)
            assert result.tp == best, (xs, ys)
            assert result.fp == len(ys) - best and result.fn == len(xs) - best

    def test_wrong_args_paths_are_rule_aware(self):
        resolved = rules({"t": {"correlation_id": "ignore"}})
        result = match_with_rules(calls(call("t", amount=1, correlation_id="a")),
                                  calls(call("t", amount=2, correlation_id="b")), resolved)
        assert [(w.name, w.paths) for w in result.wrong_args] == [("t", ["amount"])]

    def test_duplicates_use_the_normalising_rules(self):
        # two retries that differ only in an ignored correlation id are the same call twice: one duplicate
        resolved = rules({"t": {"correlation_id": "ignore"}})
        result = match_with_rules(calls(call("t", a=1)), calls(call("t", a=1, correlation_id="x"),
                                                                call("t", a=1, correlation_id="y")), resolved)
        assert (result.tp, result.fp, result.duplicate_calls) == (1, 1, 1)
