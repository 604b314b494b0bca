"""What ``check_tool_calls`` does with values no run could hold, and with options of the wrong kind: a documented
exception with a message naming the value and the fix, or the correct result — never a ``RecursionError``, a
misleading ``TypeError`` or a silently different key."""

from __future__ import annotations

import pytest

from tooleval.testing import RedactionKey, check_tool_calls

CALL = [{"name": "f", "args": {"a": 1}}]


def _deep(levels: int) -> dict:
    top: dict = {}
    node = top
    for _ in range(levels - 1):
        node["a"] = {}
        node = node["a"]
    return top


def _self_referencing() -> dict:
    value: dict = {"b": 1}
    value["x"] = value
    return value


class TestValuesNoRunCouldHold:
    @pytest.mark.parametrize("args", [_deep(10_000), _self_referencing()])
    def test_observed_arguments_too_deep_or_containing_themselves(self, args):
        with pytest.raises(ValueError, match=r"observed cannot be read as a trajectory: \[0\]\.args\..*nested "
                                             r"deeper than 400 levels \(or it contains itself\)"):
            check_tool_calls([{"name": "f", "args": args}], CALL)  # RecursionError / "Circular reference" before

    @pytest.mark.parametrize(("args", "message"), [
        (_deep(10_000), r"expected call #0 cannot be a reference: a\.a\..*nested deeper than 200 levels"),
        (_self_referencing(), r"expected call #0 cannot be a reference: x\.x\..*contains itself"),
        ({"a": float("nan")}, r"expected call #0 cannot be a reference: args\.a: nan is not a JSON number"),
        ({"a": [1, float("inf")]}, r"args\.a\[1\]: inf is not a JSON number"),
        ({"a": "x\ud800"}, r"args\.a: text holds a lone surrogate"),
    ])
    def test_a_reference_that_is_not_json(self, args, message):
        with pytest.raises(ValueError, match=message):
            check_tool_calls(CALL, [{"name": "f", "args": args}])

    def test_arguments_at_the_depth_a_run_accepts_are_scored(self):
        args = _deep(150)
        check = check_tool_calls([{"name": "f", "args": args}], [{"name": "f", "args": _deep(150)}])
        assert check.passed and check.row.f1 == 1.0
        wrong = check_tool_calls([{"name": "f", "args": _deep(149)}], [{"name": "f", "args": args}])
        assert not wrong.passed and wrong.row.f1 == 0.0


class TestOptionsOfTheWrongKind:
    @pytest.mark.parametrize("key", [123, 1.5, ["k"], object()])
    def test_a_key_that_is_not_text_or_bytes(self, key):
        with pytest.raises(TypeError, match="redaction_key must be str or bytes"):
            check_tool_calls(CALL, CALL, redaction_key=key)  # 123 was 123 NUL bytes before

    @pytest.mark.parametrize("key", ["", b""])
    def test_an_empty_key(self, key):
        with pytest.raises(ValueError, match="redaction_key is empty"):
            check_tool_calls(CALL, CALL, redaction_key=key)

    def test_a_bytearray_key_is_the_same_key_as_its_bytes(self):
        observed = [{"name": "f", "args": {"email": "a@b.c"}}]
        one = check_tool_calls(observed, observed, redaction_key=bytearray(b"k" * 16))
        other = check_tool_calls(observed, observed, redaction_key=b"k" * 16)
        assert one.row.record() == other.row.record() and one.passed

    def test_one_field_name_given_alone_is_that_field(self):
        observed = [{"name": "f", "args": {"thought": "secret plan", "t": "x"}}]
        alone = check_tool_calls(observed, observed, redaction_key=RedactionKey(b"k" * 16, "thought"))
        listed = check_tool_calls(observed, observed, redaction_key=RedactionKey(b"k" * 16, ["thought"]))
        letters = check_tool_calls(observed, observed, redaction_key=RedactionKey(b"k" * 16, list("thought")))
        assert alone.row.record() == listed.row.record()
        assert alone.row.record() != letters.row.record()  # "t" redacted as a field of its own there
        assert "secret plan" not in str(alone.row.record()) and alone.passed

    @pytest.mark.parametrize("fields", [[1], [""], [None]])
    def test_a_field_that_is_not_a_name(self, fields):
        with pytest.raises(TypeError, match="RedactionKey.fields takes field names"):
            check_tool_calls(CALL, CALL, redaction_key=RedactionKey(b"k" * 16, fields))

    @pytest.mark.parametrize("key", [123, None, ["k"]])
    def test_a_redaction_key_object_holding_no_text_or_bytes(self, key):
        with pytest.raises(TypeError, match="redaction_key must be str or bytes"):
            check_tool_calls(CALL, CALL, redaction_key=RedactionKey(key, ["thought"]))
