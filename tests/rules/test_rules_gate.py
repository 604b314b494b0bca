"""The release gate: gate.toml loading, waivers (an expired one fails), quarantine, severities, slice floors."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

from tests.support.rules import EXAMPLES, score_folder
from tooleval.errors import InputFileError
from tooleval.rules import GateConfig, evaluate_gate, load_gate_config, load_policy

TODAY = date(2026, 6, 1)
YESTERDAY = TODAY - timedelta(days=1)
FAILING = ["skipped-verification", "wrong-amount", "looping"]  # seed 004: only "correct" passes


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return score_folder(EXAMPLES / "refund-trajectory")


def gate(text: str) -> GateConfig:
    return GateConfig.from_toml(text, "gate.toml")


def waiver(case: str, expires: date, rule: str | None = None) -> str:
    rule_line = f'rule = "{rule}"\n' if rule else ""
    return (f'[[waivers]]\ncase = "{case}"\n{rule_line}owner = "qa@example.com"\nreason = "known issue"\n'
            f"expires = {expires.isoformat()}\n")


class TestWaivers:
    def test_active_waivers_pass_and_rows_stay_visible(self, rows):
        verdict = evaluate_gate(rows, gate("".join(waiver(c, TODAY) for c in FAILING)), today=TODAY)
        assert verdict.passed and verdict.failing_rows == []
        assert [o.case_id for o in verdict.waived] == FAILING  # expires today: still valid (inclusive)
        assert verdict.counts["waived_rows"] == 3 and verdict.counts["blocking_rows"] == 0
        looping = verdict.waived[2]
        # a waiver without a rule covers the whole case, the mismatch with the reference included
        assert looping.waived_rules == ["reference_mismatch", "repeated_call", "unexpected_tool"]
        assert looping.waivers[0]["owner"]

    def test_a_waiver_that_expired_yesterday_fails_the_gate(self, rows):
        config = gate(waiver("skipped-verification", TODAY) + waiver("wrong-amount", TODAY)
                      + waiver("looping", YESTERDAY))
        verdict = evaluate_gate(rows, config, today=TODAY)
        assert not verdict.passed
        assert [w.case for w in verdict.expired_waivers] == ["looping"]
        assert any("expired on 2026-05-31" in reason for reason in verdict.reasons)
        assert [o.case_id for o in verdict.failing_rows] == ["looping"]  # an expired waiver covers nothing
        # A waiver without a rule covers the whole case: said so, not "rule None".
        assert "waiver (case 'looping', all rules, owner qa@example.com) expired on 2026-05-31" in verdict.reasons

    def test_a_rule_waiver_covers_that_rule_only(self, rows):
        config = gate('[[waivers]]\nrule = "required_order"\nowner = "o"\nreason = "r"\nexpires = 2026-12-31\n')
        verdict = evaluate_gate(rows, config, today=TODAY)
        # skipped-verification's required_order is waived, but it still misses verify_identity, which the waiver does
        # not cover: the row fails, and a failing row is neither counted nor listed among the waived rows (a waived
        # row is one whose blocking rules are all waived: it passes, as its gate_verdict says)
        assert verdict.waived == [] and verdict.counts["waived_rows"] == 0
        assert verdict.counts["blocking_rows"] == 3
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [
            ("skipped-verification", ["reference_mismatch"]),
            ("wrong-amount", ["reference_mismatch", "wrong_write_arguments"]),
            ("looping", ["reference_mismatch", "repeated_call", "unexpected_tool"])]
        no_blocking = gate('row_outcome = "no_blocking"\n[[waivers]]\nrule = "required_order"\nowner = "o"\n'
                           'reason = "r"\nexpires = 2026-12-31\n')
        verdict = evaluate_gate(rows, no_blocking, today=TODAY)
        assert [o.case_id for o in verdict.failing_rows] == ["wrong-amount", "looping"]

    def test_unused_waiver_is_an_advisory(self, rows):
        verdict = evaluate_gate(rows, gate(waiver("correct", TODAY)), today=TODAY)
        assert any("matched no violation" in note for note in verdict.advisories)
        # a rule waiver names no case: the note says it covers every case (it said "case None")
        config = gate('[[waivers]]\nrule = "missing_confirmation"\nowner = "o"\nreason = "r"\nexpires = 2026-12-31\n')
        notes = evaluate_gate(rows, config, today=TODAY).advisories
        assert "waiver (every case, rule 'missing_confirmation') matched no violation" in notes


def test_a_quarantined_failing_case_does_not_block_but_is_listed(rows):
    config = gate(waiver("skipped-verification", TODAY) + waiver("wrong-amount", TODAY)
                  + '[[quarantine]]\ncase = "looping"\nowner = "qa@example.com"\nreason = "nondeterministic"\n')
    verdict = evaluate_gate(rows, config, today=TODAY)
    assert verdict.passed
    assert [(o.case_id, o.rules) for o in verdict.quarantined] == [
        ("looping", ["reference_mismatch", "repeated_call", "unexpected_tool"])]
    assert verdict.counts["quarantined_rows"] == 1 and verdict.counts["blocking_rows"] == 0
    refund = next(s for s in verdict.slices if s.name == "refund")
    assert refund.rows == 3 and refund.quarantined_rows == 1
    assert "looping" in json.dumps(verdict.to_dict())  # stays in every report


def test_severity_override(rows):
    # judged by the rules alone: looping's extra calls would otherwise fail it as reference_mismatch
    verdict = evaluate_gate(rows, gate('row_outcome = "no_blocking"\n[severity]\nrepeated_call = "advisory"\n'
                                       'unexpected_tool = "advisory"\n'), today=TODAY)
    assert [o.case_id for o in verdict.failing_rows] == ["skipped-verification", "wrong-amount"]
    assert verdict.counts["advisory_violations"] == 3


class TestSlices:
    def test_per_slice_floor_blocks_while_run_wide_f1_only_advises(self, rows):
        # mean f1 of the four runs = (1 + 0.8 + 2/3 + 2/3) / 4 = 0.7833
        advisory = evaluate_gate(rows, gate("[f1]\nmin_mean = 0.9\n"), today=TODAY)
        assert any("0.7833" in note for note in advisory.advisories)
        assert advisory.reasons == ["3 blocking row(s)"]
        floor = evaluate_gate(rows, gate("[slices.refund]\nmin_mean_f1 = 0.9\nmin_exact_match_rate = 0.5\n"),
                              today=TODAY)
        failures = next(s for s in floor.slices if s.name == "refund").failures
        assert failures == ["slice 'refund': mean f1 0.7833 is below its floor 0.9",
                            "slice 'refund': exact-match rate 0.2500 is below its floor 0.5"]

    def test_min_rows_and_a_configured_slice_missing_from_the_run(self, rows):
        verdict = evaluate_gate(rows, gate("[slices.refund]\nmin_rows = 5\n[slices.refund-eu]\n"), today=TODAY)
        assert "slice 'refund': 4 row(s); min_rows is 5" in verdict.reasons
        assert "slice 'refund-eu': missing from the run; min_rows is 1" in verdict.reasons

    def test_tool_family_figures_never_only_the_mean(self, rows):
        verdict = evaluate_gate(rows, gate("[families.payments]\nmin_rows = 4\n"), today=TODAY)
        payments = next(s for s in verdict.slices if (s.kind, s.name) == ("family", "payments"))
        assert (payments.rows, payments.exact_match_rows, payments.failing_rows, payments.passed) == (4, 1, 3, True)
        assert (payments.fp, payments.fn) == (4, 2)  # fp: 0+0+1+3, fn: 0+1+1+0
        assert verdict.counts["failures_by_tool_family"]["search"] == 1  # only looping used web_search
        assert verdict.counts["failures_by_slice"] == {"refund": 3}


def test_row_errors_block_unless_configured():
    rows = [{"case_id": "a", "trial": 0, "slice": None, "f1": None, "error_kind": "scoring_error",
             "error_message": "boom", "exact_match": None, "violations": None},
            {"case_id": "b", "trial": 0, "slice": None, "f1": 1.0, "error_kind": None, "exact_match": True,
             "violations": []}]
    assert evaluate_gate(rows, GateConfig(), today=TODAY).failing_rows[0].rules == ["row_error"]
    assert evaluate_gate(rows, gate("row_errors_block = false\n"), today=TODAY).passed
    # with no scored row at all the opt-out does not help (issue 11: zero scored rows never pass)
    assert not evaluate_gate(rows[:1], gate("row_errors_block = false\n"), today=TODAY).passed


def test_counts_and_json(rows):
    verdict = evaluate_gate(rows, GateConfig(), today=TODAY)
    # fp: wrong-amount 1 (the 499.9 refund) + looping 3 (6 calls, tp 3); fn: skipped-verification 1 + wrong-amount 1
    assert verdict.counts == {
        "rows_evaluated": 4, "scored_rows": 4, "unscored_cases": 0, "exact_match_rows": 1,
        "false_positive_calls": 4, "false_negative_calls": 2,
        "blocking_rows": 3, "waived_rows": 0, "quarantined_rows": 0, "advisory_violations": 0,
        "violations_by_rule": {"reference_mismatch": 3, "repeated_call": 2, "required_order": 1,
                               "unexpected_tool": 1, "wrong_write_arguments": 1},
        # the three failing rows differ from the reference too (the default row outcome: match)
        "failures_by_rule": {"reference_mismatch": 3, "repeated_call": 1, "required_order": 1, "unexpected_tool": 1,
                             "wrong_write_arguments": 1},
        "failures_by_tool_family": {"identity": 3, "orders": 3, "payments": 3, "search": 1},
        "failures_by_slice": {"refund": 3},
        # looping fails three rules, so the per-rule counts add up to 7 for 3 failing rows
        "failures_by_slice_and_rule": {"refund": {"reference_mismatch": 3, "repeated_call": 1, "required_order": 1,
                                                  "unexpected_tool": 1, "wrong_write_arguments": 1}},
        "rows_by_slice": {"refund": {"advisory_violations": 0, "failing": 3, "quarantined": 0,
                                     "quarantined_failing": 0, "rows": 4, "waived": 0}},
    }
    assert json.loads(json.dumps(verdict.to_dict()))["passed"] is False


class TestConfigFile:
    def test_bad_toml_names_the_line(self):
        with pytest.raises(InputFileError) as info:
            gate("schema_version = 1\n[f1\n")
        assert info.value.line == 2 and info.value.path == "gate.toml"

    def test_unknown_key_names_the_key_and_line(self):
        with pytest.raises(InputFileError) as info:
            gate("schema_version = 1\n\n[slices.refund]\nmin_row = 3\n")
        assert "slices.refund.min_row" in info.value.problem and info.value.line == 4

    @pytest.mark.parametrize("text, line, problem, fix", [
        ('[[waivers]]\ncase = "x"\nowner = "o"\nreason = "r"\nexpire = 2026-01-01\n', 5,
         "waivers.0.expire: unknown key 'expire' at line 5; did you mean 'expires'?", "rename it to 'expires'"),
        ('[[quarantine]]\ncase = "a"\nowner = "o"\nreason = "r"\n\n[[quarantine]]\ncase = "b"\nowner = "o"\n'
         'reasn = "r"\n', 9, "quarantine.1.reasn: unknown key 'reasn' at line 9; did you mean 'reason'?", "'reason'"),
        ('row_outcomes = "match"\n', 1, "did you mean 'row_outcome'?", "rename it to 'row_outcome'"),
        ('[slices.refund]\nmin_exact_rate = 0.5\n', 2, "did you mean 'min_exact_match_rate'?", "rename"),
        ('schema_version = 1\nforbidden_tools = ["refund"]\n', 2,
         "forbidden_tools: unknown key 'forbidden_tools' at line 2: 'forbidden_tools' is a case key, not a "
         "gate.toml one.", "set 'forbidden_tools' on each case it applies to in cases.jsonl"),
        ('leak_min_length = 3\n', 1, "'leak_min_length' is a [policy] key.", "move it under [policy]."),
        ('[f1]\nfoo = 1\n', 2, "f1.foo: unknown key 'foo' at line 2.",
         "[f1] accepts 'min_exact_match_rate', 'min_mean'"),
    ])
    def test_an_unknown_key_is_named_with_its_line_and_the_key_meant(self, text, line, problem, fix):
        # pydantic alone says "waivers.0.expires: Field required" for the first, with no line and no word of the
        # misspelt key, and "Extra inputs are not permitted" for a case key
        with pytest.raises(InputFileError) as info:
            gate(text)
        assert info.value.line == line and problem in info.value.problem and fix in info.value.fix
        assert "Field required" not in info.value.problem and "Extra inputs" not in info.value.problem

    @pytest.mark.parametrize("text", [
        '[severity]\nnot_a_rule = "advisory"\n',
        '[severity]\nrepeated_call = "fatal"\n',
        '[[waivers]]\nowner = "o"\nreason = "r"\nexpires = 2026-01-01\n',  # names neither case nor rule
        '[[waivers]]\ncase = "x"\nreason = "r"\nexpires = 2026-01-01\n',  # no owner
        '[[waivers]]\nrule = "nope"\nowner = "o"\nreason = "r"\nexpires = 2026-01-01\n',
        'schema_version = 2\n',
        '[policy]\noutputs_in = "somewhere"\n',
    ])
    def test_invalid_values_are_file_errors(self, text: str):
        with pytest.raises(InputFileError):
            gate(text)

    def test_missing_file_and_policy_defaults(self, tmp_path):
        with pytest.raises(InputFileError):
            load_gate_config(tmp_path / "gate.toml")
        assert load_policy(tmp_path) == GateConfig().policy

    def test_every_shipped_gate_toml_loads(self):
        for path in sorted((EXAMPLES.parent).glob("**/gate.toml")):
            assert isinstance(load_gate_config(path), GateConfig), path


def _scored(case_id: str, *, exact: bool, fp: int = 0, fn: int = 0, violations=(), wrong=()) -> dict:
    return {"case_id": case_id, "trial": 0, "slice": "s", "f1": 1.0 if exact else 0.5, "exact_match": exact,
            "fp": fp, "fn": fn, "error_kind": None, "violations": list(violations), "wrong_args": list(wrong),
            "missing_calls": [], "extra_calls": []}


class TestRowOutcome:
    """The default gate (no gate.toml): a row passes only when its calls match the reference and nothing blocks."""

    ROWS = [_scored("exact", exact=True),
            _scored("close", exact=False, fp=1, fn=1, wrong=[{"name": "refund", "expected_args_json": "{}",
                                                               "observed_args_json": "{}", "paths": ["amount"]}]),
            _scored("blocked", exact=True, violations=[{"rule": "repeated_call", "severity": "blocking",
                                                       "tool": "refund", "detail": "call #2"}]),
            {**_scored("broken", exact=False), "error_kind": "ScoringError", "error_message": "boom",
             "exact_match": None, "f1": None}]

    def test_a_mismatch_without_a_broken_rule_fails_by_default(self):
        verdict = evaluate_gate(self.ROWS, GateConfig(), today=TODAY)
        assert not verdict.passed and verdict.reasons == ["3 blocking row(s)"]
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [
            ("close", ["reference_mismatch"]), ("blocked", ["repeated_call"]), ("broken", ["row_error"])]
        close = verdict.failing_rows[0].violations
        assert close == [{"rule": "reference_mismatch", "severity": "blocking", "tool": None,
                          "detail": "match mode unordered: 1 missing and 1 extra call(s); wrong arguments in refund"}]
        assert verdict.counts["failures_by_rule"] == {"reference_mismatch": 1, "repeated_call": 1, "row_error": 1}
        as_json = verdict.to_dict()
        assert as_json["row_outcome"] == "match" and "match mode" in as_json["row_passes_when"]

    def test_the_case_match_mode_decides_what_matches(self):
        # strict: the reference's calls in another order (exact_match, but not calls_match); superset: an extra
        # read beside every reference call (not exact, but calls_match)
        strict = dict(_scored("reordered", exact=True), match_mode="strict", calls_match=False)
        superset = dict(_scored("extra-read", exact=False, fp=1), match_mode="superset", calls_match=True)
        verdict = evaluate_gate([strict, superset], GateConfig(), today=TODAY)
        assert [(o.case_id, o.rules) for o in verdict.failing_rows] == [("reordered", ["reference_mismatch"])]
        assert verdict.failing_rows[0].violations[0]["detail"] == "match mode strict: 0 missing and 0 extra call(s)"

    def test_no_blocking_judges_by_the_rules_alone(self):
        verdict = evaluate_gate(self.ROWS, gate('row_outcome = "no_blocking"\n'), today=TODAY)
        assert [o.case_id for o in verdict.failing_rows] == ["blocked", "broken"]
        assert verdict.to_dict()["row_outcome"] == "no_blocking"
        assert "reference_mismatch" not in verdict.counts["violations_by_rule"]

    def test_a_mismatch_is_waivable_per_case_like_any_rule(self):
        config = gate('[[waivers]]\ncase = "close"\nrule = "reference_mismatch"\nowner = "qa"\n'
                      'reason = "two right plans"\nexpires = 2026-12-31\n')
        verdict = evaluate_gate(self.ROWS[:2], config, today=TODAY)
        assert verdict.passed and [o.waived_rules for o in verdict.waived] == [["reference_mismatch"]]

    def test_an_unknown_row_outcome_is_a_file_error_naming_the_line(self):
        with pytest.raises(InputFileError) as info:
            gate('schema_version = 1\nrow_outcome = "exact"\n')
        assert info.value.line == 2 and "row_outcome" in info.value.problem and info.value.path == "gate.toml"

    def test_the_bundled_gate_keeps_its_own_outcome_and_the_examples_take_the_default(self):
        bundled = load_gate_config(EXAMPLES.parent / "tau-bench-airline" / "gate.toml")
        assert bundled.row_outcome == "no_blocking"
        for path in sorted(EXAMPLES.glob("*/gate.toml")):
            assert load_gate_config(path).row_outcome == "match", path
