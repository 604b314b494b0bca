"""Credentials known by their shape: a value is a secret because of what it looks like, wherever it stands.

A field name tells redaction that ``{"api_key": "k-1"}`` holds a secret; an access key pasted into a reply, a
bearer token echoed in a tool result or a JWT inside an argument's text carries no such name. These are found by
the rules of well-kept secret scanners, not by rules of our own:

* gitleaks' default configuration (``config/gitleaks.toml`` of github.com/gitleaks/gitleaks, as generated at
  commit 009e025ad4106ab333aa0b9dc4f2a884390d134c): ``aws-access-token``, ``jwt``, ``openai-api-key``,
  ``anthropic-api-key`` and ``anthropic-admin-api-key``, their expressions copied as they are (each captures the
  credential in its group 1) but for the end: gitleaks wants a quote, a backtick, a space, ``;`` or an escaped
  line break after a token, which is how code ends one; a sentence also ends one with ``,``, ``.`` or ``)``
  ("your token is eyJ…."), so here a token ends where its characters end (:data:`_END`);
* Nosey Parker's ``np.http.2`` "HTTP Bearer Token" (``crates/noseyparker/data/default/builtin/rules/http.yml`` of
  github.com/praetorian-inc/noseyparker): ``Authorization`` then ``Bearer`` then the token, case-insensitive. Its
  character class ``[a-zA-z0-9._~+/-]`` is written ``A-Z`` here: ``A-z`` is a typo upstream that also admits
  ``[\\]^_`` and the backtick, which no RFC 6750 token holds.

The scanners' allowlists and entropy thresholds are left out: they keep a code review free of false alarms, while
here a false alarm only turns a value into a token, on every side alike, and never changes a score.

A rule reads a string as it is (a message's text, a tool result, argument text that is not JSON) and, for the
bearer rule, also a key and its string value as the header line ``key: value`` (``{"Authorization": "Bearer
…"}`` is how a request's headers appear in a trace). The value found is a secret like one found under a redacted
field: replaced by its token in every string and reference that holds it.
"""

from __future__ import annotations

import re
from typing import Iterator

__all__ = ["credentials", "header_credentials", "may_hold_credential"]

_END = r"(?![A-Za-z0-9_\-/\\+=])"
"""The end of a token: no character any of the tokens below may hold comes next (gitleaks' own end, a quote, a
backtick, a space, ``;`` or an escaped line break, misses a token that ends a sentence)."""

_RULES = {
    "aws-access-token": r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
    "jwt": r"\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9\/\\_-]{17,}\.(?:[a-zA-Z0-9\/\\_-]{10,}={0,2})?)" + _END,
    "openai-api-key": (r"\b(sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ"
                       r"(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})"
                       + _END),
    "anthropic-api-key": r"\b(sk-ant-api03-[a-zA-Z0-9_\-]{93}AA)" + _END,
    "anthropic-admin-api-key": r"\b(sk-ant-admin01-[a-zA-Z0-9_\-]{93}AA)" + _END,
    "np.http.2": r"(?i:Authorization(?::\s+|.{1,5})Bearer\s+([a-zA-Z0-9._~+/-]{6,}=*)(?:[^a-zA-Z0-9._~+/=-]|$))",
}
"""Rule id -> its expression (group 1: the credential)."""

_CREDENTIAL = re.compile("|".join(f"(?:{rule})" for rule in _RULES.values()))

_KEYWORDS = ("T3BlbkFJ", "sk-ant-", "A3T", "AKIA", "ASIA", "ABIA", "ACCA", ".ey")
"""Text every credential of :data:`_RULES` but the bearer token holds (the scanners' keywords; ``.ey`` starts a
JWT's second part), with no character JSON escapes: spelled alike in JSON text at any nesting depth."""
_A_KEYWORD = re.compile(r"A(?:3T|KIA|SIA|BIA|CCA)")
"""The keywords of :data:`_KEYWORDS` that start with ``A``."""
_MAY_HOLD = re.compile(r"T3BlbkFJ|sk-ant-(?:api03|admin01)-|(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"
                       r"|ey[a-zA-Z0-9]{17,}\.ey")
"""What those credentials hold, more closely: a line that holds a keyword is confirmed with it (a regular
expression over a whole line costs ~50 µs per KB; the keywords, a few µs)."""


def credentials(text: str) -> Iterator[str]:
    """The credentials in ``text`` (group 1 of each match of a rule, left to right).

    Args:
        text: Any text (a message, a tool result, argument text).
    """
    if len(text) < 16 or not may_hold_credential(text):  # no rule matches fewer characters
        return
    for match in _CREDENTIAL.finditer(text):
        yield next(group for group in match.groups() if group is not None)


def header_credentials(key: str, value: str) -> Iterator[str]:
    """The credentials of a key and its string value read as the header line ``key: value`` (the bearer rule
    needs the header's name, which a JSON object keeps apart from its value)."""
    if "authorization" in key.lower():
        yield from credentials(f"{key}: {value}")


def may_hold_credential(text: str, lowered: str | None = None) -> bool:
    """False when ``text`` — a string, or JSON text with its nested JSON strings — provably holds no credential:
    no ``bearer`` in any letter case, and no keyword of the other rules or, when one occurs, no match of
    :data:`_MAY_HOLD`. The redactor's fast path passes such a line over.

    Args:
        text: The text.
        lowered: ``text.lower()``, when the caller has it already.
    """
    if "bearer" in (text.lower() if lowered is None else lowered):
        return True
    # whether a keyword occurs: the four that start with ``A`` by one expression (whose search looks for the ``A``
    # alone first), the others by a substring search each: a third of the time of one search per keyword
    return ("T3BlbkFJ" in text or "sk-ant-" in text or ".ey" in text or _A_KEYWORD.search(text) is not None) \
        and _MAY_HOLD.search(text) is not None
