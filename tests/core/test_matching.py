"""Duplicate-aware multiset matching (DESIGN.md "Scoring semantics": multiset matching, duplicate_calls, wrong
arguments). Every expected value is worked out by hand in the comment next to it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooleval.matching import f1_score, match_calls, optimal_pairs
from tooleval.models import Call


def call(name: str, raw) -> Call:
    return Call.from_raw(name, raw)


A = call("search", '{"q": "x"}')
B = call("lookup", '{"id": "A-1"}')
C = call("cancel", '{"id": "A-1"}')


def keys(calls: list[Call]) -> list[tuple[str, str | None]]:
    return [(c.name, c.args_json if not c.malformed else c.args_raw) for c in calls]


class TestMatchCalls:
    # ---- multiset semantics (handed case H01 and variants) ----

    def test_h01a_one_expected_three_made(self):
        # tp = min(1, 3) = 1; fp = 3 - 1 = 2; fn = 0; f1 = 2/(2+2+0) = 0.5; duplicates = 3 - max(1, 1) = 2
        r = match_calls([A], [A, A, A])
        assert (r.tp, r.fp, r.fn) == (1, 2, 0)
        assert r.f1 == 0.5
        assert r.precision == pytest.approx(1 / 3)
        assert r.recall == 1.0
        assert r.duplicate_calls == 2
        assert not r.exact_match
        assert r.mismatch_categories == ["extra", "duplicate"]
        assert keys(r.extra_calls) == [("search", '{"q":"x"}')] * 2

    def test_h01b_expected_twice_made_once(self):
        # tp 1, fp 0, fn 1: f1 = 2/(2+0+1) = 2/3; duplicates = max(0, 1 - 2) = 0
        r = match_calls([A, A], [A])
        assert (r.tp, r.fp, r.fn) == (1, 0, 1)
        assert r.f1 == pytest.approx(2 / 3)
        assert round(r.f1, 4) == 0.6667
        assert r.precision == 1.0
        assert r.recall == 0.5
        assert r.duplicate_calls == 0
        assert r.mismatch_categories == ["missing"]

    def test_h01c_expected_twice_made_twice(self):
        # tp 2: exact; a repeat that the reference asks for is not a duplicate: 2 - max(2, 1) = 0
        r = match_calls([A, A], [A, A])
        assert (r.tp, r.fp, r.fn) == (2, 0, 0)
        assert r.f1 == 1.0
        assert r.exact_match
        assert r.duplicate_calls == 0
        assert r.mismatch_categories == []

    def test_expected_twice_made_three_times(self):
        # tp 2, fp 1; duplicates = 3 - max(2, 1) = 1; f1 = 4/(4+1) = 0.8
        r = match_calls([A, A], [A, A, A])
        assert (r.tp, r.fp, r.fn, r.duplicate_calls) == (2, 1, 0, 1)
        assert r.f1 == 0.8

    def test_unexpected_call_repeated(self):
        # nothing expected, B twice: fp 2, duplicates = 2 - max(0, 1) = 1
        r = match_calls([], [B, B])
        assert (r.tp, r.fp, r.fn, r.duplicate_calls) == (0, 2, 0, 1)
        assert r.f1 == 0.0

    def test_duplicates_sum_over_keys(self):
        # A expected once made 3x -> 2; B not expected made 2x -> 1; C expected, made once -> 0; total 3
        # tp = 1 (A) + 1 (C) = 2; fp = 6 - 2 = 4; fn = 0; f1 = 4/(4+4) = 0.5
        r = match_calls([A, C], [A, B, A, C, B, A])
        assert r.duplicate_calls == 3
        assert (r.tp, r.fp, r.fn) == (2, 4, 0)
        assert r.f1 == 0.5

    def test_order_does_not_matter_for_counts(self):
        r1 = match_calls([A, B, C], [C, B, A])
        assert (r1.tp, r1.fp, r1.fn) == (3, 0, 0)
        assert r1.exact_match

    def test_canonical_args_match(self):
        # key order and 250.0 vs 250 do not matter; true vs 1 and "10" vs 10 do
        expected = [call("refund", {"order_id": "A", "amount": 250}), call("flag", {"on": 1}), call("qty", {"n": 10})]
        observed = [
            call("refund", '{"amount": 250.0, "order_id": "A"}'),
            call("flag", '{"on": true}'),
            call("qty", '{"n": "10"}'),
        ]
        r = match_calls(expected, observed)
        # tp 1 (refund), fp 2, fn 2: f1 = 2/(2+2+2) = 1/3
        assert (r.tp, r.fp, r.fn) == (1, 2, 2)
        assert r.f1 == pytest.approx(1 / 3)

    # ---- f1 / precision / recall ----

    def test_both_empty_is_a_correct_abstention(self):
        r = match_calls([], [])
        assert (r.tp, r.fp, r.fn) == (0, 0, 0)
        assert r.f1 == 1.0
        assert r.precision is None
        assert r.recall is None
        assert r.exact_match
        assert r.mismatch_categories == []

    def test_nothing_expected_one_call(self):
        # H03: precision = 0/1 = 0.0; recall has denominator 0 -> None; f1 = 0/(0+1+0) = 0.0
        r = match_calls([], [B])
        assert (r.tp, r.fp, r.fn) == (0, 1, 0)
        assert r.precision == 0.0
        assert r.recall is None
        assert r.f1 == 0.0
        assert r.mismatch_categories == ["extra"]

    def test_expected_call_nothing_made(self):
        r = match_calls([B], [])
        assert (r.tp, r.fp, r.fn) == (0, 0, 1)
        assert r.precision is None
        assert r.recall == 0.0
        assert r.f1 == 0.0
        assert r.mismatch_categories == ["missing"]
        assert keys(r.missing_calls) == [("lookup", '{"id":"A-1"}')]

    @pytest.mark.parametrize(
        ("tp", "fp", "fn", "right"),
        [(0, 0, 0, 1.0), (1, 0, 0, 1.0), (1, 2, 0, 0.5), (1, 0, 1, 2 / 3), (0, 1, 1, 0.0), (3, 1, 2, 6 / 9)],
    )
    def test_f1_score(self, tp, fp, fn, right):
        assert f1_score(tp, fp, fn) == pytest.approx(right)

    def test_f1_is_unrounded(self):
        assert match_calls([A, A], [A]).f1 == 2 / 3

    # ---- malformed calls ----

    def test_two_identical_malformed_calls_nothing_expected(self):
        # key (name, raw text) twice, expected 0: duplicates = 2 - max(0, 1) = 1
        m = call("lookup", "[1, 2]")
        r = match_calls([], [m, call("lookup", "[1, 2]")])
        assert (r.tp, r.fp, r.fn) == (0, 2, 0)
        assert r.malformed_calls == 2
        assert r.duplicate_calls == 1
        assert r.mismatch_categories == ["extra", "duplicate", "malformed"]

    def test_malformed_calls_with_different_raw_text_are_not_duplicates(self):
        r = match_calls([], [call("lookup", "[1, 2]"), call("lookup", "[1,2]")])
        assert r.duplicate_calls == 0
        assert r.malformed_calls == 2

    def test_malformed_calls_of_different_tools_are_not_duplicates(self):
        r = match_calls([], [call("lookup", "[1]"), call("cancel", "[1]")])
        assert r.duplicate_calls == 0

    def test_malformed_call_matches_nothing_and_is_never_paired(self):
        # H09b: expected handoff({}), observed handoff with list text -> fn 1, fp 1, no wrong_args pair
        r = match_calls([call("handoff", {})], [call("handoff", "[1, 2]")])
        assert (r.tp, r.fp, r.fn) == (0, 1, 1)
        assert r.wrong_args == []
        assert r.malformed_calls == 1
        assert r.mismatch_categories == ["missing", "extra", "malformed"]
        assert r.extra_calls[0].args_raw == "[1, 2]"
        assert r.extra_calls[0].args is None  # never turned into {}

    def test_truncated_call_is_malformed_not_empty(self):
        # H09c: a truncated text is not {} even when {} is expected
        r = match_calls([call("lookup", {})], [call("lookup", '{"id": "A-1"')])
        assert (r.tp, r.fp, r.fn, r.malformed_calls) == (0, 1, 1, 1)

    def test_malformed_call_beside_a_pairable_call(self):
        # expected lookup(id=A-1); observed lookup(id=A-2) and a malformed lookup: only the well-formed one pairs
        r = match_calls([B], [call("lookup", "{"), call("lookup", '{"id": "A-2"}')])
        assert (r.tp, r.fp, r.fn) == (0, 2, 1)
        assert [(w.name, w.paths, w.observed.args) for w in r.wrong_args] == [("lookup", ["id"], {"id": "A-2"})]
        assert r.mismatch_categories == ["missing", "extra", "wrong_args", "malformed"]

    # ---- wrong arguments ----

    def test_wrong_args_counts_as_one_fn_and_one_fp(self):
        # H04: get_order matches; issue_refund 9800 vs 8900 -> tp 1, fp 1, fn 1; f1 = 2/(2+1+1) = 0.5
        expected = [call("get_order", {"order_id": "A-104"}), call("issue_refund", {"order_id": "A-104", "amount_cents": 9800})]
        observed = [call("get_order", '{"order_id": "A-104"}'), call("issue_refund", '{"order_id": "A-104", "amount_cents": 8900}')]
        r = match_calls(expected, observed)
        assert (r.tp, r.fp, r.fn) == (1, 1, 1)
        assert r.f1 == 0.5
        assert [(w.name, w.paths) for w in r.wrong_args] == [("issue_refund", ["amount_cents"])]
        assert r.wrong_args[0].to_record() == {
            "name": "issue_refund",
            "expected_args_json": '{"amount_cents":9800,"order_id":"A-104"}',
            "observed_args_json": '{"amount_cents":8900,"order_id":"A-104"}',
            "paths": ["amount_cents"],
        }
        # the paired calls are still listed as missing and extra
        assert keys(r.missing_calls) == [("issue_refund", '{"amount_cents":9800,"order_id":"A-104"}')]
        assert keys(r.extra_calls) == [("issue_refund", '{"amount_cents":8900,"order_id":"A-104"}')]
        assert r.mismatch_categories == ["missing", "extra", "wrong_args"]

    def test_pairing_only_within_the_same_tool(self):
        # same args, other tool: missing + extra, no pair
        r = match_calls([call("lookup", {"id": "A-1"})], [call("cancel", '{"id": "A-1"}')])
        assert r.wrong_args == []
        assert (r.fp, r.fn) == (1, 1)
        assert r.mismatch_categories == ["missing", "extra"]

    def test_pairing_across_several_tools(self):
        # lookup pairs with lookup, cancel with cancel, never crosswise
        expected = [call("lookup", {"id": "1"}), call("cancel", {"id": "1"})]
        observed = [call("cancel", '{"id": "2"}'), call("lookup", '{"id": "3"}')]
        r = match_calls(expected, observed)
        assert [(w.name, w.expected.args, w.observed.args) for w in r.wrong_args] == [
            ("lookup", {"id": "1"}, {"id": "3"}),
            ("cancel", {"id": "1"}, {"id": "2"}),
        ]

    def test_more_observed_than_expected_of_a_tool(self):
        # one expected lookup, two wrong observed lookups: one pair (the closer one), the other is only extra
        r = match_calls(
            [call("lookup", {"id": "A-1", "x": 1})],
            [call("lookup", '{"id": "B", "x": 2}'), call("lookup", '{"id": "B", "x": 1}')],
        )
        assert (r.tp, r.fp, r.fn) == (0, 2, 1)
        assert [(w.observed.args, w.paths) for w in r.wrong_args] == [({"id": "B", "x": 1}, ["id"])]

    def test_pairing_is_optimal_not_greedy(self):
        # E1 = (a,b,c,d,e) = (1,0,0,0,0), E2 = (0,0,0,1,1); O1 = (0,0,0,0,0), O2 = (1,1,1,0,0)
        # cost E1-O1 = 1 (a), E1-O2 = 2 (b,c), E2-O1 = 2 (d,e), E2-O2 = 5 (a,b,c,d,e)
        # greedy (E1 takes its closest O1) totals 1 + 5 = 6; optimal E1-O2, E2-O1 totals 2 + 2 = 4
        def f(a, b, c, d, e):
            return {"a": a, "b": b, "c": c, "d": d, "e": e}

        expected = [call("f", f(1, 0, 0, 0, 0)), call("f", f(0, 0, 0, 1, 1))]
        o1, o2 = call("f", json.dumps(f(0, 0, 0, 0, 0))), call("f", json.dumps(f(1, 1, 1, 0, 0)))
        for observed in ([o1, o2], [o2, o1]):
            r = match_calls(expected, observed)
            got = [(w.expected.args, w.observed.args, w.paths) for w in r.wrong_args]
            assert got == [
                (f(1, 0, 0, 0, 0), f(1, 1, 1, 0, 0), ["b", "c"]),
                (f(0, 0, 0, 1, 1), f(0, 0, 0, 0, 0), ["d", "e"]),
            ]
            assert sum(len(w.paths) for w in r.wrong_args) == 4
            assert (r.tp, r.fp, r.fn) == (0, 2, 2)

    def test_nested_wrong_args_path(self):
        expected = [call("update_flights", {"flights": [{"date": "2024-05-01", "no": "HAT1"}]})]
        observed = [call("update_flights", '{"flights": [{"no": "HAT1", "date": "2024-05-02"}]}')]
        assert [w.paths for w in match_calls(expected, observed).wrong_args] == [["flights[0].date"]]

    def test_null_vs_absent_is_a_wrong_argument(self):
        # H08
        r = match_calls([A], [call("search", '{"q": "x", "status": null}')])
        assert [(w.name, w.paths) for w in r.wrong_args] == [("search", ["status"])]
        assert r.f1 == 0.0

    # ---- missing / extra lists and categories ----

    def test_missing_calls_keep_reference_order(self):
        d = call("refund", {"id": "A-1"})
        r = match_calls([C, A, B, d], [A])
        assert keys(r.missing_calls) == [
            ("cancel", '{"id":"A-1"}'),
            ("lookup", '{"id":"A-1"}'),
            ("refund", '{"id":"A-1"}'),
        ]

    def test_extra_calls_keep_trajectory_order(self):
        r = match_calls([A], [C, A, B, A])
        # the first A is the matched one; C, B and the second A are extra, in the order they were made
        assert keys(r.extra_calls) == [("cancel", '{"id":"A-1"}'), ("lookup", '{"id":"A-1"}'), ("search", '{"q":"x"}')]

    def test_h05_receipt_sent_twice(self):
        # expected get_invoice, send_invoice; send_invoice made twice: tp 2, fp 1, fn 0, duplicates 1
        get, send = call("get_invoice", {"invoice_id": "INV-7"}), call("send_invoice", {"invoice_id": "INV-7"})
        r = match_calls([get, send], [get, send, call("send_invoice", '{"invoice_id": "INV-7"}')])
        assert (r.tp, r.fp, r.fn, r.duplicate_calls) == (2, 1, 0, 1)
        assert r.mismatch_categories == ["extra", "duplicate"]
        assert r.f1 == 0.8  # 4 / (4 + 1)

    def test_all_categories_at_once(self):
        # expected A, B; observed lookup(id=A-2) (wrong args for B), C twice (extra + duplicate), a malformed call
        r = match_calls([A, B], [call("lookup", '{"id": "A-2"}'), C, C, call("search", "{")])
        assert r.mismatch_categories == ["missing", "extra", "wrong_args", "duplicate", "malformed"]
        # tp 0, fp 4, fn 2; duplicates: C 2 - 1 = 1
        assert (r.tp, r.fp, r.fn, r.duplicate_calls, r.malformed_calls) == (0, 4, 2, 1, 1)
        assert r.f1 == 0.0


_COSTS = st.integers(1, 6).flatmap(lambda rows: st.integers(1, 6).flatmap(
    lambda cols: st.lists(st.lists(st.integers(0, 3), min_size=cols, max_size=cols), min_size=rows, max_size=rows)))


@settings(max_examples=1000, deadline=None)
@given(_COSTS)
def test_optimal_pairs_are_scipy_s_assignment(costs):
    # a single row or column is paired without scipy; the rows must not change for it, so every matrix (ties
    # and all: scipy takes the first cheapest of a single row or column) gives scipy's own pairs
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(np.array(costs, dtype=float))
    assert optimal_pairs(costs) == list(zip(rows.tolist(), cols.tolist()))


@pytest.mark.parametrize(("costs", "pairs"), [
    ([[2]], [(0, 0)]),
    ([[3, 1, 2]], [(0, 1)]),  # the one cheapest column
    ([[3], [0], [2]], [(1, 0)]),  # the one cheapest row
    ([[1, 0, 0]], [(0, 1)]),  # equal costs: the first, as scipy chooses
    ([[0], [0]], [(0, 0)]),
    ([[1, 0], [0, 1]], [(0, 1), (1, 0)]),  # total 0, not 2
])
def test_optimal_pairs_by_hand(costs, pairs):
    assert optimal_pairs(costs) == pairs


@settings(max_examples=500, deadline=None)
@given(_COSTS)
def test_the_solver_loaded_alone_is_scipy_s(costs):
    # the compiled module loaded without the scipy.optimize package answers as the package's function does
    from scipy.optimize import linear_sum_assignment

    from tooleval.matching import _lsap_alone

    alone = _lsap_alone()
    assert alone is not None  # this scipy's layout has the module: the fast load is taken
    matrix = np.array(costs, dtype=float)
    assert [a.tolist() for a in alone(matrix)] == [a.tolist() for a in linear_sum_assignment(matrix)]


def test_a_larger_assignment_does_not_import_scipy_optimize():
    # importing scipy.optimize costs ~0.7 s per worker; the assignment needs one compiled module of it only
    import subprocess
    import sys

    code = ("import sys; from tooleval.matching import optimal_pairs; "
            "print(optimal_pairs([[1, 0], [0, 1]]), 'scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[(0,", "1),", "(1,", "0)]", "False"]  # total cost 0: row 0 takes column 1
