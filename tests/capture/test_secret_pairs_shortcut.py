"""The pair scan's shortcut (issue 9): text that cannot hold a ``key: value`` pair of a redacted field is not
scanned; whatever the text, the pairs found are the full scan's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.capture._secret_text import text_pairs

NAMES = {"email", "api_key", "phone"}
PIECES = ["email", "EMAIL", "Email", "api_key", "API_Key", "phone", "em\\u0061il", "\\\"", ":", "=", " ", '"', "'",
          "x@y.org", "4111 1111", "k-1", ",", "{", "}", "é", "\u212a", "ph", "one", "\n", "a", "_", "1"]


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_the_shortcut_finds_what_the_full_scan_finds(text):
    assert list(text_pairs(text, lambda k: k in NAMES, NAMES)) == list(text_pairs(text, lambda k: k in NAMES))


def test_the_shortcut_still_finds_pairs_in_any_letter_case():
    text = 'contact EMAIL: ana@x.org, "Phone"= "555-0100"'
    assert [p[3] for p in text_pairs(text, lambda k: k in NAMES, NAMES)] == ["ana@x.org", '"555-0100"']
    assert list(text_pairs("departure 06:00:00 from JFK", lambda k: k in NAMES, NAMES)) == []
