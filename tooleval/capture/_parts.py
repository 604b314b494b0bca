"""A trace redacted part by part, each part's work remembered by its JSON text.

The parts of a trace are the elements of its top-level lists (the messages) and its other top-level values. The
same parts recur from trace to trace — the system prompt in every one, a case's user turns and tool results in
each of its trials — and what redaction does to a part depends on the part alone, given the run's base secrets and
the trace's own secrets that occur in it:

* the secrets walk (``Redactor._collect``) finds in a part the same ``(form, token)`` pairs, in the same order,
  whatever the trace; the whole walk visits the parts last first, so the trace's own secrets are the parts'
  pairs taken last part first, the first pair to give a form keeping it;
* the transformation of a part depends on its value, the base secrets and, of the trace's own secrets, only the
  forms that occur in it: a form that occurs in none of its strings never matches, and a number becomes a token
  only when its canonical JSON is a numeric form (all numeric forms are therefore counted as occurring).

So each part's pairs, and its redacted text under each set of own secrets seen in it, are computed once and found
again by the part's orjson text; the trace's text is the parts' texts put together with ``orjson.Fragment``.
Looking a part up costs its serialisation and a hash; walking it cost about a microsecond per 40 bytes.

orjson's text stands for one value but for the non-finite floats, which it writes as ``null``: a part whose
redacted fields hold ``null`` is walked every time (a ``NaN`` there makes the token raise, as the walk does).
Whatever orjson does not write as plain JSON (a subclass of ``str``, a date, an integer beyond 64 bits, a lone
surrogate) and configured paths (where a part's result depends on its place) leave the trace to the whole walk.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import orjson

from tooleval.canonical import dumps_text, kept_bytes
from tooleval.capture._call_state import MARKER_KEY, _Call
from tooleval.capture._secret_text import _NUMBER_FORM, _is_plain

if TYPE_CHECKING:
    from tooleval.capture.redaction import Redactor

__all__ = ["PLAIN_JSON", "PartMemo"]

PLAIN_JSON = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""Refuse what orjson would write as something else (a ``str`` subclass as a string, a date as text): such a
value goes to the whole walk, which reads it by its own type."""
_TEXT_TYPES = frozenset((str, type(None)))
_RESULTS_KEPT = 8
"""Redacted texts kept per part (one per set of own secrets occurring in it; a part holding a secret of its own
trace's alone, unlike a case's tool result, would otherwise add one per trace)."""


class _Part:
    """What redaction does to one part. ``found``: its ``(form, token)`` pairs in the walk's order (first
    occurrence of each form); ``exact``: its text holds no ``\\u`` or ``\\/`` escape, so a plain form occurs in a
    string of the part (at any depth of nested JSON text) only if it occurs in the text; ``walk``: a ``null``
    under a redacted field (see the module docstring); ``quiet``: no redacted name and no credential in it
    (``Redactor._judge_quiet``); ``results``: own secrets occurring in it -> (redacted
    text, redacted field paths)."""

    __slots__ = ("found", "exact", "walk", "quiet", "results", "text")

    def __init__(self, found: tuple[tuple[str, str], ...], exact: bool, walk: bool, quiet: bool = False) -> None:
        self.text = b""
        """The part's orjson text (its writing with :data:`PLAIN_JSON`)."""
        self.found = found
        self.exact = exact
        self.walk = walk
        self.quiet = quiet
        self.results: dict[tuple[tuple[str, str], ...], tuple[bytes, tuple[str, ...]]] = {}


class PartMemo:
    """Parts by ``(top-level key, orjson text)``, holding texts of at most ``chars`` bytes in all, then starting
    afresh. Entries depend on their key and the redactor alone; every dictionary operation is a single one, so
    threads may share the memo (one that misses while another clears computes the part again)."""

    __slots__ = ("_entries", "_chars", "_limit")

    def __init__(self, chars: int) -> None:
        self._entries: dict[tuple[str, bytes], _Part] = {}
        self._chars = 0
        self._limit = chars

    def redact(self, redactor: "Redactor", trace: dict[str, Any], case: Any, values: bool = False,
               written: dict[str, bytes] | None = None) -> str | dict[str, Any] | None:
        """The text of ``redactor.redact_trace(trace, case)`` as :func:`tooleval.canonical.dumps_text` writes it,
        or ``None`` when the trace is for the whole walk (see the module docstring).

        ``values``: the redacted trace as JSON values instead of its text, for a caller that would only decode the
        text again: a part that redaction leaves as it is stays the very object of ``trace``, and only the parts it
        changed are read from their redacted text.

        ``written``: filled, when given and ``values``, with the orjson writing of each redacted top-level list
        (the messages) that the parts' texts make up (what ``orjson.dumps`` of the list in the result gives), so
        that a caller need not write it again; left empty for a trace judged whole."""
        if redactor._paths:
            return None
        keep = {key: trace[key] for key in ("case_id", "trial", "agent") if key in trace}
        fields = redactor._fields
        learned = self._entries.get
        text_only = _TEXT_TYPES.issuperset
        parts: list[Any] = []
        texts: list[bytes] = []
        entries: list[_Part] = []
        layout: list[tuple[str, bool, int]] = []  # (key, whether a list, end of its parts)
        for key, value in trace.items():
            if key in keep:
                continue
            if type(key) is not str:
                return None
            lowered = key.lower()
            if lowered in fields or "authorization" in lowered:  # secrets the body's own walk adds
                return None
            listed = type(value) is list
            for part in (value if listed else (value,)):
                # a part of text and null values only is found by its keys and values themselves: writing a part
                # costs more than hashing its texts (orjson gives each writing a buffer of 4 KB at least), and
                # equal keys and texts are the same part; any other part by its text
                ident = entry = text = None
                if type(part) is dict:
                    texts_of = tuple(part.values())
                    if text_only(map(type, texts_of)):
                        ident = (key, tuple(part), texts_of)
                        entry = learned(ident)
                        if entry is not None:
                            text = entry.text
                if text is None:
                    try:
                        text = orjson.dumps(part, option=PLAIN_JSON)
                    except (TypeError, orjson.JSONEncodeError):
                        return None
                    if ident is None:
                        entry = learned((key, text))
                if not entries and (entry is None or entry.quiet):
                    # a trace whose first part is new or quiet is judged whole first (one look at its text): most
                    # short traces hold no secret, and their parts, seldom seen again, need not be learned; a
                    # multi-turn trace opens with a system prompt naming the profile's fields, never quiet
                    body = {name: item for name, item in trace.items() if name not in keep}
                    if redactor._untouched(body):
                        whole = {**keep, **body, "redacted_fields": []}
                        return whole if values else dumps_text(whole)
                if entry is None:
                    entry = self._learn(redactor, key, part, text, _Call, ident)
                    text = entry.text
                parts.append(part)
                texts.append(text)
                entries.append(entry)
            layout.append((key, listed, len(parts)))

        found: dict[str, str] = {}
        for entry in reversed(entries):  # the walk's order: last value first, a list's last element first
            if entry.found:
                for form, token in entry.found:
                    found.setdefault(form, token)
        base = redactor._base
        own = {form: token for form, token in found.items() if form not in base}
        relevant = _occurring(own, texts, entries)

        result: dict[str, Any] = dict(keep)
        changed: set[str] = set()
        metadata_text = b"{}"
        start = 0
        for key, listed, end in layout:
            done_texts = []
            done_values = []
            for index in range(start, end):
                entry = entries[index]
                done = None if entry.walk else entry.results.get(relevant[index])
                if done is None:
                    subset = relevant[index]
                    call = _Call()
                    redacted = redactor._transform(parts[index], redactor._replacer(dict(subset)), call, key)
                    try:
                        # the redacted value itself is kept with its text: a trace is decoded once, and the
                        # part's values are what decoding that text would give (plain JSON values)
                        done = (kept_bytes(orjson.dumps(redacted)), tuple(call.fields), redacted)
                    except (TypeError, orjson.JSONEncodeError):
                        return None
                    if not entry.walk and len(entry.results) < _RESULTS_KEPT:
                        entry.results[subset] = done
                        self._chars += 2 * len(done[0])  # the value, about twice its text's size
                made = done[0]
                done_texts.append(made)
                if values:
                    done_values.append(parts[index] if made == texts[index] else
                                       done[2] if len(done) > 2 else orjson.loads(made))
                if done[1]:
                    changed.update(done[1])
            start = end
            if values:
                result[key] = done_values if listed else done_values[0]
                if key == "metadata":
                    metadata_text = done_texts[0]
                elif listed and written is not None:
                    written[key] = b"[" + b",".join(done_texts) + b"]"
                continue
            if listed:
                result[key] = orjson.Fragment(b"[" + b",".join(done_texts) + b"]")
            else:
                result[key] = orjson.Fragment(done_texts[0])
                if key == "metadata":
                    metadata_text = done_texts[0]

        markers = redactor._markers(own, case) if case is not None else []
        if markers:
            if not isinstance(trace.get("metadata"), dict):
                metadata = {}
            else:  # the redacted metadata: its value when values are built, else read from its text
                metadata = result["metadata"] if values else orjson.loads(metadata_text)
            result["metadata"] = {**metadata, MARKER_KEY: {"reference_secrets": markers}}
        result["redacted_fields"] = sorted(changed)
        if values:
            return result
        try:
            return orjson.dumps(result).decode()
        except (TypeError, orjson.JSONEncodeError):  # a kept value orjson cannot write: the whole walk writes it
            return None

    def _learn(self, redactor: "Redactor", key: str, part: Any, text: bytes, call_type: type,
               ident: tuple | None = None) -> _Part:
        """The part's entry, made and kept under ``ident`` (its keys and texts) or else ``(key, text)``."""
        text = kept_bytes(text)  # kept as the memo's key (and maybe a result): orjson's buffer is 4 KB at least
        decoded = text.decode()
        exact = "\\u" not in decoded and "\\/" not in decoded
        if redactor._names_spelled_alike and redactor._judge_quiet(decoded):
            # no redacted name, no credential: the walk finds nothing, and without a secret form in its text the
            # transformation keeps it as it is (Redactor._quiet_parts)
            entry = _Part((), exact, False, quiet=True)
            if redactor._base_replacer.absent_from(decoded):
                entry.results[()] = (text, ())
        else:
            found: dict[str, str] = {}
            redactor._collect(part, found, call_type())
            entry = _Part(tuple(found.items()), exact, _null_under_field(part, redactor._fields))
        size = 2 * len(text)  # the text and, about as long, its redacted text
        if self._chars + size > self._limit:
            self._entries.clear()
            self._chars = 0
        entry.text = text
        self._entries[(key, text) if ident is None else ident] = entry
        self._chars += size
        return entry


def _occurring(own: dict[str, str], texts: list[bytes], entries: list[_Part]) -> list[tuple[tuple[str, str], ...]]:
    """For each part, which of the trace's own secrets occur in it, as a sorted tuple of ``(form, token)``: the
    forms found in its text and every numeric form (a number is replaced when its canonical JSON is a form, which
    its text need not spell); all of them for a part whose text is not exact, or for every part when some form is
    not plain (then a text may spell it otherwise). The forms are looked for in the parts' texts joined by line
    breaks, which no plain form holds, so a form found lies in one part."""
    every = tuple(sorted(own.items()))
    if not every:
        return [()] * len(texts)
    if not all(_is_plain(form) for form in own):
        return [every] * len(texts)
    numeric = [item for item in every if _NUMBER_FORM.fullmatch(item[0])]
    try:
        encoded = [(form.encode(), (form, token)) for form, token in every if not _NUMBER_FORM.fullmatch(form)]
    except UnicodeEncodeError:  # a lone surrogate decoded from an escape in text
        return [every] * len(texts)
    joined = b"\n".join(texts)
    starts = list(accumulate((len(text) + 1 for text in texts), initial=0))
    hits: dict[int, list[tuple[str, str]]] = {}
    for form, item in encoded:
        at = joined.find(form)
        while at >= 0:
            index = bisect_right(starts, at) - 1
            hits.setdefault(index, []).append(item)
            at = joined.find(form, starts[index + 1])
    plain = tuple(numeric)
    return [every if not entry.exact else tuple(sorted(hits[index] + numeric)) if index in hits else plain
            for index, entry in enumerate(entries)]


def _null_under_field(value: Any, fields: set[str]) -> bool:
    """Whether a value under one of ``fields`` (at any depth of the part, outside strings) holds ``null``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if str(key).lower() in fields:
                    if b"null" in orjson.dumps(child, option=PLAIN_JSON):
                        return True
                else:
                    stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
    return False
