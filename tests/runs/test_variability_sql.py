"""Variability over a run's Parquet files folds each case's rows in DuckDB (the outcome's rule written in SQL)
instead of tallying row by row in Python: the summary equals :func:`variability_summary` of the same rows, for every
outcome, on rows of every schema (columns missing as in older partitions), and errors say what they said."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tooleval.runs.variability import LISTED_CASES, outcome_from_spec, variability_of_parquet, variability_summary

SPECS = [("gate", "match", False), ("gate", "match", True), ("gate", "no_blocking", False),
         ("gate", "no_blocking", True), ("exact", "match", False), ("f1>=0.5", "match", False),
         ("f1>=0.3333333333333333", "match", False), ("f1>=1", "match", False), ("recorded_reward", "match", False)]


def _rows(seed: int, cases: int = 60) -> list[dict]:
    """Rows with every outcome column: 1-4 trials per case, some errors, nulls, slices that change by trial."""
    rng = random.Random(seed)
    rows = []
    for c in range(cases):
        for trial in rng.sample(range(6), rng.randint(1, 4)):
            error = rng.random() < 0.15
            rows.append({
                "case_id": f"case-{rng.randint(0, 10 ** 6):07d}-{c}", "trial": trial,
                "slice": rng.choice([None, "a", "b"]),
                "f1": None if error or rng.random() < 0.1 else rng.choice([0.0, 1 / 3, 0.5, 2 / 3, 1.0, 0.1 + 0.2]),
                "error_kind": "bad_trace" if error else None,
                "exact_match": rng.choice([None, True, False]), "calls_match": rng.choice([None, True, False]),
                "blocking": rng.choice([None, True, False]), "gate_pass": rng.choice([None, None, True, False]),
                "recorded_reward": rng.choice([None, 0.0, 1.0, 0.5, 2]), "name_only": rng.choice([None, True, False]),
            })
    # the same case id for all its trials: rename by the first trial's draw
    first: dict[str, str] = {}
    for row in rows:
        key = row["case_id"].rsplit("-", 1)[1]
        row["case_id"] = first.setdefault(key, row["case_id"])
    return rows


def _source(tmp_path, rows: list[dict], drop: tuple[str, ...] = ()) -> str:
    kept = [{k: v for k, v in row.items() if k not in drop} for row in rows]
    half = len(kept) // 2
    files = []
    for i, part in enumerate((kept[:half], kept[half:])):  # two files, as a run has partitions
        path = tmp_path / f"rows-{i}.parquet"
        pq.write_table(pa.Table.from_pylist(part), path)
        files.append(str(path))
    return "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "], union_by_name = true)"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("drop", [(), ("gate_pass", "name_only", "calls_match"), ("slice", "recorded_reward")])
def test_equal_to_the_row_by_row_summary(tmp_path, seed, drop):
    rows = _rows(seed)
    source = _source(tmp_path, rows, drop)
    kept = [{k: v for k, v in row.items() if k not in drop} for row in rows]
    for spec in SPECS:
        outcome = outcome_from_spec(*spec)
        want = variability_summary(kept, outcome)
        got = variability_of_parquet(source, outcome)
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True), spec
    assert want["rows"] == len(rows) and want["by_case_count"] == len({r["case_id"] for r in rows})


def test_more_cases_than_are_listed(tmp_path):
    # 5,000 cases: more than LISTED_CASES (1,000) are flaky or worst, so the listing and the flaky list are cut, and
    # every slice holds hundreds of cases
    rows = _rows(3, cases=5000)
    source = _source(tmp_path, rows)
    for spec in SPECS[:3]:
        outcome = outcome_from_spec(*spec)
        want = variability_summary(rows, outcome)
        got = variability_of_parquet(source, outcome)
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True), spec
    assert len(want["by_case"]) == LISTED_CASES and want["by_case_count"] == 5000
    assert len(want["flaky_cases"]) == LISTED_CASES < want["flaky_cases_count"]


def test_by_hand(tmp_path):
    # case a: trials 0, 1 -> gate_pass true, then blocking false with calls_match false (under "match": a fail);
    # case b: an error row (no outcome) and a name-only row that fails unless name-only rows are accepted
    rows = [
        {"case_id": "a", "trial": 0, "slice": "s", "f1": 1.0, "error_kind": None, "gate_pass": True,
         "blocking": False, "calls_match": True, "exact_match": True, "name_only": False},
        {"case_id": "a", "trial": 1, "slice": "t", "f1": 0.5, "error_kind": None, "gate_pass": None,
         "blocking": False, "calls_match": False, "exact_match": False, "name_only": False},
        {"case_id": "b", "trial": 0, "slice": None, "f1": None, "error_kind": "bad_trace", "gate_pass": None,
         "blocking": None, "calls_match": None, "exact_match": None, "name_only": None},
        {"case_id": "b", "trial": 1, "slice": None, "f1": 1.0, "error_kind": None, "gate_pass": None,
         "blocking": False, "calls_match": True, "exact_match": True, "name_only": True},
    ]
    source = _source(tmp_path, rows)
    strict = variability_of_parquet(source, outcome_from_spec("gate", "match", False))
    assert strict["rows"] == 4 and strict["rows_without_outcome"] == 1
    assert strict["trials"] == 3 and strict["passes"] == 1  # a: pass, fail; b: name-only fail
    assert strict["by_slice"]["t"]["cases"] == 1  # a case's slice is its last trial's
    lenient = variability_of_parquet(source, outcome_from_spec("gate", "no_blocking", True))
    assert lenient["passes"] == 3  # every judged row is unblocked, and name-only rows are accepted
    assert strict["f1"] == {"mean": 2.5 / 3, "std": pytest.approx(0.28867513459481287, abs=0), "min": 0.5,
                            "max": 1.0}  # mean of 1.0, 0.5, 1.0; sample std sqrt(1/12)


def test_a_repeated_trial_is_named(tmp_path):
    rows = _rows(0, cases=5)
    rows.append(dict(rows[3]))
    source = _source(tmp_path, rows)
    outcome = outcome_from_spec("exact")
    with pytest.raises(ValueError) as want:
        variability_summary(rows, outcome)
    with pytest.raises(ValueError) as got:
        variability_of_parquet(source, outcome)
    assert str(got.value) == str(want.value) and str(got.value).startswith("two rows for case")


def test_gate_without_its_columns_raises_as_before(tmp_path):
    rows = [{"case_id": "a", "trial": t, "f1": 1.0, "error_kind": None} for t in (0, 1)]
    with pytest.raises(ValueError, match="needs a 'gate_verdict', 'gate_pass' or 'blocking' column"):
        variability_of_parquet(_source(tmp_path, rows), outcome_from_spec("gate"))
