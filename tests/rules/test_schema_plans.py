"""Tool schema checks compiled once per tool spec (``_ToolPlan``): the required/unknown-parameter check
(``_Shape``) finds what walking the raw schema at every call finds (the plain function below, which the check used
before the plans), and the type shortcut (``_typing_plan``) proves exactly what :func:`_surely_typed` proves."""

from __future__ import annotations

from typing import Any, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.canonical import key_path
from tooleval.models import Call, ToolSpec
from tooleval.rules import _schema
from tooleval.rules._schema import _Shape, _surely_typed, _typing_plan, schema_findings


def structure(value: Any, schema: Mapping[str, Any], text: str) -> list[tuple[str, str, str]]:
    """Reference: missing required and unknown parameters, the raw schema read again at every level of every call."""
    found: list[tuple[str, str, str]] = []
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        for name in schema.get("required") or []:
            if name not in value:
                found.append(("missing_required", key_path(text, name), f"required parameter {name!r} is missing"))
        for name, item in value.items():
            if name not in properties:
                if schema.get("additionalProperties") in (None, False):
                    found.append(("unknown_parameter", key_path(text, name), f"{name!r} is not a declared parameter"))
            elif isinstance(properties[name], dict):
                found += structure(item, properties[name], key_path(text, name))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += structure(item, schema["items"], f"{text}[{index}]")
    return found


TYPES = ["string", "object", "array", "boolean", "null", "number", "integer", "dict", "float"]
KEYS = st.sampled_from(["a", "b", "c", "d e"])
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=3)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(KEYS, c, max_size=4),
                      max_leaves=12)
type_kw = st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3, unique=True)  # [] holds for nothing
schemas = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional={"type": type_kw, "description": st.just("d"),
                                                        "enum": st.just([1, "x"]), "pattern": st.just("^a")}),
    lambda c: st.fixed_dictionaries({}, optional={
        "type": type_kw, "properties": st.dictionaries(KEYS, c, max_size=4), "items": c,
        "required": st.lists(KEYS, max_size=3, unique=True),
        "additionalProperties": st.booleans() | st.none() | c, "anyOf": st.lists(c, min_size=1, max_size=2)}),
    max_leaves=8,
)


@settings(max_examples=examples(300), deadline=None)
@given(values, schemas.filter(lambda s: isinstance(s, dict)))
def test_the_compiled_shape_finds_what_the_raw_schema_walk_finds(value, schema):
    shape = _Shape(schema)
    assert shape.findings(value, "") == structure(value, schema, "")
    assert shape.findings(value, "x") == structure(value, schema, "x")  # again, from the compiled children


@settings(max_examples=examples(300), deadline=None)
@given(values, schemas)
def test_the_compiled_type_shortcut_proves_what_surely_typed_proves(value, schema):
    plan = _typing_plan(schema)
    assert plan(value) == _surely_typed(value, schema)
    assert plan(value) == _surely_typed(value, schema)  # again, with the subschema plans built


SPEC = ToolSpec(name="book", parameters={"type": "object", "properties": {
    "id": {"type": "string"}, "legs": {"type": "array", "items": {"type": "object", "properties": {
        "date": {"type": "string"}}, "required": ["date"]}}}, "required": ["id"]})


def test_a_plan_is_built_once_per_spec_and_again_when_its_parameters_change():
    spec = SPEC.model_copy(deep=True)
    plan = _schema._plan_for(spec)
    assert _schema._plan_for(spec) is plan
    call = Call.from_raw("book", '{"id": 1, "legs": [{}], "x": 2}')
    assert [(f.kind, f.path) for f in schema_findings([call], {"book": spec})] == [
        ("wrong_type", "id"), ("missing_required", "legs[0].date"), ("unknown_parameter", "x")]
    spec.parameters = {"type": "object", "properties": {"x": {"type": "integer"}}}  # a spec is a mutable model
    assert _schema._plan_for(spec) is not plan
    assert [(f.kind, f.path) for f in schema_findings([call], {"book": spec})] == [
        ("unknown_parameter", "id"), ("unknown_parameter", "legs")]


def test_an_invalid_schema_raises_even_for_a_call_the_plan_proves_typed():
    bad = ToolSpec(name="bad", parameters={"type": "object", "properties": {"x": {"type": "string"}},
                                           "required": "x"})  # required must be a list
    assert _typing_plan(bad.parameters)({"x": "a"})
    with pytest.raises(ValueError, match=r"tool 'bad' are not a valid JSON Schema"):
        schema_findings([Call.from_raw("bad", '{"x": "a"}')], {"bad": bad})


PLAIN_SCHEMAS = [
    True,
    {"type": "object", "properties": {"a": {"type": "string", "description": "x"}, "b": {"type": ["integer", "null"]},
                                      "c": {"type": "array", "items": {"type": "object", "properties": {}}},
                                      "d": {"enum": ["x", 1, None]}, "e": {"default": {"k": [1]}}},
     "required": ["a", "b"], "additionalProperties": False, "title": "t"},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {},
]
NOT_PLAIN_SCHEMAS = [  # each but the last is invalid, and jsonschema must say so
    {"type": "integr"},
    {"type": []},
    {"type": ["string", "string"]},
    {"required": "x"},
    {"required": ["x", "x"]},
    {"properties": {"a": {"type": 1}}},
    {"items": {"type": "strng"}},
    {"additionalProperties": "no"},
    {"description": 3},
    {"enum": "x"},
    {"type": "object", "minProperties": 1},  # valid, but a keyword the shape check does not know
]


@pytest.mark.parametrize("schema", PLAIN_SCHEMAS)
def test_a_plain_schema_is_proved_valid_without_jsonschema(schema, monkeypatch):
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)  # the proof agrees with jsonschema
    assert _schema._plainly_valid(schema, 0)

    def refuse(schema):
        raise AssertionError("check_schema ran for a plain schema")

    monkeypatch.setattr(_schema.Draft202012Validator, "check_schema", staticmethod(refuse))
    monkeypatch.setattr(_schema, "_COMPILED", {})
    monkeypatch.setattr(_schema, "_BY_SPEC", {})
    parameters = schema if isinstance(schema, dict) else {"type": "object", "properties": {"p": schema}}
    assert _schema.validator_for(ToolSpec(name="plain", parameters=parameters)).schema == parameters


@pytest.mark.parametrize("schema", NOT_PLAIN_SCHEMAS)
def test_a_schema_not_proved_plain_is_left_to_jsonschema(schema):
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    assert not _schema._plainly_valid(schema, 0)
    spec = ToolSpec(name="other", parameters=schema)
    if schema is NOT_PLAIN_SCHEMAS[-1]:
        assert _schema.validator_for(spec).schema == schema
        return
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema(schema)
    with pytest.raises(ValueError, match=r"tool 'other' are not a valid JSON Schema"):
        _schema.validator_for(spec)
