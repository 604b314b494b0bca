"""Redaction by field name, stable under a keyed hash: "Secrets should be redacted by field name, but
redaction must be stable so expected and observed values remain comparable".

A value under a redacted field name (at any depth of a JSON object, in tool-call arguments, tool results and
metadata) is replaced by ``"redacted:<16 hex>"``, an HMAC-SHA256 of its canonical JSON under a secret key. Equal
values give equal tokens and different values different ones, so matching on redacted calls gives the same
result as on the raw values — provided references and observations are redacted with the same key, which the
pipeline does (generation output, reference calls, the legacy path). Every raw value so found is also replaced
wherever it appears verbatim in free text (message contents, malformed argument text), so an e-mail address the
agent repeats in its reply does not survive either.

The key comes from ``$TOOLEVAL_REDACTION_KEY`` or a random key kept in ``<out>/redaction.key`` (created once,
mode 0600; not under the disposable ``<out>/.tooleval``: without it a run cannot be rescored). Only a digest of the
key enters cache keys and ``summary.json``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import orjson
from pydantic import BaseModel, ConfigDict, field_validator

from tooleval.canonical import (MAX_DEPTH, canonical_dumps, canonical_json, dumps_text, kept_bytes, nesting_within,
                                strict_json_loads, writable_text)
from tooleval.capture._credentials import credentials, header_credentials, may_hold_credential
from tooleval.capture._call_state import MARKER_KEY, _Call
from tooleval.capture._parts import PLAIN_JSON, PartMemo
from tooleval.capture._secret_text import Replacer, cannot_hold_pair, leaves, secret_forms, text_pairs
from tooleval.errors import InputFileError

__all__ = ["DEFAULT_FIELDS", "MARKER_KEY", "RedactionConfig", "Redactor", "build_redactor", "case_reference_values",
           "key_path", "load_key"]

DEFAULT_FIELDS = ("api_key", "card_number", "email", "phone")
"""Field names redacted by default (compared case-insensitively)."""



class RedactionConfig(BaseModel):
    """Which fields to redact. ``fields`` match a key at any depth; ``paths`` match a dotted path from the top of
    an argument or result object (``payment.card.number``). Stored sorted: a set hashes differently in each
    process, which would change Prefect's cache key."""

    model_config = ConfigDict(frozen=True)

    fields: list[str] = list(DEFAULT_FIELDS)
    paths: list[str] = []
    key_digest: str = ""
    """sha256 of the key (never the key): part of cache keys so a new key re-redacts."""

    @field_validator("fields", "paths", mode="before")
    @classmethod
    def _sorted(cls, value: Any) -> Any:
        return sorted({str(v).lower() if isinstance(v, str) else v for v in value}) if value is not None else []


def key_path(out: str | Path) -> Path:
    """Where the results folder's redaction key lives: ``<out>/redaction.key``."""
    return Path(out).resolve() / "redaction.key"


def load_key(out: str | Path, *, create: bool = True) -> bytes:
    """The redaction key: ``$TOOLEVAL_REDACTION_KEY`` (text), the file ``$TOOLEVAL_REDACTION_KEY_FILE`` names
    (:func:`tooleval.capture.keys.environment_key`: how Dask workers get it) or ``<out>/redaction.key`` (created
    when missing and ``create``).

    Raises:
        InputFileError: the key file is missing and ``create`` is false; or it (or the file
            ``$TOOLEVAL_REDACTION_KEY_FILE`` names) is empty, too short, too long or unreadable
            (:func:`tooleval.capture.keys.read_key_file`).
    """
    from tooleval.capture.keys import environment_key, read_key_file

    env = environment_key()
    if env:
        return env
    path = key_path(out)
    if not path.exists() and not create:
        raise InputFileError(path, None, "the redaction key of these results is missing.",
                             "restore redaction.key, or set TOOLEVAL_REDACTION_KEY to the key the run used.")
    if not path.exists():  # created only if still missing: runs starting together all read the one key
        from tooleval.storage import create_bytes

        create_bytes(path.parent, path.name, secrets.token_hex(32).encode(), mode=0o600)
    return read_key_file(path, named_by="the results folder", strip=False)


class Redactor:
    """Applies a :class:`RedactionConfig` with a key: one transformation for traces and references alike.

    A **secret** is a value found under a redacted field name (or configured path): in a JSON object at any depth,
    in JSON text inside a string (argument text, a tool result), or in a ``key: value`` pair of text that is not
    JSON (:mod:`tooleval.capture._secret_text`). The transformation, given a set of secrets: a value under a
    redacted field becomes its token; a string holding a secret's text form has it replaced by the secret's
    token; a number equal to a numeric secret becomes that number's token. Traces are redacted with the run's
    base secrets (:meth:`seed`: those of the dataset) plus their own; references (expected calls, accepted
    plans, expected outputs, the case input) with the base secrets plus those of their trace's own secrets that
    occur in them, which the trace carries as *markers* (kind, length, token: never the value) under
    ``metadata["tooleval.redaction"]``. So each value gets the same transformation everywhere, and redaction never
    changes a score (docs/design.md "Trust rules").

    Once seeded, a redactor holds no per-call state: every method may run in several threads at once (a Dask
    worker shares one per process). Its only caches — tokens by value, patterns by set of forms, quiet verdicts and
    credentials by text — hold entries that depend on their key alone.
    """

    def __init__(self, config: RedactionConfig, key: bytes) -> None:
        self.config = config
        self._key = key
        self._fields = set(config.fields)
        self._paths = set(config.paths)
        self._base: dict[str, str] = {}
        self._base_replacer = Replacer({})
        self._known_pairs: dict[str, tuple[tuple[int, int, Any, str], ...]] = {}
        """The redacted pairs of the dataset's texts that needed a scan (a trace repeats its case's input, the
        system prompt first: scanned once at :meth:`seed` instead of twice per trace)."""
        self._tokens: dict[str, str] = {}
        """String value -> token; other values are keyed by their canonical JSON in ``_canonical_tokens``."""
        self._canonical_tokens: dict[str, str] = {}
        self._names = sorted({f.lower() for f in self._fields} | {p.lower().rsplit(".", 1)[-1] for p in self._paths})
        self._ascii_names = tuple(name.encode() for name in self._names if name.isascii())
        """The names that are ASCII, as UTF-8 bytes (found in a writing's bytes as they are)."""
        self._name_hint = 0
        """Which of ``_ascii_names`` :meth:`_names_in` found last (tried first next time)."""
        self._names_spelled_alike = all(_SPELLED_ALIKE.fullmatch(name) for name in self._names)
        """Whether every name is spelled the same in any JSON text, raw or nested (see :meth:`_quiet_parts`)."""
        self._base_plain: bool | None = True
        """Whether every base secret form is spelled alike at any JSON nesting depth (see :meth:`_untouched`);
        ``None`` when some is a number (then a line holding an exponent goes the slow way)."""
        self._number_spellings: tuple[str, ...] = ()
        """orjson's text of each numeric base secret that is not an integer, where it differs from the form
        (see :meth:`_untouched`)."""
        self._verdicts = _TextCache(_TEXT_CHARS_KEPT)
        """Orjson text of a trace part -> whether it is quiet (:meth:`_quiet_verdict`)."""
        self._found_credentials = _TextCache(_TEXT_CHARS_KEPT)
        """A long string of a trace -> the credentials in it (:meth:`_credentials`)."""
        self._recent_case_texts: dict[int, tuple[Any, list[str], str]] = {}
        """``id`` of a case -> (the case, its reference texts, joined): :meth:`_texts_of`."""
        self._parts = PartMemo(_TEXT_CHARS_KEPT)
        """A trace part's orjson text -> its secrets and redacted texts (:meth:`redact_trace_text`)."""

    @classmethod
    def create(cls, out: str | Path, fields: list[str] | None = None, paths: list[str] | None = None) -> "Redactor":
        """A redactor whose key is :func:`load_key` (``fields`` default: :data:`DEFAULT_FIELDS`)."""
        key = load_key(out)
        config = RedactionConfig(
            fields=list(DEFAULT_FIELDS) if fields is None else fields,
            paths=paths or [],
            key_digest=hashlib.sha256(key).hexdigest(),
        )
        return cls(config, key)

    def token(self, value: Any) -> str:
        """``"redacted:<16 hex>"`` for a JSON value (equal canonical values give equal tokens): the first 16 hex
        digits of the HMAC-SHA256 of its canonical JSON under the key, computed once per distinct value.

        Raises:
            ValueError: the value has no canonical JSON (a non-finite number, a set).
        """
        if type(value) is str:
            token = self._tokens.get(value)
            if token is None:
                token = _remember(self._tokens, value, self._digest(canonical_dumps(value)))
            return token
        text = canonical_json(value)
        token = self._canonical_tokens.get(text)
        if token is None:
            token = _remember(self._canonical_tokens, text, self._digest(text))
        return token

    def _digest(self, canonical: str) -> str:
        # surrogatepass: a string decoded from an escape may hold a lone surrogate, which UTF-8 cannot encode; it
        # still gets a token of its own (the same one wherever it occurs), so one such value never stops a run
        return "redacted:" + hmac.digest(self._key, canonical.encode("utf-8", "surrogatepass"), "sha256").hex()[:16]

    def _fresh_token(self, value: Any) -> str:
        """:meth:`token` without remembering it (for the candidate substrings of :meth:`reference_secrets`,
        which are not secrets and would only fill the cache)."""
        return self._digest(canonical_json(value))

    # -- what one call reads once ----------------------------------------------------------------------------

    def _embedded(self, text: str, call: _Call) -> Any:
        value = call.embedded.get(text, _MISSING)
        if value is _MISSING:
            value = call.embedded[text] = _embedded_json(text)
        return value

    def _pairs(self, text: str, call: _Call) -> tuple[tuple[int, int, Any, str], ...]:
        pairs = call.pairs.get(text)
        if pairs is None:
            pairs = self._known_pairs.get(text)
            if pairs is None:
                pairs = self._scanned_pairs(text)
            call.pairs[text] = pairs
        return pairs

    @functools.lru_cache(maxsize=2048)
    def _scanned_pairs(self, text: str) -> tuple[tuple[int, int, Any, str], ...]:
        """:func:`text_pairs` of ``text`` for this redactor's fields, remembered (bounded, thread-safe): the same
        tool result or user turn recurs in every trial of a case, and a text that holds a field name is scanned
        with the pair expression at every word (about a millisecond for a 10 KB tool result). The result depends
        on the text and the fields alone."""
        return tuple(text_pairs(text, self._fields.__contains__, self._fields))

    # -- finding secrets -------------------------------------------------------------------------------------

    def _credentials(self, text: str) -> Iterable[str]:
        """:func:`~tooleval.capture._credentials.credentials` of ``text``, remembered for a long text (the system
        prompt and a case's tool results are walked in every trace; looking one up reads it twice, screening it
        for credentials about ten times). The result depends on the text alone."""
        if len(text) < _LONG_TEXT:
            return credentials(text)
        found = self._found_credentials.get(text)
        if found is None:
            found = self._found_credentials.keep(text, tuple(credentials(text)))
        return found

    def _add_secret(self, value: Any, found: dict[str, str]) -> None:
        for form, leaf in secret_forms(value):
            found.setdefault(form, self.token(leaf))

    def _collect(self, value: Any, found: dict[str, str], call: _Call) -> None:
        # Depth-first from the last child, secrets of a redacted key added as the key is met: the first leaf to
        # give a form sets its token, so this order is part of the result.
        fields, paths = self._fields, self._paths
        stack: list[tuple[Any, str]] = [(value, "")]
        skip = call.skip
        while stack:
            item, where = stack.pop()
            if isinstance(item, dict):
                if id(item) in skip:
                    continue
                for key, child in item.items():
                    if type(child) is str and type(key) is str:
                        for credential in header_credentials(key, child):
                            self._add_secret(credential, found)
                    if paths:
                        child_path = f"{where}.{key}" if where else str(key)
                        if str(key).lower() in fields or child_path.lower() in paths:
                            self._add_secret(child, found)
                        else:
                            stack.append((child, child_path))
                    elif str(key).lower() in fields:
                        self._add_secret(child, found)
                    else:
                        stack.append((child, ""))  # without configured paths, a path decides nothing
            elif isinstance(item, list):
                if id(item) not in skip:
                    stack.extend((child, where) for child in item)
            elif isinstance(item, str):
                embedded = self._embedded(item, call) if item[:1] in _JSON_HEADS else None
                if embedded is _TOO_DEEP:
                    # JSON text too deep to walk: a redacted name in it may hold anything, so the whole text is
                    # the secret (references holding the same text are redacted alike)
                    if any(name in item.lower() for name in self._names):
                        self._add_secret(item, found)
                elif embedded is not None:
                    stack.append((embedded, ""))
                    continue
                if ":" in item or "=" in item:  # a pair needs one (text_pairs' own first test)
                    for _, _, secret, _ in self._pairs(item, call):
                        self._add_secret(secret, found)
                for credential in self._credentials(item):
                    self._add_secret(credential, found)

    # -- the transformation ----------------------------------------------------------------------------------

    def _transform(self, value: Any, replacer: Replacer, call: _Call, path: str = "") -> Any:
        if isinstance(value, str):  # most leaves: plain text goes straight to the replacer
            if value[:1] in _JSON_HEADS or ":" in value or "=" in value:
                return self._transform_text(value, replacer, call)
            return replacer.text(value)
        if isinstance(value, dict):
            if id(value) in call.skip:
                return value
            fields, paths = self._fields, self._paths
            out = {}
            for key, child in value.items():
                child_path = f"{path}.{key}" if path else str(key)
                if child_path in _STRUCTURAL:
                    out[key] = child  # roles, tool names and ids are not data (references' names stay raw too)
                elif str(key).lower() in fields or (paths and child_path.lower() in paths):
                    # a key decoded from a lone-surrogate escape keeps the escape in the recorded path (the envelope's
                    # Parquet column cannot hold it, and one such key stopped the whole run)
                    call.fields.add(writable_text(child_path))
                    out[key] = self.token(child)
                else:
                    out[key] = self._transform(child, replacer, call, child_path)
            return out
        if isinstance(value, list):
            if id(value) in call.skip:
                return value
            return [self._transform(child, replacer, call, path) for child in value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not replacer.may_hold_numbers():
                return value
            try:
                form = canonical_json(value)
            except ValueError:
                return value
            return self.token(value) if replacer.holds(form) else value
        return value

    def _transform_text(self, text: str, replacer: Replacer, call: _Call) -> str:
        embedded = self._embedded(text, call) if text[:1] in _JSON_HEADS else None
        if embedded is not None and embedded is not _TOO_DEEP:
            redacted = self._transform(embedded, replacer, call)
            return text if redacted == embedded else _json_text(redacted)
        pairs = self._pairs(text, call) if ":" in text or "=" in text else ()
        if not pairs:
            return replacer.text(text)
        pieces, last = [], 0
        for start, end, secret, _ in pairs:
            if start < last:
                continue
            pieces += [replacer.text(text[last:start]), json.dumps(self.token(secret))]
            last = end
        return "".join(pieces) + replacer.text(text[last:])

    def _replacer(self, extra: dict[str, str] | None = None) -> Replacer:
        return Replacer(extra, self._base_replacer) if extra else self._base_replacer

    # -- traces ----------------------------------------------------------------------------------------------

    def redact_trace(self, trace: dict[str, Any], case: Any = None) -> dict[str, Any]:
        """Redact a recorded-trace dict (every part of it but ``case_id``, ``trial`` and ``agent``).

        Args:
            trace: The recorded trace (not modified).
            case: Its :class:`tooleval.models.Case`: the trace's own secrets that occur in the case's references
                are recorded as markers (see the class docstring) so that scoring redacts the references alike;
                or a function of no argument that returns it (or ``None``), called only when the trace holds
                secrets of its own (a case is parsed on first use).

        Returns:
            A new trace dict: the redacted trace plus ``redacted_fields``, the sorted dotted paths of the values
            this call replaced under a redacted field name (``["messages.tool_calls.function.arguments.email"]``
            style paths; list positions are not part of a path).
        """
        call = _Call()
        keep = {key: trace[key] for key in ("case_id", "trial", "agent") if key in trace}
        body = {key: value for key, value in trace.items() if key not in keep}
        if self._untouched(body):
            return {**keep, **body, "redacted_fields": []}
        quiet = self._quiet_parts(body)
        call.skip = {id(part) for part, _ in quiet}
        own: dict[str, str] = {}
        self._collect(body, own, call)
        own = {form: token for form, token in own.items() if form not in self._base}
        replacer = self._replacer(own)
        call.skip = {id(part) for part, text in quiet if replacer.absent_from(text)}
        result = {**keep, **self._transform(body, replacer, call)}
        markers = self._markers(own, case) if case is not None else []
        if markers:
            metadata = result.get("metadata") if isinstance(result.get("metadata"), dict) else {}
            result["metadata"] = {**metadata, MARKER_KEY: {"reference_secrets": markers}}
        result["redacted_fields"] = sorted(call.fields)
        return result

    def redact_trace_text(self, trace: dict[str, Any], case: Any = None) -> str:
        """:meth:`redact_trace` serialised as :func:`tooleval.canonical.dumps_text` writes it (the same text), made
        part by part: each message's secrets and redacted text are remembered by its JSON text
        (:mod:`tooleval.capture._parts`), since the system prompt recurs in every trace and a case's turns and tool
        results in each of its trials; a trace that needs the whole walk gets it.

        Args:
            trace: The recorded trace as JSON values (not modified).
            case: Its :class:`tooleval.models.Case` (see :meth:`redact_trace`).

        Raises:
            ValueError: a value under a redacted field has no canonical JSON (a non-finite number), as in
                :meth:`redact_trace`.
        """
        text = self._parts.redact(self, trace, case)
        return text if text is not None else dumps_text(self.redact_trace(trace, case))

    def redact_trace_values(self, trace: dict[str, Any], case: Any = None,
                            written: dict[str, bytes] | None = None) -> dict[str, Any]:
        """:meth:`redact_trace_text`'s trace as JSON values (equal to decoding that text), for a caller that would
        only decode the text again: what redaction leaves as it is stays the very object of ``trace`` (shared, not
        copied: neither may be modified), and only the parts it changed are read from their redacted text.

        Args:
            written: Filled, when given, with ``{"messages": the orjson writing of the redacted messages}`` where the
                redaction wrote them part by part (nothing for a trace it judged or walked whole).

        Raises:
            ValueError: as :meth:`redact_trace_text`.
        """
        result = self._parts.redact(self, trace, case, values=True, written=written)
        if result is None:
            if written:  # a part written before the memo gave up: the whole walk's values are what count
                written.clear()
            return self.redact_trace(trace, case)
        return result

    def _untouched(self, body: dict[str, Any]) -> bool:
        """True when redaction provably leaves ``body`` as it is, decided on its text instead of a walk (most
        lines hold no secret; the walk costs ~1 ms on a long trace).

        The text is orjson's serialisation: keys and strings appear decoded, so ``"em\\u0061il"`` in the input
        line is ``email`` here; a string that itself holds JSON (argument text, a tool result) keeps its own
        escapes, so any ``\\u`` left means "go the slow way". Untouched means: no redacted field name (nor a
        path's last key) occurs in the lower-cased text (the walk and :func:`text_pairs` compare lower-cased
        keys, which always contain the name), no credential may occur in it
        (:func:`~tooleval.capture._credentials.may_hold_credential`: the walk would find one in a string), and no
        base secret form occurs in it (the replacer looks for exactly those forms); a base form spelled
        differently when escaped, a number possibly written with an exponent, or a numeric base secret in
        orjson's own spelling (``0.000012896620064407295`` for ``1.2896620064407295e-05``: orjson writes floats
        in [1e-05, 1e-04) without an exponent) sends the line the slow way.
        """
        if self._base_plain is False:
            return False
        try:
            text = orjson.dumps(body).decode()
        except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, an integer beyond 64 bits: the slow way
            return False
        return self._untouched_text(text)

    def untouched_text(self, written: bytes) -> bool:
        """True when redaction provably leaves a trace as it is, judged on orjson's compact writing of the whole
        trace (``written``: UTF-8 bytes, possibly inside list brackets), as :meth:`_untouched` judges the writing
        of its redacted part. What that test looks for — a name in a key or a text, a credential or a base secret
        form in a text, a number's spelling, an escape — lies inside one string or number, which the whole
        trace's writing spells as the part's does; the whole writing only adds text (the key fields, brackets),
        so a trace it passes, the part's writing passes too."""
        if self._base_plain is False:
            return False
        # a name spelled in lower case already (a long trace's system prompt names the profile's fields) decides
        # before the whole text is decoded and lowered (~2 ns a character)
        if len(written) > _LONG_WRITING and self._names_in(written):
            return False
        return self._untouched_text(written.decode())

    def _names_in(self, written: bytes) -> bool:
        """Whether an ASCII name occurs in ``written``, the name found last tried first: looking for a name that is
        absent reads the whole writing (~9 µs on a 16 KB trace), and a corpus's traces name the same field (a tau
        system prompt names ``email``) trace after trace. The order changes only the cost, never the answer; a
        thread that reads the hint while another sets it tries names in another order."""
        names = self._ascii_names
        first = self._name_hint
        if first < len(names) and names[first] in written:
            return True
        for at, name in enumerate(names):
            if at != first and name in written:
                self._name_hint = at
                return True
        return False

    def _untouched_text(self, text: str) -> bool:
        """:meth:`_untouched` given orjson's writing of the values."""
        lowered = text.lower()  # the names first: on a line that holds one (most that hold any secret) it decides
        if any(name in lowered for name in self._names):
            return False
        if "\\u" in text or "\\/" in text:
            return False
        if self._base_plain is None and (_EXPONENT.search(text) or any(s in text for s in self._number_spellings)):
            return False
        if may_hold_credential(text, lowered):
            return False
        return not self._base_replacer.search(text)

    def _quiet_parts(self, body: dict[str, Any]) -> list[tuple[Any, str]]:
        """``(part, its orjson text)`` for the objects and lists of a trace — the elements of its top-level lists
        (the messages), its top-level objects or else their values — that hold no redacted field name: the secrets
        walk finds nothing in them, and when no secret form occurs in their text either
        (:meth:`Replacer.absent_from`) the transformation leaves them as they are. Most messages of a long trace
        are such parts; walking them cost most of the time.

        The test is :meth:`_untouched`'s, part by part: no ``\\u`` or ``\\/`` in the text and no name in the
        lower-cased text. It holds for names spelled alike in any JSON text (ASCII without a quote, a backslash, a
        slash or a control character): such a name in a key or a ``key: value`` pair, raw or in nested JSON text,
        appears in the text as itself. Other names: no part is quiet.
        """
        if not self._names_spelled_alike:
            return []
        quiet = []
        for value in body.values():
            if isinstance(value, list):  # the messages: a line that got here holds a name, most often in them
                children = value
            elif isinstance(value, dict):
                text = self._quiet_text(value)
                if text is not None:
                    quiet.append((value, text))
                    continue
                children = list(value.values())
            else:
                continue
            for child in children:
                if isinstance(child, (dict, list)) and (text := self._quiet_text(child)) is not None:
                    quiet.append((child, text))
        return quiet

    def _quiet_text(self, value: Any) -> str | None:
        try:
            text = orjson.dumps(value).decode()
        except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, an integer beyond 64 bits: walked
            return None
        return text if self._quiet_verdict(text) else None

    def _quiet_verdict(self, text: str) -> bool:
        """Whether a part whose orjson text is ``text`` is quiet (see :meth:`_quiet_parts`), remembered: a trace's
        parts recur in trace after trace — the system prompt in every one, a case's user turns and tool results in
        each of its trials — and judging a part reads its text about fifteen times (its lower case, each name,
        each credential keyword), where looking it up reads it twice (a hash and one comparison). The verdict
        depends on the text and the redactor's names alone; the texts kept are bounded by their total length
        (:data:`_TEXT_CHARS_KEPT`), not their number, since a tool result may be long."""
        verdict = self._verdicts.get(text)
        if verdict is None:
            verdict = self._verdicts.keep(text, self._judge_quiet(text))
        return verdict

    def _judge_quiet(self, text: str) -> bool:
        if "\\u" in text or "\\/" in text:
            return False
        lowered = text.lower()
        if may_hold_credential(text, lowered):
            return False
        return not any(name in lowered for name in self._names)

    def _markers(self, own: dict[str, str], case: Any) -> list[list[Any]]:
        if not own:
            return []
        if callable(case):  # the case is looked up (and parsed) only for a trace with secrets of its own
            case = case()
            if case is None:
                return []
        texts, joined = self._texts_of(case)
        markers = set()
        for form, token in own.items():
            occurs = form in joined if "\x00" not in form else any(form in text for text in texts)
            if occurs:
                markers.add((_form_kind(form, token, self.token), len(form), token))
        return sorted(list(m) for m in markers)

    def _texts_of(self, case: Any) -> tuple[list[str], str]:
        """The texts of ``case``'s references (:func:`_case_texts`) and the same joined by NUL (a form without a
        NUL occurs in the joined text exactly when it occurs in one of them), remembered for the last cases seen:
        the trials of a case follow one another, and reading a case's texts walks its input (the system prompt
        with the first turns). Kept by the case object itself (held, so its ``id`` is not reused meanwhile);
        cases are not changed during a run."""
        kept = self._recent_case_texts.get(id(case))
        if kept is not None and kept[0] is case:
            return kept[1], kept[2]
        texts = _case_texts(case)
        joined = "\x00".join(texts)
        if len(self._recent_case_texts) >= _CASES_KEPT:
            self._recent_case_texts.clear()
        self._recent_case_texts[id(case)] = (case, texts, joined)
        return texts, joined

    # -- references ------------------------------------------------------------------------------------------

    def reference_secrets(self, case: Any, markers: Any) -> dict[str, str]:
        """The trace's own secrets that occur in ``case``'s references, found again from the trace's markers.

        Args:
            case: The trace's :class:`tooleval.models.Case`.
            markers: ``[[kind, length, token], ...]`` as :meth:`redact_trace` wrote them; not a list, or empty:
                nothing is found.

        Returns:
            Form -> token: each substring of the case's texts of a marker's length whose token is the marker's,
            for the markers in order and the texts and positions in order (the first marker to claim a form
            keeps it). Each distinct substring is hashed once per (kind, length), however many markers share it.
        """
        found: dict[str, str] = {}
        if not isinstance(markers, list) or not markers:
            return found
        texts = _case_texts(case)
        wanted: dict[tuple[str, int], set[str]] = {}
        for kind, length, token in markers:
            if type(kind) is str and type(length) is int and type(token) is str:
                wanted.setdefault((kind, length), set()).add(token)
        hits: dict[tuple[str, int], dict[str, list[str]]] = {}
        for kind, length, token in markers:
            if type(kind) is str and type(length) is int and type(token) is str:
                if (kind, length) not in hits:
                    hits[kind, length] = self._substrings_by_token(texts, kind, length, wanted[kind, length])
                forms = hits[kind, length].get(token, ())
            else:  # not a marker this module writes (a length that is no int...): the definition, step by step
                forms = [text[i:i + length] for text in texts for i in range(len(text) - length + 1)
                         if _form_token(kind, text[i:i + length], self._fresh_token) == token]
            for form in forms:
                if form not in found:
                    found[form] = token
        return found

    def _substrings_by_token(self, texts: list[str], kind: str, length: int,
                             tokens: set[str]) -> dict[str, list[str]]:
        """Token -> the distinct substrings of ``texts`` of ``length`` characters that have it under ``kind`` (among
        ``tokens``), in order of first occurrence."""
        index: dict[str, list[str]] = {}
        seen: set[str] = set()
        for text in texts:
            for i in range(len(text) - length + 1):
                form = text[i:i + length]
                if form in seen:
                    continue
                seen.add(form)
                token = _form_token(kind, form, self._fresh_token)
                if token in tokens:
                    index.setdefault(token, []).append(form)  # type: ignore[arg-type]
        return index

    def redact_reference(self, value: Any, extra: dict[str, str] | None = None) -> Any:
        """Redact a reference value (argument object, expected output, case input) with the base secrets plus
        ``extra`` (:meth:`reference_secrets`); returns a new value, ``value`` is not modified."""
        return self._transform(value, self._replacer(extra), _Call())

    def redact_args(self, args: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, Any]:
        """Redact one reference argument object (see :meth:`redact_reference`)."""
        return self.redact_reference(args, extra)

    def redact_json(self, value: Any) -> Any:
        """Redact a JSON value with the base secrets (:meth:`redact_reference` without a trace's own)."""
        return self.redact_reference(value)

    def redact_messages(self, messages: Any, extra: dict[str, str] | None = None) -> Any:
        """Redact a conversation (a case input) as its request is redacted in a trace."""
        return self.redact_reference(messages, extra)

    def seed(self, values: Iterable[Any]) -> None:
        """Find the secrets of these JSON values (every case's references and input): the base secrets, redacted
        in *every* trace and reference alike, whichever shard it falls in. Call it before the redactor is shared
        between threads (it replaces the base secrets)."""
        found: dict[str, str] = {}
        known: dict[str, tuple[tuple[int, int, Any, str], ...]] = {}
        seen: set[bytes] = set()
        for value in values:
            # a list is walked last element first, each element whole: an element walked before (every case's
            # input repeats the system prompt) adds no form and no pair that is not found already
            for part in (reversed(value) if type(value) is list else (value,)):
                try:
                    text = orjson.dumps(part, option=PLAIN_JSON)  # NaN is written null: the walk finds nothing in either
                except (TypeError, orjson.JSONEncodeError):
                    text = None
                if text is not None:
                    if text in seen:
                        continue
                    seen.add(kept_bytes(text))  # orjson's own bytes hold 4 KB each: GBs over 142,858 cases
                call = _Call()  # one per part: what it parsed is dropped with it
                self._collect(part, found, call)
                known.update((text, pairs) for text, pairs in call.pairs.items()
                             if not cannot_hold_pair(text, self._fields))
        self._apply_seed(found, known)

    def seed_cases(self, cases: Mapping[str, Any] | Iterable[Any] | Callable[[Callable[[bytes], bool] | None],
                                                                              Iterable[Any]]) -> None:
        """:meth:`seed` with every case's reference arguments and input (:func:`case_reference_values`).

        Args:
            cases: The cases by id; or the cases themselves in file order; or a reader of a ``cases.jsonl``: a
                callable that takes a line screen and returns the cases of the lines the screen does not skip, in
                file order (``functools.partial(tooleval.dataset.stream_case_references, path)``). A reader is
                given :meth:`seeds_nothing`, so that a line the seeding would find nothing in is never decoded.
        """
        if callable(cases) and not isinstance(cases, Mapping):
            cases = cases(self.seeds_nothing if self._names_spelled_alike else None)
        # one case's values at a time: a list of every case's (a tau case's input holds its ~7 KB system prompt)
        # was the largest thing the flow and each worker ever held, ~25 KB of Python objects a case
        each = cases.values() if isinstance(cases, Mapping) else cases
        self.seed(value for case in each for value in case_reference_values(case))

    def seeds_nothing(self, line: bytes) -> bool:
        """True when :meth:`seed` provably finds nothing in the case a ``cases.jsonl`` line holds (the line's
        bytes, as written in the file): no base secret, and no text whose pairs it would keep. Seeding then need
        not decode the line at all; most lines of a corpus name no redacted field and hold no credential, and
        decoding and walking every case was most of the seeding's time (~47 µs a bfcl case).

        The test is :meth:`_judge_quiet`'s (the one a trace's quiet parts pass): UTF-8 text without a ``\\u`` or
        ``\\/`` escape, no credential keyword, and no redacted name in any letter case. The walk finds a secret
        only under a key that is a name, in a ``key: value`` pair whose key is one, or in a credential; each is
        spelled in any JSON text, raw or nested in JSON strings, as itself, and the case's values are decoded
        from the line alone (the fields the seeding reads add no text of their own). Only for names spelled alike
        (:attr:`_names_spelled_alike`); raises nothing: a line it cannot judge is not skipped.
        """
        if not self._names_spelled_alike:
            return False
        # a name spelled in lower case in the bytes (a tau case's system prompt names the profile's fields)
        # decides before the line is decoded and lowered
        if self._names_in(line):
            return False
        try:
            text = line.decode()
        except UnicodeDecodeError:
            return False
        return self._judge_quiet(text)

    def seed_state(self) -> bytes | None:
        """What :meth:`seed` found, as JSON bytes that :meth:`load_seed_state` takes back (``None`` when a value
        cannot be written as JSON, e.g. an integer beyond 64 bits: such a redactor is seeded from the cases).

        Seeding reads every case of the dataset (17-26 s at 142,858 bfcl cases); a run's flow seeds once and
        hands this state to its workers in memory, which load it instead of seeding again. It holds the secrets
        themselves: never write it to disk."""
        try:
            return orjson.dumps({"format": _SEED_FORMAT, "base": self._base, "known": self._known_pairs})
        except (TypeError, orjson.JSONEncodeError):
            return None

    def load_seed_state(self, data: bytes) -> None:
        """Take the state :meth:`seed_state` wrote, as :meth:`seed` would have left it.

        Raises:
            ValueError: ``data`` is not such a state (not JSON, another format, a missing part).
        """
        state = orjson.loads(data)
        if type(state) is not dict or state.get("format") != _SEED_FORMAT:
            raise ValueError("not a redaction seed state of this format")
        base, known = state["base"], state["known"]
        if type(base) is not dict or type(known) is not dict:
            raise ValueError("a redaction seed state needs its base secrets and known pairs")
        # JSON has no tuples: each text's pairs come back as lists of (start, end, secret, name) lists
        self._apply_seed(base, {text: tuple(tuple(pair) for pair in pairs) for text, pairs in known.items()})

    def _apply_seed(self, found: dict[str, str], known: dict[str, tuple[tuple[int, int, Any, str], ...]]) -> None:
        self._base = found
        self._base_replacer = Replacer(found)
        self._known_pairs = known
        plain: bool | None = True
        spellings = set()
        for form in found:
            if any(ch in form for ch in '"\\/') or any(ord(ch) < 0x20 for ch in form):
                plain = False
                break
            if _NUMBER.fullmatch(form):
                plain = None
                spellings.add(_orjson_spelling(form))
        self._base_plain = plain
        self._number_spellings = tuple(sorted(spelling for spelling in spellings - set(found) if spelling))

    def seed_digest(self) -> str:
        """sha256 of the base secrets (sorted): what redaction of every trace and reference depends on besides
        the trace itself (part of the shard cache keys)."""
        return hashlib.sha256(canonical_json(sorted(self._base.items())).encode()).hexdigest()


_MISSING = object()
_SEED_FORMAT = 1
"""Version of :meth:`Redactor.seed_state`'s JSON (a change of its layout bumps it: older files are then seeded
again, never misread)."""
_TOKENS_KEPT = 1 << 16
"""Tokens a redactor keeps per cache before starting afresh (a few MB; a run's distinct secrets rarely fill it)."""
_CASES_KEPT = 64
"""Cases whose reference texts a redactor keeps (:meth:`Redactor._texts_of`)."""
_LONG_TEXT = 256
_LONG_WRITING = 4096
"""Bytes of a trace's writing from which the redaction's screen looks for a name before lowering the text (a long
trace's system prompt names the profile's fields; on a short trace the look would be spent twice)."""
"""Characters from which a string's credentials are remembered (a shorter one is screened about as fast as it is
looked up)."""
_TEXT_CHARS_KEPT = 1 << 23
"""Characters of texts a redactor keeps per cache (quiet verdicts, credentials found) before starting afresh (8 M:
8 to 32 MB each, while a corpus's recurring parts — every trace's system prompt, each case's turns across its
trials — stay found)."""


class _TextCache:
    """Text -> a value that depends on the text alone, holding texts of at most ``chars`` characters in all, then
    starting afresh. Its dictionary operations are single ones, so threads may share it: one that misses while
    another clears judges the text again; the count of characters is approximate under threads (it only bounds
    the memory kept)."""

    __slots__ = ("_entries", "_chars", "_limit")

    def __init__(self, chars: int) -> None:
        self._entries: dict[str, Any] = {}
        self._chars = 0
        self._limit = chars

    def get(self, text: str) -> Any:
        """The value kept for ``text``, or ``None``."""
        return self._entries.get(text)

    def keep(self, text: str, value: Any) -> Any:
        """Keep ``value`` for ``text``; returns ``value``."""
        if self._chars + len(text) > self._limit:
            self._entries.clear()
            self._chars = 0
        self._entries[text] = value
        self._chars += len(text)
        return value


def _orjson_spelling(form: str) -> str:
    """How orjson writes the float a numeric form stands for (``""`` for an integer, which both write alike, or a
    form that is not a finite number)."""
    try:
        value = json.loads(form)
    except ValueError:
        return ""
    if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
        return ""
    return orjson.dumps(value).decode()


def _remember(cache: dict[str, str], key: str, token: str) -> str:
    # clear-then-set are single dictionary operations: a thread reading meanwhile misses and recomputes the same
    # token, never sees a wrong one
    if len(cache) >= _TOKENS_KEPT:
        cache.clear()
    cache[key] = token
    return token


_SPELLED_ALIKE = re.compile(r"[ !#-&(-.0-\[\]-~]*")
"""Printable ASCII but ``"``, ``/``, ``\\`` and ``'`` (which a single-quoted key escapes)."""
_EXPONENT = re.compile(r"[0-9.][eE][-+]?[0-9]")
_NUMBER = re.compile(r"-?[0-9][0-9.eE+-]*")

_STRUCTURAL = frozenset(
    f"{prefix}{part}"
    for prefix in ("messages.", "request.messages.")
    for part in ("role", "name", "tool_call_id", "tool_calls.id", "tool_calls.type", "tool_calls.function.name",
                 "tool_calls.name")
) | {"adapter_calls.name", "executor_calls.name"}
"""Trace paths whose strings are structure, never transformed."""

_JSON_HEADS = frozenset('{["') | frozenset(chr(c) for c in range(0x3001) if chr(c).isspace())
"""First characters of a string that may hold an object or a list, or a JSON string holding one: ``{``, ``[``,
``"`` and whitespace (``str.isspace`` holds for no character past U+3000). ``text[:1] in _JSON_HEADS`` spares most
strings a call and a strip."""


def _json_text(value: Any) -> str:
    """JSON text of a redacted value that was read from JSON text: non-ASCII characters as themselves, unless a
    string holds a lone surrogate (decoded from an escape), which only an escape can write as UTF-8."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(value)
    return text


_TOO_DEEP = object()
"""What :func:`_embedded_json` returns for JSON text nested deeper than :data:`MAX_DEPTH` levels."""


def _embedded_json(text: str) -> Any:
    """The object or list a string holds as JSON text (argument text, a tool result), or the text of a JSON string
    that holds one (JSON encoded as text twice: ``"{\\"email\\": …}"``, read a layer at a time), else ``None``;
    :data:`_TOO_DEEP` for an object or list nested deeper than :data:`MAX_DEPTH` levels. Text with a repeated key,
    ``NaN`` or too deep for Python's parser is not read as JSON: it is kept as text (and stays malformed)."""
    head = text[:1]
    if head.isspace():
        head = text.lstrip()[:1]
    if head not in ("{", "[", '"'):
        return None
    try:
        value = strict_json_loads(text, unique_keys=True)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, str):
        return value if _embedded_json(value) is not None else None
    if not isinstance(value, (dict, list)):
        return None
    # nested deeper than a trace may be: the transformation recurses into it (Python's parser reads ~1,000
    # levels), so it is not walked; the caller treats the whole text as one value
    return value if nesting_within(value, MAX_DEPTH) else _TOO_DEEP


def case_reference_values(case: Any) -> list[Any]:
    """The reference values of a case that redaction must treat like its traces: expected call arguments,
    accepted plans' arguments, expected outputs and the input."""
    values: list[Any] = [call.args or {} for plan in case.plans for call in plan]
    values += list(case.expected_outputs or [])
    values.append(case.input)
    return values


def _case_texts(case: Any) -> list[str]:
    return [text for value in case_reference_values(case) for _, text in leaves(value)]


def _form_token(kind: str, form: str, token: Callable[[Any], str]) -> str | None:
    try:
        if kind == "s":
            return token(form)
        if kind == "n":
            value = json.loads(form)
            return token(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return token(json.loads('"' + form + '"'))
    except ValueError:
        return None


def _form_kind(form: str, token: str, token_of: Callable[[Any], str]) -> str:
    """How a form relates to its secret: ``s`` the string itself, ``n`` a number's JSON, ``e`` an escaped
    string."""
    return next(kind for kind in ("s", "n", "e") if _form_token(kind, form, token_of) == token)


def build_redactor(out: str | Path, config: RedactionConfig | None, cases: dict[str, Any], *,
                   seed_state: bytes | None = None) -> Redactor | None:
    """The run's redactor, seeded with every case's reference arguments and input (``None`` when redaction is
    off). The key is :func:`load_key` ``(out)``; ``config.key_digest`` must match it.

    Args:
        seed_state: :meth:`Redactor.seed_state` of a redactor built with the same key, config and cases (the
            run's flow hands it to its workers in memory: it holds the secrets, so it is never written to disk),
            taken instead of seeding from ``cases``; one that does not read back is ignored.

    Raises:
        InputFileError: the key is missing or is not the one ``config`` was made with.
    """
    if config is None:
        return None
    key = load_key(out, create=False)
    if config.key_digest and hashlib.sha256(key).hexdigest() != config.key_digest:
        raise InputFileError(
            key_path(out), None,
            f"the redaction key is not the one these traces were redacted with (key digest {config.key_digest[:12]}...).",
            "restore the results folder's redaction.key, or set TOOLEVAL_REDACTION_KEY to the key the run used.",
        )
    redactor = Redactor(config, key)
    if seed_state is not None:
        try:
            redactor.load_seed_state(seed_state)
            return redactor
        except (ValueError, KeyError, TypeError):  # not a state of this format: seeded from the cases below
            redactor = Redactor(config, key)
    redactor.seed_cases(cases)
    return redactor
