"""Characterization of ragas 0.4.3's own ToolCallF1, and of tooleval's wrapper around it (DESIGN.md "ragas column").

ragas is called directly here, not through tooleval: these tests pin what ragas itself does (set semantics,
two empty lists score 0.0, Python equality of argument values, rounding to 4 decimals), so that an upgrade that
changes any of it fails loudly instead of moving the ``ragas_tool_call_f1`` column silently. The second half
checks that ``tooleval.scoring.ragas_metric`` hands rows to ragas so that it returns the same values.

ragas 0.4.3 (ragas/metrics/collections/tool_call_f1): expected and observed calls become *sets* of
``(name, frozenset(args))``; tp = |obs & ref|, fp = |obs - ref|, fn = |ref - obs|; precision and recall are 0.0
when their denominator is 0; f1 = 2PR/(P+R) (0.0 when P+R = 0); the result is ``round(f1, 4)``.
"""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version

import pytest

from tooleval.models import Call, Case, calls_from_messages
from tooleval.scoring.ragas_metric import ragas_args, ragas_tool_call_f1, ragas_tool_call_f1_many, ragas_version
from tooleval.scoring.rows import score_envelopes


def _ragas(reference: list[tuple[str, dict]], observed: list[tuple[str, dict]]) -> float:
    """ragas' own ToolCallF1 for one row: one assistant message carrying every observed call."""
    from ragas.messages import AIMessage, ToolCall
    from ragas.metrics.collections import ToolCallF1

    metric = ToolCallF1()
    message = AIMessage(content="", tool_calls=[ToolCall(name=n, args=a) for n, a in observed])
    result = asyncio.run(
        metric.ascore(user_input=[message], reference_tool_calls=[ToolCall(name=n, args=a) for n, a in reference])
    )
    return result.value


def _wrapper(reference: list[tuple[str, dict]], observed: list[tuple[str, dict]]) -> float:
    """The same row through tooleval's wrapper (``{"name", "args"}`` dicts)."""
    return ragas_tool_call_f1(
        [{"name": n, "args": a} for n, a in reference],
        [{"name": n, "args": a} for n, a in observed],
    )


A = ("search", {"q": "x"})
B = ("lookup", {"id": "A-1"})
C = ("lookup", {"id": "A-2"})
D = ("cancel", {"id": "A-1"})

# (id, reference, observed, right value computed by hand from ragas' set formula)
CHARACTERIZATION = [
    # set semantics: {A} vs {A}: tp 1, fp 0, fn 0 -> 1.0 (tooleval's multiset f1 would be 0.5)
    ("duplicates_collapse", [A], [A, A, A], 1.0),
    # reference [A, A] is the set {A}: 1.0 (tooleval's multiset f1 would be 0.6667)
    ("reference_duplicates_collapse", [A, A], [A], 1.0),
    # both empty: P = R = 0.0 -> 0.0 (tooleval says 1.0: a correct abstention)
    ("both_empty", [], [], 0.0),
    # nothing expected, one call: tp 0 -> 0.0
    ("nothing_expected_one_call", [], [A], 0.0),
    # expected one call, none made: 0.0
    ("nothing_called", [A], [], 0.0),
    # Python equality inside a frozenset: True == 1 and hash(True) == hash(1) -> match
    ("true_equals_one", [("set_flag", {"on": 1})], [("set_flag", {"on": True})], 1.0),
    # 10 == 10.0 and hash(10) == hash(10.0) -> match
    ("int_equals_float", [("set_qty", {"n": 10})], [("set_qty", {"n": 10.0})], 1.0),
    # "10" != 10 -> no match
    ("string_is_not_number", [("set_qty", {"n": 10})], [("set_qty", {"n": "10"})], 0.0),
    # nested key order does not matter (dict -> frozenset)
    ("nested_key_order", [("book", {"trip": {"from": "X", "to": "Y"}})], [("book", {"trip": {"to": "Y", "from": "X"}})], 1.0),
    # list order matters (list -> tuple)
    ("list_order", [("ex", {"ids": ["i1", "i2"]})], [("ex", {"ids": ["i2", "i1"]})], 0.0),
    # null is not an absent key
    ("null_vs_absent", [("search", {"q": "x"})], [("search", {"q": "x", "status": None})], 0.0),
    # same args, other name: no match
    ("name_differs", [("lookup", {"id": "A-1"})], [("cancel", {"id": "A-1"})], 0.0),
    # tp 1, fp 2, fn 0: P = 1/3, R = 1 -> 2*(1/3)/(4/3) = 0.5
    ("tp1_fp2_fn0", [A], [A, B, C], 0.5),
    # tp 1, fp 0, fn 1: P = 1, R = 1/2 -> 2*(1/2)/(3/2) = 2/3 = 0.666666... -> 0.6667 (rounds up)
    ("two_thirds", [A, B], [A], 0.6667),
    # tp 1, fp 2, fn 3: P = 1/3, R = 1/4 -> 2*(1/12)/(7/12) = 2/7 = 0.285714... -> 0.2857 (rounds down)
    ("two_sevenths", [A, B, C, D], [A, ("x", {}), ("y", {})], 0.2857),
    # the duplicate A collapses: tp 1, fp 1 (B), fn 1 (C): P = R = 1/2 -> 0.5
    ("duplicates_collapse_mixed", [A, C], [A, A, B], 0.5),
]


@pytest.mark.parametrize(
    ("reference", "observed", "right"),
    [case[1:] for case in CHARACTERIZATION],
    ids=[case[0] for case in CHARACTERIZATION],
)
def test_ragas_tool_call_f1_characterization(reference, observed, right):
    assert _ragas(reference, observed) == right


@pytest.mark.parametrize(
    ("reference", "observed", "right"),
    [case[1:] for case in CHARACTERIZATION],
    ids=[case[0] for case in CHARACTERIZATION],
)
def test_wrapper_gives_ragas_values(reference, observed, right):
    assert _wrapper(reference, observed) == right


def test_ragas_rounds_to_four_decimals_exactly():
    value = _ragas([A, B], [A])
    assert value == 0.6667
    assert value != 2 / 3
    assert isinstance(value, float)


def test_ragas_version_is_pinned():
    assert version("ragas") == "0.4.3"
    assert ragas_version() == "0.4.3"


def test_h21_ragas_collections_imports():
    import ragas.metrics.collections as collections

    assert inspect.isclass(collections.ToolCallF1)


def test_wrapper_many_keeps_row_order():
    pairs = [
        ([{"name": n, "args": a} for n, a in reference], [{"name": n, "args": a} for n, a in observed])
        for _, reference, observed, _ in CHARACTERIZATION
    ]
    assert ragas_tool_call_f1_many(pairs) == [right for *_, right in CHARACTERIZATION]


def test_wrapper_many_empty_input():
    assert ragas_tool_call_f1_many([]) == []


class TestRagasArgs:
    def test_malformed_call_is_passed_with_its_raw_text(self):
        call = Call.from_raw("lookup", '{"id": "A-1"')
        assert call.malformed
        assert ragas_args(call) == {"__malformed__": '{"id": "A-1"'}

    def test_list_text_is_malformed_for_ragas_too(self):
        assert ragas_args(Call.from_raw("handoff", "[1, 2]")) == {"__malformed__": "[1, 2]"}

    def test_well_formed_call_passes_its_args(self):
        assert ragas_args(Call.from_raw("lookup", '{"id": "A-1", "n": 2}')) == {"id": "A-1", "n": 2}

    def test_non_integral_float_reaches_ragas_as_a_float(self):
        call = Call.from_raw("pay", '{"amount": 2.5, "n": 3.0, "nested": {"rate": 0.1}}')
        args = ragas_args(call)
        assert args == {"amount": 2.5, "n": 3, "nested": {"rate": 0.1}}
        assert type(args["amount"]) is float
        got = ragas_tool_call_f1(
            [{"name": "pay", "args": {"amount": 2.5, "n": 3, "nested": {"rate": 0.1}}}],
            [{"name": "pay", "args": args}],
        )
        assert got == 1.0

    def test_empty_text_is_empty_args(self):
        assert ragas_args(Call.from_raw("handoff", "")) == {}

    def test_true_still_equals_one_for_ragas_after_parsing(self):
        # tooleval keeps True a bool; ragas' own equality then makes it match 1 (handed case H06c).
        observed = Call.from_raw("set_flag", '{"on": true}')
        reference = Call.from_raw("set_flag", {"on": 1})
        got = ragas_tool_call_f1(
            [{"name": reference.name, "args": ragas_args(reference)}],
            [{"name": observed.name, "args": ragas_args(observed)}],
        )
        assert got == 1.0

    def test_float_text_matches_int_reference(self):
        observed = Call.from_raw("set_qty", '{"n": 10.0}')
        got = ragas_tool_call_f1([{"name": "set_qty", "args": {"n": 10}}], [{"name": "set_qty", "args": ragas_args(observed)}])
        assert got == 1.0


def _scored_row(expected_calls: list[dict], tool_calls: list[dict]) -> dict:
    case = Case(case_id="c1", input="", expected_calls=expected_calls)
    calls = calls_from_messages([{"role": "assistant", "content": "", "tool_calls": tool_calls}])
    envelope = {
        "dataset_revision": "t",
        "case_id": "c1",
        "trial": 0,
        "model_calls": [c.to_record() for c in calls],
        "metadata_json": "{}",
        "trace_digest": "x",
        "error": None,
    }
    return score_envelopes({"c1": case}, [envelope])[0]


def _tc(name: str, arguments: str) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


class TestMalformedInScoredRows:
    def test_two_identical_malformed_calls_are_one_call_to_ragas(self):
        # ragas sees {search(q=x), lookup({"__malformed__": "[1"})}: tp 1, fp 1, fn 0 -> P 1/2, R 1 -> 0.6667.
        # Were the two malformed calls distinct to ragas: fp 2 -> P 1/3 -> 0.5.
        row = _scored_row(
            [{"name": "search", "args": {"q": "x"}}],
            [_tc("search", '{"q": "x"}'), _tc("lookup", "[1"), _tc("lookup", "[1")],
        )
        assert row["ragas_tool_call_f1"] == 0.6667
        # tooleval's own multiset view: tp 1, fp 2 -> f1 = 2/(2+2) = 0.5
        assert row["malformed_calls"] == 2
        assert row["fp"] == 2
        assert row["f1"] == 0.5

    def test_two_different_malformed_calls_are_two_calls_to_ragas(self):
        # tp 1, fp 2 (two distinct raw texts), fn 0 -> 0.5
        row = _scored_row(
            [{"name": "search", "args": {"q": "x"}}],
            [_tc("search", '{"q": "x"}'), _tc("lookup", "[1"), _tc("lookup", "[2")],
        )
        assert row["ragas_tool_call_f1"] == 0.5

    def test_malformed_call_matches_nothing_in_ragas(self):
        # expected handoff({}), observed handoff with list text: ragas sees {"__malformed__": "[1, 2]"} != {} -> 0.0
        row = _scored_row([{"name": "handoff", "args": {}}], [_tc("handoff", "[1, 2]")])
        assert row["ragas_tool_call_f1"] == 0.0

    def test_scored_row_equals_ragas_called_directly(self):
        # the same row given to ragas directly, malformed call in the documented form
        row = _scored_row(
            [{"name": "search", "args": {"q": "x"}}, {"name": "set_flag", "args": {"on": 1}}],
            [_tc("search", '{"q": "x"}'), _tc("set_flag", '{"on": true}'), _tc("lookup", '{"id":')],
        )
        direct = _ragas(
            [("search", {"q": "x"}), ("set_flag", {"on": 1})],
            [("search", {"q": "x"}), ("set_flag", {"on": True}), ("lookup", {"__malformed__": '{"id":'})],
        )
        # tp 2, fp 1, fn 0: P 2/3, R 1 -> 2*(2/3)/(5/3) = 0.8
        assert direct == 0.8
        assert row["ragas_tool_call_f1"] == direct


_PROVIDER_PROBE = """
import sys
from tooleval.scoring.ragas_metric import hide_provider_sdks, import_ragas_metric, ragas_tool_call_f1
if {hide}:
    hide_provider_sdks()
import_ragas_metric()
loaded = ('anthropic' in sys.modules, 'google.genai' in sys.modules, 'instructor' in sys.modules)
value = ragas_tool_call_f1([{{'name': 'a', 'args': {{'x': 1}}}}], [{{'name': 'a', 'args': {{'x': 1}}}}, {{'name': 'b', 'args': {{}}}}])
import anthropic  # shown again once ragas is imported
print(*loaded, value, sys.modules['anthropic'] is not None)
"""


@pytest.mark.parametrize("hide, expected", [(True, "False False True 0.6667 True"),
                                            (False, "True True True 0.6667 True")])
def test_ragas_without_the_model_providers_sdks(hide, expected):
    """A process of tooleval's own (a pool worker, the command) imports ragas without the model providers' SDKs
    that instructor registers when they are installed (anthropic and google-genai are, as the importers' test
    producers): ToolCallF1 gives the same value, and ``import anthropic`` still works afterwards. Without
    ``hide_provider_sdks`` (a caller's process) ragas imports them as it always does.

    ToolCallF1 by hand: reference {a(x=1)}, observed {a(x=1), b()}: precision 1/2, recall 1, F1 = 2/3 -> 0.6667."""
    import subprocess
    import sys

    pytest.importorskip("anthropic")
    pytest.importorskip("google.genai")
    done = subprocess.run([sys.executable, "-c", _PROVIDER_PROBE.format(hide=hide)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.split()[-5:] == expected.split()
