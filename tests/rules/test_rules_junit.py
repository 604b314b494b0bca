"""``junit.xml`` of a verdict parses with a JUnit reader library (junitparser), names the listed failing rows and
counts the others per slice and rule (issue 9: bounded at any corpus size)."""

from __future__ import annotations

import json
from datetime import date

import pytest
from junitparser import Failure, JUnitXml, Skipped

from tests.support.rules import EXAMPLES, score_folder
from tooleval.rules import GateConfig, evaluate_gate, write_junit

TODAY = date(2026, 6, 1)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return score_folder(EXAMPLES / "refund-trajectory") + score_folder(EXAMPLES / "refund-negative")


def _cases(path):
    return {f"{case.classname}/{case.name}": case for suite in JUnitXml.fromfile(str(path)) for case in suite}


def test_every_failing_row_is_named_with_its_rules_and_call_objects(rows, tmp_path):
    verdict = evaluate_gate(rows, GateConfig(), today=TODAY)
    path = write_junit(verdict, tmp_path / "junit.xml", suite_name="examples")
    cases = _cases(path)
    # 9 failing rows listed one by one (all of them: fewer than the 100 listed by default) and one count case for
    # the passing rows of each slice: refund has 4 rows (3 failing), refund-negative 12 (6 failing)
    passing = {key: case for key, case in cases.items() if key.endswith(" passing rows")}
    assert sorted(passing) == ["refund-negative/6 passing rows", "refund/1 passing rows"]
    assert all(case.is_passed for case in passing.values())
    assert json.loads(passing["refund/1 passing rows"].system_out)["rows"] == 4
    assert len(cases) == 9 + 2  # no gate-level cases without floors or waivers
    failed = {key: case for key, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    expected = {f"{o.slice}/{o.case_id}#{o.trial}" for o in verdict.failing_rows}
    assert set(failed) == expected and len(expected) == 9  # 3 seed runs + 6 wrong negative trials
    failure = next(r for r in failed["refund/wrong-amount#0"].result if isinstance(r, Failure))
    # without row_outcome the gate also asks for the reference's calls: every failing example row differs from it
    assert failure.message == "blocking: reference_mismatch, wrong_write_arguments"
    evidence = json.loads(failure.text)
    assert evidence["rules"] == ["reference_mismatch", "wrong_write_arguments"]
    assert evidence["wrong_args"][0]["expected"]["amount"] == 49.99
    assert evidence["wrong_args"][0]["observed"]["amount"] == 499.9
    looping = json.loads(next(r for r in failed["refund/looping#0"].result if isinstance(r, Failure)).text)
    assert [c["name"] for c in looping["extra_calls"]] == ["lookup_order", "lookup_order", "web_search"]
    skipped = json.loads(next(r for r in failed["refund/skipped-verification#0"].result).text)
    assert skipped["missing_calls"] == [{"name": "verify_identity", "args": {"customer_id": "C-118"}}]
    assert "refund/correct#0" not in cases  # a passing row is counted, not listed


def test_rows_beyond_the_listed_are_counted_per_slice_and_rule(rows, tmp_path):
    verdict = evaluate_gate(rows, GateConfig(), today=TODAY, listed=2)
    assert len(verdict.failing_rows) == 2 and verdict.counts["blocking_rows"] == 9
    # the worst first: the lowest F1 (the two refund-negative trials listed are those with F1 0.0)
    assert [o.f1 for o in verdict.failing_rows] == sorted(o.f1 for o in verdict.failing_rows)
    cases = _cases(write_junit(verdict, tmp_path / "junit.xml", suite_name="examples"))
    listed = [key for key, case in cases.items() if "#" in key]
    assert len(listed) == 2
    counted = {key: case for key, case in cases.items() if " more failing rows" in key}
    by_rule = verdict.counts["failures_by_slice_and_rule"]
    for (slice_, rules) in by_rule.items():
        for rule, n in rules.items():
            shown = sum(1 for o in verdict.failing_rows if o.slice == slice_ and rule in o.rules)
            if n > shown:
                case = counted[f"{slice_}/{rule}: {n - shown} more failing rows"]
                assert case.result[0].type == rule and json.loads(case.result[0].text)["failing_rows"] == n
    assert sum(int(k.split(": ")[1].split()[0]) for k in counted) + sum(
        len(o.rules) for o in verdict.failing_rows) == sum(n for r in by_rule.values() for n in r.values())


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
    cases = _cases(write_junit(verdict, tmp_path / "junit.xml"))
    looping = cases["refund/looping#0"]
    assert looping.is_skipped
    assert "would fail: reference_mismatch, repeated_call, unexpected_tool" in looping.result[0].message
    assert isinstance(looping.result[0], Skipped)
    waived = cases["refund/skipped-verification#0"]
    assert waived.is_passed and "waived: reference_mismatch, required_order" in waived.system_out
    assert not cases["refund/wrong-amount#0"].is_passed  # its waiver expired yesterday
    assert not cases["gate/slice:refund"].is_passed
    expired = cases["gate/waiver:wrong-amount:*"]
    assert expired.result[0].message == "waiver expired on 2026-05-31"
