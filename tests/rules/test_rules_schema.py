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


def test_a_repeated_call_has_the_same_findings_at_its_own_position() -> None:
    # findings are kept per (tool, arguments): the second row's call is answered from them, at its own index
    call = Call.from_raw("refund", '{"order_id": "A", "items": [{"qty": 1}], "reason": "x"}')
    found = [("missing_required", "amount_cents"), ("missing_required", "items[0].sku"),
             ("unknown_parameter", "reason")]
    assert _kinds(call) == [(0, kind, path) for kind, path in found]
    assert _kinds(Call.from_raw("ping", "{}"), call) == [(1, kind, path) for kind, path in found]


def test_findings_quote_each_call_s_arguments_in_their_own_key_order() -> None:
    # jsonschema quotes the value as written ("%r is not of type %r"): two calls equal but for key order each get
    # their own text, whichever was seen first
    a = Call.from_raw("refund", '{"order_id": "A", "amount_cents": 1, "items": {"sku": "x", "qty": 2}}')
    b = Call.from_raw("refund", '{"order_id": "A", "amount_cents": 1, "items": {"qty": 2, "sku": "x"}}')
    assert [f.detail for f in schema_findings([a, b, a, b], TOOLS)] == [
        "{'sku': 'x', 'qty': 2} is not of type 'array'", "{'qty': 2, 'sku': 'x'} is not of type 'array'"] * 2


def test_malformed_calls_and_datasets_without_tools_are_not_checked() -> None:
    assert _kinds(Call.from_raw("refund", '{"order_id": ')) == []
    assert schema_findings([Call.from_raw("anything", "{}")], {}) == []


# --- wiring (issue 13 item 6): validator cache, violations, row columns, the gate ---------------------------------

import json  # noqa: E402
from datetime import date  # noqa: E402

import pytest  # noqa: E402

from tooleval.errors import InputFileError  # noqa: E402
from tooleval.models import Case, calls_from_messages  # noqa: E402
from tooleval.rules import GateConfig, evaluate_gate, evaluate_row  # noqa: E402
from tooleval.rules import _schema  # noqa: E402
from tooleval.rules._schema import schema_violations, validator_for  # noqa: E402


def test_a_validator_is_compiled_once_per_tool_schema_per_process(monkeypatch):
    compiled: list[dict] = []

    real = _schema.Draft202012Validator

    def counting(schema):
        compiled.append(schema)
        return real(schema)

    counting.check_schema = real.check_schema
    monkeypatch.setattr(_schema, "Draft202012Validator", counting)
    monkeypatch.setattr(_schema, "_COMPILED", {})
    monkeypatch.setattr(_schema, "_BY_SPEC", {})
    calls = [Call.from_raw("refund", '{"order_id": "A", "amount_cents": "1"}'), Call.from_raw("search", '{"q": 1}')]
    for _ in range(500):  # 500 rows of 2 calls each
        schema_findings(calls, TOOLS)
    reloaded = {name: ToolSpec.model_validate(json.loads(spec.model_dump_json())) for name, spec in TOOLS.items()}
    schema_findings(calls, reloaded)  # tools.json read again (another shard): same schemas, nothing recompiled
    assert [s["properties"].keys() for s in compiled] == [TOOLS["refund"].parameters["properties"].keys(),
                                                          TOOLS["search"].parameters["properties"].keys()]
    assert validator_for(reloaded["refund"]) is validator_for(TOOLS["refund"])


def test_an_invalid_schema_names_the_tool():
    bad = ToolSpec(name="bad", parameters={"type": "object", "properties": {"x": {"type": "integr"}}})
    with pytest.raises(ValueError, match=r"tool 'bad' are not a valid JSON Schema .*fix that schema"):
        schema_findings([Call.from_raw("bad", '{"x": 1}')], {"bad": bad})


def test_one_advisory_violation_per_call_with_findings():
    calls = [Call.from_raw("ping", "{}"), Call.from_raw("refund", '{"order_id": 7, "reason": "x"}'),
             Call.from_raw("refnud", "{}")]
    violations = schema_violations(schema_findings(calls, TOOLS), calls)
    assert [(v.rule, v.severity, v.tool) for v in violations] == [("tool_schema", "advisory", "refund"),
                                                                  ("tool_schema", "advisory", "refnud")]
    assert violations[0].detail == (
        'call #2 refund({"order_id":7,"reason":"x"}): missing required parameter at amount_cents (required '
        "parameter 'amount_cents' is missing); wrong type at order_id (7 is not of type 'string'); unknown "
        "parameter at reason ('reason' is not a declared parameter)")
    assert violations[1].detail == "call #3 refnud({}): undeclared tool (no such tool in tools.json)"


def _row(tools, *calls: Call, expected=None) -> dict:
    case = Case(case_id="c", input="", expected_calls=expected if expected is not None else list(calls))
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [
        {"id": str(i), "type": "function", "function": {"name": c.name, "arguments": c.args_raw or c.args_json}}
        for i, c in enumerate(calls)]}]
    return evaluate_row(case, tools, messages, calls_from_messages(messages)).columns()


def test_a_finding_never_changes_f1_or_exact_match():
    call = Call.from_raw("refund", '{"order_id": 7, "amount_cents": 100}')  # wrong type, made as expected
    checked, unchecked = _row(TOOLS, call), _row({}, call)
    for key in ("tp", "fp", "fn", "f1", "precision", "recall", "exact_match", "missing_calls", "extra_calls"):
        assert checked[key] == unchecked[key], key
    assert checked["exact_match"] is True and checked["f1"] == 1.0
    assert checked["mismatch_categories"] == ["schema"] and unchecked["mismatch_categories"] == []
    assert [(f["kind"], f["path"]) for f in checked["schema_findings"]] == [("wrong_type", "order_id")]
    assert not checked["blocking"]  # advisory by default


def test_no_tools_json_means_not_checked_not_clean():
    call = Call.from_raw("anything", '{"x": 1}')
    assert _row({}, call)["schema_findings"] is None  # null: nothing to check against
    assert _row(TOOLS, Call.from_raw("ping", "{}"))["schema_findings"] == []  # checked and clean


def _gate_row(case_id: str, tool: str) -> dict:
    violation = {"rule": "tool_schema", "severity": "advisory", "tool": tool, "detail": f"call #1 {tool}(...)"}
    return {"case_id": case_id, "trial": 0, "slice": None, "f1": 1.0, "exact_match": True, "fp": 0, "fn": 0,
            "missing_calls": [], "extra_calls": [], "wrong_args": [], "violations": [violation]}


GATE_ROWS = [_gate_row("a", "refund"), _gate_row("b", "search")]


def _failing(config: GateConfig) -> list[tuple[str, list[str]]]:
    verdict = evaluate_gate(GATE_ROWS, config, today=date(2026, 1, 1))
    return [(o.case_id, o.rules) for o in verdict.failing_rows]


def test_schema_findings_are_advisory_by_default():
    verdict = evaluate_gate(GATE_ROWS, GateConfig(), today=date(2026, 1, 1))
    assert verdict.passed and verdict.counts["advisory_violations"] == 2
    assert verdict.counts["violations_by_rule"] == {"tool_schema": 2}


def test_blockable_per_tool_in_gate_toml(tmp_path):
    config = GateConfig.from_toml('schema_version = 1\n[tool_schema]\nblocking_tools = ["refund"]\n')
    assert _failing(config) == [("a", ["tool_schema"])]  # search's finding stays advisory
    every = GateConfig.from_toml('[severity]\ntool_schema = "blocking"\n')
    assert _failing(every) == [("a", ["tool_schema"]), ("b", ["tool_schema"])]
    waived = GateConfig.from_toml('[tool_schema]\nblocking_tools = ["refund"]\n[[waivers]]\nrule = "tool_schema"\n'
                                  'owner = "qa"\nreason = "schema fix pending"\nexpires = 2026-02-01\n')
    assert _failing(waived) == []


def test_unknown_key_in_the_tool_schema_table_names_its_line():
    with pytest.raises(InputFileError, match=r"gate.toml:3.*tool_schema.blocking_tool"):
        GateConfig.from_toml('schema_version = 1\n[tool_schema]\nblocking_tool = ["refund"]\n', "gate.toml")
