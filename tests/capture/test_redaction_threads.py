"""One redactor, many threads: a Dask worker with threads shares the process's redactor (tasks/_shared.py caches
it), so a call must keep what it finds — redacted field paths above all — to itself, and the redactor must come
out of any number of calls as it went in (its token cache aside, whose entries depend on their key alone)."""

from __future__ import annotations

import json
import sys
import threading
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tests.support.redaction import datasets, redactor_for

REPEATS = 12
"""Calls per thread: with a switch interval of a microsecond, each call is interleaved with the others'."""


@contextmanager
def _switching_often():
    """Make the interpreter switch threads every microsecond, so two calls really interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _redact_concurrently(redactor, jobs: list[tuple[dict, object]]) -> list[list[str]]:
    """Each job redacted REPEATS times in its own thread, all threads started together; every output
    serialised (the key order is part of the bytes generation writes)."""
    barrier = threading.Barrier(len(jobs))
    outputs: list[list[str]] = [[] for _ in jobs]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        trace, case = jobs[index]
        try:
            barrier.wait()
            for _ in range(REPEATS):
                outputs[index].append(json.dumps(redactor.redact_trace(json.loads(json.dumps(trace)), case)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    with _switching_often():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return outputs


@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
@given(datasets(rows=15))
def test_threads_sharing_a_redactor_each_get_their_own_result(data):
    cases, traces, _, _ = data
    jobs = [(trace, cases[trace["case_id"]]) for trace in traces[:4]]
    alone = [json.dumps(redactor_for(cases).redact_trace(json.loads(json.dumps(t)), c)) for t, c in jobs]
    shared = redactor_for(cases)
    outputs = _redact_concurrently(shared, jobs)
    for expected, got in zip(alone, outputs):
        assert got == [expected] * REPEATS


def test_redacted_fields_are_not_mixed_between_threads():
    # two traces whose redacted fields differ: each thread's result names its own fields only
    from tooleval.models import Case

    cases = {"a": Case.model_validate({"case_id": "a", "input": "hi", "expected_calls": []}),
             "b": Case.model_validate({"case_id": "b", "input": "hi", "expected_calls": []})}
    filler = [{"role": "assistant", "content": f"step {i}: checking"} for i in range(300)]
    email = {"case_id": "a", "trial": 0, "messages": [{"role": "user", "content": "hi"}, *filler],
             "metadata": {"email": "ana@x.org"}}
    phone = {"case_id": "b", "trial": 0, "messages": [{"role": "user", "content": "hi"}, *filler],
             "metadata": {"contact": {"phone": "555-0100"}}}
    outputs = _redact_concurrently(redactor_for(cases), [(email, cases["a"]), (phone, cases["b"])] * 2)
    for index, fields in enumerate([["metadata.email"], ["metadata.contact.phone"]] * 2):
        assert {tuple(json.loads(text)["redacted_fields"]) for text in outputs[index]} == {tuple(fields)}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(datasets(rows=10))
def test_a_call_leaves_the_redactor_as_it_found_it(data):
    cases, traces, _, _ = data
    redactor = redactor_for(cases)
    caches = ("_tokens", "_canonical_tokens")
    before = {key: value for key, value in vars(redactor).items() if key not in caches}
    for trace in traces:
        case = cases[trace["case_id"]]
        out = redactor.redact_trace(json.loads(json.dumps(trace)), case)
        marker = ((out.get("metadata") or {}).get("tooleval.redaction") or {}).get("reference_secrets")
        extra = redactor.reference_secrets(case, marker)
        redactor.redact_messages(case.input, extra)
        for plan in case.plans:
            for call in plan:
                redactor.redact_args(call.args or {}, extra)
    after = {key: value for key, value in vars(redactor).items() if key not in caches}
    assert after.keys() == before.keys()
    assert all(after[key] is before[key] for key in before)  # nothing replaced
    assert after["_base"] == before["_base"] and after["_known_pairs"] == before["_known_pairs"]
