"""Seed 004's four refund runs (``../shared/seeds/004_5a53a91585e9480e.txt``) as the example dataset
``datasets/examples/refund-trajectory``: the same reply, different trajectories; only ``correct`` passes.

Seed 004's expected output, by run: correct PASS; skipped-verification FAIL (verify_identity never called, so the
required order is not met); wrong-amount FAIL (issue_refund called with 499.9, not 49.99); looping FAIL (web_search
outside the allowed set, lookup_order repeated); "contains 8/8 passed": the reply text passes all four.
"""

from __future__ import annotations

import json
from datetime import date

import pytest

from tests.support.rules import EXAMPLES, rules_of, score_folder
from tooleval.rules import evaluate_gate, load_gate_config

FOLDER = EXAMPLES / "refund-trajectory"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    return {row["case_id"]: row for row in score_folder(FOLDER)}


@pytest.fixture(scope="module")
def verdict(rows):
    return evaluate_gate(list(rows.values()), load_gate_config(FOLDER / "gate.toml"), today=date(2026, 6, 1))


def test_the_four_seed_runs(rows):
    assert list(rows) == ["correct", "skipped-verification", "wrong-amount", "looping"]


def test_only_correct_passes(rows, verdict):
    assert not verdict.passed  # `tooleval gate` exits 1
    assert [o.case_id for o in verdict.failing_rows] == ["skipped-verification", "wrong-amount", "looping"]
    assert rows["correct"]["violations"] == [] and not rows["correct"]["blocking"]
    assert verdict.counts["rows_evaluated"] == 4 and verdict.counts["blocking_rows"] == 3


def test_skipped_verification_fails_required_order(rows):
    row = rows["skipped-verification"]
    assert rules_of(row) == ["required_order"]
    assert row["violations"][0]["tool"] == "issue_refund"
    # expected 3 calls, observed lookup_order + issue_refund: tp 2, fn 1 -> f1 = 4 / 5
    assert row["f1"] == pytest.approx(0.8)


def test_wrong_amount_fails_wrong_write_arguments_with_both_calls(rows, verdict):
    row = rows["wrong-amount"]
    assert rules_of(row) == ["wrong_write_arguments"]
    pair = row["wrong_args"][0]
    assert json.loads(pair["expected_args_json"]) == {"order_id": "ORD-7731", "amount": 49.99}
    assert json.loads(pair["observed_args_json"]) == {"order_id": "ORD-7731", "amount": 499.9}
    assert pair["paths"] == ["amount"]
    detail = row["violations"][0]["detail"]
    assert '"amount":49.99' in detail and '"amount":499.9' in detail
    evidence = next(o for o in verdict.failing_rows if o.case_id == "wrong-amount").evidence()
    assert evidence["wrong_args"] == [{"name": "issue_refund", "expected": {"amount": 49.99, "order_id": "ORD-7731"},
                                       "observed": {"amount": 499.9, "order_id": "ORD-7731"}, "paths": ["amount"]}]


def test_looping_fails_unexpected_tool_and_repeated_call(rows):
    row = rows["looping"]
    assert sorted(set(rules_of(row))) == ["repeated_call", "unexpected_tool"]
    assert [(v["rule"], v["tool"]) for v in row["violations"]] == [
        ("unexpected_tool", "web_search"), ("repeated_call", "lookup_order"), ("repeated_call", "lookup_order")]


def test_a_text_only_check_passes_all_four(rows):
    # what expected_contains alone sees: every reply holds "$49.99" and "ORD-7731" (seed 004: contains 8/8)
    for row in rows.values():
        assert "missing_output" not in rules_of(row)
    # ... while the trajectory rules tell the runs apart: 1 of 4 passes
    assert [case for case, row in rows.items() if not row["blocking"]] == ["correct"]
