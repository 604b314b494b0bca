"""The scoring stage's per-shard memos give the rows the plain path gives: a case's shared references and sets
kept across batches (:class:`tooleval.scoring.rows.ShardMemo`), observed calls read once per shard, the case-input
map built only for a request that is not its case's own, wrong-argument paths kept per pair of argument texts, and
ragas' reference set built once per case."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import BUNDLED
from tooleval.canonical import diff_paths
from tooleval.capture.envelope import build_envelope, envelope_calls
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import load_dataset
from tooleval.models import ArgumentRule, Call, RecordedTrace, with_rules
from tooleval.rules import ToolTable, load_policy
from tooleval.matching import call_diff_paths
from tooleval.scoring.ragas_f1 import ragas_call_set, ragas_set_f1, ragas_set_f1_of_sets
from tooleval.scoring import CallRegistry
from tooleval.scoring.rows import ShardMemo, case_inputs, score_envelopes, score_rows

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)

_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([0.5, 1.0, -0.0, 2.25]) \
    | st.sampled_from(["", "a", "b", "ORD-1"])
_ARGS = st.dictionaries(st.sampled_from(["a", "b", "c", "x-y", "d.e"]), st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b"]), inner,
                                                                          max_size=2), max_leaves=6), max_size=4)


def _bundled():
    loaded = load_dataset(BUNDLED)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), loaded.revision, AT)
                 for line in iter_trace_lines(BUNDLED / "traces.jsonl.gz")]
    return loaded, envelopes


def _options(loaded):
    return {"tools": ToolTable(loaded.tools), "policy": load_policy(loaded.path)}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "put"]), _ARGS), min_size=1, max_size=6))
def test_calls_read_once_per_shard_are_the_envelope_s_calls(calls):
    # repeated (name, arguments) pairs come from the shard's registry: the same calls as reading each record anew
    records = [Call.from_raw(name, args).to_record() for name, args in calls]
    records += [{"name": "put", "args_json": None, "args_raw": "{oops", "parse_error": "not JSON"},
                {"name": "get", "args_json": None, "args_raw": None, "parse_error": None}]
    registry = CallRegistry()

    def read() -> list[int]:
        return [registry.canonical(r["name"], r["args_json"]) if r["parse_error"] is None and r["args_json"]
                else registry.add(Call.from_record(r)) for r in records]

    first, again = read(), read()
    plain = envelope_calls({"model_calls": records}, written_here=True)
    assert first == again
    assert [registry.calls[i] for i in again] == plain
    assert [registry.calls[i].key for i in again] == [c.key for c in plain]
    assert [registry.records[i] for i in again] == records
    assert len(registry.calls) == len({c.key for c in plain})


def test_a_call_of_another_tool_with_the_same_arguments_is_another_call():
    registry = CallRegistry()
    text = Call.from_raw("get", {"id": 1}).args_json
    a, b = registry.canonical("get", text), registry.canonical("put", text)
    assert a != b and (registry.calls[a].name, registry.calls[b].name) == ("get", "put")


def test_a_reference_call_s_own_rules_do_not_reach_an_observed_call_of_its_key():
    registry = CallRegistry()
    ruled = with_rules(Call.from_raw("get", {"id": 1}), {"id": ArgumentRule(tolerance=1)})
    first = registry.reference(ruled)
    assert registry.canonical("get", ruled.args_json) == first
    assert registry.calls[first].argument_rules is None


@settings(max_examples=500, deadline=None)
@given(_ARGS, _ARGS, _ARGS)
def test_kept_wrong_argument_paths_are_diff_paths(expected, observed, other):
    e, o, x = (Call.from_raw("t", args) for args in (expected, observed, other))
    for _ in range(2):  # the second time from the memo
        assert call_diff_paths(e, o) == diff_paths(e.args, o.args)
        assert call_diff_paths(e, x) == diff_paths(e.args, x.args)
        assert call_diff_paths(x, o) == diff_paths(x.args, o.args)


def test_kept_paths_are_a_copy():
    e, o = Call.from_raw("t", {"a": 1}), Call.from_raw("t", {"a": 2})
    call_diff_paths(e, o).append("changed")
    assert call_diff_paths(e, o) == ["a"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["f", "g"]), _ARGS), max_size=4),
       st.lists(st.tuples(st.sampled_from(["f", "g"]), _ARGS), max_size=4))
def test_the_f1_of_call_sets_is_ragas_set_f1(expected, observed):
    e = [{"name": n, "args": a} for n, a in expected]
    o = [{"name": n, "args": a} for n, a in observed]
    assert ragas_set_f1_of_sets(ragas_call_set(e), ragas_call_set(o)) == ragas_set_f1(e, o)


def test_rows_scored_in_batches_with_one_memo_are_the_rows_scored_at_once():
    # the bundled 200 rows: 50 cases, four trials each, so each batch of 7 meets cases seen in earlier batches
    loaded, envelopes = _bundled()
    whole = score_envelopes(loaded.cases, envelopes, **_options(loaded))
    memo = ShardMemo()
    batched = [row.record() for start in range(0, len(envelopes), 7)
               for row in score_rows(loaded.cases, envelopes[start:start + 7], memo=memo, **_options(loaded))]
    assert batched == whole
    assert len(memo.cases) == 50


def test_the_whole_input_map_is_built_only_for_a_request_not_its_case_s_own():
    loaded, envelopes = _bundled()
    # the bundled traces record no request: each is given its own case's input as its recorded request
    envelopes = [dict(e, request_messages_json=json.dumps(loaded.cases[e["case_id"]].input)) for e in envelopes]
    given = score_envelopes(loaded.cases, envelopes, inputs=case_inputs(loaded.cases, None), digests_verified=True,
                            **_options(loaded))
    asked = []

    def lazy():
        asked.append(1)
        return case_inputs(loaded.cases, None)

    # (digests taken as verified: the changed envelopes' digests would be each row's mismatch before the inputs)
    assert score_envelopes(loaded.cases, envelopes, inputs=lazy, digests_verified=True, **_options(loaded)) == given
    assert {row["provenance_status"] for row in given} == {"missing"}  # matched, but no response id recorded
    assert {row["provenance_detail"] for row in given} == {"no provider response id recorded"}
    assert asked == []  # every request is its own case's input
    # a trace of case 3 recorded as case 4's: the whole map names case 3 as the request's owner
    swapped = [dict(envelopes[12], case_id="4")]
    assert envelopes[12]["case_id"] == "3"
    lazy_rows = score_envelopes(loaded.cases, swapped, inputs=lazy, digests_verified=True, **_options(loaded))
    given_rows = score_envelopes(loaded.cases, swapped, inputs=case_inputs(loaded.cases, None),
                                 digests_verified=True, **_options(loaded))
    assert lazy_rows == given_rows and asked == [1]
    assert lazy_rows[0]["provenance_status"] == "mismatch"
    assert lazy_rows[0]["provenance_detail"].startswith("the trace answers case 3's request")


def test_a_match_result_set_at_once_is_the_constructed_one():
    from tooleval.matching import MatchResult
    from tooleval.scoring._table import _match_result

    missing, extra = [Call.from_plain_args("refund", {"id": "A"})], [Call.from_plain_args("lookup", {})]
    # 1 of 2 observed and 1 of 2 expected calls match: precision = recall = 1/2, f1 = 2*1 / (2*1 + 1 + 1) = 1/2
    values = (1, 1, 1, 0.5, 0.5, 0.5, False, 0, 0, missing, extra, [], ["missing", "extra"])
    made = _match_result(*values)
    assert made == MatchResult(*values)
    assert repr(made) == repr(MatchResult(*values))
    assert made.f1 == 0.5 and made.missing_calls is missing and made.mismatch_categories == ["missing", "extra"]
