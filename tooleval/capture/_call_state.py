"""State shared by the redactor's walk and its per-part memo: what one redaction call finds, and the key under
which a redacted trace's metadata names the secrets that also occur in its case's references.

It lives apart from :mod:`tooleval.capture.redaction` so that the per-part memo (:mod:`tooleval.capture._parts`),
which the redactor itself uses, can build a call's state without importing the redactor back.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARKER_KEY", "_Call"]


MARKER_KEY = "tooleval.redaction"
"""Key under a redacted trace's ``metadata`` holding ``{"reference_secrets": [[kind, length, token], ...]}``."""


class _Call:
    """What one redaction call finds and reuses: the field paths it redacted, and each string's embedded JSON and
    ``key: value`` pairs (the secrets walk and the transformation read every string alike). Local to one call and
    never stored on the redactor, so one redactor serves any number of threads."""

    __slots__ = ("fields", "embedded", "pairs", "skip")

    def __init__(self) -> None:
        self.fields: set[str] = set()
        self.embedded: dict[str, Any] = {}
        self.pairs: dict[str, tuple[tuple[int, int, Any, str], ...]] = {}
        self.skip: set[int] = set()
        """``id`` of the objects and lists of the trace that the current walk passes over as they are."""
