"""Issue 11 section 1: each input the issue names as a leak or a changed score, with its right value."""

from __future__ import annotations

import json

from tests.support.redaction import redactor_for, score_both
from tooleval.models import Case, ToolSpec


def _trace(case_id: str, *messages: dict, metadata: dict | None = None) -> dict:
    return {"case_id": case_id, "trial": 0, "agent": {"name": "a", "version": "1", "model": "m"},
            "messages": [{"role": "user", "content": "hi"}, *messages], "metadata": metadata}


def _call(name: str, arguments: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "1", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _case(case_id: str, calls: list, **extra) -> Case:
    return Case.model_validate({"case_id": case_id, "input": "hi", "expected_calls": calls, **extra})


CASES = {"c": _case("c", [{"name": "pay", "args": {"card_number": 4111111111111111}}])}


def test_numeric_card_number_repeated_in_message_text():
    trace = _trace("c", _call("pay", '{"card_number": 4111111111111111}'),
                   {"role": "assistant", "content": "Charged card 4111111111111111."})
    _, redacted, _, _, envelopes = score_both(CASES, [trace])
    assert "4111111111111111" not in json.dumps(envelopes, default=str) + json.dumps(redacted, default=str)
    assert redacted[0]["exact_match"] is True


def test_malformed_single_quoted_arguments_keep_no_secret_and_stay_malformed():
    raw = "{'email': 'x@y.z', 'api_key': 'k-1'}"
    trace = _trace("c", _call("pay", raw))
    _, redacted, _, _, envelopes = score_both(CASES, [trace])
    stored = envelopes[0]["model_calls"][0]
    assert stored["parse_error"] is not None and "x@y.z" not in stored["args_raw"]
    assert "'k-1'" not in stored["args_raw"] and stored["args_raw"].startswith("{'email': \"redacted:")
    assert redacted[0]["malformed_calls"] == 1


def test_json_escaped_key_is_the_same_key():
    trace = _trace("c", _call("pay", '{"card_numb\\u0065r": 4111111111111111, "em\\u0061il": "ana@example.org"}'))
    _, redacted, _, _, envelopes = score_both(CASES, [trace])
    text = json.dumps(envelopes, default=str) + json.dumps(redacted, default=str)
    assert "ana@example.org" not in text and "4111111111111111" not in text


def test_key_letter_case_does_not_matter():
    redactor = redactor_for(CASES)
    out = redactor.redact_trace(_trace("c", {"role": "tool", "content": '{"EMAIL": "ana@example.org"}'},
                                       {"role": "assistant", "content": "Mail to ana@example.org sent."}))
    assert "ana@example.org" not in json.dumps(out)


def test_expected_output_quoted_in_a_violation_detail_is_redacted_and_still_found():
    cases = {"o": _case("o", [], expected_outputs=["ana@example.org"])}
    told = _trace("o", {"role": "tool", "content": '{"email": "ana@example.org"}'},
                  {"role": "assistant", "content": "Your address is ana@example.org."})
    silent = dict(_trace("o", {"role": "tool", "content": '{"email": "ana@example.org"}'},
                         {"role": "assistant", "content": "Done."}), trial=1)
    plain, redacted, _, _, _ = score_both(cases, [told, silent])
    rules = [[v["rule"] for v in row["violations"]] for row in redacted]
    assert rules == [[v["rule"] for v in row["violations"]] for row in plain] == [[], ["missing_output"]]
    assert "ana@example.org" not in json.dumps(redacted, default=str)
    assert "ana@example.org" in json.dumps(plain, default=str)


def test_a_trace_only_secret_in_the_reference_is_redacted_alike():
    # the address is under "email" only in this trace's tool result; the reference names it under "to"
    cases = {"m": _case("m", [{"name": "send", "args": {"to": "bob@example.org"}}])}
    trace = _trace("m", {"role": "tool", "content": '{"email": "bob@example.org"}'},
                   _call("send", '{"to": "bob@example.org"}'))
    plain, redacted, _, _, envelopes = score_both(cases, [trace], {"send": ToolSpec(name="send")})
    assert plain[0]["f1"] == redacted[0]["f1"] == 1.0
    assert "bob@example.org" not in json.dumps(envelopes, default=str) + json.dumps(redacted, default=str)
    marker = json.loads(envelopes[0]["metadata_json"])["tooleval.redaction"]["reference_secrets"]
    assert marker == [["s", len("bob@example.org"), redactor_for(cases).token("bob@example.org")]]


def test_acceptable_values_of_a_redacted_field_are_redacted_alike():
    # listed values (one_of) of redacted fields, in a reference call's own rules, in the case's rules and on a
    # nested path: the agent's value is redacted, so a listed value must be too, or a listed value fails
    cases = {"k": _case("k", [{"name": "pay", "args": {"amount": 5, "payer": {"email": "ana@example.org"}},
                               "argument_rules": {"api_key": {"optional": True, "one_of": [""]}}}],
                        argument_rules={"pay": {"payer.email": {"one_of": ["ops@example.org"]}}})}
    given = [('{"amount": 5, "payer": {"email": "ana@example.org"}}', True),
             ('{"amount": 5, "payer": {"email": "ops@example.org"}}', True),
             ('{"amount": 5, "payer": {"email": "ana@example.org"}, "api_key": ""}', True),
             ('{"amount": 5, "payer": {"email": "eve@example.org"}}', False),
             ('{"amount": 5, "payer": {"email": "ana@example.org"}, "api_key": "k-1"}', False)]
    traces = [dict(_trace("k", _call("pay", arguments)), trial=i) for i, (arguments, _) in enumerate(given)]
    plain, redacted, _, _, envelopes = score_both(cases, traces)
    assert [row["exact_match"] for row in redacted] == [row["exact_match"] for row in plain] == [ok for _, ok in given]
    assert "ops@example.org" not in json.dumps(envelopes, default=str) + json.dumps(redacted, default=str)
