"""Type findings are cached per validator and argument text (issue 9); a cached answer equals jsonschema's own,
key order included (its messages quote the value as written)."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from tooleval.rules import _schema

SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}}}


def _direct(args: dict) -> list[tuple[str, str, str]]:
    return [("wrong_type", _schema._path(e.absolute_path), e.message)
            for e in Draft202012Validator(SCHEMA).iter_errors(args) if e.validator == "type"]


def test_cached_findings_equal_jsonschema_key_order_included():
    validator = Draft202012Validator(SCHEMA)
    one, two = {"x": {"b": 1, "a": 2}, "n": 1.5}, {"x": {"a": 2, "b": 1}, "n": 1.5}
    for args in (one, two, one, two):
        assert _schema._types(args, validator) == _direct(args)
    assert _schema._types(one, validator) != _schema._types(two, validator)
    assert _schema._types(one, validator) == [("wrong_type", "x", "{'b': 1, 'a': 2} is not of type 'string'"),
                                             ("wrong_type", "n", "1.5 is not of type 'integer'")]
    assert _schema._types({"x": "ok", "n": 3}, validator) == []
    assert _schema._types({"n": 2 ** 70}, validator) == []  # beyond orjson's integers: answered, not cached
