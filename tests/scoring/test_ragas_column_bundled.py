"""The ragas column on every bundled row equals ragas' own ToolCallF1, computed without tooleval's code path.

The independent side reads ``cases.jsonl`` and ``traces.jsonl.gz`` with json/gzip, builds ``ragas.messages``
objects straight from ``json.loads(function.arguments)`` of every assistant tool call (empty text -> ``{}``) and
the case's ``expected_calls`` args, and calls ragas' ``ascore``. The tooleval side is
``build_envelope`` + ``score_envelopes`` (the core; no Prefect). Both are ragas' rounded outputs, so they must
be equal exactly, row by row.

The second half checks the bundled figures measured on the source file (../shared/data/README.md, tau-bench
section): 200 runs, 632 expected and 1,164 observed calls, 12 exact matches, 124 runs with a missing call, 162
with an extra call, 16 repeating an identical call, 18 with no call at all.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from datetime import datetime, timezone

import pytest

from tests.support.paths import BUNDLED
from tooleval.capture.envelope import build_envelope
from tooleval.models import Case, RecordedTrace
from tooleval.scoring.rows import score_envelopes

CAPTURED_AT = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _read_jsonl(path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def raw_cases() -> dict[str, dict]:
    return {case["case_id"]: case for case in _read_jsonl(BUNDLED / "cases.jsonl")}


@pytest.fixture(scope="module")
def raw_traces() -> list[dict]:
    return _read_jsonl(BUNDLED / "traces.jsonl.gz")


def _observed_tool_calls(trace: dict) -> list[tuple[str, dict]]:
    calls = []
    for message in trace["messages"]:
        if message.get("role") != "assistant":
            continue
        for tool_call in message.get("tool_calls") or []:
            function = tool_call["function"]
            text = function["arguments"]
            args = {} if text.strip() == "" else json.loads(text)
            assert isinstance(args, dict), (trace["case_id"], trace["trial"], text)  # no malformed call here
            calls.append((function["name"], args))
    return calls


@pytest.fixture(scope="module")
def independent(raw_cases, raw_traces) -> dict[tuple[str, int], float]:
    """ragas' ToolCallF1 per (case_id, trial), computed from the raw files."""
    from ragas.messages import AIMessage, ToolCall
    from ragas.metrics.collections import ToolCallF1

    metric = ToolCallF1()

    async def score_all() -> dict[tuple[str, int], float]:
        values = {}
        for trace in raw_traces:
            case = raw_cases[str(trace["case_id"])]
            reference = [ToolCall(name=c["name"], args=c.get("args") or {}) for c in case["expected_calls"]]
            observed = [ToolCall(name=n, args=a) for n, a in _observed_tool_calls(trace)]
            result = await metric.ascore(
                user_input=[AIMessage(content="", tool_calls=observed)], reference_tool_calls=reference
            )
            values[(str(trace["case_id"]), trace["trial"])] = result.value
        return values

    return asyncio.run(score_all())


@pytest.fixture(scope="module")
def rows(raw_cases, raw_traces) -> list[dict]:
    cases = {case_id: Case.model_validate(case) for case_id, case in raw_cases.items()}
    envelopes = [build_envelope(RecordedTrace.model_validate(t), "t", CAPTURED_AT) for t in raw_traces]
    return score_envelopes(cases, envelopes)


def test_bundled_has_200_rows_with_unique_keys(rows, independent):
    assert len(rows) == 200
    assert len({(r["case_id"], r["trial"]) for r in rows}) == 200
    assert len(independent) == 200
    assert all(r["error_kind"] is None for r in rows)


def test_ragas_column_equals_ragas_on_every_bundled_row(rows, independent):
    differing = [
        (r["case_id"], r["trial"], r["ragas_tool_call_f1"], independent[(r["case_id"], r["trial"])])
        for r in rows
        if r["ragas_tool_call_f1"] != independent[(r["case_id"], r["trial"])]
    ]
    assert differing == []
    assert all(isinstance(r["ragas_tool_call_f1"], float) for r in rows)


def test_mean_ragas_column(rows, independent):
    mine = math.fsum(independent.values()) / len(independent)
    theirs = math.fsum(r["ragas_tool_call_f1"] for r in rows) / len(rows)
    assert theirs == mine
    # the column is not trivially constant: ragas' set view differs from one row to another
    assert 0.0 < mine < 1.0
    assert len(set(independent.values())) > 2


def test_ragas_set_view_differs_from_tooleval_multiset_view(rows):
    # ragas collapses duplicates, tooleval counts them: on at least the 16 rows with a repeated identical call the
    # two numbers can differ; they must not be the same column under two names.
    assert any(r["ragas_tool_call_f1"] != round(r["f1"], 4) for r in rows)


class TestBundledFigures:
    """Figures from ../shared/data/README.md, measured on the source file independently of tooleval."""

    def test_rows(self, rows):
        assert len(rows) == 200

    def test_expected_calls(self, rows):
        assert sum(len(r["expected_calls"]) for r in rows) == 632

    def test_observed_calls(self, rows):
        assert sum(len(r["observed_calls"]) for r in rows) == 1164

    def test_observed_calls_counted_from_raw_file(self, raw_traces):
        assert sum(len(_observed_tool_calls(t)) for t in raw_traces) == 1164

    def test_exact_match_rows(self, rows):
        assert sum(1 for r in rows if r["exact_match"]) == 12

    def test_rows_with_missing(self, rows):
        assert sum(1 for r in rows if r["fn"] > 0) == 124

    def test_rows_with_extra(self, rows):
        assert sum(1 for r in rows if r["fp"] > 0) == 162

    def test_rows_with_duplicates(self, rows):
        assert sum(1 for r in rows if r["duplicate_calls"] > 0) == 16

    def test_rows_without_calls(self, rows):
        assert sum(1 for r in rows if not r["observed_calls"]) == 18

    def test_rows_expecting_no_call(self, rows):
        assert sum(1 for r in rows if not r["expected_calls"]) == 28

    def test_no_malformed_call_in_bundled_traces(self, rows):
        assert sum(r["malformed_calls"] for r in rows) == 0

    def test_counts_are_consistent(self, rows):
        for r in rows:
            assert r["tp"] + r["fn"] == len(r["expected_calls"])
            assert r["tp"] + r["fp"] == len(r["observed_calls"])
            assert r["exact_match"] == (r["fp"] == 0 and r["fn"] == 0)
