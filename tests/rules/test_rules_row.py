"""``evaluate_row``: the columns the scoring stage adds, shaped for the Arrow types proposed for ROW_SCHEMA."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.support.rules import call, calls, messages
from tooleval.matching import match_calls
from tooleval.models import Case, ToolSpec, calls_from_messages
from tooleval.rules import evaluate_row
from tooleval.rules._row import case_rules
from tooleval.storage import CALL_TYPE, WRONG_ARGS_TYPE

PROPOSED = pa.schema([  # the columns issue 3 adds to rows (the lead owns ROW_SCHEMA)
    ("violations", pa.list_(pa.struct([("rule", pa.string()), ("severity", pa.string()), ("tool", pa.string()),
                                       ("detail", pa.string())]))),
    ("blocking", pa.bool_()),
    ("coercions", pa.list_(pa.struct([("call_index", pa.int32()), ("tool", pa.string()), ("path", pa.string()),
                                      ("from_value", pa.string()), ("to_value", pa.string())]))),
    ("chosen_plan", pa.int32()),
    ("reference_calls", pa.list_(CALL_TYPE)),
    ("tool_families", pa.list_(pa.string())),
    ("missing_calls", pa.list_(CALL_TYPE)),
    ("extra_calls", pa.list_(CALL_TYPE)),
    ("wrong_args", pa.list_(WRONG_ARGS_TYPE)),
])
TOOLS = {"pay": ToolSpec(name="pay", side_effect="write", family="payments",
                         parameters={"type": "object", "properties": {"cents": {"type": "integer"}}},
                         argument_rules={"cents": "coerce"}),
         "get": ToolSpec(name="get", family="orders")}


def test_columns_fit_the_proposed_arrow_types():
    case = Case(case_id="a", input="", expected_calls=[call("get", id="A"), call("pay", cents=100)],
                accepted_plans=[[call("pay", cents=100)]], forbidden_tools=["get"])
    msgs = messages("pay", (call("get", id="A"), {}), (call("pay", cents="100"), {}), ("assistant", "done"))
    result = evaluate_row(case, TOOLS, msgs, calls_from_messages(msgs))
    columns = result.columns()
    table = pa.Table.from_pylist([{k: columns[k] for k in PROPOSED.names}], schema=PROPOSED)
    assert table.num_rows == 1
    assert columns["chosen_plan"] == 0 and columns["f1"] == 1.0 and columns["tool_families"] == ["orders", "payments"]
    # the schema is checked on the arguments as sent: "100" is a string for an integer parameter, although the
    # declared coercion makes it match the reference (an advisory tool_schema violation; f1 stays 1.0)
    assert [(v["rule"], v["severity"]) for v in columns["violations"]] == [("forbidden_tool", "blocking"),
                                                                           ("tool_schema", "advisory")]
    assert columns["blocking"] and columns["mismatch_categories"] == ["schema"]
    assert [(f["kind"], f["path"]) for f in columns["schema_findings"]] == [("wrong_type", "cents")]
    assert columns["coercions"][0]["to_value"] == "100"


def test_rules_resolved_once_by_the_caller_give_the_same_row():
    # the scoring stage resolves a case's rules once and passes them for each of its rows: "100" is coerced to the
    # reference's 100 either way (f1 1.0, one coercion), and the forbidden get is reported either way
    case = Case(case_id="a", input="", expected_calls=[call("get", id="A"), call("pay", cents=100)],
                forbidden_tools=["get"])
    msgs = messages("pay", (call("get", id="A"), {}), (call("pay", cents="100"), {}))
    resolved = case_rules(case, TOOLS)
    rows = [evaluate_row(case, TOOLS, msgs, calls_from_messages(msgs), rules=rules).columns()
            for rules in (None, resolved, resolved)]
    assert rows[0] == rows[1] == rows[2]
    assert rows[1]["f1"] == 1.0 and [c["to_value"] for c in rows[1]["coercions"]] == ["100"]
    assert [v["rule"] for v in rows[1]["violations"]] == ["forbidden_tool", "tool_schema"]


def test_metric_columns_equal_match_calls_without_rules():
    case = Case(case_id="a", input="", expected_calls=[call("get", id="A")])
    msgs = messages("x", (call("get", id="B"), {}), (call("get", id="A"), {}))
    columns = evaluate_row(case, {}, msgs, calls_from_messages(msgs)).columns()
    reference = match_calls(case.expected_calls, calls_from_messages(msgs))
    assert (columns["tp"], columns["fp"], columns["fn"], columns["f1"]) == (reference.tp, reference.fp, reference.fn,
                                                                          reference.f1)
    assert columns["violations"] == [] and not columns["blocking"] and columns["tool_families"] == []


def test_observed_calls_must_be_the_messages_calls():
    case = Case(case_id="a", input="", expected_calls=[])
    with pytest.raises(ValueError):
        evaluate_row(case, {}, messages("x"), calls(call("get", id="A")))


def test_the_rules_package_imports_no_prefect():
    import subprocess
    import sys

    code = "import sys, tooleval.rules; assert 'prefect' not in sys.modules, 'prefect imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_row_without_a_transcript():
    # no messages: the calls alone (no results, no user, no reply) -- a protected call is then unconfirmed
    tools = {"book": ToolSpec(name="book", side_effect="write", requires_confirmation=True)}
    case = Case(case_id="a", input="", expected_calls=[call("book", id=1)], expected_outputs=["booked"])
    observed = calls(call("book", id=1))
    rules = [v.rule for v in evaluate_row(case, tools, None, observed).violations]
    assert rules == ["missing_confirmation", "missing_output"]
    assert evaluate_row(Case(case_id="b", input="", expected_calls=[]), {}, None, []).columns()["f1"] == 1.0
