"""Every scoring case of ../shared/cases/handed.jsonl (H01–H09, H17) with its right values.

The right values were computed by hand by whoever filed each case (source named per case); decimals are rounded
to 4 places there, so they are compared at an absolute tolerance of 5e-5.
"""

from __future__ import annotations

import json

import pytest

from tests.support.datasets import handed_cases
from tests.support.paths import GOLDEN, REPO
from tooleval.canonical import canonical_json
from tooleval.models import calls_from_messages
from tooleval.scoring.rows import score_envelopes
from tooleval.models import Case

CASES = handed_cases("scoring")


def _row(case: dict) -> dict:
    model_case = Case(case_id=case["id"], input="", expected_calls=case["expected_calls"])
    messages = [{"role": "assistant", "content": "", "tool_calls": case["observed_tool_calls"]}]
    calls = calls_from_messages(messages)
    envelope = {
        "dataset_revision": "r1",
        "case_id": case["id"],
        "trial": 0,
        "model_calls": [c.to_record() for c in calls],
        "metadata_json": "{}",
        "trace_digest": "x",
        "error": None,
    }
    return score_envelopes({case["id"]: model_case}, [envelope])[0]


def test_the_copy_is_the_handed_file():
    """The tests read a copy of ../shared/cases/handed.jsonl (the handed cases' source, beside the checkout as the
    README asks): a case added to or corrected in the source must not go unchecked here."""
    source = REPO.parent / "shared" / "cases" / "handed.jsonl"
    assert source.read_bytes() == (GOLDEN / "handed.jsonl").read_bytes(), \
        f"copy {source} over tests/golden/handed.jsonl and check the new or changed cases"


def test_all_scoring_cases_present():
    ids = {case["id"] for case in CASES}
    assert {"H01a", "H01b", "H01c", "H02", "H03", "H04", "H05", "H06a", "H06b", "H06c", "H07a", "H07b", "H08",
            "H09a", "H09b", "H09c", "H17"} <= ids


def _calls(records: list[dict]) -> list[dict]:
    return [{"name": r["name"], "args": json.loads(r["args_json"])} for r in records]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_handed_scoring_case(case: dict):
    row = _row(case)
    right = case["right"]
    for key in ("tp", "fp", "fn", "duplicate_calls", "malformed_calls", "exact_match"):
        if key in right:
            assert row[key] == right[key], key
    for key in ("f1", "ragas_tool_call_f1", "precision", "recall"):
        if key in right:
            if right[key] is None:
                assert row[key] is None, key
            else:
                assert row[key] == pytest.approx(right[key], abs=5e-5), key
    if "missing_calls" in right:
        assert _calls(row["missing_calls"]) == right["missing_calls"]
    if "extra_calls" in right:
        assert _calls(row["extra_calls"]) == right["extra_calls"]
    if "wrong_args" in right:
        got = row["wrong_args"]
        assert [(w["name"], w["paths"]) for w in got] == [(w["name"], w["paths"]) for w in right["wrong_args"]]
        for got_pair, right_pair in zip(got, right["wrong_args"]):
            if "expected" in right_pair:
                assert got_pair["expected_args_json"] == canonical_json(right_pair["expected"])
                assert got_pair["observed_args_json"] == canonical_json(right_pair["observed"])
    if "wrong_args_total_paths" in right:
        assert sum(len(w["paths"]) for w in row["wrong_args"]) == right["wrong_args_total_paths"]
    if "observed_calls" in right:
        assert len(row["observed_calls"]) == len(right["observed_calls"])  # zip below would hide a missing call
        for got_call, right_call in zip(row["observed_calls"], right["observed_calls"]):
            assert got_call["name"] == right_call["name"]
            assert got_call["args_raw"] == right_call["args_raw"]
            assert got_call["parse_error"]  # kept with the reason it could not be read
            assert got_call["args_json"] is None  # never turned into {}


def test_h17_pairing_does_not_depend_on_list_order():
    case = next(c for c in CASES if c["id"] == "H17")
    reversed_case = dict(case, observed_tool_calls=list(reversed(case["observed_tool_calls"])))
    paths = sorted(tuple(w["paths"]) for w in _row(reversed_case)["wrong_args"])
    assert paths == [("b", "c"), ("d", "e")]
