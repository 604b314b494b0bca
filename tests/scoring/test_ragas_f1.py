"""tooleval's own ragas set-F1 (:mod:`tooleval.scoring.ragas_f1`) equals ragas 0.4.3's ToolCallF1 itself.

DESIGN.md "ragas column": the own implementation may compute the row-level column only if it is proven equal to
ragas on every bundled row and on the handed cases; issue 9 adds 10,000 synthetic rows. The ragas side here is
:func:`tooleval.scoring.ragas_metric.ragas_tool_call_f1_many`, which builds ``ragas.messages`` objects and awaits
``ToolCallF1().ascore`` — ragas' own code decides. Both sides get the same inputs (the row path's ragas
arguments: canonical values, malformed calls as ``{"__malformed__": raw}``), and the values must be equal exactly.
"""

from __future__ import annotations

import gzip
import json

import pytest

from tests.support.datasets import handed_cases
from tests.support.paths import BUNDLED
from tooleval.models import Call, Case, calls_from_messages
from tooleval.scoring.ragas_f1 import ragas_call_set, ragas_set_f1, ragas_set_f1_many, ragas_set_f1_of_sets
from tooleval.scoring.ragas_metric import ragas_args, ragas_tool_call_f1_many
from tooleval.synth import write_synth


def _ragas_form(calls: list[Call]) -> list[dict]:
    return [{"name": c.name, "args": ragas_args(c)} for c in calls]


def _pairs_from_files(cases_path, traces_lines) -> list[tuple[list[dict], list[dict]]]:
    with cases_path.open(encoding="utf-8") as handle:
        cases = {c.case_id: c for c in (Case.model_validate_json(line) for line in handle if line.strip())}
    pairs = []
    for line in traces_lines:
        trace = json.loads(line)
        observed = calls_from_messages(trace["messages"])
        pairs.append((_ragas_form(cases[str(trace["case_id"])].expected_calls), _ragas_form(observed)))
    return pairs


def _assert_equal_to_ragas(pairs: list[tuple[list[dict], list[dict]]]) -> None:
    theirs = ragas_tool_call_f1_many(pairs)
    mine = ragas_set_f1_many(pairs)
    differing = [(i, pairs[i], a, b) for i, (a, b) in enumerate(zip(mine, theirs)) if a != b]
    assert differing == []
    assert len(mine) == len(pairs)


def test_every_bundled_row():
    with gzip.open(BUNDLED / "traces.jsonl.gz", "rt", encoding="utf-8") as handle:
        pairs = _pairs_from_files(BUNDLED / "cases.jsonl", [line for line in handle if line.strip()])
    assert len(pairs) == 200
    _assert_equal_to_ragas(pairs)
    # the bundled mean ragas column (README, data facts): 0.3449
    assert round(sum(ragas_set_f1_many(pairs)) / 200, 4) == 0.3449


@pytest.mark.parametrize("case", handed_cases("scoring"), ids=lambda c: c["id"])
def test_every_handed_case(case):
    expected = [Call.from_raw(c["name"], c.get("args") or {}) for c in case["expected_calls"]]
    observed = calls_from_messages([{"role": "assistant", "content": "", "tool_calls": case["observed_tool_calls"]}])
    pair = (_ragas_form(expected), _ragas_form(observed))
    _assert_equal_to_ragas([pair])
    if "ragas_tool_call_f1" in case["right"]:  # the value filed by hand with the case
        assert ragas_set_f1(*pair) == pytest.approx(case["right"]["ragas_tool_call_f1"], abs=5e-5)


def test_ten_thousand_synthetic_rows(tmp_path):
    synth = write_synth(10_000, 7, "bfcl", tmp_path / "synth")
    with (synth.path / "traces.jsonl").open(encoding="utf-8") as handle:
        pairs = _pairs_from_files(synth.path / "cases.jsonl", handle)
    assert len(pairs) == 10_000
    malformed = sum(1 for _, observed in pairs for c in observed if "__malformed__" in c["args"])
    both_empty = sum(1 for expected, observed in pairs if not expected and not observed)
    duplicates = sum(1 for _, observed in pairs if len({json.dumps(c, sort_keys=True) for c in observed}) < len(observed))
    assert malformed > 0 and both_empty > 1000 and duplicates > 50
    _assert_equal_to_ragas(pairs)


EDGES = [
    ([], [], 0.0),  # ragas scores two empty lists 0.0 (tooleval's f1 says 1.0)
    ([{"name": "a", "args": {"x": True}}], [{"name": "a", "args": {"x": 1}}], 1.0),  # Python: True == 1
    ([{"name": "a", "args": {"x": 10}}], [{"name": "a", "args": {"x": 10.0}}], 1.0),  # 10 == 10.0
    ([{"name": "a", "args": {"x": "10"}}], [{"name": "a", "args": {"x": 10}}], 0.0),
    ([{"name": "a", "args": {}}], [{"name": "a", "args": {}}, {"name": "a", "args": {}}], 1.0),  # sets
    ([{"name": "a", "args": {"l": [1, 2]}}], [{"name": "a", "args": {"l": [2, 1]}}], 0.0),  # list order
    ([{"name": "a", "args": {"d": {"k": 1}}}], [{"name": "a", "args": {"d": [["k", 1]]}}], 0.0),
    ([{"name": "a", "args": {"x": None}}], [{"name": "a", "args": {}}], 0.0),
    ([{"name": "a", "args": {}}], [{"name": "a", "args": {"__malformed__": "{"}}], 0.0),
    ([{"name": "a", "args": {}}, {"name": "b", "args": {}}, {"name": "c", "args": {}}],
     [{"name": "a", "args": {}}], 0.5),  # p 1, r 1/3: 2/3 / (4/3) = 0.5
    ([{"name": "a", "args": {}}, {"name": "b", "args": {}}], [{"name": "a", "args": {}}, {"name": "c", "args": {}},
                                                               {"name": "d", "args": {}}], 0.4),  # p 1/3 r 1/2
]


@pytest.mark.parametrize("expected,observed,value", EDGES)
def test_edges_by_hand_and_against_ragas(expected, observed, value):
    assert ragas_set_f1(expected, observed) == value
    _assert_equal_to_ragas([(expected, observed)])


def test_a_wrong_own_value_is_drift_naming_that_row(monkeypatch):
    """The row path's own set-F1 is wrong on exactly one row (bundled case 3, trial 0): the legacy path, which
    calls ragas, and the per-row drift check catch it and name the row with both values."""
    from datetime import datetime, timezone

    import tooleval.scoring._table as table_module
    import tooleval.scoring.rows as rows_module
    from tooleval.capture.envelope import build_envelope
    from tooleval.capture.recorded import iter_trace_lines
    from tooleval.dataset import load_dataset
    from tooleval.models import RecordedTrace
    from tooleval.runs.drift import check_drift
    from tooleval.runs.legacy import legacy_score

    dataset = load_dataset(BUNDLED)
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), dataset.revision, at)
                 for line in iter_trace_lines(BUNDLED / "traces.jsonl.gz")]
    target = next(e for e in envelopes if (e["case_id"], e["trial"]) == ("3", 0))
    index = envelopes.index(target)
    right = table_module._Counts._ragas

    def wrong_on_one_row(*args):  # the row path computes the batch's ragas column at once
        values = right(*args)
        return [round(1.0 - value, 4) if i == index else value for i, value in enumerate(values)]

    monkeypatch.setattr(table_module._Counts, "_ragas", staticmethod(wrong_on_one_row))
    rows = rows_module.score_envelopes(dataset.cases, envelopes)
    legacy = legacy_score(envelopes, dataset.cases, "scorer-x")
    report = check_drift(legacy, rows)
    legacy_value = next(r.value for r in legacy.per_row if (r.case_id, r.trial) == ("3", 0))
    assert report["verdict"] == "drift" and report["attribution"] == "row_level_path"
    differing = report["rows_differing"]
    assert differing == [{"case_id": "3", "trial": 0, "legacy": legacy_value, "new": round(1.0 - legacy_value, 4)}]
