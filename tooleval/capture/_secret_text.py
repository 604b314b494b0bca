"""Secrets in text: ``key: value`` pairs of redacted fields in text that is not JSON, the text forms of a secret
value, and one-pass replacement.

Free text (message contents, malformed argument text such as ``{'email': 'x@y.z', 'api_key': 'k-1'}``, a
truncated tool result) is read for pairs whose key — double-quoted, single-quoted or bare, JSON escapes decoded
(``"em\\u0061il"``), any letter case — names a redacted field. The value (quoted string, number or bare word) is a
secret. A secret value is then looked for in text in each of its **forms**: the value itself, its JSON-escaped
spellings, and for a number its canonical JSON (``4111111111111111``). Replacement is one left-to-right pass that
takes, at the leftmost position where some form occurs, the longest form there, so the result depends only on the
secrets that occur in the text, and an inserted token is never rescanned. The forms are compiled once into a
regular expression shaped as a trie (one path per position instead of one attempt per form).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Collection, Iterator

from tooleval.canonical import canonical_json

__all__ = ["MIN_TEXT", "cannot_hold_pair", "form_pattern", "leaves", "secret_forms", "text_pairs", "Replacer"]

MIN_TEXT = 4
"""Forms shorter than this are not looked for in text or in other values (``"TX"``, ``7`` would hit everywhere);
a value under a redacted key is always replaced where it stands."""

_QUOTED_KEY = r"""(?P<q>["'])(?P<key>(?:(?!(?P=q))[^\\\n]|\\.){1,64})(?P=q)\s*[:=]\s*"""
_BARE_KEY = r"""(?<![\w"'\\])(?P<bare>[A-Za-z_][\w-]{0,63})\s*[:=]\s*"""
_VALUE = (r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|-?\d[\d.eE+-]*"""
          r"""|[^\s,;'"{}\[\]()]*[\d@._+-][^\s,;'"{}\[\]()]*)""")
"""A quoted string, a number, or a bare word holding a digit or one of ``@ . _ + -`` (``email: is that ok``
does not make ``is`` a secret; ``email: ana@x.org`` does)."""
_PAIR = re.compile(f"(?:{_QUOTED_KEY}|{_BARE_KEY}){_VALUE}")


def _unescape(inner: str, quote: str) -> str:
    """The text of a quoted literal's inside (JSON escapes decoded; for single quotes ``\\'`` too)."""
    if quote == "'":
        inner = re.sub(r'\\(.)|"', lambda m: ("'" if m.group(1) == "'" else m.group(0)) if m.group(1) is not None
                       else '\\"', inner)
    try:
        return json.loads('"' + inner + '"')
    except ValueError:
        return inner


def _decode_value(literal: str) -> Any:
    if literal[:1] in ("'", '"'):
        return _unescape(literal[1:-1], literal[0])
    try:
        value = json.loads(literal)
    except ValueError:
        return literal
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return literal
    return value


def cannot_hold_pair(text: str, names: Collection[str] | None) -> bool:
    """True when ``text`` provably holds no pair whose key is one of ``names`` (lower-case ASCII): no ``:``/``=``
    at all, or plain ASCII text (no escape to decode) in which no name occurs in any letter case — a key is then
    a substring of the text, and ASCII lower-casing maps it character by character."""
    if ":" not in text and "=" not in text:
        return True
    if names is None or not text.isascii() or "\\" in text or not all(n.isascii() for n in names):
        return False
    lowered = text.lower()
    return not any(name in lowered for name in names)


def text_pairs(text: str, is_redacted: Callable[[str], bool],
               names: Collection[str] | None = None) -> Iterator[tuple[int, int, Any, str]]:
    """``(start, end, value, literal)`` of every ``key: value`` / ``key=value`` pair in ``text`` whose decoded,
    case-folded key ``is_redacted``; ``start:end`` spans the value's literal.

    ``names``: when given, ``is_redacted(key)`` is exactly ``key in names`` — then a text that cannot hold such a
    key is not scanned at all (the pair expression over every string leaf of a tau trace cost ~20 % of the
    run)."""
    if cannot_hold_pair(text, names):
        return
    for match in _PAIR.finditer(text):
        quoted = match.group("key")
        key = _unescape(quoted, match.group("q")) if quoted is not None else match.group("bare")
        if is_redacted(key.lower()):
            literal = match.group("value")
            if literal[:1] not in ("'", '"'):
                literal = literal.rstrip(".")  # the end of a sentence, not of the value
            if literal:
                start = match.start("value")
                yield start, start + len(literal), _decode_value(literal), literal


def leaves(value: Any) -> Iterator[tuple[Any, str]]:
    """``(leaf, text)`` for every string and number leaf of a JSON value (keys and booleans are not secret); a
    number's text is its canonical JSON, a number that has none (non-finite) is skipped."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            yield item, item
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            try:
                yield item, canonical_json(item)
            except ValueError:
                continue


def secret_forms(value: Any) -> list[tuple[str, Any]]:
    """``(form, leaf)`` for every text form of every leaf of a secret value (strings and numbers; keys and
    booleans are not secret), forms of at least :data:`MIN_TEXT` characters."""
    out: list[tuple[str, Any]] = []
    for item, text in leaves(value):
        forms = {item, json.dumps(item, ensure_ascii=False)[1:-1], json.dumps(item)[1:-1]} if isinstance(
            item, str) else {text}
        out += [(form, item) for form in forms if len(form) >= MIN_TEXT]
    return out


_NESTING = 64
"""Deepest nesting of groups a trie pattern may have (forms that are prefixes of one another, one level each);
past it the forms are compiled as a flat alternation, which finds the same matches more slowly (the regular
expression parser recurses per group)."""


def form_pattern(forms: Collection[str]) -> "re.Pattern[str] | None":
    """A pattern that finds, at the leftmost position where some form occurs, the longest form there: the same
    matches as the alternation of the forms sorted longest first, compiled as a trie (one nested group per point
    where forms branch or end) so that the engine follows one path per position instead of trying every form.

    Args:
        forms: Non-empty strings (an empty form would match everywhere: it is compiled as the flat alternation).

    Returns:
        The compiled pattern, or ``None`` for no forms.
    """
    if not forms:
        return None
    if "" in forms:
        return re.compile("|".join(map(re.escape, sorted(forms, key=lambda f: (-len(f), f)))))
    end = object()  # marks a node where a form ends (a key no one-character string can equal)
    root: dict[Any, Any] = {}
    for form in forms:
        node = root
        for char in form:
            node = node.setdefault(char, {})
        node[end] = True
    source = _trie_source(root, end)
    if source is None:
        return re.compile("|".join(map(re.escape, sorted(forms, key=lambda f: (-len(f), f)))))
    return re.compile(source)


def _trie_source(root: dict[Any, Any], end: object) -> str | None:
    """The regular expression of a trie, longest continuation first (a node where a form ends makes what follows
    it optional, tried before stopping); ``None`` when it would nest deeper than :data:`_NESTING`. Chains of nodes
    with one child and no end become one literal, so a long form costs no nesting."""

    def branch(node: dict[Any, Any], depth: int) -> str | None:
        if depth > _NESTING:
            return None
        alternatives = []
        for char, child in node.items():
            if char is end:
                continue
            run = [char]
            while end not in child and len(child) == 1:
                (char, child), = child.items()
                run.append(char)
            rest = branch(child, depth + 1)
            if rest is None:
                return None
            alternatives.append(re.escape("".join(run)) + rest)
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        return f"(?:{body})?" if end in node else body

    return branch(root, 0)


_NUMBER_FORM = re.compile(r"-?[0-9][0-9.eE+-]*")
"""What a number's canonical JSON looks like (``4111111111111111``, ``-2.5``, ``1e+16``): a table with no such
form cannot hold a number, whatever its value."""


def _is_plain(form: str) -> bool:
    """No character that JSON text may spell as an escape (a quote, a backslash, a slash, a control character)."""
    return not any(ch in '"\\/' or ch < " " for ch in form)


_MISSING = object()
_PATTERNS: dict[frozenset, "re.Pattern[str] | None"] = {}
"""Compiled patterns by set of forms, shared by every replacer of the process (each value depends on its key
only, so concurrent readers and writers at worst compile a pattern twice)."""
_PATTERNS_KEPT = 256


def _compiled(forms: frozenset) -> "re.Pattern[str] | None":
    pattern = _PATTERNS.get(forms, _MISSING)
    if pattern is _MISSING:
        pattern = form_pattern(forms)
        if len(_PATTERNS) >= _PATTERNS_KEPT:
            _PATTERNS.clear()
        _PATTERNS[forms] = pattern
    return pattern  # type: ignore[return-value]


class Replacer:
    """Forms -> replacement tokens, applied in one pass; immutable once built, so one replacer may serve several
    threads.

    ``base`` layers a replacer over another one (a run's base secrets, compiled once) without compiling the union:
    the pass takes whichever of the two patterns matches leftmost (the longer at the same position), and a form in
    both tables takes this table's token, as ``Replacer({**base.table, **table})`` would.
    """

    def __init__(self, table: dict[str, str], base: "Replacer | None" = None) -> None:
        """Args:
            table: Form -> token.
            base: A replacer whose forms apply too (its tokens give way to ``table``'s for a shared form).
        """
        if base is not None and base._base is not None:
            base = Replacer({**base._base.table, **base.table})  # one level of layering only
        if base is not None and not base.table:
            base = None
        if base is not None and ("" in table or "" in base.table):
            table, base = {**base.table, **table}, None  # an empty form matches everywhere: one flat pattern
        self.table = table
        self._base = base
        self._pattern = _compiled(frozenset(table)) if table else None
        self._numbers = any(_NUMBER_FORM.fullmatch(form) for form in table) or (
            base is not None and base._numbers)
        self._plain = all(_is_plain(form) for form in table) and (base is None or base._plain)
        self._shortest = min(map(len, [*table, *(base.table if base is not None else ())]), default=0)
        """Length of the shortest form: a shorter text holds none (most strings of a trace are short)."""

    def holds(self, form: str) -> bool:
        """Whether ``form`` is a secret form."""
        return form in self.table or (self._base is not None and form in self._base.table)

    def may_hold_numbers(self) -> bool:
        """False when no form is a number's canonical JSON: then no number can be a secret."""
        return self._numbers

    def _token(self, match: "re.Match[str]") -> str:
        form = match.group()
        token = self.table.get(form)
        return token if token is not None else self._base.table[form]  # type: ignore[union-attr]

    def absent_from(self, text: str) -> bool:
        """Whether replacement provably changes no string and no number of a JSON value, judged on ``text``, the
        value's orjson serialisation holding no ``\\u`` or ``\\/`` (nested JSON text spells every character of a
        plain form as itself then).

        True when no form is a number's canonical JSON (orjson spells some floats differently, ``0.00001`` for
        ``1e-05``, so numbers are never judged on text) and either there is no form, or every form is plain — no
        quote, backslash, slash or control character, the characters JSON escapes — and none occurs in ``text``.
        """
        if self._numbers:
            return False
        if not self.table and self._base is None:
            return True
        return self._plain and not self.search(text)

    def search(self, text: str) -> bool:
        """Whether some form occurs in ``text``."""
        if self._pattern is not None and self._pattern.search(text) is not None:
            return True
        return self._base is not None and self._base.search(text)

    def text(self, text: str) -> str:
        """``text`` with every occurring form replaced by its token."""
        own = self._pattern
        base = self._base._pattern if self._base is not None else None
        if len(text) < self._shortest:
            return text
        if base is None:
            return text if own is None else own.sub(self._token, text)
        if own is None:
            return base.sub(self._token, text)
        pieces: list[str] = []
        position = 0
        mine, theirs = own.search(text), base.search(text)
        while mine is not None or theirs is not None:
            if mine is not None and mine.start() < position:
                mine = own.search(text, position)
            if theirs is not None and theirs.start() < position:
                theirs = base.search(text, position)
            if mine is None and theirs is None:
                break
            if theirs is None or (mine is not None and (mine.start(), -mine.end()) <= (theirs.start(), -theirs.end())):
                match = mine
            else:
                match = theirs
            pieces += [text[position:match.start()], self._token(match)]  # type: ignore[union-attr]
            position = match.end()  # type: ignore[union-attr]
        if not pieces:
            return text
        pieces.append(text[position:])
        return "".join(pieces)
