"""The assertion API (``tooleval.testing``): what it accepts, the match modes worked by hand, the readable failure,
rules and redaction. The rows it returns are a run's rows: ``test_same_rows.py`` holds it to ``tooleval run``."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tooleval.models import Call, Case
from tooleval.rules import MatchMode
from tooleval.testing import RedactionKey, ToolCallMismatch, assert_tool_calls, check_tool_calls

pytest_plugins = ["pytester"]


def call(tool: str, **args) -> dict:
    return {"name": tool, "args": args}


A, B, C = call("lookup_order", order_id="ORD-1"), call("issue_refund", order_id="ORD-1", amount=5), call("web_search", q="x")
EXPECTED = [A, B]


class TestObservedShapes:
    """Every shape a test may hold gives the same observed calls (and so the same row)."""

    WIRE = [{"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-1"}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "issue_refund", "arguments": '{"amount": 5.0, "order_id": "ORD-1"}'}}]

    def shapes(self) -> dict[str, object]:
        from langchain_core.messages import AIMessage, HumanMessage
        from openai.types.chat import ChatCompletionMessage
        from openai.types.responses import ResponseFunctionToolCall

        chat = [{"role": "user", "content": "refund ORD-1"},
                {"role": "assistant", "content": None, "tool_calls": self.WIRE}]
        items = [{"type": "function_call", "call_id": w["id"], "name": w["function"]["name"],
                  "arguments": w["function"]["arguments"]} for w in self.WIRE]
        lc_calls = [{"name": w["function"]["name"], "args": json.loads(w["function"]["arguments"]), "id": w["id"]}
                    for w in self.WIRE]
        return {
            "calls": EXPECTED,
            "Call objects": [Call.from_raw(c["name"], c["args"]) for c in EXPECTED],
            "chat messages": chat,
            "chat completion": {"choices": [{"message": chat[1]}]},
            "openai SDK message": [ChatCompletionMessage.model_validate(chat[1])],
            "Responses items": items,
            "Responses SDK items": [ResponseFunctionToolCall.model_validate(item) for item in items],
            "Response": {"id": "resp_1", "output": items},
            "LangChain messages": [HumanMessage("refund ORD-1"), AIMessage(content="", tool_calls=lc_calls)],
            "LangChain dicts": [AIMessage(content="", tool_calls=lc_calls).model_dump()],
            "recorded trace": {"case_id": "c", "trial": 2, "messages": chat},
        }

    def test_each_shape_gives_the_same_calls(self):
        for name, observed in self.shapes().items():
            check = check_tool_calls(observed, EXPECTED)
            assert [(c["name"], c["args_json"]) for c in check.row.observed_calls] == [
                ("lookup_order", '{"order_id":"ORD-1"}'), ("issue_refund", '{"amount":5,"order_id":"ORD-1"}')], name
            assert check.passed and check.row.exact_match, name

    def test_an_envelope_is_scored_as_it_is(self):
        """An envelope is already captured: it is scored, not captured again (its digest and trial stay)."""
        from datetime import datetime, timezone

        from tooleval.capture.envelope import generation_envelope

        trace = {"case_id": "c", "trial": 2, "messages": self.shapes()["chat messages"]}
        record = {"case_id": "c", "trial": 2, "error": None, "payload_json": json.dumps(trace)}
        captured = generation_envelope(record, datetime.now(timezone.utc))
        check = check_tool_calls(captured, EXPECTED)
        assert (check.row.case_id, check.row.trial, check.row.trace_digest) == ("c", 2, captured["trace_digest"])
        assert check.passed and check.row.trace_digest == check_tool_calls(trace, EXPECTED).row.trace_digest

    def test_malformed_argument_text_stays_malformed(self):
        check = check_tool_calls([{"name": "lookup_order", "arguments": '{"order_id": "ORD-1"'}], [A])
        assert check.row.malformed_calls == 1 and not check.passed
        assert "lookup_order(<not a JSON object: '{\"order_id\": \"ORD-1\"'>)" in check.explain()

    def test_no_calls_at_all(self):
        assert check_tool_calls([], []).passed  # a correct abstention (f1 1.0)
        assert not check_tool_calls([{"role": "assistant", "content": "Done!"}], [A]).passed

    def test_unreadable_shapes_are_refused_by_name(self):
        with pytest.raises(TypeError, match="OpenAI chat messages"):
            check_tool_calls("lookup_order", EXPECTED)
        with pytest.raises(TypeError, match="neither a 'role' nor a 'name'"):
            check_tool_calls([{"content": "hi"}], EXPECTED)
        with pytest.raises(ValueError, match="a function_call has no name"):
            check_tool_calls([{"type": "function_call", "arguments": "{}"}], EXPECTED)


# Hand-worked: reference [A, B]; the verdict of each trajectory in each mode, decided from the definitions
# (docs/rules.md "Match modes"), not from the code.
TRAJECTORIES = {
    "exact": [A, B],
    "order swapped": [B, A],
    "one extra": [A, B, C],
    "one missing": [A],
    "a duplicate": [A, A, B],
}
VERDICTS = {  # unordered, strict, subset, superset, subset_ordered, superset_ordered
    "exact": (True, True, True, True, True, True),
    "order swapped": (True, False, True, True, False, False),
    "one extra": (False, False, False, True, False, True),
    "one missing": (False, False, True, False, True, False),
    "a duplicate": (False, False, False, True, False, True),
}
MODES = ("unordered", "strict", "subset", "superset", "subset_ordered", "superset_ordered")


class TestMatchModes:
    @pytest.mark.parametrize("name", TRAJECTORIES)
    def test_hand_worked_verdicts(self, name):
        got = tuple(check_tool_calls(TRAJECTORIES[name], EXPECTED, mode=mode).calls_match for mode in MODES)
        assert got == VERDICTS[name]

    @pytest.mark.parametrize("name", TRAJECTORIES)
    def test_the_figures_do_not_depend_on_the_mode(self, name):
        figures = {(r.tp, r.fp, r.fn, r.f1, r.ragas_tool_call_f1, r.exact_match, r.match_mode == mode)
                   for mode in MODES for r in [check_tool_calls(TRAJECTORIES[name], EXPECTED, mode=mode).row]}
        assert len(figures) == 1

    def test_unordered_is_exact_match(self):
        for name, observed in TRAJECTORIES.items():
            row = check_tool_calls(observed, EXPECTED).row
            assert row.match_mode == "unordered" and row.calls_match == row.exact_match, name

    def test_ordered_as_a_name_or_a_rule(self):
        assert check_tool_calls([B, A], EXPECTED, mode="superset_ordered").mode == "superset_ordered"
        assert not check_tool_calls([B, A], EXPECTED, mode="superset_ordered").calls_match
        case = Case(case_id="c", input="", expected_calls=EXPECTED, match_mode="superset")
        assert check_tool_calls([B, A], case, rules={"ordered": True}).mode == "superset_ordered"
        assert not check_tool_calls([B, A], case, rules={"ordered": True}).calls_match
        assert check_tool_calls([B, A], case).calls_match  # the case's own mode, unordered
        assert check_tool_calls([A, C, B], EXPECTED, mode="superset_ordered").calls_match  # extra in between
        assert not check_tool_calls([A, C, B], EXPECTED, mode="strict").calls_match

    def test_first_fit_pairing_by_hand(self):
        # reference call 0 accepts observed calls 0 and 1, reference call 1 only observed call 0 (acceptable values
        # listed): a maximum matching pairs 0-1 and 1-0; first fit gives observed 0 to reference 0, and reference 1
        # then finds none. The same calls made the other way round (0 accepts {0, 1}, 1 accepts {1}) pass both.
        first_fit, maximum = MatchMode.from_label("unordered_first_fit"), MatchMode("unordered")
        crossed = {(0, 0), (0, 1), (1, 0)}.__contains__
        straight = {(0, 0), (0, 1), (1, 1)}.__contains__
        assert maximum.holds(2, 2, 0, 0, lambda i, j: crossed((i, j)))
        assert not first_fit.holds(2, 2, 0, 0, lambda i, j: crossed((i, j)))
        assert first_fit.holds(2, 2, 0, 0, lambda i, j: straight((i, j)))
        assert not first_fit.holds(2, 3, 1, 0, lambda i, j: straight((i, j)))  # fp > 0: no match, as unordered
        assert first_fit.label == "unordered_first_fit" and first_fit.first_fit

    def test_first_fit_needs_unordered(self):
        with pytest.raises(ValidationError, match="pairing: first_fit applies to match_mode unordered"):
            Case(case_id="c", input=[], expected_calls=[], match_mode="superset", pairing="first_fit")
        with pytest.raises(ValueError, match="first-fit pairing applies to the unordered mode"):
            MatchMode("strict", first_fit=True)

    def test_ordered_needs_subset_or_superset(self):
        with pytest.raises(ValueError, match="ordered: true applies to match_mode subset or superset, not 'strict'"):
            check_tool_calls([A, B], EXPECTED, rules={"match_mode": "strict", "ordered": True})
        with pytest.raises(ValueError, match="ordered applies to the subset and superset modes"):
            MatchMode("unordered", ordered=True)
        with pytest.raises(ValidationError, match="ordered: true applies to match_mode subset or superset"):
            Case(case_id="x", input="", expected_calls=[A], match_mode="unordered", ordered=True)
        with pytest.raises(ValueError, match="unknown match mode 'sorted'"):
            check_tool_calls([A], [A], mode="sorted")

    def test_a_case_carries_its_mode(self):
        case = Case(case_id="x", input="", expected_calls=EXPECTED, match_mode="superset")
        assert check_tool_calls([A, C, B], case).calls_match
        assert not check_tool_calls([A, C, B], case, mode="strict").calls_match  # the call's mode wins

    def test_accepted_plans_are_alternatives_in_every_mode(self):
        """Plans [A, B] and [B, A] under strict accept both orders; the figures are the best-F1 plan's (plan 0 on a
        tie), whatever the mode."""
        rules = {"accepted_plans": [[B, A]]}
        swapped = check_tool_calls([B, A], EXPECTED, mode="strict", rules=rules)
        assert swapped.calls_match and swapped.row.chosen_plan == 0 and swapped.row.f1 == 1.0
        assert not check_tool_calls([B, A], EXPECTED, mode="strict").calls_match

    def test_argument_rules_decide_equality_in_the_order_checks(self):
        rules = {"argument_rules": {"issue_refund": {"amount": {"tolerance": 0.01}}}}
        near = [A, call("issue_refund", order_id="ORD-1", amount=5.004)]
        assert check_tool_calls(near, EXPECTED, mode="strict", rules=rules).calls_match
        assert not check_tool_calls(near, EXPECTED, mode="strict").calls_match

    def test_the_failure_says_what_the_mode_asks(self):
        assert check_tool_calls([B, A], EXPECTED, mode="strict").explain() == (
            "tool calls do not match (strict): the order differs\n"
            "  order: expected lookup_order, issue_refund\n"
            "         observed issue_refund, lookup_order")
        assert check_tool_calls([A, B, C], EXPECTED, mode="subset").explain() == (
            "tool calls do not match (subset): 1 extra\n"
            '  + web_search(q="x")  (not expected)')
        assert check_tool_calls([A], EXPECTED, mode="subset").explain() == (
            "tool calls match (subset)\n"
            "  (1 expected call(s) not made: allowed in subset mode)")
        assert check_tool_calls([A, A, B], EXPECTED, mode="superset").passed


class TestReadableFailure:
    def test_wrong_arguments_show_every_differing_path_with_both_values(self):
        expected = [call("book", flights=[{"date": "2024-05-01", "no": "HAT1"}], cabin="economy")]
        observed = [call("book", flights=[{"date": "2024-05-02", "no": "HAT1"}], cabin="business", extra=1)]
        assert check_tool_calls(observed, expected).explain() == (
            "tool calls do not match (unordered): 1 with wrong arguments\n"
            '  ~ book  cabin: expected "economy", got "business"; extra: expected (absent), got 1; '
            'flights[0].date: expected "2024-05-01", got "2024-05-02"')

    def test_assert_raises_an_assertion_error_with_the_explanation(self):
        with pytest.raises(AssertionError) as info:
            assert_tool_calls([A], EXPECTED)
        assert isinstance(info.value, ToolCallMismatch)
        assert str(info.value) == ('tool calls do not match (unordered): 1 missing\n'
                                   '  - issue_refund(amount=5, order_id="ORD-1")  (expected, not called)')
        assert info.value.check.row.fn == 1

    def test_a_passing_assert_returns_the_check(self):
        assert assert_tool_calls([A, B], EXPECTED).row.f1 == 1.0


class TestRulesAndPolicies:
    def test_blocking_rules_fail_a_matching_trajectory(self):
        check = check_tool_calls([A, B], EXPECTED, rules={"forbidden_tools": ["issue_refund"]})
        assert check.calls_match and not check.passed
        assert check.explain().splitlines() == [
            "tool calls match (unordered), but 1 blocking rule(s) were violated",
            '  ! forbidden_tool: call #2 issue_refund({"amount":5,"order_id":"ORD-1"}): the case forbids issue_refund']

    def test_tools_and_policy(self):
        tools = [{"name": "issue_refund", "side_effect": "write"}]
        check = check_tool_calls([A], EXPECTED, tools=tools)
        assert [v["rule"] for v in check.blocking_violations] == ["missing_write"]
        unreferenced = check_tool_calls([A, B], [A], tools=tools, policy={"forbid_unreferenced_writes": True})
        assert [v["rule"] for v in unreferenced.blocking_violations] == ["forbidden_tool"]
        # tools.json declares issue_refund only: the lookup is an undeclared tool, which is advisory
        assert [(v["rule"], v["severity"]) for v in unreferenced.violations if v["rule"] != "forbidden_tool"] == [
            ("tool_schema", "advisory")] and not unreferenced.passed

    def test_unknown_rule_keys_are_refused(self):
        with pytest.raises(ValueError, match=r"unknown rule key\(s\) \['forbiden_tools'\]"):
            check_tool_calls([A], [A], rules={"forbiden_tools": ["x"]})

    def test_a_dataset_case_by_id(self, repo_root):
        folder = repo_root / "datasets" / "examples" / "refund-trajectory"
        traces = [json.loads(line) for line in (folder / "traces.jsonl").read_text().splitlines()]
        verdicts = {t["case_id"]: check_tool_calls(t, dataset=folder).passed for t in traces}
        assert verdicts == {"correct": True, "skipped-verification": False, "wrong-amount": False, "looping": False}
        by_id = check_tool_calls(traces[0]["messages"], "correct", dataset=folder)
        assert by_id.passed and by_id.row.dataset_revision == "refund-trajectory-v1"


class TestRedaction:
    def test_off_unless_a_key_is_given_and_no_key_file_is_written(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        observed = [call("update_contact", user_id="u1", email="ana@example.com")]
        plain = check_tool_calls(observed, observed)
        assert "ana@example.com" in plain.row.observed_calls[0]["args_json"]
        keyed = check_tool_calls(observed, observed, redaction_key="k1")
        assert "ana@example.com" not in json.dumps(keyed.row.record(), default=str)
        assert keyed.row.observed_calls == keyed.row.expected_calls and keyed.passed
        assert list(tmp_path.iterdir()) == []

    def test_redaction_never_changes_the_verdict(self):
        for name, observed in TRAJECTORIES.items():
            for mode in MODES:
                plain = check_tool_calls(observed, EXPECTED, mode=mode)
                keyed = check_tool_calls(observed, EXPECTED, mode=mode,
                                         redaction_key=RedactionKey(b"k", fields=["order_id"]))
                assert (plain.passed, plain.row.f1, plain.calls_match) == (keyed.passed, keyed.row.f1,
                                                                           keyed.calls_match), (name, mode)
                assert "ORD-1" not in json.dumps(keyed.row.observed_calls)


def test_one_trajectory_takes_milliseconds():
    import time

    check_tool_calls([A, B], EXPECTED)  # the first call computes the scorer version once
    # CPU time, not wall time: on a loaded machine the process waits for a core, which says nothing of the check
    started = time.process_time()
    for _ in range(20):
        check_tool_calls([A, C, B], EXPECTED, mode="superset_ordered")
    assert (time.process_time() - started) / 20 < 0.05


class TestSeedExample:
    """``docs/examples/test_refund_trajectory.py``: seed 004's refund runs, 1 passed and 3 failed, each failure
    naming what the seed names (the skipped verification, 499.9 instead of 49.99, the loop with web_search)."""

    def test_one_passes_three_fail_with_named_failures(self, pytester, repo_root):
        pytester.copy_example(str(repo_root / "docs" / "examples" / "test_refund_trajectory.py"))
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=1, failed=3)
        result.stdout.fnmatch_lines([
            "*tool calls do not match (strict): 1 missing",
            '*  - verify_identity(customer_id="C-118")  (expected, not called)',
            "*  ! required_order: call #2 issue_refund(*) came before any successful verify_identity*",
            "*tool calls do not match (strict): 1 with wrong arguments",
            "*  ~ issue_refund  amount: expected 49.99, got 499.9",
            "*  ! wrong_write_arguments: *",
            "*tool calls do not match (strict): 3 extra",
            '*  + lookup_order(order_id="ORD-7731") x2  (called 3 times, expected once)',
            '*  + web_search(query="refund policy")  (not expected)',
            "*  ! unexpected_tool: call #5 web_search(*",
            "*  ! repeated_call: call #2 lookup_order(*) repeats call #1",
        ])

    def test_the_readme_example(self, pytester, repo_root):
        """README "In your tests": the ten lines a newcomer pastes, on the example dataset's recorded runs."""
        text = (repo_root / "README.md").read_text()
        start = text.index("## In your tests")
        code = text[text.index("```python\n", start) + len("```python\n"):]
        code = code[: code.index("```")]
        assert len(code.strip().splitlines()) <= 12
        pytester.makepyfile(test_readme=code.replace("datasets/examples", str(repo_root / "datasets" / "examples")))
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=1, failed=3)
        result.stdout.fnmatch_lines(["*  - verify_identity(customer_id=\"C-118\")  (expected, not called)",
                                     "*  ~ issue_refund  amount: expected 49.99, got 499.9",
                                     '*  + web_search(query="refund policy")  (not expected)'])
