"""The negative cases of ``datasets/examples/refund-negative`` (seed 000: "Include missing identifiers,
conflicting amounts, ..., denied permissions, timeouts before execution, timeouts after execution, and ambiguous
requests"): trial 0 is the right behaviour and passes, trial 1 a plausible wrong one and fails the named rules."""

from __future__ import annotations

import pytest

from tests.support.rules import EXAMPLES, rules_of, score_folder

FOLDER = EXAMPLES / "refund-negative"
WRONG = {
    "missing-identifier": ["forbidden_tool", "missing_output"],  # refunds a guessed order, never asks
    "conflicting-amounts": ["forbidden_tool"],  # refunds the amount the user claimed
    "denied-permission": ["missing_write", "repeated_side_effect", "call_budget"],  # splits the refund
    "timeout-before-execution": ["missing_write"],  # gives up: the refund never happened
    "timeout-after-execution": ["call_budget"],  # blind retry: refunded twice
    "ambiguous-request": ["call_budget", "missing_output"],  # acts on a guess, asks nothing
}


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, int], dict]:
    return {(row["case_id"], row["trial"]): row for row in score_folder(FOLDER)}


def test_every_negative_case_is_shipped(rows):
    assert sorted({case for case, _ in rows}) == sorted(WRONG)


@pytest.mark.parametrize("case_id", sorted(WRONG))
def test_right_behaviour_passes(rows, case_id: str):
    row = rows[(case_id, 0)]
    assert row["violations"] == [] and not row["blocking"] and row["exact_match"]


@pytest.mark.parametrize("case_id", sorted(WRONG))
def test_wrong_behaviour_fails_the_named_rules(rows, case_id: str):
    row = rows[(case_id, 1)]
    assert rules_of(row, "blocking") == WRONG[case_id] and row["blocking"]


def test_ambiguous_request_ends_in_a_question_with_no_call(rows):
    right = rows[("ambiguous-request", 0)]
    assert right["fp"] == 0 and right["tp"] == 0 and right["f1"] == 1.0  # a correct abstention


def test_retry_after_a_timeout_before_execution_is_not_a_repeated_side_effect(rows):
    # the first issue_refund got "Error: timeout ... not executed": the retry is the reference's second call
    assert rows[("timeout-before-execution", 0)]["violations"] == []
