"""``junit.xml`` of a verdict parses with a JUnit reader library (junitparser) and names every failing row."""

from __future__ import annotations

import json
from datetime import date

import pytest
from junitparser import Failure, JUnitXml, Skipped

from rules_helpers import EXAMPLES, score_folder
from tooleval.rules import GateConfig, evaluate_gate, write_junit

TODAY = date(2026, 6, 1)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return score_folder(EXAMPLES / "refund-trajectory") + score_folder(EXAMPLES / "refund-negative")


def _cases(path):
    return {f"{case.classname}/{case.name}": case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def test_every_failing_row_is_named_with_its_rules_and_call_objects(rows, tmp_path):
    verdict = evaluate_gate(rows, GateConfig(), today=TODAY)
    path = write_junit(verdict, rows, tmp_path / "junit.xml", suite_name="examples")
    cases = _cases(path)
    assert len(cases) == len(rows)  # one test case per row, no gate-level cases without floors or waivers
    failed = {key: case for key, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    expected = {f"{o.slice}/{o.case_id}#{o.trial}" for o in verdict.failing_rows}
    assert set(failed) == expected and len(expected) == 9  # 3 seed runs + 6 wrong negative trials
    failure = next(r for r in failed["refund/wrong-amount#0"].result if isinstance(r, Failure))
    assert failure.message == "blocking: wrong_write_arguments"
    evidence = json.loads(failure.text)
    assert evidence["rules"] == ["wrong_write_arguments"]
    assert evidence["wrong_args"][0]["expected"]["amount"] == 49.99
    assert evidence["wrong_args"][0]["observed"]["amount"] == 499.9
    looping = json.loads(next(r for r in failed["refund/looping#0"].result if isinstance(r, Failure)).text)
    assert [c["name"] for c in looping["extra_calls"]] == ["lookup_order", "lookup_order", "web_search"]
    skipped = json.loads(next(r for r in failed["refund/skipped-verification#0"].result).text)
    assert skipped["missing_calls"] == [{"name": "verify_identity", "args": {"customer_id": "C-118"}}]
    assert cases["refund/correct#0"].is_passed


def test_quarantine_waivers_and_gate_failures(rows, tmp_path):
    config = GateConfig.from_toml("""
[slices.refund]
min_mean_f1 = 0.9
[[quarantine]]
case = "looping"
owner = "qa"
reason = "flaky"
[[waivers]]
case = "wrong-amount"
owner = "payments-qa"
reason = "fix in review"
expires = 2026-05-31
[[waivers]]
case = "skipped-verification"
owner = "payments-qa"
reason = "fix in review"
expires = 2026-06-30
""")
    verdict = evaluate_gate(rows, config, today=TODAY)
    cases = _cases(write_junit(verdict, rows, tmp_path / "junit.xml"))
    looping = cases["refund/looping#0"]
    assert looping.is_skipped and "would fail: repeated_call, unexpected_tool" in looping.result[0].message
    assert isinstance(looping.result[0], Skipped)
    waived = cases["refund/skipped-verification#0"]
    assert waived.is_passed and "waived: required_order" in waived.system_out
    assert not cases["refund/wrong-amount#0"].is_passed  # its waiver expired yesterday
    assert not cases["gate/slice:refund"].is_passed
    expired = cases["gate/waiver:wrong-amount:*"]
    assert expired.result[0].message == "waiver expired on 2026-05-31"
