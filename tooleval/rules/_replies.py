"""Reading a user's reply to "Shall I go ahead?": confirmed, refused, unclear or silent.

The reply is cut into **clauses** at punctuation (``, ; : . ! ?``, line breaks, dashes) and at the conjunctions
``but``, ``though``, ``although``, ``however``, ``except``. Each clause is read on its own:

* ``affirmative`` — it holds an affirmative ("yes", "go ahead", "oui", "ja", "sí", ...) that no negation before it
  *in the same clause* cancels ("Nope, nothing else to add. Yes, go ahead." confirms: the "nope" is another clause);
* ``negated`` — an affirmative with a negation before it in the clause ("please don't go ahead");
* ``deferral`` — "wait", "hold on", "not yet", "later", "until", a weekday, "tomorrow" ... (an affirmative clause
  that also defers counts as a deferral: "go ahead tomorrow" is not consent now);
* ``withheld`` — an imperative negation right before a verb that names the action ("don't cancel it yet", "do not
  book it"), or a phrase that holds the action back until something else happens ("not ready", "let me talk to
  ...", "only after", "once I", "leave it for now");
* ``refusal`` — a clause that starts with a refusal word ("no", "nope", "nah", "non", "nein", "stop", "don't")
  and says nothing else of substance ("No thanks", "Nope") — "Never mind the receipt" is about the receipt;
* ``hedge`` — "maybe", "I guess", "not sure", "probably", ...; ``condition`` — "if", "unless", "as long as", ...;
  ``question`` — the clause ends with ``?``;
* ``neutral`` — anything else.

The verdict: the **last affirmative clause** decides, unless a negated, deferral or refusal clause comes after it
(then ``refused``: a refusal or a deferral after the affirmative wins), or a withheld clause is the one right after
it (``refused``: "Yes, but don't cancel it yet." says yes to something else than the cancel now; further on, a
"don't cancel my other booking" is about another thing), or it is ``unclear``: the affirmative
shares its clause with a question, a hedge or a condition ("Yes if it is under $200"; "if possible" is politeness,
and "Could you proceed with it?" a polite order), a condition opens its sentence ("If it is cheaper, go ahead"),
a question or condition follows in the same sentence ("OK, but how much is it?"), or a hedge follows anywhere
("Go ahead. I guess."). A question in a later sentence is a new request ("Yes, proceed. Also, do I have other
flights?" confirms: tau-bench task 34), and "not sure what/which/..." asks about facts, not about going ahead.
With no affirmative clause: ``refused`` when some clause refuses, negates, defers or withholds; ``unclear`` when some clause
asks, hedges or sets a condition; ``silent`` otherwise. Only ``confirmed`` is a confirmation; ``unclear`` becomes a
``missing_confirmation`` whose detail starts with ``unclear`` so that a person can look.

Cost: a set of word lists is compiled once into an index of its phrases by first word (:class:`_WordIndex`), so a
clause is read in one pass over its own words whatever the lists' length; verdicts are cached per (reply, lists)
in a bounded LRU, since a corpus repeats its users' replies across rows and trials.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Literal

__all__ = ["ReplyVerdict", "read_reply", "reply_reader", "clauses", "words", "DEFAULT_AFFIRMATIVES", "DEFAULT_NEGATIONS",
           "DEFAULT_NOT_AFFIRMATIVE", "DEFAULT_DEFERRALS", "DEFAULT_REFUSALS", "DEFAULT_HEDGES",
           "DEFAULT_CONDITIONS"]

ReplyVerdict = Literal["confirmed", "refused", "unclear", "silent"]

DEFAULT_AFFIRMATIVES = (
    "yes", "yeah", "yep", "yup", "ya", "confirm", "confirmed", "i confirm", "go ahead", "proceed", "sure", "correct",
    "please do", "ok", "okay", "k", "absolutely", "sounds good", "sounds great", "do it", "let's do it",
    "go for it", "that's right", "that is right", "all right", "alright", "definitely", "of course", "certainly",
    "affirmative", "approved", "i approve", "that works", "works for me", "fine by me", "that's fine", "perfect",
    "no problem", "no worries",
    # common non-English forms
    "oui", "d'accord", "allez-y", "ja", "jawohl", "genau", "einverstanden", "sí", "si", "claro", "vale",
    "adelante", "sim",
)
DEFAULT_NEGATIONS = ("no", "not", "don't", "dont", "do not", "never", "nope", "cannot", "can't", "won't", "isn't",
                     "doesn't", "nah", "non", "nein", "nicht", "kein", "não", "nao", "pas", "ne")
DEFAULT_NOT_AFFIRMATIVE = ("make sure", "making sure", "be sure", "not sure", "are you sure", "is that correct",
                           "is it correct", "is that ok", "is that okay", "k?")
DEFAULT_DEFERRALS = (
    "wait", "hold on", "hold off", "not yet", "not now", "later", "until", "tomorrow", "next week", "let me think",
    "let me check", "give me a", "before you", "first let me", "monday", "tuesday", "wednesday", "thursday",
    "friday", "saturday", "sunday", "tonight", "another time", "moment", "warte", "attendez", "espera", "momento",
)
DEFAULT_REFUSALS = ("no", "nope", "nah", "non", "nein", "não", "nao", "stop", "don't", "do not", "never",
                    "no way", "no thanks", "no thank you", "absolutely not", "definitely not", "cancel that",
                    "forget it")
DEFAULT_HEDGES = ("maybe", "perhaps", "i guess", "i suppose", "probably", "possibly", "i think", "not sure",
                  "hmm", "i don't know", "dunno", "kind of", "sort of", "peut-être", "vielleicht", "quizás",
                  "tal vez")
DEFAULT_CONDITIONS = ("if", "unless", "as long as", "provided", "only if", "assuming", "si c'est", "wenn", "falls")

_FILLER = {"thanks", "thank", "you", "please", "actually", "then", "it", "that", "for", "now", "sorry", "thx",
           "merci", "danke", "gracias", "obrigado", "way"}
_POLITE_IF = ("if possible", "if you can", "if you could", "if that's possible", "if it's possible")
"""Politeness, not a condition: "just proceed with economy if possible" (tau-bench task 23) confirms."""
_REQUEST = ("could you", "can you", "would you", "will you", "could we", "can we", "shall we", "please")
"""A question that opens like this and holds an affirmative is a polite order: "Could you proceed with it?"."""
_WITHHOLDING = (
    "not ready", "haven't decided", "not decided", "still deciding", "still thinking", "only after", "not until",
    "once i", "after i", "leave it for now", "keep it for now", "hold it", "let me talk", "let me ask",
    "let me speak", "let me discuss", "let me call", "let me confirm", "i need to ask", "i need to talk",
    "i have to ask", "i have to talk", "i want to ask", "i want to talk",
)
"""Phrases that hold the action back until something else happens ("Yes, but let me talk to my wife first"). They
refuse only in the affirmative's clause or the clause right after it: further on they are about something else
("... For the other booking, I'll leave it for now")."""
_ACTIONS = frozenset({
    "cancel", "book", "change", "modify", "update", "process", "do", "submit", "finalize", "finalise", "complete",
    "execute", "reserve", "purchase", "buy", "upgrade", "downgrade", "place", "touch", "rebook", "switch", "refund",
    "remove", "delete", "send", "issue", "apply", "charge",
})
"""Verbs that name the action being confirmed: a negation right before one withholds it ("but don't cancel it")."""
_IMPERATIVE_NEGATIONS = frozenset({("don't",), ("dont",), ("do", "not"), ("never",)})
"""Negations that tell the agent not to act; "I can't send MMS" states a fact and withholds nothing."""
_ADVERBS = frozenset({"just", "actually", "really", "quite", "even", "go", "and", "ever"})
"""Words allowed between the negation and the verb ("don't actually cancel", "don't go and book it")."""
_WH = {"what", "which", "where", "when", "who", "whom", "how", "if", "whether", "why"}
"""After "not sure" / "I don't know" these make a question about facts ("not sure what the number was"), not a
doubt about going ahead."""
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*(?:-[^\W_]+)*|\?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_BREAK = re.compile(r"[,;:.!\u2014\u2013]+|\s-\s|(?<=\?)|\b(?:but|though|although|however|except)\b",
                    re.IGNORECASE)


_NOT_WORDS = re.compile(r"[^\s]*(?:@|\d|_|://|redacted:)[^\s]*")
"""Chunks that are data, not words: addresses, numbers, ids, links and redaction tokens. They are read as their
trailing punctuation only, so that a reply reads the same whether its data is redacted or not (redaction must
never change a verdict), and an address such as ``x@if.example`` holds no ``if``."""


_TRAILING_PUNCTUATION = re.compile(r"[.,;:!?]*$")


def _without_data(text: str) -> str:
    return _NOT_WORDS.sub(lambda m: _TRAILING_PUNCTUATION.search(m.group(0)).group(0), text)


def words(text: str) -> list[str]:
    """Lower-case word tokens (Unicode letters; ``?`` kept as a token); typographic apostrophes read as ``'``;
    data chunks (addresses, numbers, ids, redaction tokens) are left out."""
    return _WORD.findall(_without_data(text).casefold().replace("\u2019", "'"))


@lru_cache(maxsize=8192)
def _phrase_words(phrase: str) -> tuple[str, ...]:
    """:func:`words` of a list phrase, once per phrase (not again for every clause of every reply)."""
    return tuple(words(phrase))


def _clause_words(part: str) -> list[str]:
    # a part of a text that went through _without_data holds no data chunk any more (a chunk is a whole
    # whitespace-delimited run, and what replaced it is punctuation between spaces), so the second pass that
    # words() would make finds nothing to remove
    return _WORD.findall(part.casefold().replace("\u2019", "'"))


def clauses(text: str) -> list[tuple[int, list[str]]]:
    """The reply's clauses as ``(sentence number, words)`` (see the module docstring); empty clauses dropped."""
    text = _without_data(text)
    return [(n, ws) for n, sentence in enumerate(_SENTENCE.split(text))
            for part in _BREAK.split(sentence) if part and (ws := _clause_words(part))]


_LIST_NAMES = ("affirmatives", "negations", "not_affirmative", "deferrals", "refusals", "hedges", "conditions")
(_AFFIRMATIVES, _NEGATIONS, _NOT_AFFIRMATIVE, _DEFERRALS, _REFUSALS, _HEDGES, _CONDITIONS, _POLITE, _REQUESTS,
 _WITHHOLD) = range(10)
_HEAD_FILLER = frozenset(_FILLER | {"oh", "um", "uh", "well", "hmm"})


class _WordIndex:
    """A set of word lists compiled once: each phrase filed under its first word, so that a clause's words are
    looked up once each instead of every phrase of every list being tried at every word of the clause.

    ``first`` maps a word to ``(list number, phrase words)`` pairs, in list order and then phrase order (the
    refusal test takes the first refusal phrase, in list order, that opens a clause). ``missing`` holds the list
    numbers absent from the caller's dict: reading one raises the ``KeyError`` a dict lookup would, at the moment
    the reading rule needs it."""

    __slots__ = ("first", "missing")

    def __init__(self, lists: tuple[tuple[str, ...] | None, ...]) -> None:
        self.first: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        self.missing = frozenset(number for number, phrases in enumerate(lists) if phrases is None)
        for number, phrases in enumerate((*lists, _POLITE_IF, _REQUEST, _WITHHOLDING)):
            for phrase in phrases or ():
                parts = _phrase_words(phrase)
                if parts:
                    self.first.setdefault(parts[0], []).append((number, parts))

    def spans(self, tokens: list[str]) -> dict[int, list[tuple[int, int]]]:
        """``(start, end)`` word spans of every list's phrases in ``tokens``, by list number (lists with none
        left out)."""
        found: dict[int, list[tuple[int, int]]] = {}
        first = self.first
        for i, token in enumerate(tokens):
            for number, parts in first.get(token, ()):
                n = len(parts)
                if n == 1 or tuple(tokens[i:i + n]) == parts:
                    found.setdefault(number, []).append((i, i + n))
        return found

    def of(self, found: dict[int, list[tuple[int, int]]], number: int) -> list[tuple[int, int]]:
        """The spans of one list (raises ``KeyError`` naming a list the caller's dict lacks)."""
        if number in self.missing:
            raise KeyError(_LIST_NAMES[number])
        return found.get(number, [])

    def opening(self, tokens: list[str], number: int) -> int | None:
        """End of the first phrase of list ``number`` (in list order) that starts ``tokens``; ``None`` if none."""
        if number in self.missing:
            raise KeyError(_LIST_NAMES[number])
        if not tokens:
            return None
        return next((len(parts) for listed, parts in self.first.get(tokens[0], ())
                     if listed == number and tuple(tokens[:len(parts)]) == parts), None)


@lru_cache(maxsize=64)
def _compiled(lists: tuple[tuple[str, ...] | None, ...]) -> _WordIndex:
    return _WordIndex(lists)


def _index_of(lists: dict[str, tuple[str, ...]]) -> _WordIndex:
    # keyed by content, not identity: a detector is built per row from the same configured lists, and a dict
    # passed by a caller may be changed between calls
    return _compiled(tuple(tuple(lists[name]) if name in lists else None for name in _LIST_NAMES))


def _hedged(tokens: list[str], found: dict, index: _WordIndex) -> bool:
    return any(end >= len(tokens) or tokens[end] not in _WH for _, end in index.of(found, _HEDGES))


def _conditional(found: dict, index: _WordIndex) -> bool:
    polite = {k for start, end in found.get(_POLITE, ()) for k in range(start, end)}
    return any(start not in polite for start, _ in index.of(found, _CONDITIONS))


def _withheld(tokens: list[str], found: dict) -> bool:
    """A withholding phrase, or an imperative negation right before an action verb ("don't cancel it yet")."""
    if found.get(_WITHHOLD):
        return True
    for start, end in found.get(_NEGATIONS, ()):
        if tuple(tokens[start:end]) in _IMPERATIVE_NEGATIONS:
            verb = next((t for t in tokens[end:] if t not in _ADVERBS), None)
            if verb in _ACTIONS:
                return True
    return False


def _kind(tokens: list[str], index: _WordIndex) -> str:
    found = index.spans(tokens)
    blocked = {k for start, end in index.of(found, _NOT_AFFIRMATIVE) for k in range(start, end)}
    negations = index.of(found, _NEGATIONS)
    affirmatives = sorted((start, end) for start, end in index.of(found, _AFFIRMATIVES)
                          if not blocked.intersection(range(start, end)))
    # the clause's last affirmative decides; a negation anywhere before it in the clause, overlapping it ("please
    # do not go ahead") or right after it ("absolutely not") cancels it
    last = affirmatives[-1] if affirmatives else None
    negated = last is not None and any(
        s < last[0] or (s < last[1] < e) or s == last[1] for s, e in negations)  # "no problem" holds its "no"
    affirmed = last is not None and not negated
    question = tokens[-1] == "?"
    if negated:
        return "negated"
    if index.of(found, _DEFERRALS):
        return "deferral"
    if _withheld(tokens, found):
        return "withheld"
    if affirmed:
        request = any(start == 0 for start, _ in found.get(_REQUESTS, ()))
        if (question and not request) or _conditional(found, index) or _hedged(tokens, found, index):
            return "unclear_affirmative"
        return "affirmative"
    head = [t for t in tokens if t != "?"]
    while head and head[0] in _HEAD_FILLER:
        head = head[1:]
    refusal = index.opening(head, _REFUSALS)
    if refusal is not None and all(t in _FILLER for t in head[refusal:]):
        return "refusal"
    if question:
        return "question"
    if _hedged(tokens, found, index):
        return "hedge"
    return "condition" if _conditional(found, index) else "neutral"


_CACHED_TEXT_LIMIT = 2000
"""Replies longer than this many characters are read every time: the verdict cache holds short replies only, so
its memory stays bounded (at most :data:`_VERDICTS` entries of this size)."""
_VERDICTS = 16384


def read_reply(text: str, lists: dict[str, tuple[str, ...]] | None = None) -> ReplyVerdict:
    """The verdict of one user reply (module docstring); cached per (reply, lists content).

    Args:
        text: The user's reply.
        lists: Word lists by name (``affirmatives``, ``negations``, ``not_affirmative``, ``deferrals``,
            ``refusals``, ``hedges``, ``conditions``), each a sequence of phrases (strings); the defaults of this
            module when ``None`` or empty.

    Returns:
        ``"confirmed"``, ``"refused"``, ``"unclear"`` or ``"silent"``.

    Raises:
        KeyError: ``lists`` lacks a list that reading this reply needs (named by the error).
    """
    return _read(text, _index_of(lists or DEFAULT_LISTS))


def reply_reader(lists: dict[str, tuple[str, ...]] | None = None) -> Callable[[str], ReplyVerdict]:
    """:func:`read_reply` with ``lists`` fixed: their phrase index is found once, here, not per reply (for a
    caller that owns ``lists`` and does not change them, as a confirmation detector does).

    Returns:
        ``read(text)`` -> the verdict of one reply; raises ``KeyError`` as :func:`read_reply` does.
    """
    index = _index_of(lists or DEFAULT_LISTS)
    return lambda text: _read(text, index)


def _read(text: str, index: _WordIndex) -> ReplyVerdict:
    if len(text) > _CACHED_TEXT_LIMIT:
        return _verdict(text, index)
    return _cached_verdict(text, index)


def _verdict(text: str, index: _WordIndex) -> ReplyVerdict:
    parts = clauses(text)
    kinds = [_kind(tokens, index) for _, tokens in parts]
    last = max((i for i, k in enumerate(kinds) if k in ("affirmative", "unclear_affirmative")), default=None)
    after = kinds if last is None else kinds[last + 1:]
    if any(k in ("negated", "deferral", "refusal") for k in after):
        return "refused"
    # a withheld action refuses only beside the yes: further on it is about something else
    if (after[:1] if last is not None else after).count("withheld"):
        return "refused"
    if last is None:
        return "unclear" if any(k in ("question", "hedge", "condition") for k in kinds) else "silent"
    sentence = parts[last][0]
    same_sentence = [k for (n, _), k in zip(parts[last + 1:], after) if n == sentence]
    condition_before = last > 0 and kinds[last - 1] == "condition" and parts[last - 1][0] == sentence
    if kinds[last] == "unclear_affirmative" or condition_before or "hedge" in after or any(
            k in ("question", "condition") for k in same_sentence):
        return "unclear"
    return "confirmed"


_cached_verdict = lru_cache(maxsize=_VERDICTS)(_verdict)


DEFAULT_LISTS: dict[str, tuple[str, ...]] = {
    "affirmatives": DEFAULT_AFFIRMATIVES, "negations": DEFAULT_NEGATIONS, "not_affirmative": DEFAULT_NOT_AFFIRMATIVE,
    "deferrals": DEFAULT_DEFERRALS, "refusals": DEFAULT_REFUSALS, "hedges": DEFAULT_HEDGES,
    "conditions": DEFAULT_CONDITIONS,
}
"""The default word lists by name (what :class:`tooleval.rules.ConfirmationConfig` starts from)."""
