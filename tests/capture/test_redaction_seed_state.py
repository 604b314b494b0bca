"""A run's redactor is seeded once: the flow hands what seeding found (``Redactor.seed_state``) to every worker
with the shards, in memory, and each worker's redactor loads it (``build_redactor(seed_state=...)``) instead of
reading every case again (17-26 s per process at 142,858 bfcl cases). A loaded redactor must redact every trace
exactly as the seeded one does; a state of another format is ignored; the state (which holds the secrets) is
never written under the results folder (``test_redaction_scan`` checks every file a run leaves)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.redaction import KEY, planted_datasets, redactor_for
from tasks import _shared
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig, Redactor, build_redactor
from tooleval.dataset import load_dataset
from tooleval.runs.plan import dataset_ref
from tooleval.models import Case


def _loaded(seeded: Redactor) -> Redactor:
    state = seeded.seed_state()
    assert state is not None
    fresh = Redactor(seeded.config, KEY)
    fresh.load_seed_state(state)
    return fresh


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(planted_datasets())
def test_a_loaded_seed_redacts_every_trace_as_the_seeded_redactor(data):
    cases, traces, _, secrets = data
    seeded = redactor_for(cases)
    loaded = _loaded(seeded)
    assert loaded.seed_digest() == seeded.seed_digest()
    assert loaded._known_pairs == seeded._known_pairs
    for trace in traces:
        case = cases[trace["case_id"]]
        assert (loaded.redact_trace_text(json.loads(json.dumps(trace)), case)
                == seeded.redact_trace_text(json.loads(json.dumps(trace)), case))


def _case(email: str, note: str) -> Case:
    return Case.model_validate({
        "case_id": "c1", "input": [{"role": "user", "content": f"mail me at {email}; {note}"}],
        "expected_calls": [{"name": "send", "args": {"email": email, "body": "hi"}}]})


class _Refusing(dict):
    """Cases that fail the test when seeding reads them."""

    def values(self):
        raise AssertionError("the seed state was not used: the cases were read")


def test_a_worker_takes_the_flows_seed_without_reading_the_cases(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", "seed-state-test-key-000000000001")
    config = RedactionConfig(fields=list(DEFAULT_FIELDS))
    cases = {"c1": _case("ana@example.com", "token: sk-abc123def456ghi789")}
    flow = build_redactor(tmp_path, config, cases)
    assert "ana@example.com" in flow._base
    worker = build_redactor(tmp_path, config, _Refusing(cases), seed_state=flow.seed_state())
    assert worker._base == flow._base and worker._known_pairs == flow._known_pairs
    trace = {"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "ana@example.com here"}]}
    assert worker.redact_trace_text(dict(trace), cases["c1"]) == flow.redact_trace_text(dict(trace), cases["c1"])
    assert "ana@example.com" not in worker.redact_trace_text(dict(trace), cases["c1"])


def test_a_state_of_another_format_is_ignored_and_the_cases_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", "seed-state-test-key-000000000001")
    config = RedactionConfig(fields=list(DEFAULT_FIELDS))
    cases = {"c1": _case("ana@example.com", "")}
    for bad in (b"not json", b'{"format": 999, "base": {}, "known": {}}', b'{"format": 1}', b"[]"):
        redactor = build_redactor(tmp_path, config, cases, seed_state=bad)
        assert "ana@example.com" in redactor._base, bad  # seeded from the cases: the secret is found


def test_the_offered_state_reaches_the_workers_cached_redactor(tmp_path, monkeypatch):
    # the bundled dataset, as a worker loads it; seeding is made to fail so only the offered state can serve
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", "seed-state-test-key-000000000001")
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline"
    loaded = load_dataset(folder)
    ref = dataset_ref(loaded)
    config = RedactionConfig(fields=list(DEFAULT_FIELDS))
    flow = build_redactor(tmp_path, config, loaded.cases)
    _shared._redactor.cache_clear()
    monkeypatch.setattr(Redactor, "seed", lambda self, values: pytest.fail("seeded although a state was offered"))
    try:
        _shared.offer_seed_state(str(tmp_path), config, ref, flow.seed_state())
        worker = _shared.cached_redactor(str(tmp_path), config, ref)
        assert worker._base == flow._base and worker._known_pairs == flow._known_pairs
    finally:
        _shared._redactor.cache_clear()
        _shared._SEEDS.clear()


def test_a_number_beyond_64_bits_survives_the_saved_state(tmp_path, monkeypatch):
    # secret forms are texts, so the state holds a 70-bit card number as its digits, not as a JSON number
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", "seed-state-test-key-000000000001")
    config = RedactionConfig(fields=list(DEFAULT_FIELDS))
    wide = 2**70  # 1180591620717411303424
    cases = {"c1": Case.model_validate({"case_id": "c1", "input": [{"role": "user", "content": "x"}],
                                        "expected_calls": [{"name": "pay", "args": {"card_number": wide}}]})}
    seeded = build_redactor(tmp_path, config, cases)
    loaded = build_redactor(tmp_path, config, _Refusing(cases), seed_state=seeded.seed_state())
    assert "1180591620717411303424" in loaded._base and loaded._base == seeded._base
    trace = {"case_id": "c1", "trial": 0, "messages": [{"role": "user", "content": "card 1180591620717411303424"}]}
    assert "1180591620717411303424" not in loaded.redact_trace_text(dict(trace), cases["c1"])


def test_loading_a_foreign_state_raises_value_error():
    redactor = Redactor(RedactionConfig(), KEY)
    with pytest.raises(ValueError):
        redactor.load_seed_state(b'{"format": 2, "base": {}, "known": {}}')
    with pytest.raises(ValueError):
        redactor.load_seed_state(b'{"format": 1, "base": [], "known": {}}')


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_a_run_seeds_its_redactor_once_on_the_plans_thread(tiny_dataset, tmp_path, monkeypatch):
    # the flow seeds while the plan goes on (a thread of its own) and every stage's redactor takes that seed
    import threading

    from tests.support.runs import run_small

    _shared._redactor.cache_clear()
    seeded_on: list[str] = []
    own = Redactor.seed

    def seed(self, values):
        seeded_on.append(threading.current_thread().name)
        return own(self, values)

    monkeypatch.setattr(Redactor, "seed", seed)
    result, drift = run_small(dataset=str(tiny_dataset), out=str(tmp_path / "out"), run_id="r1")
    assert not drift and result.summary["rows"] == 4
    assert seeded_on == ["tooleval-redactor-seed"]
    _shared._redactor.cache_clear()
    _shared._SEEDS.clear()
