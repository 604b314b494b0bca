"""The confirmation reader's compiled word lists and verdict cache.

A set of word lists is compiled once into an index of phrases by first word (``_WordIndex``), and verdicts are
cached per (reply, lists content). The index must find exactly the phrase spans that trying every phrase of every
list at every word of a clause finds (the plain scan below, which the reader used before the index), and the
first refusal phrase in list order that opens a clause; the cache must never answer for other lists or a changed
dict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import examples
from tooleval.rules import _replies
from tooleval.rules._replies import DEFAULT_LISTS, _phrase_words, _WordIndex, read_reply, reply_reader

NAMES = ("affirmatives", "negations", "not_affirmative", "deferrals", "refusals", "hedges", "conditions")


def scan(tokens: list[str], phrases) -> list[tuple[int, int]]:
    """Reference: every phrase tried at every word of the clause."""
    found = []
    for phrase in phrases:
        parts = _phrase_words(phrase)
        n = len(parts)
        if n:
            found += [(i, i + n) for i in range(len(tokens) - n + 1) if tuple(tokens[i:i + n]) == parts]
    return found


# phrases that share first words ("no", "no way", "no thanks"; "go", "go ahead"), repeat across lists, end in "?"
# or tokenise to nothing ("123"), so that ties, overlaps and list order all matter
PHRASES = sorted({p for v in DEFAULT_LISTS.values() for p in v} | set(_replies._POLITE_IF) | set(_replies._REQUEST)
                 | {"go", "no no", "k?", "please proceed", "123", "yes yes yes"})
WORDS = sorted({w for p in PHRASES for w in _phrase_words(p)} | _replies._FILLER | {"?", "the", "flight"})

lists_strategy = st.fixed_dictionaries({name: st.lists(st.sampled_from(PHRASES), max_size=12).map(tuple)
                                        for name in NAMES})
tokens_strategy = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)


def _index(lists: dict[str, tuple[str, ...]]) -> _WordIndex:
    return _WordIndex(tuple(lists[name] for name in NAMES))


@settings(max_examples=examples(300), deadline=None)
@given(tokens_strategy, lists_strategy)
def test_the_index_finds_the_spans_the_plain_scan_finds(tokens, lists):
    index = _index(lists)
    found = index.spans(tokens)
    for number, name in enumerate(NAMES):
        assert sorted(index.of(found, number)) == sorted(scan(tokens, lists[name])), name
    assert sorted(found.get(_replies._POLITE, [])) == sorted(scan(tokens, _replies._POLITE_IF))
    assert sorted(found.get(_replies._REQUESTS, [])) == sorted(scan(tokens, _replies._REQUEST))


@settings(max_examples=examples(300), deadline=None)
@given(tokens_strategy, lists_strategy)
def test_the_opening_refusal_is_the_first_in_list_order(tokens, lists):
    expected = next((end for start, end in scan(tokens, lists["refusals"]) if start == 0), None)
    assert _index(lists).opening(tokens, NAMES.index("refusals")) == expected


def test_list_order_decides_which_refusal_opens_a_clause():
    # both phrases open the clause; the one listed first gives the refusal's end
    tokens = ["no", "way", "flight"]
    refusals = NAMES.index("refusals")
    assert _index({**DEFAULT_LISTS, "refusals": ("no", "no way")}).opening(tokens, refusals) == 1
    assert _index({**DEFAULT_LISTS, "refusals": ("no way", "no")}).opening(tokens, refusals) == 2


texts = st.lists(st.sampled_from(PHRASES + [",", ".", "?", "!", " but ", "\n", "x@if.example", "flight 12"]),
                 max_size=10).map(" ".join)


@settings(max_examples=examples(300), deadline=None)
@given(texts, lists_strategy)
def test_a_cached_verdict_equals_a_fresh_reading(text, lists):
    fresh = _replies._verdict(text, _index(lists))
    assert read_reply(text, lists) == fresh
    assert read_reply(text, dict(lists)) == fresh  # another dict of the same content: the same cached answer


@settings(max_examples=examples(300), deadline=None)
@given(texts, lists_strategy)
def test_a_reader_with_fixed_lists_reads_as_read_reply(text, lists):
    assert reply_reader(lists)(text) == read_reply(text, lists)


def test_a_reader_by_hand():
    read = reply_reader()
    assert (read("Sounds good."), read("No thanks."), read("Maybe later?")) == ("confirmed", "refused", "refused")
    lists = {name: phrases for name, phrases in DEFAULT_LISTS.items() if name != "refusals"}
    assert reply_reader(lists)("Yes, go ahead.") == "confirmed"  # a reader is built without the missing list
    with pytest.raises(KeyError, match="refusals"):
        reply_reader(lists)("No thanks.")


def test_the_cache_answers_for_the_lists_content_not_the_dict():
    lists = dict(DEFAULT_LISTS)
    assert read_reply("Sounds good.", lists) == "confirmed"
    lists["affirmatives"] = ("yes",)  # the same dict, changed: read again with the new lists
    assert read_reply("Sounds good.", lists) == "silent"
    assert read_reply("Sounds good.") == "confirmed"


def test_a_long_reply_is_read_but_not_held():
    before = _replies._cached_verdict.cache_info().currsize
    text = "the flight " * (_replies._CACHED_TEXT_LIMIT // 10) + "yes, go ahead"
    assert len(text) > _replies._CACHED_TEXT_LIMIT
    assert read_reply(text) == "confirmed"
    assert _replies._cached_verdict.cache_info().currsize == before


def test_a_missing_list_fails_only_when_the_reading_needs_it():
    lists = {name: phrases for name, phrases in DEFAULT_LISTS.items() if name != "refusals"}
    assert read_reply("Yes, go ahead.", lists) == "confirmed"  # an affirmative clause never asks for refusals
    with pytest.raises(KeyError, match="refusals"):
        read_reply("No thanks.", lists)
