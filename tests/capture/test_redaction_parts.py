"""Redaction part by part (``Redactor.redact_trace_text``, ``tooleval/capture/_parts.py``): each message's secrets
and redacted text are remembered by its JSON text, and the trace's text is put together from them. It must be the
very text generation wrote before, ``dumps_text(redact_trace(trace, case))``, for every trace and in any order of
traces (a remembered part meets other traces' secrets); each test below fails when one of the part path's guards
is taken away."""

from __future__ import annotations

import json
import math
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tests.support.redaction import datasets, planted_datasets, redactor_for
from tests.capture.test_redaction_fast_path import _messages, _objects, _seeds
from tooleval.canonical import dumps_text
from tooleval.capture.redaction import RedactionConfig, Redactor
from tooleval.models import Case


def _slow(redactor: Redactor, trace: dict, case=None) -> str:
    return dumps_text(redactor.redact_trace(json.loads(json.dumps(trace)), case))


def _alike(seed: list, traces: list[dict], case=None, config: RedactionConfig | None = None) -> list[str]:
    """Each trace's part-by-part text, asserted equal to the whole walk's, one redactor for all of them (so later
    traces meet the parts the earlier ones left remembered); a fresh redactor walks each."""
    config = config or RedactionConfig()
    parts = Redactor(config, b"k" * 32)
    parts.seed(seed)
    got = []
    for trace in traces:
        walker = Redactor(config, b"k" * 32)
        walker.seed(seed)
        want = _slow(walker, trace, case)
        text = parts.redact_trace_text(json.loads(json.dumps(trace)), case)
        assert text == want
        got.append(text)
    return got


def _trace(trial: int, *messages: dict, **top) -> dict:
    return {"case_id": "c1", "trial": trial, "messages": list(messages), **top}


SYSTEM = {"role": "system", "content": "Each user has a profile with an email and a phone."}


# -- properties ---------------------------------------------------------------------------------------------------

@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(_seeds, st.lists(st.lists(_messages, max_size=5), min_size=1, max_size=4),
       st.lists(st.dictionaries(st.sampled_from(["reward", "email", "info"]), _objects, max_size=2), min_size=4,
                max_size=4),
       st.sampled_from([None, ["key"], ["email", "to"]]))
def test_traces_sharing_parts_come_out_as_the_walk_makes_them(seed, conversations, metadata, fields):
    # the traces share their first message and each other's later ones: remembered parts meet other secrets
    config = RedactionConfig() if fields is None else RedactionConfig(fields=fields)
    shared = conversations[0][:1]
    traces = [_trace(trial, *shared, *messages, *conversations[(trial + 1) % len(conversations)][-1:])
              | {"metadata": metadata[trial % 4]} for trial, messages in enumerate(conversations * 2)]
    _alike(seed, traces, config=config)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(datasets(rows=20))
def test_generated_datasets_come_out_as_the_walk_makes_them(data):
    cases, traces, _, _ = data
    parts, walker = redactor_for(cases), redactor_for(cases)
    for trace in traces + traces:  # twice: the second time every part is remembered
        case = cases[trace["case_id"]]
        assert parts.redact_trace_text(json.loads(json.dumps(trace)), case) == _slow(walker, trace, case)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=list(HealthCheck))
@given(planted_datasets())
def test_planted_secrets_and_credentials_come_out_as_the_walk_makes_them(data):
    cases, traces, _, secrets = data
    parts, walker = redactor_for(cases), redactor_for(cases)
    for trace in traces + traces:
        case = cases[trace["case_id"]]
        text = parts.redact_trace_text(json.loads(json.dumps(trace)), case)
        assert text == _slow(walker, trace, case)


# -- each guard ---------------------------------------------------------------------------------------------------

def test_a_secret_spelled_with_an_escape_in_nested_json_is_replaced():
    # the tool result writes "ana@x.org" as "ana\u0040x.org" inside its JSON text: the part's text does not hold
    # the form, its decoded string does (a part whose text holds "\u" counts every own secret as occurring)
    nested = json.dumps({"note": "mail ana\\u0040x.org"}).replace("\\\\u0040", "\\u0040")
    assert "\\u0040" in nested and json.loads(nested)["note"] == "mail ana@x.org"
    first = _trace(0, SYSTEM, {"role": "tool", "content": nested})
    second = _trace(1, SYSTEM, {"role": "tool", "content": nested}, metadata={"email": "ana@x.org"})
    out = _alike([], [first, second])
    assert "ana@x.org" not in json.loads(json.loads(out[1])["messages"][1]["content"])["note"]


def test_a_number_spelled_otherwise_than_its_form_is_replaced():
    # the card number 4111111111111111 is the trace's own secret; the float 4.111111111111111e15 elsewhere has the
    # same canonical JSON, which its text (4.111111111111111e15) does not spell: numeric forms always count
    quiet = {"role": "tool", "content": "ok", "data": [4.111111111111111e15]}
    out = _alike([], [_trace(0, quiet), _trace(1, quiet, metadata={"card_number": 4111111111111111})])
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    assert json.loads(out[1])["messages"][0]["data"] == [redactor.token(4111111111111111)]
    assert json.loads(out[0])["messages"][0]["data"] == [4111111111111111]  # not a secret in the first trace


def test_a_secret_holding_a_quote_is_replaced_where_json_escapes_it():
    # the text of a part writes the quote as \" : a form that JSON escapes is looked for in every part
    said = {"role": "user", "content": 'write to o"neil@x.org please'}
    out = _alike([], [_trace(0, said), _trace(1, said, metadata={"email": 'o"neil@x.org'})])
    assert 'o"neil@x.org' not in json.loads(out[1])["messages"][0]["content"]
    assert 'o"neil@x.org' in json.loads(out[0])["messages"][0]["content"]


def test_a_remembered_part_is_redacted_with_each_trace_s_own_secrets():
    said = {"role": "user", "content": "reach me at ana@x.org or bo@x.org"}
    traces = [_trace(0, said, metadata={"email": "ana@x.org"}), _trace(1, said, metadata={"email": "bo@x.org"}),
              _trace(2, said)]
    out = [json.loads(text)["messages"][0]["content"] for text in _alike([], traces)]
    assert "ana@x.org" not in out[0] and "bo@x.org" in out[0]
    assert "bo@x.org" not in out[1] and "ana@x.org" in out[1]
    assert out[2] == said["content"]


def test_the_last_part_gives_a_form_its_token():
    # one card number as a number in the first message and as text in the second: the walk visits the last part
    # first, so the text's token (that of the string) replaces the number in free text
    first = {"role": "tool", "content": "a", "card_number": 4111111111111111}
    second = {"role": "tool", "content": "b", "card_number": "4111111111111111"}
    said = {"role": "user", "content": "card 4111111111111111"}
    out = _alike([], [_trace(0, first, second, said)])
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    assert redactor.token("4111111111111111") != redactor.token(4111111111111111)
    assert json.loads(out[0])["messages"][2]["content"] == "card " + redactor.token("4111111111111111")


def test_a_base_secret_in_a_quiet_message_is_replaced():
    # no redacted name in the message, but the dataset's secret is in its text
    said = {"role": "user", "content": "account ACC-778899 please"}
    out = _alike([{"email": "ACC-778899"}], [_trace(0, said), _trace(1, said)])
    assert "ACC-778899" not in out[1]


def test_a_null_under_a_redacted_field_is_not_taken_for_a_nan():
    # orjson writes NaN as null: a part remembered with "email": null must not answer for one holding NaN,
    # whose token cannot be made (the walk raises)
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    text = redactor.redact_trace_text(_trace(0, {"role": "tool", "content": "x", "email": None}))
    assert json.loads(text)["messages"][0]["email"] == redactor.token(None)
    with pytest.raises(ValueError):
        redactor.redact_trace_text(_trace(1, {"role": "tool", "content": "x", "email": math.nan}))


def test_a_str_subclass_is_not_taken_for_a_str():
    # the walk reads a header only when its value is exactly a str: a part written alike with a str subclass
    # value holds no credential, and must not be answered by the plain part remembered before
    class Value(str):
        pass

    plain = {"role": "tool", "content": "x", "headers": {"Authorization": "Bearer abcdefgh12345678"}}
    odd = {"role": "tool", "content": "x", "headers": {"Authorization": Value("Bearer abcdefgh12345678")}}
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    first = redactor.redact_trace_text(_trace(0, plain, {"role": "user", "content": "abcdefgh12345678"}))
    assert "abcdefgh12345678" not in first
    second = redactor.redact_trace_text(_trace(1, odd, {"role": "user", "content": "abcdefgh12345678"}))
    assert second == dumps_text(Redactor(RedactionConfig(), b"k" * 32).redact_trace(
        _trace(1, odd, {"role": "user", "content": "abcdefgh12345678"})))
    assert "abcdefgh12345678" in second


@pytest.mark.parametrize("top", [{"email": "ana@x.org"}, {"Authorization": "Bearer abcdefgh12345678"}])
def test_a_secret_at_the_top_of_the_trace_is_found(top):
    said = {"role": "user", "content": "ana@x.org abcdefgh12345678"}
    out = _alike([], [_trace(0, said, **top), _trace(1, said, **top)])
    content = json.loads(out[1])["messages"][0]["content"]
    assert content.count("redacted:") == 1


def test_a_configured_path_decides_by_the_place_of_a_value():
    config = RedactionConfig(paths=["metadata.info.code"])
    said = {"role": "user", "content": "use S3CRET-1"}
    out = _alike([], [_trace(0, said, metadata={"info": {"code": "S3CRET-1"}})], config=config)
    assert "S3CRET-1" not in out[0]


@pytest.mark.parametrize("metadata", [{"reward": 1.0}, None, ["not", "an object"]])
def test_markers_of_own_secrets_in_the_case_are_written_into_the_metadata(metadata):
    case = Case.model_validate({"case_id": "c1", "input": "hi", "expected_calls": [],
                                "expected_outputs": ["sent to ana@x.org"]})
    top = {} if metadata is None else {"metadata": metadata}
    trace = _trace(0, {"role": "tool", "content": json.dumps({"email": "ana@x.org"})}, **top)
    out = json.loads(_alike([], [trace, trace], case=case)[1])
    token = Redactor(RedactionConfig(), b"k" * 32).token("ana@x.org")
    want = {"reference_secrets": [["s", 9, token]]}  # a string form, 9 characters
    assert out["metadata"] == {**(metadata if isinstance(metadata, dict) else {}), "tooleval.redaction": want}


def test_a_form_holding_a_nul_is_not_found_across_two_case_texts():
    # the case's texts are searched joined by NUL: a form holding one is looked for text by text
    case = Case.model_validate({"case_id": "c1", "input": "hi", "expected_calls": [],
                                "expected_outputs": ["xab", "cdy"]})
    trace = _trace(0, {"role": "tool", "content": "x", "email": "ab\x00cd"})
    out = json.loads(_alike([], [trace], case=case)[0])
    assert "tooleval.redaction" not in out.get("metadata", {})


def test_the_texts_of_a_case_are_the_case_s_own():
    # a case's texts are kept by its id with the case itself: another case at that id is read afresh
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    old = Case.model_validate({"case_id": "c1", "input": "hi", "expected_calls": [], "expected_outputs": ["nothing"]})
    new = Case.model_validate({"case_id": "c1", "input": "hi", "expected_calls": [],
                               "expected_outputs": ["sent to ana@x.org"]})
    redactor._recent_case_texts[id(new)] = (old, ["nothing"], "nothing")
    trace = _trace(0, {"role": "tool", "content": "x", "email": "ana@x.org"})
    assert "tooleval.redaction" in json.loads(redactor.redact_trace_text(trace, new))["metadata"]


def test_threads_sharing_a_redactor_get_the_walk_s_texts():
    # generation's threads share one redactor per process: its remembered parts serve each thread alike
    import sys

    traces = [_trace(trial, SYSTEM, {"role": "tool", "content": json.dumps({"email": f"u{trial % 3}@x.org"})},
                     {"role": "user", "content": f"mail u{trial % 3}@x.org and u{(trial + 1) % 3}@x.org"})
              for trial in range(12)]
    want = [_slow(Redactor(RedactionConfig(), b"k" * 32), trace) for trace in traces]
    shared = Redactor(RedactionConfig(), b"k" * 32)
    got: list[list[str]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(index: int) -> None:
        barrier.wait()
        for _ in range(5):
            got[index].append([shared.redact_trace_text(trace) for trace in traces])

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(before)
    assert all(run == want for runs in got for run in runs)
    assert len([run for runs in got for run in runs]) == 20


# -- seeding: a case input's repeated messages are walked once -----------------------------------------------------

def _seeded_by_walking_each_value(config: RedactionConfig, values: list) -> Redactor:
    """The seed as the whole walk makes it: every value walked whole, one after the other."""
    from tooleval.capture._secret_text import cannot_hold_pair
    from tooleval.capture.redaction import _Call

    redactor = Redactor(config, b"k" * 32)
    found: dict = {}
    known: dict = {}
    for value in values:
        call = _Call()
        redactor._collect(value, found, call)
        known.update((t, p) for t, p in call.pairs.items() if not cannot_hold_pair(t, redactor._fields))
    redactor._base, redactor._known_pairs = found, known
    return redactor


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@example([[{"role": "user", "content": "x", "card_number": 4111111111111111}],
          [{"role": "user", "content": "y", "card_number": "4111111111111111"},
           {"role": "user", "content": "x", "card_number": 4111111111111111}]], None)
@example([[{"card_number": 4111111111111111}, {"card_number": "4111111111111111"}]], None)
@given(st.lists(st.one_of(st.lists(_messages, max_size=3), _objects, _messages), max_size=6),
       st.sampled_from([None, ["key"], ["email", "to"]]))
def test_seeding_finds_what_walking_every_value_finds(values, fields):
    # the examples: a list's last element is walked first, so of two elements giving one form two tokens (a
    # number's, a string's) the last one's is kept; a second input repeating the first's message after one such
    # element skips it as seen without changing which token the form keeps
    config = RedactionConfig() if fields is None else RedactionConfig(fields=fields)
    redactor = Redactor(config, b"k" * 32)
    redactor.seed(json.loads(json.dumps(values)))
    want = _seeded_by_walking_each_value(config, json.loads(json.dumps(values)))
    assert list(redactor._base.items()) == list(want._base.items())
    assert redactor._known_pairs == want._known_pairs
