"""Each of the 13 violation rules on small hand-made trajectories, the confirmation detector, and the alignment of
calls with their tool results."""

from __future__ import annotations

import pytest

from tests.support.rules import call, calls, messages
from tooleval.models import Case, ToolSpec, calls_from_messages
from tooleval.rules import (
    RULE_NAMES,
    KeywordConfirmation,
    PolicyConfig,
    ToolTable,
    Violation,
    check_policies,
    match_plans,
    trajectory,
)

TOOLS = {t.name: t for t in [
    ToolSpec(name="lookup", side_effect="read", idempotent=True, family="orders"),
    ToolSpec(name="refund", side_effect="write", idempotent=False, family="payments"),
    ToolSpec(name="book", side_effect="write", requires_confirmation=True),
    ToolSpec(name="profile", side_effect="read", confidential_fields=["card_last4", "address"]),
    ToolSpec(name="send", side_effect="write", idempotent=False, required_arguments=["to"]),
]}
LOOKUP = call("lookup", id="A")
REFUND = call("refund", id="A", amount=10)


def check(case: dict, msgs: list[dict], *, policy: PolicyConfig | None = None, **kw) -> list[Violation]:
    model = Case.model_validate({"case_id": "c", "input": "", **case})
    observed = calls_from_messages(msgs)
    match, _ = match_plans(model.plans, observed, None)
    return check_policies(model, TOOLS, msgs, observed, match, policy=policy, **kw)


def names(violations: list[Violation]) -> list[str]:
    return [v.rule for v in violations]


def test_the_rule_names():
    # the 13 rules of check_policies, then tool_schema (issue 13: tests/rules/test_rules_schema.py) and
    # args_not_captured (tests/rules/test_rules_name_only.py)
    assert RULE_NAMES == ("forbidden_tool", "unexpected_tool", "repeated_call", "missing_write",
                          "wrong_write_arguments", "f1_below_floor", "required_order", "missing_confirmation",
                          "repeated_side_effect", "call_budget", "required_argument", "missing_output", "leaked_field",
                          "tool_schema", "args_not_captured")


def test_violation_record_shape():
    v = Violation("forbidden_tool", "blocking", "refund", "x")
    assert v.to_record() == {"rule": "forbidden_tool", "severity": "blocking", "tool": "refund", "detail": "x"}


def test_a_clean_row_has_no_violation():
    assert check({"expected_calls": [LOOKUP, REFUND]}, messages("hi", (LOOKUP, {}), (REFUND, {}))) == []


def test_forbidden_tool():
    found = check({"expected_calls": [LOOKUP], "forbidden_tools": ["refund"]},
                  messages("hi", (LOOKUP, {}), (REFUND, "Error: nope")))
    assert [(v.rule, v.severity, v.tool) for v in found] == [("forbidden_tool", "blocking", "refund")]
    assert "call #2 refund(" in found[0].detail  # any call fails, failed attempts included


def test_unexpected_tool():
    found = check({"expected_calls": [LOOKUP], "allowed_tools": ["lookup"]},
                  messages("hi", (LOOKUP, {}), (call("web_search", q="x"), {})))
    assert [(v.rule, v.tool) for v in found] == [("unexpected_tool", "web_search")]


def test_repeated_call_reads_included_identical_only():
    msgs = messages("hi", (LOOKUP, {}), (call("lookup", id="B"), {}), (LOOKUP, {}))
    found = check({"expected_calls": [LOOKUP], "no_repeated_calls": True}, msgs)
    assert names(found) == ["repeated_call"] and "call #3" in found[0].detail and "call #1" in found[0].detail
    assert check({"expected_calls": [LOOKUP]}, msgs) == []  # read extras alone are advisory: no violation


def test_missing_write_and_wrong_write_arguments():
    missing = check({"expected_calls": [LOOKUP, REFUND]}, messages("hi", (LOOKUP, {})))
    assert [(v.rule, v.tool) for v in missing] == [("missing_write", "refund")]
    msgs = messages("hi", (LOOKUP, {}), (call("refund", id="A", amount=100), {}))
    wrong = check({"expected_calls": [LOOKUP, REFUND]}, msgs)
    assert names(wrong) == ["wrong_write_arguments"]
    detail = wrong[0].detail
    assert '"amount":10' in detail and '"amount":100' in detail and "differs at amount" in detail


def test_read_only_misses_are_not_violations():
    assert check({"expected_calls": [LOOKUP, REFUND]}, messages("hi", (REFUND, {}))) == []


def test_f1_below_floor():
    # expected [lookup, refund], observed [refund]: tp 1, fn 1 -> f1 = 2 / 3 = 0.6667
    msgs = messages("hi", (REFUND, {}))
    assert names(check({"expected_calls": [LOOKUP, REFUND], "min_f1": 0.7}, msgs)) == ["f1_below_floor"]
    assert check({"expected_calls": [LOOKUP, REFUND], "min_f1": 0.6}, msgs) == []
    exact = check({"expected_calls": [LOOKUP, REFUND], "require_exact": True}, msgs)
    assert names(exact) == ["f1_below_floor"] and "1 missing and 0 extra" in exact[0].detail


class TestRequiredOrder:
    CASE = {"expected_calls": [LOOKUP, REFUND], "sequence_rules": [{"before": "lookup", "then": "refund"}]}

    def test_then_before_before(self):
        found = check(self.CASE, messages("hi", (REFUND, {}), (LOOKUP, {})))
        assert [(v.rule, v.tool) for v in found] == [("required_order", "refund")]

    def test_a_failed_attempt_does_not_count(self):
        found = check(self.CASE, messages("hi", (LOOKUP, "Error: timeout"), (REFUND, {})))
        assert names(found) == ["required_order"]

    def test_in_order_passes_and_no_then_call_is_no_order_violation(self):
        assert check(self.CASE, messages("hi", (LOOKUP, "Error: x"), (LOOKUP, {}), (REFUND, {}))) == []
        assert names(check(self.CASE, messages("hi", (LOOKUP, {})))) == ["missing_write"]


class TestConfirmation:
    BOOK = call("book", flight="HAT1")
    CASE = {"expected_calls": [BOOK]}

    def run(self, *turns, **kw) -> list[str]:
        return names(check(self.CASE, messages("Book HAT1 for me.", *turns), **kw))

    def test_yes_since_the_last_proposal(self):
        assert self.run(("assistant", "I will book HAT1 for $100. Shall I?"), ("user", "Yes, please."),
                        (self.BOOK, {})) == []

    def test_no_user_message_since_the_proposal(self):
        assert self.run(("user", "yes"), ("assistant", "Booking HAT1 for $100 now."), (self.BOOK, {})) == \
            ["missing_confirmation"]

    def test_only_the_initial_request(self):
        assert self.run((self.BOOK, {})) == ["missing_confirmation"]

    @pytest.mark.parametrize("reply", ["No, don't book it.", "I'm not sure.", "Could you make sure it is cheap?",
                                       "Which seat is it?", "Don\u2019t proceed yet"])
    def test_negated_or_absent_affirmatives(self, reply: str):
        assert self.run(("assistant", "Book HAT1 for $100?"), ("user", reply), (self.BOOK, {})) == \
            ["missing_confirmation"]

    @pytest.mark.parametrize("reply", ["yep", "Go ahead.", "That is correct, proceed", "OK", "Sure, do it"])
    def test_affirmatives(self, reply: str):
        assert self.run(("assistant", "Book HAT1 for $100?"), ("user", reply), (self.BOOK, {})) == []

    def test_each_call_needs_it_and_failed_attempts_count(self):
        found = check(self.CASE, messages("Book", ("assistant", "Book HAT1?"), ("user", "no"),
                                          (self.BOOK, "Error: x"), ("assistant", "Retry?"), ("user", "ok"),
                                          (self.BOOK, {})))
        assert names(found) == ["missing_confirmation"] and "call #1" in found[0].detail

    def test_custom_detector(self):
        never = lambda msgs, index: False  # noqa: E731
        assert self.run(("assistant", "Book?"), ("user", "yes"), (self.BOOK, {}), confirmation=never) == \
            ["missing_confirmation"]
        detector = KeywordConfirmation()
        assert detector.is_affirmative("Yes, go ahead") and not detector.is_affirmative("not correct")


class TestRepeatedSideEffect:
    def test_same_call_twice_after_success(self):
        found = check({"expected_calls": [REFUND]}, messages("hi", (REFUND, {}), (REFUND, {})))
        assert [(v.rule, v.tool) for v in found] == [("repeated_side_effect", "refund")]

    def test_retry_after_a_failed_attempt_is_not_a_repeat(self):
        msgs = messages("hi", (REFUND, "Error: timeout"), (REFUND, {}))
        assert check({"expected_calls": [REFUND, REFUND]}, msgs) == []

    def test_idempotent_tools_may_repeat(self):
        assert check({"expected_calls": [LOOKUP]}, messages("hi", (LOOKUP, {}), (LOOKUP, {}))) == []


def test_call_budget():
    msgs = messages("hi", (LOOKUP, {}), (LOOKUP, {}), (REFUND, {}))
    found = check({"expected_calls": [LOOKUP, REFUND], "max_calls": {"total": 2, "per_tool": {"lookup": 1}}}, msgs)
    assert [(v.rule, v.tool) for v in found] == [("call_budget", None), ("call_budget", "lookup")]
    assert check({"expected_calls": [], "max_calls": {"total": 3, "per_tool": {"lookup": 2}}}, msgs) == []


def test_required_argument_case_and_tool_level():
    msgs = messages("hi", (call("send", body="x"), {}), (call("refund", id="A"), {}))
    found = check({"expected_calls": [], "required_arguments": {"refund": ["amount", "id"]}}, msgs)
    assert [(v.rule, v.tool) for v in found if v.rule == "required_argument"] == [
        ("required_argument", "send"), ("required_argument", "refund")]
    assert "lacks to" in found[0].detail and "lacks amount" in found[1].detail


def test_required_argument_with_a_tool_table():
    # a ToolTable answers "which tools declare required_arguments" from its set: only send does among TOOLS
    table = ToolTable(TOOLS.values())
    assert table.required == {"send"}
    msgs = messages("hi", (call("send", body="x"), {}), (call("lookup", id="A"), {}), (call("send", to="b"), {}))
    model = Case.model_validate({"case_id": "c", "input": "", "expected_calls": []})
    observed = calls_from_messages(msgs)
    match, _ = match_plans(model.plans, observed, None)
    found = check_policies(model, table, msgs, observed, match)
    # call #1 lacks "to"; call #3 has it; lookup declares nothing
    assert [(v.rule, v.tool, v.detail) for v in found if v.rule == "required_argument"] == [
        ("required_argument", "send", 'call #1 send({"body":"x"}) lacks to')]
    assert found == check_policies(model, TOOLS, msgs, observed, match)  # the dict scan finds the same
    # no tool declares any: nothing to find, whatever the calls lack
    bare = ToolTable(spec.model_copy(update={"required_arguments": None}) for spec in TOOLS.values())
    assert bare.required == frozenset()
    assert [v for v in check_policies(model, bare, msgs, observed, match) if v.rule == "required_argument"] == []


def test_required_argument_of_a_malformed_call():
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "send", "arguments": "{broken"}}]}]
    assert "unreadable" in check({"expected_calls": []}, msgs)[0].detail


class TestMissingOutput:
    def test_final_reply_must_contain_each_string(self):
        msgs = messages("hi", ("assistant", "Refund of $49.99 issued."), ("user", "thanks"), ("assistant", "Bye"))
        found = check({"expected_calls": [], "expected_outputs": ["$49.99", "bye"]}, msgs)
        assert [v.detail for v in found] == ["the final reply does not contain '$49.99'"]  # case-insensitive "bye"

    def test_any_reply_and_ignored_characters_like_tau_bench(self):
        msgs = messages("hi", ("assistant", "The total is 1,628."), ("assistant", "Bye"))
        policy = PolicyConfig(outputs_in="any_reply", output_ignore_chars=",")
        assert check({"expected_calls": [], "expected_outputs": ["1628"]}, msgs, policy=policy) == []


class TestLeakedField:
    RESULT = {"name": "Sam", "card_last4": "4242", "address": {"street": "12 Elm Street", "state": "TX"}}
    PROFILE = call("profile", id="C-9")

    def run(self, reply: str, *before) -> list[Violation]:
        return check({"expected_calls": [self.PROFILE]}, messages("hi", *before, (self.PROFILE, self.RESULT),
                                                                   ("assistant", reply)))

    def test_a_quoted_card_number_is_a_leak_masked_in_the_detail(self):
        found = self.run("Your card ending 4242 is on file.")
        assert [(v.rule, v.tool) for v in found] == [("leaked_field", "profile")]
        assert "4242" not in found[0].detail and "'**42'" in found[0].detail and "profile.card_last4" in found[0].detail

    def test_nested_values_under_a_confidential_key(self):
        assert names(self.run("Shipping to 12 elm street.")) == ["leaked_field"]

    def test_short_values_and_clean_replies_pass(self):
        assert self.run("You live in TX and your profile is fine.") == []  # "TX" is shorter than 4 characters

    def test_a_value_the_user_wrote_first_is_not_a_leak(self):
        assert self.run("Card 4242 confirmed.", ("user", "my card ends in 4242")) == []

    def test_only_later_messages_count_and_non_json_results_are_skipped(self):
        msgs = messages("hi", ("assistant", "Is 4242 yours?"), (self.PROFILE, "card 4242"), ("assistant", "4242"))
        assert check({"expected_calls": [self.PROFILE]}, msgs) == []


class TestUnreferencedWrites:
    POLICY = PolicyConfig(forbid_unreferenced_writes=True)

    def test_blocking_when_the_write_succeeded_advisory_when_it_failed(self):
        msgs = messages("hi", (LOOKUP, {}), (REFUND, "Error: denied"), (call("refund", id="B", amount=1), {}))
        found = check({"expected_calls": [LOOKUP]}, msgs, policy=self.POLICY)
        assert [(v.rule, v.severity) for v in found] == [("forbidden_tool", "advisory"), ("forbidden_tool", "blocking")]

    def test_not_when_a_plan_writes(self):
        msgs = messages("hi", (REFUND, {}))
        assert check({"expected_calls": [LOOKUP], "accepted_plans": [[REFUND]]}, msgs, policy=self.POLICY) == []
        assert check({"expected_calls": [LOOKUP]}, msgs) == []  # the policy is off by default


class TestTrajectory:
    def test_results_are_linked_by_position_when_ids_repeat(self):
        msgs = [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
                    {"id": "x", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "x", "content": "ok"},
                {"role": "tool", "tool_call_id": "x", "content": "Error: no"}]
        steps = trajectory(msgs, calls_from_messages(msgs))
        assert [(s.call.name, s.result_index, s.failed) for s in steps] == [("lookup", 1, False), ("refund", 2, True)]

    @pytest.mark.parametrize(("content", "failed"), [
        (" " * 62 + "Error: no", True),  # the prefix starts past the first 64 characters' last few
        ("\n" * 100 + "ERROR: no", True),  # only whitespace in the first 64 characters; capitals fold
        (" " * 70 + "Err", False),  # "err" is not "error:"
        ('{"status": "error: none"}' + " " * 100, False),  # a JSON result that mentions an error
    ])
    def test_an_error_result_is_read_from_its_first_words(self, content, failed):
        msgs = [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": content}]
        assert trajectory(msgs, calls_from_messages(msgs))[0].failed is failed

    def test_tau2_error_flag(self):
        msgs = [{"role": "assistant", "content": None, "tool_calls": [{"id": "a", "name": "lookup", "arguments": {}}]},
                {"role": "tool", "tool_call_id": "a", "content": "nope", "error": True}]
        assert trajectory(msgs, calls_from_messages(msgs))[0].failed

    def test_observed_calls_must_come_from_the_messages(self):
        msgs = messages("hi", (LOOKUP, {}))
        with pytest.raises(ValueError):
            trajectory(msgs, calls(REFUND))
        with pytest.raises(ValueError):
            trajectory(msgs, calls(LOOKUP, LOOKUP))


def test_repeats_use_the_normalising_rules():
    # the two lookups differ only in an ignored trace id and in "2" vs 2 under coerce: the same call twice
    first, second = call("lookup", id="A", trace="t1", n="2"), call("lookup", id="A", trace="t2", n=2)
    case = {"expected_calls": [first], "no_repeated_calls": True,
            "argument_rules": {"lookup": {"trace": "ignore", "n": {"coerce": "number"}}}}
    assert names(check(case, messages("hi", (first, {}), (second, {})))) == ["repeated_call"]
    case["argument_rules"] = {"lookup": {"trace": "ignore"}}
    assert check(case, messages("hi", (first, {}), (second, {}))) == []
