"""Helpers of the redaction properties (issue 11 section 1): scoring one dataset with and without redaction
through the real capture and scoring code, and hypothesis strategies for datasets with planted secrets."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from typing import Any

from hypothesis import strategies as st

from tooleval.capture.envelope import build_envelope
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig, Redactor, case_reference_values
from tooleval.models import Case, RecordedTrace, ToolSpec
from tooleval.rules import GateConfig, PolicyConfig, evaluate_gate
from tooleval.scoring.rows import score_envelopes

KEY = b"property-test-key"
METRICS = ("tp", "fp", "fn", "precision", "recall", "f1", "ragas_tool_call_f1", "exact_match", "duplicate_calls",
           "malformed_calls", "mismatch_categories", "blocking", "chosen_plan", "error_kind", "error_message", "provenance_status",
           "first_divergent_boundary", "failure_owner")
"""Every metric column, and the columns a verdict or an owner is read from."""


def redactor_for(cases: dict[str, Case], fields: list[str] | None = None) -> Redactor:
    """A redactor seeded with the dataset (as :func:`tooleval.capture.redaction.build_redactor` seeds it)."""
    redactor = Redactor(RedactionConfig(fields=list(fields or DEFAULT_FIELDS)), KEY)
    redactor.seed([value for case in cases.values() for value in case_reference_values(case)])
    return redactor


def envelopes(traces: list[dict], cases: dict[str, Case], redactor: Redactor | None) -> list[dict]:
    """Trace envelopes of ``traces`` (redacted first when a redactor is given), as the capture stage builds them."""
    out = []
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for trace in traces:
        redacted_fields = None
        if redactor is not None:
            trace = redactor.redact_trace(json.loads(json.dumps(trace)), cases.get(trace["case_id"]))
            redacted_fields = trace.pop("redacted_fields")
        out.append(build_envelope(RecordedTrace.model_validate(trace), "r1", at, redacted_fields=redacted_fields))
    return out


def score_both(cases: dict[str, Case], traces: list[dict], tools: dict[str, ToolSpec] | None = None,
               policy: PolicyConfig | None = None, gate: GateConfig | None = None):
    """``(plain rows, redacted rows, plain verdict, redacted verdict, redacted envelopes)``."""
    traces = [t for t in traces if t["case_id"] in cases]
    redactor = redactor_for(cases)
    redacted_envelopes = envelopes(traces, cases, redactor)
    plain = score_envelopes(cases, envelopes(traces, cases, None), tools=tools, policy=policy)
    redacted = score_envelopes(cases, redacted_envelopes, redactor=redactor, tools=tools, policy=policy)
    gate = gate or GateConfig()
    today = date(2026, 1, 1)
    return plain, redacted, evaluate_gate(plain, gate, today=today), evaluate_gate(redacted, gate, today=today), \
        redacted_envelopes


def metric_view(row: dict) -> dict:
    """What must not change with redaction: the metric columns, the evidence counts and every violation's rule,
    severity and tool (details quote redacted values, so they are compared by rule, not by text)."""
    view = {key: row[key] for key in METRICS}
    for key in ("missing_calls", "extra_calls", "wrong_args", "reference_calls", "observed_calls"):
        view[key] = None if row[key] is None else len(row[key])
    view["violations"] = None if row["violations"] is None else sorted(
        (v["rule"], v["severity"], v["tool"]) for v in row["violations"])
    return view


def verdict_view(verdict) -> dict:
    """A gate verdict without the texts that quote values."""
    return {"passed": verdict.passed, "counts": verdict.counts,
            "failing": sorted((o.case_id, o.trial, tuple(o.rules)) for o in verdict.failing_rows),
            "slices": [(s.kind, s.name, s.rows, s.exact_match_rows, s.failing_rows, s.passed) for s in verdict.slices]}


# -- strategies ---------------------------------------------------------------------------------------------------

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
emails = st.builds(lambda a, b: f"{a}@{b}.example", st.text(_ALPHABET, min_size=3, max_size=8),
                   st.text(_ALPHABET, min_size=2, max_size=6))
cards = st.integers(min_value=10**12, max_value=10**16 - 1)
api_keys = st.builds(lambda a: f"sk-{a}", st.text(_ALPHABET + "_-", min_size=6, max_size=14))
secret_values = st.one_of(emails, cards, api_keys)
plain_values = st.one_of(st.sampled_from(["A-1", "B-2", "economy", "hi there", "HAT271", ""]),
                         st.integers(-5, 500), st.floats(0, 500, allow_nan=False).map(lambda f: round(f, 2)),
                         st.booleans(), st.none())
redacted_keys = st.sampled_from(["email", "Email", "EMAIL", "api_key", "Api_Key", "card_number", "phone"])
plain_keys = st.sampled_from(["recipient", "note", "amount", "id", "text", "contact", "to"])
TOOLS = ["send_message", "update_profile", "refund", "lookup"]


@st.composite
def argument_objects(draw, pool: list) -> dict:
    """An argument object whose values come from ``pool`` (the dataset's secrets and plain values), sometimes
    under a redacted key, sometimes nested."""
    args: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.one_of(redacted_keys, plain_keys))
        value = draw(st.sampled_from(pool))
        if draw(st.integers(0, 4)) == 0:
            value = {draw(st.one_of(redacted_keys, plain_keys)): value}
        args[key] = value
    return args


def _argument_text(draw, args: dict) -> str:
    """Argument text as a model writes it: JSON, JSON with an escaped key, Python-literal (malformed), a repeated
    key (malformed) or truncated JSON (malformed)."""
    text = json.dumps(args)
    form = draw(st.integers(0, 9))
    if form == 1 and args:
        key = next(iter(args))
        escaped = "".join(f"\\u{ord(c):04x}" if i == 1 else c for i, c in enumerate(key))
        return text.replace(json.dumps(key), f'"{escaped}"', 1)
    if form == 2 and args:
        return repr(args)
    if form == 3 and args:
        first = next(iter(args))
        return text[:-1] + f", {json.dumps(first)}: {json.dumps(args[first])}}}"
    if form == 4 and len(text) > 2:
        return text[:-1]
    return text


@st.composite
def datasets(draw, rows: int = 40) -> tuple[dict[str, Case], list[dict], dict[str, ToolSpec], list]:
    """A dataset (cases, traces, tools) with secrets planted in references, arguments, tool results, user and
    assistant text, and malformed argument text; returns the planted secret values too."""
    secrets = draw(st.lists(secret_values, min_size=2, max_size=6, unique=True))
    pool = secrets + draw(st.lists(plain_values, min_size=2, max_size=5))
    tools = {name: ToolSpec(name=name, side_effect="write" if name in ("refund", "update_profile") else "read",
                            requires_confirmation=name == "refund") for name in TOOLS}
    cases: dict[str, Case] = {}
    traces: list[dict] = []
    for number in range(draw(st.integers(2, max(2, rows // 5)))):
        case_id = f"c{number}"
        expected = [{"name": draw(st.sampled_from(TOOLS)), "args": draw(argument_objects(pool))}
                    for _ in range(draw(st.integers(0, 3)))]
        # an expected output that is only a *part* of a secret cannot be found once the secret is a token: a
        # documented limit (docs/redaction.md), so outputs are whole values or text
        texts = [str(v) for v in pool if isinstance(v, (str, int)) and not isinstance(v, bool)] + ["done"]
        whole = [t for t in texts if not any(t in str(s) and t != str(s) for s in secrets)
                 and not (t.lstrip("-").isdigit() and len(t) < 5)]  # "10" sits inside many card numbers
        outputs = draw(st.lists(st.sampled_from(whole), max_size=2))
        user = f"Please help, my email is {draw(st.sampled_from(secrets))} and card_number={draw(cards)}"
        cases[case_id] = Case.model_validate({
            "case_id": case_id, "input": user, "expected_calls": expected, "expected_outputs": outputs or None,
            "slice": draw(st.sampled_from(["a", "b", None]))})
        for trial in range(draw(st.integers(1, max(1, rows // 5)))):
            messages: list[dict] = [{"role": "user", "content": user}]
            calls = [dict(c) for c in expected if draw(st.integers(0, 5))]
            calls += [{"name": draw(st.sampled_from(TOOLS)), "args": draw(argument_objects(pool))}
                      for _ in range(draw(st.integers(0, 2)))]
            if calls and draw(st.booleans()):
                calls.append(calls[0])
            messages.append({"role": "assistant", "content": "Shall I go ahead?"})
            messages.append({"role": "user", "content": draw(st.sampled_from(
                ["Yes, go ahead.", "No.", f"yes, use {draw(st.sampled_from(secrets))}", "maybe"]))})
            for index, made in enumerate(calls):
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"t{index}", "type": "function",
                    "function": {"name": made["name"], "arguments": _argument_text(draw, made["args"])}}]})
                result = {draw(st.one_of(redacted_keys, plain_keys)): draw(st.sampled_from(pool)),
                          "status": "ok"}
                messages.append({"role": "tool", "tool_call_id": f"t{index}", "name": made["name"],
                                 "content": json.dumps(result) if draw(st.booleans()) else
                                 f"email: {draw(st.sampled_from(secrets))}; ok"})
            reply = " ".join(draw(st.lists(st.sampled_from([str(v) for v in pool] + ["Done."]), max_size=3)))
            messages.append({"role": "assistant", "content": reply or "Done."})
            traces.append({"case_id": case_id, "trial": trial,
                           "agent": {"name": "a", "version": "1", "model": "m"}, "messages": messages,
                           "metadata": {"reward": 1.0, "card_number": draw(cards)}})
    return cases, traces, tools, secrets


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
aws_keys = st.builds(lambda rest: f"AKIA{rest}", st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16))
jwts = st.builds(lambda a, b, c: f"eyJ{a}.eyJ{b}.{c}", st.text(_ALNUM, min_size=17, max_size=30),
                 st.text(_ALNUM, min_size=17, max_size=40), st.text(_ALNUM + "_-", min_size=10, max_size=30))
openai_keys = st.builds(lambda a, b: f"sk-{a}T3BlbkFJ{b}", st.text(_ALNUM, min_size=20, max_size=20),
                        st.text(_ALNUM, min_size=20, max_size=20))
bearer_tokens = st.text(_ALNUM + "._~-", min_size=8, max_size=24).map(lambda t: f"bt{t}z")
"""Credentials by the shapes of gitleaks' and Nosey Parker's rules (``tooleval/capture/_credentials.py``): random, so
a leak cannot be mistaken for a value that occurs anyway."""

KEPT = "keep-me-4821"
"""A value only ever under non-redacted keys: it must survive redaction (the scan is not vacuous)."""


@st.composite
def planted_datasets(draw) -> tuple[dict[str, Case], list[dict], dict[str, ToolSpec], list[str]]:
    """A dataset whose every secret was seen under a redacted field name: the base secrets under ``api_key`` in
    a case's references; one secret per case in its ``expected_outputs`` (plain text) that each of its traces
    shows under a redacted key; one secret per trace, under a redacted key in any letter case, under a
    JSON-escaped key in argument text, in malformed single-quoted argument text, in user and assistant text,
    and (for a number) repeated in message text; and per trace, with no field name near them, credentials known by
    their shape (an AWS access key id, a JWT, an OpenAI key, a bearer token) in user text, a tool result, and JSON
    encoded in a string inside argument JSON, twice. Returns the secrets' texts as the last item."""
    cases, traces, tools, base = draw(datasets(rows=12))
    cases["vault"] = Case.model_validate({"case_id": "vault", "input": "store", "expected_calls": [
        {"name": "lookup", "args": {"api_key": base, "note": KEPT}}]})
    secrets = [str(s) for s in base]
    per_case: dict[str, str] = {}
    for case_id in list(cases):
        if case_id == "vault":
            continue
        value = draw(emails).replace("@", f".{case_id}@")
        per_case[case_id] = value
        cases[case_id] = cases[case_id].model_copy(update={"expected_outputs": [f"sent to {value}"]})
        secrets.append(value)
    for number, trace in enumerate(traces):
        own_text = draw(emails).replace("@", f".t{number}@")
        own_number = draw(cards)
        only_malformed = draw(api_keys) + f"-t{number}"  # seen nowhere else: found in the malformed text itself
        secrets += [own_text, str(own_number), only_malformed]
        key = draw(redacted_keys)
        escaped = '"' + "".join(f"\\u{ord(c):04x}" if i == 0 else c for i, c in enumerate("email")) + '"'
        trace["messages"] += [
            {"role": "tool", "content": json.dumps({key: own_text, "CARD_NUMBER": own_number,
                                                    "Phone": per_case[trace["case_id"]]})},
            {"role": "user", "content": f"My number is {own_number}, mail {own_text}."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "p1", "type": "function", "function": {"name": "send_message", "arguments":
                    "{" + escaped + f': "{own_text}", "note": "{KEPT}"' + "}"}},
                {"id": "p2", "type": "function", "function": {"name": "send_message", "arguments":
                    f"{{'email': '{own_text}', 'API_KEY': '{only_malformed}', 'to': '{per_case[trace['case_id']]}'}}"}},
                {"id": "p3", "type": "function", "function": {"name": "lookup", "arguments":
                    "{'email': 'x@y.z', 'api_key': 'k-1'}"}}]},
            {"role": "assistant", "content": f"Done: sent to {per_case[trace['case_id']]} ({own_text})."},
        ]
        aws, aws_nested, jwt, openai, bearer = (draw(aws_keys), draw(aws_keys), draw(jwts), draw(openai_keys),
                                                draw(bearer_tokens))
        secrets += [aws, aws_nested, jwt, openai, bearer]
        nested = json.dumps({"payload": json.dumps({"blob": json.dumps(
            {"headers": {"Authorization": f"Bearer {bearer}"}, "key_id": aws_nested, "note": KEPT})})})
        trace["messages"] += [
            {"role": "user", "content": f"Use {openai} for the call."},
            {"role": "tool", "content": f"key {aws} issued; session {jwt}."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "p4", "type": "function", "function": {"name": "lookup", "arguments": nested}}]},
            {"role": "tool", "tool_call_id": "p4", "content": json.dumps({"echo": nested})},
        ]
    return cases, traces, tools, secrets


def leaked(text: str, secrets: list[str]) -> list[str]:
    """The secrets that occur in ``text``."""
    return sorted({s for s in secrets if s in text})
