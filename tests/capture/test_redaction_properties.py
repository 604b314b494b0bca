"""Issue 11 section 1, property 1: redaction never changes a score (DESIGN.md "Trust rules").

Every metric column, the evidence counts, every violation's rule and the gate verdict are compared with and
without redaction, on the bundled data, on every example dataset, on the issue's two-case dataset and on
datasets generated with hypothesis (secrets under redacted keys in any letter case and with JSON escapes, in
references, in argument values under other keys, in tool results, in text, in malformed argument text)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support import figures
from tests.support.paths import BUNDLED, REPO
from tests.support.profiles import examples
from tests.support.redaction import datasets, metric_view, score_both, verdict_view
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import find_traces_file, load_dataset
from tooleval.models import Case
from tooleval.rules import load_gate_config, load_policy



def _assert_same(cases, traces, tools=None, policy=None, gate=None) -> int:
    plain, redacted, verdict, redacted_verdict, _ = score_both(cases, traces, tools, policy, gate)
    differences = [(p["case_id"], p["trial"], key, metric_view(p)[key], metric_view(r)[key])
                   for p, r in zip(plain, redacted) for key in metric_view(p) if metric_view(p)[key] != metric_view(r)[key]]
    assert differences == []
    assert verdict_view(redacted_verdict) == verdict_view(verdict)
    return len(plain)


def test_the_issue_example_scores_alike():
    # case mail expects exactly the call its trace makes; case profile holds the same address under "email"
    cases = {
        "mail": Case.model_validate({"case_id": "mail", "input": "mail ana", "expected_calls": [
            {"name": "send_message", "args": {"recipient": "ana@example.org", "text": "hi"}}]}),
        "profile": Case.model_validate({"case_id": "profile", "input": "fix profile", "expected_calls": [
            {"name": "update_profile", "args": {"contact": {"email": "ana@example.org"}}}]}),
    }
    call = {"id": "1", "type": "function", "function": {
        "name": "send_message", "arguments": '{"recipient": "ana@example.org", "text": "hi"}'}}
    traces = [{"case_id": "mail", "trial": 0, "agent": {"name": "a", "version": "1", "model": "m"},
               "messages": [{"role": "user", "content": "mail ana"},
                            {"role": "assistant", "content": None, "tool_calls": [call]}]}]
    plain, redacted, _, _, envelopes = score_both(cases, traces)
    assert plain[0]["f1"] == 1.0 and redacted[0]["f1"] == 1.0 and redacted[0]["wrong_args"] == []
    assert "ana@example.org" not in str(envelopes) + str(redacted)


@pytest.mark.parametrize("folder", [BUNDLED, *sorted((REPO / "datasets" / "examples").glob("*/"))],
                         ids=lambda p: p.name)
def test_bundled_and_example_datasets_score_alike(folder):
    dataset = load_dataset(folder)
    gate = load_gate_config(folder / "gate.toml") if (folder / "gate.toml").is_file() else None
    traces = [line.data for line in iter_trace_lines(find_traces_file(folder))]
    rows = _assert_same(dataset.cases, traces, {t.name: t for t in dataset.tools},
                        load_policy(folder), gate)
    assert rows == {"tau-bench-airline": 200}.get(folder.name, rows)


@settings(max_examples=examples(120), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(datasets(rows=40))
def test_generated_datasets_score_alike(data):
    cases, traces, tools, _ = data
    figures.add("redaction_rows", _assert_same(cases, traces, tools))  # printed at the session's end

