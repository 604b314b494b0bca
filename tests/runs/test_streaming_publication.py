"""Publication at scale (issue 9 item 1): the gate, ``junit.xml`` and the variability figures of a 20,000-row
synthetic run are computed without a Python object per row, yet every count equals an independent count made
here with DuckDB over the published Parquet rows; only the listed rows are bounded (100 per list)."""

from __future__ import annotations

import json

import duckdb
import pytest
from junitparser import Failure, JUnitXml, Skipped

from tooleval.runs.spec import RunSpec
from tooleval.synth import write_synth

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]  # the Prefect test harness's server

ROWS = 20_000

# A row fails the default gate (the synthetic dataset has no gate.toml: every blocking violation blocks, a row
# error blocks, and a scored row whose calls do not match its reference fails as reference_mismatch) when it holds
# one of those; these are its blocking rules.
_BLOCKING_RULES = """
SELECT coalesce(slice, '(none)') AS slice, case_id, trial,
       list_distinct(list_transform(list_filter(coalesce(violations, []), lambda v: v.severity = 'blocking'),
                                    lambda v: v.rule)
                     || CASE WHEN error_kind IS NOT NULL THEN ['row_error'] ELSE [] END
                     || CASE WHEN error_kind IS NULL AND NOT calls_match THEN ['reference_mismatch'] ELSE [] END)
       AS rules
FROM rows
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    from flows.evaluate import evaluate

    root = tmp_path_factory.mktemp("streaming")
    data = write_synth(ROWS, 11, "bfcl", root / "data").path
    result = evaluate(RunSpec(dataset=str(data), out=str(root / "out"), run_id="big", workers=1, shard_size=4000))
    con = duckdb.connect()
    con.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet('{result.rows_path}/*.parquet')")
    con.execute(f"CREATE VIEW judged AS {_BLOCKING_RULES}")
    return result, con


def test_gate_counts_equal_an_independent_count(published):
    result, con = published
    gate = result.summary["gate"]
    rows, failing = con.execute("SELECT count(*), count(*) FILTER (WHERE len(rules) > 0) FROM judged").fetchone()
    assert rows == ROWS and result.summary["rows"] == ROWS
    assert gate["counts"]["rows_evaluated"] == rows
    assert gate["counts"]["blocking_rows"] == gate["failing_rows_count"] == failing > 1000
    assert gate["passed"] is False and gate["reasons"][0] == f"{failing} blocking row(s)"
    by_rule = con.execute("SELECT slice, rule, count(*) FROM (SELECT slice, unnest(rules) AS rule FROM judged) "
                          "GROUP BY ALL").fetchall()
    assert gate["counts"]["failures_by_slice_and_rule"] == {
        s: {r: n for s2, r, n in sorted(by_rule) if s2 == s} for s in {s for s, _, _ in by_rule}}
    exact, fp, fn = con.execute("SELECT count(*) FILTER (WHERE exact_match), sum(fp), sum(fn) FROM rows").fetchone()
    assert (gate["counts"]["exact_match_rows"], gate["counts"]["false_positive_calls"],
            gate["counts"]["false_negative_calls"]) == (exact, fp, fn)
    # only the worst 100 failing rows are listed, the lowest F1 first
    listed = gate["failing_rows"]
    assert len(listed) == gate["listed"] == 100
    lowest = con.execute("SELECT f1 FROM rows JOIN judged USING (case_id, trial) WHERE len(rules) > 0 "
                         "ORDER BY f1 NULLS FIRST LIMIT 100").fetchall()
    assert [r["f1"] for r in listed] == [f1 for (f1,) in lowest]
    assert len(json.dumps(result.summary)) < 1_500_000  # counts and the worst rows, not every failing row


def test_junit_lists_the_worst_and_counts_the_rest(published):
    result, con = published
    xml = JUnitXml.fromfile(str(result.run_path + "/junit.xml"))
    suite = next(iter(xml))
    cases = list(suite)
    failing = con.execute("SELECT count(*) FROM judged WHERE len(rules) > 0").fetchone()[0]
    listed = [c for c in cases if "#" in c.name]
    assert len(listed) == 100 and all(isinstance(c.result[0], Failure) for c in listed)
    # per (slice, rule): the listed rows' rules plus the counted "N more failing rows" equal DuckDB's count
    expected = dict(((s, r), n) for s, r, n in con.execute(
        "SELECT slice, rule, count(*) FROM (SELECT slice, unnest(rules) AS rule FROM judged) GROUP BY ALL").fetchall())
    seen: dict[tuple[str, str], int] = {}
    for case in listed:
        for rule in case.result[0].message.removeprefix("blocking: ").split(", "):
            seen[(case.classname, rule)] = seen.get((case.classname, rule), 0) + 1
    for case in cases:
        if " more failing rows" in case.name:
            rule, more = case.name.split(": ")[0], int(case.name.split(": ")[1].split()[0])
            assert case.result[0].type == rule
            seen[(case.classname, rule)] = seen.get((case.classname, rule), 0) + more
    assert seen == expected
    passing = sum(int(c.name.split()[0]) for c in cases if c.name.endswith(" passing rows") and not c.result)
    assert passing == ROWS - failing
    assert not any(isinstance(r, Skipped) for c in cases for r in c.result)  # nothing is quarantined
    props = {p.name: p.value for p in suite.properties()}
    assert (int(props["rows"]), int(props["failing_rows"]), props["passed"]) == (ROWS, failing, "false")
    assert int(suite.failures) == 100 + sum(1 for c in cases if " more failing rows" in c.name)


def test_variability_counts_equal_an_independent_count(published):
    result, con = published
    figures = result.summary["variability"]
    # outcome "gate" under the default row outcome: a row passes when its calls match the reference and it is not
    # blocking; rows with an error have no outcome
    cases, flaky, passes = con.execute("""
        WITH per_case AS (
          SELECT case_id, count(*) FILTER (WHERE NOT blocking AND calls_match) AS passes, count(*) AS trials FROM rows
          WHERE error_kind IS NULL AND blocking IS NOT NULL GROUP BY case_id)
        SELECT count(*), count(*) FILTER (WHERE passes > 0 AND passes < trials), sum(passes) FROM per_case
        """).fetchone()
    assert (figures["rows"], figures["cases"], figures["passes"]) == (ROWS, cases, passes)
    assert figures["flaky_cases_count"] == flaky > 1000
    assert len(figures["flaky_cases"]) == 1000  # the first 1,000 by case id
    assert figures["flaky_cases"] == sorted(figures["flaky_cases"])
    assert figures["by_case_count"] == cases and len(figures["by_case"]) == 1000
    f1_mean = con.execute("SELECT avg(f1) FROM rows").fetchone()[0]
    assert figures["f1"]["mean"] == pytest.approx(f1_mean, abs=1e-12)
    assert result.summary["mean_f1"] == pytest.approx(f1_mean, abs=1e-12)


def test_gate_judge_fed_batch_by_batch_equals_judge_rows():
    """The flow judges each shard's rows as the shard finishes (GateJudge); the verdict is the one judge_rows gives
    over the same rows at once: A#0 exact, A#1 blocking (a forbidden tool), C has no row (unscored, blocking)."""
    from tooleval.rules import GateConfig
    from tooleval.runs.gate import GateJudge, judge_rows

    def row(case_id, trial, blocking):
        violation = [{"rule": "forbidden_tool", "severity": "blocking", "tool": "refund", "detail": ""}]
        return {"case_id": case_id, "trial": trial, "slice": None, "violations": violation if blocking else [],
                "error_kind": None, "error_message": None, "missing_calls": [], "extra_calls": [],
                "wrong_args": [], "f1": 1.0 if not blocking else 0.5, "exact_match": not blocking, "fp": 0,
                "fn": 0, "tool_families": [], "blocking": blocking}

    scope = {"A": None, "B": None, "C": None}
    batches = [[row("A", 0, False)], [row("A", 1, True), row("B", 0, False)]]
    judge = GateJudge(scope, [], GateConfig())
    for batch in batches:
        judge.add(batch)
    fed, whole = judge.verdict(), judge_rows(batches, scope, [], GateConfig())
    assert fed.to_dict() == whole.to_dict()
    assert sorted(o.case_id for o in fed.failing_rows) == ["A", "C"] and fed.counts["rows_evaluated"] == 3
