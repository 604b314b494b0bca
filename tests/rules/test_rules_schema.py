"""Tool schema checks (issue 13 item 6): one test per finding kind on a small dataset's tools.json."""

from __future__ import annotations

from tooleval.models import Call, ToolSpec
from tooleval.rules._schema import schema_findings

TOOLS = {
    "refund": ToolSpec(name="refund", parameters={
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "amount_cents": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                                 "qty": {"type": "integer"}},
                                                 "required": ["sku"]}},
            "notify": {"type": "boolean"},
        },
        "required": ["order_id", "amount_cents"],
    }),
    "ping": ToolSpec(name="ping"),
    "search": ToolSpec(name="search", parameters={"type": "object", "properties": {"q": {"type": "string"}},
                                                  "additionalProperties": True}),
}


def _kinds(*calls: Call) -> list[tuple[int, str, str]]:
    return [(f.call_index, f.kind, f.path) for f in schema_findings(list(calls), TOOLS)]


def test_a_call_that_fits_its_schema_has_no_finding() -> None:
    call = Call.from_raw("refund", '{"order_id": "A", "amount_cents": 9800.0, "items": [{"sku": "x", "qty": 2}]}')
    assert _kinds(call, Call.from_raw("ping", "{}")) == []  # 9800.0 is canonically the integer 9800


def test_undeclared_tool() -> None:
    assert _kinds(Call.from_raw("refnud", '{"order_id": "A"}')) == [(0, "undeclared_tool", "")]


def test_missing_required_parameter_at_the_top_and_nested() -> None:
    call = Call.from_raw("refund", '{"order_id": "A", "items": [{"qty": 1}]}')
    assert _kinds(call) == [(0, "missing_required", "amount_cents"), (0, "missing_required", "items[0].sku")]


def test_unknown_parameter_unless_the_schema_allows_extras() -> None:
    assert _kinds(Call.from_raw("refund", '{"order_id": "A", "amount_cents": 1, "reason": "x"}')) == [
        (0, "unknown_parameter", "reason")]
    assert _kinds(Call.from_raw("search", '{"q": "a", "page": 2}')) == []


def test_wrong_type_string_for_number_and_number_for_boolean() -> None:
    call = Call.from_raw("refund", '{"order_id": 7, "amount_cents": "9800", "notify": 1}')
    assert _kinds(call) == [(0, "wrong_type", "amount_cents"), (0, "wrong_type", "notify"),
                            (0, "wrong_type", "order_id")]


def test_malformed_calls_and_datasets_without_tools_are_not_checked() -> None:
    assert _kinds(Call.from_raw("refund", '{"order_id": ')) == []
    assert schema_findings([Call.from_raw("anything", "{}")], {}) == []
