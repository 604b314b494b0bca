"""The schema check's shortcut (issue 9): when :func:`tooleval.rules._schema._surely_typed` proves an argument
object draws no ``type`` error, jsonschema (Draft 2020-12) finds none either; otherwise jsonschema decides as
before. Checked on generated schemas and values against jsonschema itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.support.profiles import examples
from tooleval.rules._schema import _surely_typed, _types

TYPES = ["string", "object", "array", "boolean", "null", "number", "integer"]

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=3)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("abc"), c,
                                                                                        max_size=3), max_leaves=10)
type_kw = st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)
schemas = st.recursive(
    st.fixed_dictionaries({}, optional={"type": type_kw, "description": st.just("d"), "enum": st.just([1, "x"]),
                                        "minimum": st.just(0), "pattern": st.just("^a")}),
    lambda c: st.fixed_dictionaries({}, optional={
        "type": type_kw, "properties": st.dictionaries(st.sampled_from("abc"), c, max_size=3), "items": c,
        "required": st.just(["a"]), "additionalProperties": st.booleans() | c,
        "anyOf": st.lists(c, min_size=1, max_size=2)}),
    max_leaves=6,
)


def jsonschema_type_errors(value, schema) -> list[str]:
    return [e.message for e in Draft202012Validator(schema).iter_errors(value) if e.validator == "type"]


@settings(max_examples=examples(600), deadline=None)
@given(values, schemas)
def test_a_proof_of_no_type_error_agrees_with_jsonschema(value, schema):
    if _surely_typed(value, schema):
        assert jsonschema_type_errors(value, schema) == []


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from("abc"), values, max_size=3), schemas)
def test_type_findings_equal_jsonschema_with_or_without_the_shortcut(args, schema):
    found = _types(args, Draft202012Validator(schema))
    assert [detail for _, _, detail in found] == jsonschema_type_errors(args, schema)


def test_the_shortcut_proves_the_common_case_and_refuses_what_it_does_not_know():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "xs": {"type": "array",
              "items": {"type": "number"}}}, "required": ["n"]}
    assert _surely_typed({"n": 3, "xs": [1, 2.5], "other": "x"}, schema)
    assert not _surely_typed({"n": True}, schema)  # a boolean is not an integer: jsonschema decides (and finds it)
    assert not _surely_typed({"n": 3}, {**schema, "anyOf": [{"type": "object"}]})  # unknown keyword: not proven
    assert not _surely_typed({"n": 3}, {"type": "dict"})  # not a JSON Schema type
