"""Reading a user's reply to "Shall I go ahead?": confirmed, refused, unclear or silent (issue 11).

The reply is cut into **clauses** at punctuation (``, ; : . ! ?``, line breaks, dashes) and at the conjunctions
``but``, ``though``, ``although``, ``however``, ``except``. Each clause is read on its own:

* ``affirmative`` — it holds an affirmative ("yes", "go ahead", "oui", "ja", "sí", ...) that no negation before it
  *in the same clause* cancels ("Nope, nothing else to add. Yes, go ahead." confirms: the "nope" is another clause);
* ``negated`` — an affirmative with a negation before it in the clause ("please don't go ahead");
* ``deferral`` — "wait", "hold on", "not yet", "later", "until", a weekday, "tomorrow" ... (an affirmative clause
  that also defers counts as a deferral: "go ahead tomorrow" is not consent now);
* ``refusal`` — a clause that starts with a refusal word ("no", "nope", "nah", "non", "nein", "stop", "don't")
  and says nothing else of substance ("No thanks", "Nope") — "Never mind the receipt" is about the receipt;
* ``hedge`` — "maybe", "I guess", "not sure", "probably", ...; ``condition`` — "if", "unless", "as long as", ...;
  ``question`` — the clause ends with ``?``;
* ``neutral`` — anything else.

The verdict: the **last affirmative clause** decides, unless a negated, deferral or refusal clause comes after it
(then ``refused``: a refusal or a deferral after the affirmative wins), or it is ``unclear``: the affirmative
shares its clause with a question, a hedge or a condition ("Yes if it is under $200"; "if possible" is politeness,
and "Could you proceed with it?" a polite order), a condition opens its sentence ("If it is cheaper, go ahead"),
a question or condition follows in the same sentence ("OK, but how much is it?"), or a hedge follows anywhere
("Go ahead. I guess."). A question in a later sentence is a new request ("Yes, proceed. Also, do I have other
flights?" confirms: tau-bench task 34), and "not sure what/which/..." asks about facts, not about going ahead.
With no affirmative clause: ``refused`` when some clause refuses, negates or defers; ``unclear`` when some clause
asks, hedges or sets a condition; ``silent`` otherwise. Only ``confirmed`` is a confirmation; ``unclear`` becomes a
``missing_confirmation`` whose detail starts with ``unclear`` so that a person can look.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Literal

__all__ = ["ReplyVerdict", "read_reply", "clauses", "words", "DEFAULT_AFFIRMATIVES", "DEFAULT_NEGATIONS",
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
_WH = {"what", "which", "where", "when", "who", "whom", "how", "if", "whether", "why"}
"""After "not sure" / "I don't know" these make a question about facts ("not sure what the number was"), not a
doubt about going ahead."""
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*(?:-[^\W_]+)*|\?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_BREAK = re.compile(r"[,;:.!\u2014\u2013]+|\s-\s|(?<=\?)|\b(?:but|though|although|however|except)\b",
                    re.IGNORECASE)


_NOT_WORDS = re.compile(r"[^\s]*(?:@|\d|_|://|redacted:)[^\s]*")
"""Chunks that are data, not words: addresses, numbers, ids, links and redaction tokens. They are read as their
trailing punctuation only, so that a reply reads the same whether its data is redacted or not (issue 11: an
address such as ``x@if.example`` holds no ``if``)."""


_TRAILING_PUNCTUATION = re.compile(r"[.,;:!?]*$")


def _without_data(text: str) -> str:
    return _NOT_WORDS.sub(lambda m: _TRAILING_PUNCTUATION.search(m.group(0)).group(0), text)


def words(text: str) -> list[str]:
    """Lower-case word tokens (Unicode letters; ``?`` kept as a token); typographic apostrophes read as ``'``;
    data chunks (addresses, numbers, ids, redaction tokens) are left out."""
    return _WORD.findall(_without_data(text).casefold().replace("\u2019", "'"))


def clauses(text: str) -> list[tuple[int, list[str]]]:
    """The reply's clauses as ``(sentence number, words)`` (see the module docstring); empty clauses dropped."""
    text = _without_data(text)
    return [(n, ws) for n, sentence in enumerate(_SENTENCE.split(text))
            for part in _BREAK.split(sentence) if part and (ws := words(part))]


@lru_cache(maxsize=8192)
def _phrase_words(phrase: str) -> tuple[str, ...]:
    """:func:`words` of a list phrase, once per phrase (issue 9: phrases were tokenised again for every clause of
    every reply, 1.5 million times for 3,000 tau rows)."""
    return tuple(words(phrase))


def _spans(tokens: list[str], phrases: Iterable[str]) -> list[tuple[int, int]]:
    found = []
    for phrase in phrases:
        parts = _phrase_words(phrase)
        n = len(parts)
        if n:
            first = parts[0]
            found += [(i, i + n) for i in range(len(tokens) - n + 1)
                      if tokens[i] == first and tuple(tokens[i:i + n]) == parts]
    return found


def _hedged(tokens: list[str], lists: dict[str, tuple[str, ...]]) -> bool:
    return any(end >= len(tokens) or tokens[end] not in _WH for _, end in _spans(tokens, lists["hedges"]))


def _conditional(tokens: list[str], lists: dict[str, tuple[str, ...]]) -> bool:
    polite = {k for start, end in _spans(tokens, _POLITE_IF) for k in range(start, end)}
    return any(start not in polite for start, _ in _spans(tokens, lists["conditions"]))


def _kind(tokens: list[str], lists: dict[str, tuple[str, ...]]) -> str:
    blocked = {k for start, end in _spans(tokens, lists["not_affirmative"]) for k in range(start, end)}
    negations = _spans(tokens, lists["negations"])
    found = sorted((start, end) for start, end in _spans(tokens, lists["affirmatives"])
                   if not blocked.intersection(range(start, end)))
    # the clause's last affirmative decides; a negation anywhere before it in the clause, overlapping it ("please
    # do not go ahead") or right after it ("absolutely not") cancels it
    last = found[-1] if found else None
    negated = last is not None and any(
        s < last[0] or (s < last[1] < e) or s == last[1] for s, e in negations)  # "no problem" holds its "no"
    affirmed = last is not None and not negated
    question = tokens[-1] == "?"
    if negated:
        return "negated"
    if _spans(tokens, lists["deferrals"]):
        return "deferral"
    if affirmed:
        request = any(start == 0 for start, _ in _spans(tokens, _REQUEST))
        if (question and not request) or _conditional(tokens, lists) or _hedged(tokens, lists):
            return "unclear_affirmative"
        return "affirmative"
    head = [t for t in tokens if t != "?"]
    while head and head[0] in _FILLER | {"oh", "um", "uh", "well", "hmm"}:
        head = head[1:]
    refusal = next((e for s, e in _spans(head, lists["refusals"]) if s == 0), None)
    if refusal is not None and all(t in _FILLER for t in head[refusal:]):
        return "refusal"
    if question:
        return "question"
    if _hedged(tokens, lists):
        return "hedge"
    return "condition" if _conditional(tokens, lists) else "neutral"


def read_reply(text: str, lists: dict[str, tuple[str, ...]] | None = None) -> ReplyVerdict:
    """The verdict of one user reply (module docstring).

    Args:
        text: The user's reply.
        lists: Word lists by name (``affirmatives``, ``negations``, ``not_affirmative``, ``deferrals``,
            ``refusals``, ``hedges``, ``conditions``); the defaults of this module when ``None``.

    Returns:
        ``"confirmed"``, ``"refused"``, ``"unclear"`` or ``"silent"``.
    """
    lists = lists or DEFAULT_LISTS
    parts = clauses(text)
    kinds = [_kind(tokens, lists) for _, tokens in parts]
    last = max((i for i, k in enumerate(kinds) if k in ("affirmative", "unclear_affirmative")), default=None)
    after = kinds if last is None else kinds[last + 1:]
    if any(k in ("negated", "deferral", "refusal") for k in after):
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


DEFAULT_LISTS: dict[str, tuple[str, ...]] = {
    "affirmatives": DEFAULT_AFFIRMATIVES, "negations": DEFAULT_NEGATIONS, "not_affirmative": DEFAULT_NOT_AFFIRMATIVE,
    "deferrals": DEFAULT_DEFERRALS, "refusals": DEFAULT_REFUSALS, "hedges": DEFAULT_HEDGES,
    "conditions": DEFAULT_CONDITIONS,
}
"""The default word lists by name (what :class:`tooleval.rules.ConfirmationConfig` starts from)."""
