"""The compiled forms of redaction against their plain definitions (docs/redaction.md "The transformation"):
the trie pattern finds what the alternation of the forms, longest first, finds; a replacer layered over the base
secrets' replaces as one over the merged table; a token is the HMAC of the value's canonical JSON, whatever was
asked before; the reference secrets are the substrings whose token is a marker's."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.canonical import canonical_json
from tooleval.capture._secret_text import Replacer, form_pattern
from tooleval.capture.redaction import RedactionConfig, Redactor, _case_texts
from tooleval.models import Case

KEY = b"pattern-test-key"
# few letters, so that forms are often prefixes of one another and overlap in the text
forms = st.text("ab.1\\\"", min_size=1, max_size=7)
texts = st.text("ab.1\\\"x", max_size=60)


def _flat(table: dict[str, str]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, sorted(table, key=lambda f: (-len(f), f)))))


@settings(max_examples=examples(500), deadline=None)
@given(st.sets(forms, min_size=1, max_size=12), texts)
def test_the_trie_pattern_finds_what_the_alternation_finds(chosen, text):
    trie, flat = form_pattern(chosen), _flat(dict.fromkeys(chosen, ""))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in flat.finditer(text)]


def test_forms_nested_too_deep_for_a_trie_still_match_alike():
    chosen = {"a" * n for n in range(1, 120)} | {"b" * 300}  # each a prefix of the next: one group per form
    text = "a" * 250 + "b" * 700 + "a" * 3
    trie, flat = form_pattern(chosen), _flat(dict.fromkeys(chosen, ""))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in flat.finditer(text)]


def test_a_long_form_costs_no_nesting():
    assert form_pattern({"x" * 5000, "y" * 5000}).search("z" + "y" * 5000).span() == (1, 5001)


tables = st.dictionaries(forms, st.sampled_from(["<1>", "<2>", "<3>", "<4>"]), max_size=8)


@settings(max_examples=examples(500), deadline=None)
@given(tables, tables, texts)
def test_a_layered_replacer_replaces_as_the_merged_table(base, extra, text):
    merged = Replacer({**base, **extra})
    layered = Replacer(extra, Replacer(base))
    assert layered.text(text) == merged.text(text)
    assert layered.search(text) == (merged.text(text) != text or any(f in text for f in merged.table))
    for form in [*base, *extra, text]:
        assert layered.holds(form) == merged.holds(form)


def test_a_replacer_knows_when_no_number_can_be_a_secret():
    assert not Replacer({"ana@x.org": "t"}).may_hold_numbers()
    assert Replacer({"4111111111111111": "t"}).may_hold_numbers()
    assert Replacer({}, Replacer({"-2.5": "t"})).may_hold_numbers()


json_values = st.recursive(
    st.one_of(st.text(max_size=8), st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
              st.booleans(), st.none()),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.text(max_size=4), children, max_size=3)),
    max_leaves=8)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(json_values, min_size=1, max_size=6))
def test_a_token_is_the_hmac_of_the_canonical_json_whatever_came_before(values):
    redactor = Redactor(RedactionConfig(), KEY)
    for value in values + values[::-1]:  # asked twice, in both orders: a remembered token must be the same
        digest = hmac.new(KEY, canonical_json(value).encode(), hashlib.sha256).hexdigest()[:16]
        assert redactor.token(value) == f"redacted:{digest}"


def test_values_equal_in_python_but_not_in_json_get_their_own_tokens():
    redactor = Redactor(RedactionConfig(), KEY)
    assert redactor.token(1) != redactor.token(True)  # 1 == True for a dict key; not for JSON
    assert redactor.token(True) != redactor.token(1)
    assert redactor.token(0) != redactor.token(False)
    assert redactor.token(250) == redactor.token(250.0)  # one value in canonical JSON
    assert redactor.token("250") != redactor.token(250)


def _definition(redactor: Redactor, texts: list[str], markers: list[list]) -> dict[str, str]:
    """docs/redaction.md: each substring of that length whose token matches, markers in order, first claim
    kept."""
    def token_of(kind: str, form: str) -> str | None:
        try:
            if kind == "s":
                return redactor.token(form)
            value = json.loads(form) if kind == "n" else json.loads('"' + form + '"')
            if kind == "n" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                return None
            return redactor.token(value)
        except ValueError:
            return None

    found: dict[str, str] = {}
    for kind, length, token in markers:
        for text in texts:
            for i in range(len(text) - length + 1):
                form = text[i:i + length]
                if form not in found and token_of(kind, form) == token:
                    found[form] = token
    return found


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text("ab1\\\"u0e. ", min_size=4, max_size=6), min_size=1, max_size=4),
       st.text("ab1\\\"u0e. ", max_size=40), st.data())
def test_reference_secrets_are_the_substrings_whose_token_is_a_markers(secrets, text, data):
    redactor = Redactor(RedactionConfig(), KEY)
    case = Case.model_validate({"case_id": "c", "input": text + " " + " ".join(secrets), "expected_calls": [
        {"name": "f", "args": {"note": secrets[0], "n": 1500}}], "expected_outputs": [text[::-1]]})
    markers = []
    for secret in secrets + ["1500", "15e2"]:
        kind = data.draw(st.sampled_from(["s", "n", "e"]))
        value = json.loads(secret) if kind == "n" and re.fullmatch(r"-?[1-9][0-9]*(e[0-9])?", secret) else secret
        markers.append([kind, len(secret), redactor.token(value)])
    markers += data.draw(st.lists(st.sampled_from(markers), max_size=3))  # repeated markers claim nothing new
    texts = _case_texts(case)
    found = redactor.reference_secrets(case, markers)
    assert list(found.items()) == list(_definition(redactor, texts, markers).items())
