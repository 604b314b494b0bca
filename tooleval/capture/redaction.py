"""Redaction by field name, stable under a keyed hash (issue 4; seed 000: "Secrets should be redacted by field
name, but redaction must be stable so expected and observed values remain comparable").

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

import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, field_validator

from tooleval.canonical import canonical_json, strict_json_loads
from tooleval.capture._secret_text import Replacer, leaves, secret_forms, text_pairs
from tooleval.errors import InputFileError

__all__ = ["DEFAULT_FIELDS", "MARKER_KEY", "RedactionConfig", "Redactor", "build_redactor", "case_reference_values",
           "key_path", "load_key"]

DEFAULT_FIELDS = ("api_key", "card_number", "email", "phone")
"""Field names redacted by default (compared case-insensitively)."""



class RedactionConfig(BaseModel):
    """Which fields to redact. ``fields`` match a key at any depth; ``paths`` match a dotted path from the top of
    an argument or result object (``payment.card.number``). Stored sorted (stable cache keys, handed case H19)."""

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
        InputFileError: the key file is missing and ``create`` is false.
    """
    from tooleval.capture.keys import environment_key

    env = environment_key()
    if env:
        return env
    path = key_path(out)
    if not path.exists() and not create:
        raise InputFileError(path, None, "the redaction key of these results is missing.",
                             "restore redaction.key, or set TOOLEVAL_REDACTION_KEY to the key the run used.")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(secrets.token_hex(32).encode())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    return path.read_bytes()


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
    ``metadata["tooleval.redaction"]``. So each value gets the same transformation everywhere (DESIGN.md "Trust
    rules": redaction never changes a score).
    """

    def __init__(self, config: RedactionConfig, key: bytes) -> None:
        self.config = config
        self._key = key
        self._fields = set(config.fields)
        self._paths = set(config.paths)
        self._base: dict[str, str] = {}
        self.redacted_fields: set[str] = set()
        self._names = sorted({f.lower() for f in self._fields} | {p.lower().rsplit(".", 1)[-1] for p in self._paths})
        self._base_plain: bool | None = True
        """Whether every base secret form is spelled alike at any JSON nesting depth (see :meth:`_untouched`);
        ``None`` when some is a number (then a line holding an exponent goes the slow way)."""

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
        """``"redacted:<16 hex>"`` for a JSON value (equal canonical values give equal tokens)."""
        digest = hmac.new(self._key, canonical_json(value).encode(), hashlib.sha256).hexdigest()[:16]
        return f"redacted:{digest}"

    def _is_redacted(self, key: str, path: str) -> bool:
        return key.lower() in self._fields or path.lower() in self._paths

    # -- finding secrets -------------------------------------------------------------------------------------

    def _add_secret(self, value: Any, found: dict[str, str]) -> None:
        for form, leaf in secret_forms(value):
            found.setdefault(form, self.token(leaf))

    def _collect(self, value: Any, found: dict[str, str], path: str = "") -> None:
        stack: list[tuple[Any, str]] = [(value, path)]
        while stack:
            item, where = stack.pop()
            if isinstance(item, dict):
                for key, child in item.items():
                    child_path = f"{where}.{key}" if where else str(key)
                    if self._is_redacted(str(key), child_path):
                        self._add_secret(child, found)
                    else:
                        stack.append((child, child_path))
            elif isinstance(item, list):
                stack.extend((child, where) for child in item)
            elif isinstance(item, str):
                embedded = _embedded_json(item)
                if embedded is not None:
                    stack.append((embedded, ""))
                else:
                    for _, _, secret, _ in text_pairs(item, lambda k: k in self._fields, self._fields):
                        self._add_secret(secret, found)

    # -- the transformation ----------------------------------------------------------------------------------

    def _transform(self, value: Any, replacer: Replacer, path: str = "") -> Any:
        if isinstance(value, dict):
            out = {}
            for key, child in value.items():
                child_path = f"{path}.{key}" if path else str(key)
                if child_path in _STRUCTURAL:
                    out[key] = child  # roles, tool names and ids are not data (references' names stay raw too)
                elif self._is_redacted(str(key), child_path):
                    self.redacted_fields.add(child_path)
                    out[key] = self.token(child)
                else:
                    out[key] = self._transform(child, replacer, child_path)
            return out
        if isinstance(value, list):
            return [self._transform(child, replacer, path) for child in value]
        if isinstance(value, str):
            return self._transform_text(value, replacer)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                form = canonical_json(value)
            except ValueError:
                return value
            return self.token(value) if replacer.holds(form) else value
        return value

    def _transform_text(self, text: str, replacer: Replacer) -> str:
        embedded = _embedded_json(text)
        if embedded is not None:
            redacted = self._transform(embedded, replacer)
            return text if redacted == embedded else json.dumps(redacted, ensure_ascii=False)
        pieces, last = [], 0
        for start, end, secret, _ in text_pairs(text, lambda k: k in self._fields, self._fields):
            if start < last:
                continue
            pieces += [replacer.text(text[last:start]), json.dumps(self.token(secret))]
            last = end
        return "".join(pieces) + replacer.text(text[last:])

    def _replacer(self, extra: dict[str, str] | None = None) -> Replacer:
        return Replacer({**self._base, **(extra or {})})

    # -- traces ----------------------------------------------------------------------------------------------

    def redact_trace(self, trace: dict[str, Any], case: Any = None) -> dict[str, Any]:
        """Redact a recorded-trace dict (every part of it but ``case_id``, ``trial`` and ``agent``) and record the
        redacted field paths under ``redacted_fields``.

        Args:
            trace: The recorded trace.
            case: Its :class:`tooleval.models.Case`: the trace's own secrets that occur in the case's references
                are recorded as markers (see the class docstring) so that scoring redacts the references alike.
        """
        self.redacted_fields = set()
        keep = {key: trace[key] for key in ("case_id", "trial", "agent") if key in trace}
        body = {key: value for key, value in trace.items() if key not in keep}
        if self._untouched(body):
            return {**keep, **body, "redacted_fields": []}
        own: dict[str, str] = {}
        self._collect(body, own)
        own = {form: token for form, token in own.items() if form not in self._base}
        result = {**keep, **self._transform(body, self._replacer(own))}
        markers = self._markers(own, case) if case is not None else []
        if markers:
            metadata = result.get("metadata") if isinstance(result.get("metadata"), dict) else {}
            result["metadata"] = {**metadata, MARKER_KEY: {"reference_secrets": markers}}
        result["redacted_fields"] = sorted(self.redacted_fields)
        return result

    def _untouched(self, body: dict[str, Any]) -> bool:
        """True when redaction provably leaves ``body`` as it is, decided on its text instead of a walk (issue 9:
        most lines hold no secret; the walk costs ~1 ms on a long trace).

        The text is orjson's serialisation: keys and strings appear decoded, so ``"em\\u0061il"`` in the input
        line is ``email`` here; a string that itself holds JSON (argument text, a tool result) keeps its own
        escapes, so any ``\\u`` left means "go the slow way". Untouched means: no redacted field name (nor a
        path's last key) occurs in the lower-cased text (``_is_redacted`` and :func:`text_pairs` compare
        lower-cased keys, which always contain the name), and no base secret form occurs in it (the replacer
        looks for exactly those forms); a base form spelled differently when escaped, or a number possibly
        written with an exponent, sends the line the slow way.
        """
        if self._base_plain is False:
            return False
        try:
            text = orjson.dumps(body).decode()
        except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, an integer beyond 64 bits: the slow way
            return False
        if "\\u" in text or "\\/" in text:
            return False
        lowered = text.lower()
        if any(name in lowered for name in self._names):
            return False
        if self._base_plain is None and _EXPONENT.search(text):
            return False
        return not any(form in text for form in self._base)

    def _markers(self, own: dict[str, str], case: Any) -> list[list[Any]]:
        texts = _case_texts(case)
        markers = set()
        for form, token in own.items():
            if any(form in text for text in texts):
                markers.add((_form_kind(form, token, self), len(form), token))
        return sorted(list(m) for m in markers)

    # -- references ------------------------------------------------------------------------------------------

    def reference_secrets(self, case: Any, markers: Any) -> dict[str, str]:
        """The trace's own secrets that occur in ``case``'s references, found again from the trace's markers
        (each substring of the case's texts of a marker's length whose token is the marker's)."""
        found: dict[str, str] = {}
        if not isinstance(markers, list) or not markers:
            return found
        texts = _case_texts(case)
        for kind, length, token in markers:
            for text in texts:
                for i in range(len(text) - length + 1):
                    form = text[i:i + length]
                    if form not in found and _form_token(kind, form, self) == token:
                        found[form] = token
        return found

    def redact_reference(self, value: Any, extra: dict[str, str] | None = None) -> Any:
        """Redact a reference value (argument object, expected output, case input) with the base secrets plus
        ``extra`` (:meth:`reference_secrets`)."""
        return self._transform(value, self._replacer(extra))

    def redact_args(self, args: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, Any]:
        """Redact one reference argument object (see :meth:`redact_reference`)."""
        return self.redact_reference(args, extra)

    def redact_json(self, value: Any) -> Any:
        """Redact a JSON value with the base secrets (:meth:`redact_reference` without a trace's own)."""
        return self.redact_reference(value)

    def redact_messages(self, messages: Any, extra: dict[str, str] | None = None) -> Any:
        """Redact a conversation (a case input) as its request is redacted in a trace."""
        return self.redact_reference(messages, extra)

    def seed(self, values: list[Any]) -> None:
        """Find the secrets of these JSON values (every case's references and input): the base secrets, redacted
        in *every* trace and reference alike, whichever shard it falls in."""
        found: dict[str, str] = {}
        for value in values:
            self._collect(value, found)
        self._base = found
        plain: bool | None = True
        for form in found:
            if any(ch in form for ch in '"\\/') or any(ord(ch) < 0x20 for ch in form):
                plain = False
                break
            if _NUMBER.fullmatch(form):
                plain = None
        self._base_plain = plain

    def seed_digest(self) -> str:
        """sha256 of the base secrets (sorted): what redaction of every trace and reference depends on besides
        the trace itself (part of the shard cache keys, issue 9)."""
        return hashlib.sha256(canonical_json(sorted(self._base.items())).encode()).hexdigest()


_EXPONENT = re.compile(r"[0-9.][eE][-+]?[0-9]")
_NUMBER = re.compile(r"-?[0-9][0-9.eE+-]*")

_STRUCTURAL = frozenset(
    f"{prefix}{part}"
    for prefix in ("messages.", "request.messages.")
    for part in ("role", "name", "tool_call_id", "tool_calls.id", "tool_calls.type", "tool_calls.function.name",
                 "tool_calls.name")
) | {"adapter_calls.name", "executor_calls.name"}
"""Trace paths whose strings are structure, never transformed."""

MARKER_KEY = "tooleval.redaction"
"""Key under a redacted trace's ``metadata`` holding ``{"reference_secrets": [[kind, length, token], ...]}``."""


def _embedded_json(text: str) -> Any:
    """The object or list a string holds as JSON text (argument text, a tool result), else ``None``. Text with a
    repeated key, ``NaN`` or too deep is not read as JSON: it is kept as text (and stays malformed)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        value = strict_json_loads(text, unique_keys=True)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def case_reference_values(case: Any) -> list[Any]:
    """The reference values of a case that redaction must treat like its traces: expected call arguments,
    accepted plans' arguments, expected outputs and the input."""
    values: list[Any] = [call.args or {} for plan in case.plans for call in plan]
    values += list(case.expected_outputs or [])
    values.append(case.input)
    return values


def _case_texts(case: Any) -> list[str]:
    return [text for value in case_reference_values(case) for _, text in leaves(value)]


def _form_token(kind: str, form: str, redactor: Redactor) -> str | None:
    try:
        if kind == "s":
            return redactor.token(form)
        if kind == "n":
            value = json.loads(form)
            return redactor.token(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return redactor.token(json.loads('"' + form + '"'))
    except ValueError:
        return None


def _form_kind(form: str, token: str, redactor: Redactor) -> str:
    """How a form relates to its secret: ``s`` the string itself, ``n`` a number's JSON, ``e`` an escaped
    string."""
    return next(kind for kind in ("s", "n", "e") if _form_token(kind, form, redactor) == token)


def build_redactor(out: str | Path, config: RedactionConfig | None, cases: dict[str, Any]) -> Redactor | None:
    """The run's redactor, seeded with every case's reference arguments and input (``None`` when redaction is
    off). The key is :func:`load_key` ``(out)``; ``config.key_digest`` must match it.

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
    redactor.seed([value for case in cases.values() for value in case_reference_values(case)])
    return redactor
