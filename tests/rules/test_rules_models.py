"""The new case keys and tool-spec keys of issue 3 on :class:`Case` and :class:`ToolSpec`: typed, validated at
load time (a bad rule is a file error naming the line), set-valued fields as sorted lists."""

from __future__ import annotations

import json

import pytest

from tests.support.datasets import write_dataset
from tooleval.dataset import load_dataset
from tooleval.errors import InputFileError
from tooleval.models import ArgumentRule, Case, ToolSpec


def case(**keys) -> Case:
    return Case.model_validate({"case_id": "c", "input": "", "expected_calls": [], **keys})


def test_rule_keys_are_typed_and_sorted():
    c = case(allowed_tools=["b", "a", "b"], forbidden_tools=["z", "y"], no_repeated_calls=True, min_f1=0.5,
             require_exact=True, sequence_rules=[{"before": "a", "then": "b"}],
             max_calls={"total": 3, "per_tool": {"b": 1, "a": 2}}, required_arguments={"t": ["y", "x", "x"]},
             expected_outputs=["ok"])
    assert c.allowed_tools == ["a", "b"] and c.forbidden_tools == ["y", "z"]
    assert c.sequence_rules[0].before == "a" and c.sequence_rules[0].then == "b"
    assert c.max_calls.total == 3 and list(c.max_calls.per_tool) == ["a", "b"]
    assert c.required_arguments == {"t": ["x", "y"]}


def test_argument_rule_shorthands():
    c = case(argument_rules={"t": {"a": "ignore", "b": ["case_insensitive", {"strip_chars": "-"}],
                                   "c": {"tolerance": 0.5, "one_of": [1.0]}, "d": "coerce"}})
    rules = c.argument_rules["t"]
    assert rules["a"] == ArgumentRule(ignore=True)
    assert rules["b"] == ArgumentRule(case_insensitive=True, strip_chars="-")
    assert rules["c"].one_of == [1]  # canonical: 1.0 -> 1
    assert rules["d"].coerce is True


def test_accepted_plans_are_parsed_like_expected_calls():
    c = case(expected_calls=[{"name": "a", "args": {"x": 1.0}}], accepted_plans=[[{"name": "b", "args": None}]])
    assert c.plans[0][0].args == {"x": 1} and c.plans[1][0].args == {}
    with pytest.raises(ValueError):
        case(accepted_plans=[[{"name": "b", "args": [1]}]])


def test_tool_spec_keys():
    spec = ToolSpec(name="t", argument_rules={"id": "ignore"}, required_arguments=["b", "a"],
                    confidential_fields=["card_last4"])
    assert spec.argument_rules["id"].ignore and spec.required_arguments == ["a", "b"]


@pytest.mark.parametrize("bad", [
    {"argument_rules": {"t": {"a": "fuzzy"}}},
    {"argument_rules": {"t": {"a": {"tolerance": "big"}}}},
    {"sequence_rules": [{"before": "a"}]},
    {"max_calls": {"total": -1}},
    {"max_calls": {"per_tool": {"a": -2}}},
    {"min_f1": 1.5},
])
def test_bad_rules_are_file_errors_with_the_line(tmp_path, bad: dict):
    cases = [{"case_id": "ok", "input": "", "expected_calls": []},
             {"case_id": "bad", "input": "", "expected_calls": [], **bad}]
    folder = write_dataset(tmp_path / "d", cases, None)
    with pytest.raises(InputFileError) as info:
        load_dataset(folder)
    assert info.value.line == 2


def test_bad_tool_rule_is_a_file_error(tmp_path):
    folder = write_dataset(tmp_path / "d", [{"case_id": "ok", "input": "", "expected_calls": []}], None)
    (folder / "tools.json").write_text(json.dumps([{"name": "t", "argument_rules": {"a": "sloppy"}}]))
    with pytest.raises(InputFileError, match="tool #0"):
        load_dataset(folder)
