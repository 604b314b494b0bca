"""The gate over Arrow tables (``GateTally.add_table``) gives the verdict of the gate over the same rows one by one
(``GateTally.add``): by hand on a small table, and on random rows, configs and table cuts against the per-row
path."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
from tests.support.profiles import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from tooleval.rules import GATE_RULES, GateConfig, GateTally
from tooleval.runs.gate import GATE_COLUMNS, judge_rows
from tooleval.storage import ROW_SCHEMA

TODAY = date(2026, 12, 2)
SCHEMA = pa.schema([ROW_SCHEMA.field(c) for c in GATE_COLUMNS])


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r.get(c) for c in GATE_COLUMNS} for r in rows], schema=SCHEMA)


def by_rows(config: GateConfig, rows: list[dict]) -> dict:
    tally = GateTally(config, today=TODAY)
    for row in table(rows).to_pylist():
        tally.add(row)
    return tally.verdict().to_dict()


def by_tables(config: GateConfig, rows: list[dict], cuts: list[int] = ()) -> dict:
    return judged_by_tables(config, rows, cuts)[0]


def judged_by_tables(config: GateConfig, rows: list[dict], cuts: list[int] = ()) -> tuple[dict, list[tuple]]:
    """The verdict of the rows judged table by table, and each row's ``(gate_verdict, gate_rules)``."""
    tally = GateTally(config, today=TODAY)
    whole = table(rows)
    edges = [0, *sorted(c for c in cuts if 0 < c < len(rows)), len(rows)]
    per_row = []
    for start, stop in zip(edges, edges[1:]):
        judged = tally.add_table(whole.slice(start, stop - start))
        assert judged.num_rows == stop - start
        per_row += list(zip(judged["gate_verdict"].to_pylist(), judged["gate_rules"].to_pylist()))
    return tally.verdict().to_dict(), per_row


def per_row_verdicts(config: GateConfig, rows: list[dict]) -> list[tuple]:
    tally = GateTally(config, today=TODAY)
    return [(o.gate_verdict, o.gate_rules) for o in map(tally.add, table(rows).to_pylist())]


def violation(rule: str, severity: str = "blocking", tool: str | None = None) -> dict:
    return {"rule": rule, "severity": severity, "tool": tool, "detail": f"{rule} on {tool}"}


def scored(case_id: str, trial: int, **columns) -> dict:
    row = {"case_id": case_id, "trial": trial, "slice": "s", "f1": 1.0, "exact_match": True, "calls_match": True,
           "fp": 0, "fn": 0, "tool_families": ["pay"]}
    return {**row, **columns}


class TestByHand:
    ROWS = [
        scored("a", 0),  # passes
        scored("a", 1, f1=0.5, exact_match=False, calls_match=False, fp=1, fn=1),  # reference_mismatch
        scored("b", 0, violations=[violation("missing_write", tool="refund"),
                                   violation("forbidden_tool", "advisory", "delete")]),  # missing_write
        scored("b", 1, f1=None, exact_match=None, calls_match=None, error_kind="scoring_error",
               error_message="bad", tool_families=None),  # row_error, no family
        scored("c", 0, slice=None, f1=0.25, exact_match=False, calls_match=False, fn=2,
               tool_families=["pay", "mail"]),  # reference_mismatch, no slice
    ]

    def test_counts(self):
        counts = by_tables(GateConfig(), self.ROWS)["counts"]
        assert counts["rows_evaluated"] == 5 and counts["scored_rows"] == 4
        assert counts["blocking_rows"] == 4  # every row but the first
        assert counts["exact_match_rows"] == 2  # a#0 and b#0
        assert counts["false_positive_calls"] == 1 and counts["false_negative_calls"] == 3
        assert counts["advisory_violations"] == 1
        assert counts["violations_by_rule"] == {"forbidden_tool": 1, "missing_write": 1, "reference_mismatch": 2,
                                                "row_error": 1}
        assert counts["failures_by_rule"] == {"missing_write": 1, "reference_mismatch": 2, "row_error": 1}
        assert counts["failures_by_slice"] == {"(none)": 1, "s": 3}
        assert counts["failures_by_tool_family"] == {"(none)": 1, "mail": 1, "pay": 3}
        assert counts["rows_by_slice"]["s"] == {"advisory_violations": 1, "failing": 3, "quarantined": 0,
                                                "quarantined_failing": 0, "rows": 4, "waived": 0}

    def test_slices_and_listing(self):
        verdict = by_tables(GateConfig(listed_rows=2), self.ROWS)
        # listed: the worst two of the four failing rows: b#1 (no F1) then c#0 (F1 0.25)
        assert [(o["case_id"], o["trial"]) for o in verdict["failing_rows"]] == [("b", 1), ("c", 0)]
        pay = next(s for s in verdict["slices"] if s["name"] == "pay")
        # pay: a#0 (1.0), a#1 (0.5), b#0 (1.0), c#0 (0.25) -> mean 2.75 / 4; b#1 has no family
        assert pay["rows"] == 4 and pay["mean_f1"] == 2.75 / 4 and pay["min_f1"] == 0.25 and pay["failing_rows"] == 3

    def test_equals_the_rows_path_whatever_the_cuts(self):
        config = GateConfig(listed_rows=2)
        expected = by_rows(config, self.ROWS)
        for cuts in ([], [1], [2, 3], [1, 2, 3, 4]):
            assert by_tables(config, self.ROWS, cuts) == expected

    def test_each_rows_verdict(self):
        """The verdict each row stores (``gate_verdict``, ``gate_rules``), by hand: under the default gate a#0
        passes and every other row fails (see ROWS); with case b waived for missing_write and case c quarantined,
        b#0 is waived, b#1 still fails (its row_error is not waived) and c#0 is quarantined with the rule it would
        fail."""
        assert judged_by_tables(GateConfig(), self.ROWS)[1] == [
            ("pass", []), ("fail", ["reference_mismatch"]), ("fail", ["missing_write"]), ("fail", ["row_error"]),
            ("fail", ["reference_mismatch"])]
        config = GateConfig(waivers=[{"case": "b", "rule": "missing_write", "owner": "qa", "reason": "known",
                                      "expires": date(2027, 1, 1)}],
                            quarantine=[{"case": "c", "owner": "qa", "reason": "flaky"}])
        verdict, rows = judged_by_tables(config, self.ROWS, [2])
        assert rows == [("pass", []), ("fail", ["reference_mismatch"]), ("waived", ["missing_write"]),
                        ("fail", ["row_error"]), ("quarantined", ["reference_mismatch"])]
        # the gate's own counts agree: two rows fail (a#1, b#1), one is waived, one quarantined
        assert [verdict["counts"][k] for k in ("blocking_rows", "waived_rows", "quarantined_rows")] == [2, 1, 1]


CASES = ["a", "b", "c", "é", "(none)"]
RULES = ["missing_write", "tool_schema", "args_not_captured", "forbidden_tool", "row_error", "reference_mismatch",
         "missing_confirmation"]
assert set(RULES) <= set(GATE_RULES)

violations = st.one_of(st.none(), st.lists(st.fixed_dictionaries({
    "rule": st.sampled_from(RULES), "severity": st.sampled_from(["blocking", "advisory", None]),
    "tool": st.sampled_from([None, "t1", "t2"]), "detail": st.sampled_from([None, "why"])}), max_size=3))
columns = st.fixed_dictionaries({
    "slice": st.sampled_from([None, "", "s1", "s2"]),
    "violations": violations,
    "error_kind": st.sampled_from([None, None, None, "", "scoring_error"]),
    "error_message": st.sampled_from([None, "bad row"]),
    "missing_calls": st.sampled_from([None, [], [{"name": "refund", "args_json": "{}", "args_raw": None,
                                                  "parse_error": None}]]),
    "f1": st.one_of(st.none(), st.floats(0.0, 1.0, allow_nan=False), st.sampled_from([0.0, 1 / 3, 0.1])),
    "exact_match": st.sampled_from([None, True, False]),
    "calls_match": st.sampled_from([None, True, False]),
    "fp": st.sampled_from([None, 0, 1, 3]),
    "fn": st.sampled_from([None, 0, 2]),
    "tool_families": st.one_of(st.none(), st.lists(st.sampled_from(["x", "y", "(none)"]), max_size=3)),
    "name_only": st.sampled_from([None, False, True]),
    "match_mode": st.sampled_from([None, "unordered", "strict"]),
})


@st.composite
def runs(draw) -> tuple[GateConfig, list[dict], list[int]]:
    keys = draw(st.lists(st.tuples(st.sampled_from(CASES), st.integers(0, 4)), unique=True, max_size=40))
    rows = [{"case_id": case, "trial": trial, **draw(columns)} for case, trial in keys]
    waivers = draw(st.lists(st.fixed_dictionaries({
        "case": st.sampled_from([None, "a", "é"]), "rule": st.sampled_from([None, *RULES]),
        "expires": st.sampled_from([date(2026, 12, 1), date(2027, 1, 1)])}).filter(
            lambda w: w["case"] is not None or w["rule"] is not None), max_size=2))
    config = GateConfig(
        row_outcome=draw(st.sampled_from(["match", "no_blocking"])),
        severity=draw(st.dictionaries(st.sampled_from(RULES), st.sampled_from(["blocking", "advisory"]), max_size=2)),
        tool_schema={"blocking_tools": draw(st.lists(st.sampled_from(["t1", "t2"]), max_size=2))},
        row_errors_block=draw(st.booleans()),
        accept_name_only=draw(st.booleans()),
        waivers=[{**w, "owner": "qa", "reason": "known"} for w in waivers],
        quarantine=[{"case": c, "owner": "qa", "reason": "flaky"}
                    for c in draw(st.lists(st.sampled_from(["b", "c"]), max_size=1))],
        listed_rows=draw(st.integers(0, 5)),
        slices=draw(st.dictionaries(st.sampled_from(["s1", "s3"]), st.just({"min_rows": 2, "min_mean_f1": 0.5}),
                                    max_size=1)),
    )
    cuts = draw(st.lists(st.integers(0, len(rows)), max_size=4))
    return config, rows, cuts


@settings(max_examples=examples(300), deadline=None)
@given(runs())
def test_tables_judge_as_rows_do(run):
    config, rows, cuts = run
    verdict, per_row = judged_by_tables(config, rows, cuts)
    assert verdict == by_rows(config, rows)
    assert per_row == per_row_verdicts(config, rows)
    # the stored verdicts count what the gate counts: its failing rows are the rows stored as fail
    assert sum(v == "fail" for v, _ in per_row) == verdict["counts"]["blocking_rows"]


def test_judge_finds_the_rows_the_errors_name():
    # errors name (a, 1) and (b, 0) without a row, and (c, 0) that has one: the placeholders are for the first two
    # and for the scope's case "d" that has no row at all
    errors = [{"kind": "missing_trace", "case_id": case, "trial": trial, "message": "no trace"}
              for case, trial in (("a", 1), ("b", 0), ("c", 0))]
    scope = {"a": "s", "b": "s", "c": "s", "d": "s"}
    rows = [scored("a", 0), scored("c", 0)]
    judged = [judge_rows(batches, scope, errors, GateConfig()).to_dict()
              for batches in ([table(rows).to_pylist()], [table(rows)])]  # dicts, then an Arrow table
    assert judged[0] == judged[1]
    assert judged[1]["counts"]["unscored_cases"] == 3
    listed = sorted((o["case_id"], o["trial"], o["no_trial"]) for o in judged[1]["failing_rows"])
    assert listed == [("a", 1, False), ("b", 0, False), ("d", 0, True)]  # "d" has no trial at all
