"""Seed 000's cases (``../shared/seeds/000_ed2a970509f67b38.txt``) as the example dataset
``datasets/examples/tool-contracts``."""

from __future__ import annotations

import pytest

from tests.support.rules import EXAMPLES, rules_of, score_folder

FOLDER = EXAMPLES / "tool-contracts"


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, int], dict]:
    return {(row["case_id"], row["trial"]): row for row in score_folder(FOLDER)}


def test_extra_profile_change_is_forbidden_while_f1_stays_high(rows):
    # expected get_invoice + send_invoice; observed those two and update_contact_email: tp 2, fp 1 -> f1 = 4/5
    row = rows[("invoice-extra-email-update", 0)]
    assert rules_of(row) == ["forbidden_tool"] and row["violations"][0]["tool"] == "update_contact_email"
    assert row["f1"] == pytest.approx(0.8) and row["blocking"]


def test_invoice_sent_twice_is_a_repeated_side_effect(rows):
    row = rows[("invoice-sent-twice", 0)]
    assert rules_of(row) == ["repeated_side_effect"] and row["violations"][0]["tool"] == "send_invoice"
    assert row["f1"] == pytest.approx(0.8)  # tp 2, fp 1


def test_charge_before_inventory_fails_required_order_although_f1_is_one(rows):
    row = rows[("charge-before-inventory", 0)]
    assert row["f1"] == 1.0 and row["exact_match"]
    assert rules_of(row) == ["required_order"] and row["violations"][0]["tool"] == "charge_card"


def test_optional_locale_is_accepted_only_where_the_rule_says_so(rows):
    allowed, strict = rows[("locale-optional", 0)], rows[("locale-strict", 0)]
    assert allowed["f1"] == 1.0 and allowed["violations"] == []
    # without the rule: send_invoice(INV-7, locale en-US) vs send_invoice(INV-7) -> tp 1, fp 1, fn 1 -> f1 0.5
    assert strict["f1"] == 0.5 and rules_of(strict) == ["wrong_write_arguments"]
    assert strict["wrong_args"][0]["paths"] == ["locale"]


def test_leaked_card_digits_while_f1_is_one_and_the_same_reply_without_them_passes(rows):
    leaked, clean = rows[("invoice-status-leak", 0)], rows[("invoice-status-leak", 1)]
    assert leaked["f1"] == 1.0 and rules_of(leaked) == ["leaked_field"] and leaked["blocking"]
    assert leaked["violations"][0]["tool"] == "get_invoice"
    assert clean["f1"] == 1.0 and clean["violations"] == [] and not clean["blocking"]


def test_accepted_plan_is_chosen_and_recorded(rows):
    row = rows[("airport-alternative-plan", 0)]
    assert row["chosen_plan"] == 1 and row["f1"] == 1.0 and row["violations"] == []
    assert [c["name"] for c in row["reference_calls"]] == ["resolve_iata_code"]


def test_coercion_is_recorded_on_the_row(rows):
    row = rows[("charge-amount-as-text", 0)]
    assert row["f1"] == 1.0
    assert row["coercions"] == [{"call_index": 0, "tool": "charge_card", "path": "amount_cents",
                                 "from_value": '"9800"', "to_value": "9800"}]
    assert row["tool_families"] == ["payments"]
