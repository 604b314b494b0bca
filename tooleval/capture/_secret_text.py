"""Secrets in text: ``key: value`` pairs of redacted fields in text that is not JSON, the text forms of a secret
value, and one-pass replacement (issue 11).

Free text (message contents, malformed argument text such as ``{'email': 'x@y.z', 'api_key': 'k-1'}``, a
truncated tool result) is read for pairs whose key — double-quoted, single-quoted or bare, JSON escapes decoded
(``"em\\u0061il"``), any letter case — names a redacted field. The value (quoted string, number or bare word) is a
secret. A secret value is then looked for in text in each of its **forms**: the value itself, its JSON-escaped
spellings, and for a number its canonical JSON (``4111111111111111``). Replacement is one left-to-right regex
pass (longest form first at each position), so the result depends only on the secrets that occur in the text,
and an inserted token is never rescanned.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Collection, Iterator

from tooleval.canonical import canonical_json

__all__ = ["MIN_TEXT", "leaves", "secret_forms", "text_pairs", "Replacer"]

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


def _cannot_hold_pair(text: str, names: Collection[str] | None) -> bool:
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
    key is not scanned at all (issue 9: the pair expression over every string leaf of a tau trace cost ~20 % of
    the run)."""
    if _cannot_hold_pair(text, names):
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


class Replacer:
    """Forms -> replacement tokens, applied in one regex pass. Compiled once per distinct set of forms."""

    _cache: dict[frozenset, "re.Pattern[str] | None"] = {}

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        key = frozenset(table)
        if key not in Replacer._cache:
            if len(Replacer._cache) > 256:
                Replacer._cache.clear()
            forms = sorted(table, key=lambda f: (-len(f), f))
            Replacer._cache[key] = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._pattern = Replacer._cache[key]

    def text(self, text: str) -> str:
        """``text`` with every occurring form replaced by its token."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self.table[m.group(0)], text)

    def holds(self, form: str) -> bool:
        """Whether ``form`` is a secret form."""
        return form in self.table
