"""Credentials known by their shape (``tooleval/capture/_credentials.py``): an AWS access key id, a JWT, an OpenAI or
Anthropic API key and a bearer token are redacted by default wherever they stand — user and assistant text, a tool
result, argument text, JSON encoded in a string inside argument JSON (twice) — with no redacted field name near
them; the fast path never passes over a line that holds one; a reference holding the same value gets the same
token, so scores do not move.

The sample values are made up to fit the scanners' rules (gitleaks' ``aws-access-token``, ``jwt``,
``openai-api-key``, ``anthropic-api-key``; Nosey Parker's ``np.http.2``), nothing real."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tests.support.redaction import metric_view, redactor_for, score_both
from tooleval.capture._credentials import credentials, may_hold_credential
from tooleval.capture.redaction import MARKER_KEY, RedactionConfig, Redactor
from tooleval.models import Case

AWS = "AKIAZ7QX2LMNOPQRSTUV"  # AKIA + 16 of [A-Z2-7]
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk")
OPENAI = "sk-abcdefghij0123456789T3BlbkFJzyxwvutsrq9876543210"  # sk- + 20 + T3BlbkFJ + 20
ANTHROPIC = "sk-ant-api03-" + "a1B2c3D4e5" * 9 + "xyz" + "AA"  # 93 characters between the prefix and AA
BEARER = "mF_9.B5f-4.1JqM"  # RFC 6750's example token, as in Nosey Parker's rule
KINDS = {"aws": AWS, "jwt": JWT, "openai": OPENAI, "anthropic": ANTHROPIC, "bearer": BEARER}


def _text_with(kind: str) -> str:
    value = KINDS[kind]
    return f"Authorization: Bearer {value}" if kind == "bearer" else f"here it is: {value}, keep it safe"


def _redactor(seed: list | None = None) -> Redactor:
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    redactor.seed(seed or [])
    return redactor


def _trace(messages: list[dict]) -> dict:
    return {"case_id": "c1", "trial": 0, "messages": messages}


def _call(arguments: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}


def _assert_redacted(redactor: Redactor, out: dict, value: str) -> None:
    text = json.dumps(out, ensure_ascii=False)
    assert value not in text
    assert redactor.token(value) in text  # replaced by its token, not dropped
    # the token is what the same value gets under a redacted field: one value, one token
    assert redactor.token(value) == _redactor().redact_trace(_trace([]) | {"metadata": {"api_key": value}})[
        "metadata"]["api_key"]


def test_each_rule_finds_its_sample_and_nothing_in_plain_text():
    assert [list(credentials(_text_with(kind))) for kind in KINDS] == [[value] for value in KINDS.values()]
    plain = ("They key in Asia is AKIA-style; a bearer of news; eyJ is how base64 JSON starts; sk-test-1; "
             "Authorization: Bearer abc")  # too short for np.http.2 (6 characters at least)
    assert list(credentials(plain)) == []


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("where", ["user", "assistant", "tool"])
def test_a_credential_in_free_text_is_redacted(kind, where):
    redactor = _redactor()
    message = {"role": where, "content": _text_with(kind)}
    if where == "tool":
        message["tool_call_id"] = "t1"
    out = redactor.redact_trace(_trace([message]))
    _assert_redacted(redactor, out, KINDS[kind])
    assert out["redacted_fields"] == []  # no field name was involved, as for a base secret found in text
    assert out["messages"][0]["content"].startswith("Authorization: Bearer redacted:" if kind == "bearer"
                                                    else "here it is: redacted:")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_credential_in_json_in_a_string_in_argument_json_twice_is_redacted(kind):
    value = KINDS[kind]
    innermost = {"headers": {"Authorization": f"Bearer {value}"}} if kind == "bearer" else {"note": value}
    arguments = json.dumps({"payload": json.dumps({"blob": json.dumps(innermost), "city": "Paris"})})
    redactor = _redactor()
    out = redactor.redact_trace(_trace([_call(arguments), {"role": "tool", "tool_call_id": "t1",
                                                           "content": json.dumps({"result": arguments})}]))
    _assert_redacted(redactor, out, value)
    # decoded three times over, the innermost object holds the token, and the rest is kept
    payload = json.loads(json.loads(out["messages"][0]["tool_calls"][0]["function"]["arguments"])["payload"])
    assert payload["city"] == "Paris"
    inner = json.loads(payload["blob"])
    token = redactor.token(value)
    assert inner == ({"headers": {"Authorization": f"Bearer {token}"}} if kind == "bearer" else {"note": token})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_line_whose_only_secret_is_a_credential_is_not_passed_over(kind):
    redactor = _redactor([{"email": "ana@x.org"}])  # a base secret, so the fast path is armed
    line = _trace([{"role": "user", "content": "hello"},
                   _call(json.dumps({"data": json.dumps({"data": _text_with(kind)})}))])
    body = {k: v for k, v in line.items() if k not in ("case_id", "trial")}
    assert not redactor._untouched(body)
    assert redactor._quiet_parts(body) == [(line["messages"][0], '{"role":"user","content":"hello"}')]
    _assert_redacted(redactor, redactor.redact_trace(line), KINDS[kind])


def test_references_holding_a_credential_get_the_same_token_and_scores_do_not_move():
    # the access key is in the case's expected call: a base secret, found by its shape in the reference. The
    # bearer token is a secret of the trace alone (its shape needs the header); the expected call holds it bare,
    # so the trace carries a marker for it and the reference is redacted alike
    other = "AKIA234567ABCDEFGHIJ"
    case = Case.model_validate({"case_id": "c1", "input": "rotate the key", "expected_calls": [
        {"name": "rotate", "args": {"key_id": AWS}}, {"name": "call_api", "args": {"token": BEARER}},
        {"name": "revoke", "args": {"key_id": other}}]})

    def call(number: int, name: str, args: dict) -> dict:
        return {"id": f"t{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}

    trace = _trace([{"role": "user", "content": "rotate the key"},
                    {"role": "tool", "tool_call_id": "t0", "content": f"found {AWS}; Authorization: Bearer {BEARER}"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        call(1, "rotate", {"key_id": AWS}), call(2, "call_api", {"token": BEARER}),
                        call(3, "revoke", {"key_id": "AKIAWRONGWRONGWRONG2"})]}])
    redactor = redactor_for({"c1": case})
    out = redactor.redact_trace(json.loads(json.dumps(trace)), case)
    assert [v for v in (AWS, BEARER, "AKIAWRONGWRONGWRONG2") if v in json.dumps(out)] == []
    assert out["metadata"][MARKER_KEY]["reference_secrets"] == [["s", len(BEARER), redactor.token(BEARER)]]
    plain, redacted, *_ = score_both({"c1": case}, [trace])
    assert [metric_view(r) for r in redacted] == [metric_view(r) for r in plain]
    # 3 expected calls, 3 observed: rotate and call_api match, revoke's key differs -> tp 2, fp 1, fn 1
    assert (redacted[0]["tp"], redacted[0]["fp"], redacted[0]["fn"]) == (2, 1, 1)
    assert redacted[0]["f1"] == pytest.approx(2 / 3)


def test_json_encoded_as_text_twice_is_read_a_layer_at_a_time():
    # a tool result whose content is a JSON string that spells JSON: the e-mail under a redacted field and the
    # credentials inside are found, and the result is encoded again as it came (a JSON string of JSON)
    redactor = _redactor()
    content = json.dumps(json.dumps({"email": "ana@x.org", "key_id": AWS, "session": JWT, "city": "Paris"}))
    out = redactor.redact_trace(_trace([{"role": "tool", "tool_call_id": "t1", "content": content}]))
    assert json.loads(json.loads(out["messages"][0]["content"])) == {
        "email": redactor.token("ana@x.org"), "key_id": redactor.token(AWS), "session": redactor.token(JWT),
        "city": "Paris"}
    assert out["redacted_fields"] == ["email"]


@settings(max_examples=examples(300), deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), before=st.text(max_size=6), after=st.text(max_size=6),
       depth=st.integers(0, 3))
def test_the_fast_path_pre_check_sees_every_credential_at_any_nesting_depth(kind, before, after, depth):
    # whatever surrounds it, a string in which a rule finds a credential makes the line's orjson text fail the
    # pre-check, also when the string sits in JSON encoded as text inside JSON, up to three times
    leaf = before + _text_with(kind) + after
    value: object = {"content": leaf}
    for _ in range(depth):
        value = {"content": json.dumps(value)}
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # a lone surrogate: the redactor walks such a line anyway
        return
    if list(credentials(leaf)):
        assert may_hold_credential(text)
