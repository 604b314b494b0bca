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

from pydantic import BaseModel, ConfigDict, field_validator

from tooleval.canonical import canonical_json
from tooleval.errors import InputFileError

__all__ = ["DEFAULT_FIELDS", "RedactionConfig", "Redactor", "build_redactor", "key_path", "load_key"]

DEFAULT_FIELDS = ("api_key", "card_number", "email", "phone")
"""Field names redacted by default (compared case-insensitively)."""

_MIN_TEXT = 4  # shorter raw values are not replaced in free text (too many accidental hits)


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
    """The redaction key: ``$TOOLEVAL_REDACTION_KEY`` (text) or ``<out>/redaction.key`` (created when missing
    and ``create``).

    Raises:
        InputFileError: the key file is missing and ``create`` is false.
    """
    env = os.environ.get("TOOLEVAL_REDACTION_KEY")
    if env:
        return env.encode()
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
    """Applies a :class:`RedactionConfig` with a key. Not thread-safe while :meth:`redact_trace` runs."""

    def __init__(self, config: RedactionConfig, key: bytes) -> None:
        self.config = config
        self._key = key
        self._fields = set(config.fields)
        self._paths = set(config.paths)
        self._seen: dict[str, str] = {}
        self._base_seen: dict[str, str] = {}
        self.redacted_fields: set[str] = set()

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

    def _remember(self, value: Any, token: str) -> None:
        if isinstance(value, (dict, list)):
            for item in (value.values() if isinstance(value, dict) else value):
                self._remember(item, self.token(item))
            return
        # Only strings are replaced in free text: a number's digits can sit inside other numbers.
        if isinstance(value, str) and len(value) >= _MIN_TEXT:
            self._seen[value] = token

    def redact_json(self, value: Any, path: str = "") -> Any:
        """Redact a parsed JSON value: redacted fields (at any depth) and configured paths become tokens."""
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                child = f"{path}.{key}" if path else str(key)
                if str(key).lower() in self._fields or child.lower() in self._paths:
                    self.redacted_fields.add(child)
                    out[key] = self.token(item)
                    self._remember(item, out[key])
                else:
                    out[key] = self.redact_json(item, child)
            return out
        if isinstance(value, list):
            return [self.redact_json(item, path) for item in value]
        return value

    def redact_text(self, text: str) -> str:
        """Replace every raw string value seen so far wherever it appears verbatim in ``text``."""
        for raw in sorted(self._seen, key=len, reverse=True):
            text = text.replace(raw, self._seen[raw])
        return text

    def redact_field_pairs(self, text: str) -> str:
        """Replace ``"field": value`` pairs of redacted fields in text that is not valid JSON (malformed
        argument text, a truncated tool result)."""
        if self._fields:
            names = "|".join(re.escape(f) for f in sorted(self._fields))
            pattern = re.compile(r'("(?:' + names + r')"\s*:\s*)("(?:[^"\\]|\\.)*"|[-0-9.eE+]+)', re.IGNORECASE)
            text = pattern.sub(lambda m: m.group(1) + json.dumps(self._token_of_literal(m.group(2))), text)
        return text

    def _token_of_literal(self, literal: str) -> str:
        try:
            return self.token(json.loads(literal))
        except ValueError:
            return self.token(literal)

    def _redact_argument_text(self, raw: Any) -> Any:
        if isinstance(raw, dict):
            return self.redact_json(raw)
        if not isinstance(raw, str) or not raw.strip():
            return raw
        try:
            parsed = json.loads(raw)
        except ValueError:
            return self.redact_field_pairs(raw)  # malformed: kept raw, but not its secrets
        if not isinstance(parsed, dict):
            return self.redact_field_pairs(raw)
        redacted = self.redact_json(parsed)
        return raw if redacted == parsed else json.dumps(redacted, ensure_ascii=False)

    def _redact_message(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return message
        message = dict(message)
        calls = []
        for call in message.get("tool_calls") or []:
            call = dict(call)
            body = dict(call.get("function", call))
            for key in ("arguments", "args"):
                if key in body:
                    body[key] = self._redact_argument_text(body[key])
            if "function" in call:
                call["function"] = body
            else:
                call = body
            calls.append(call)
        if message.get("tool_calls"):
            message["tool_calls"] = calls
        content = message.get("content")
        if isinstance(content, str):
            try:
                parsed = json.loads(content) if content.strip()[:1] in ("{", "[") else None
            except ValueError:
                parsed = None
            if isinstance(parsed, (dict, list)):
                redacted = self.redact_json(parsed)
                if redacted != parsed:
                    message["content"] = json.dumps(redacted, ensure_ascii=False)
            else:
                message["content"] = self.redact_field_pairs(content)
        return message

    def _redact_boundary_call(self, call: Any) -> Any:
        """An adapter or executor record: its arguments (object or text) and its tool result."""
        if not isinstance(call, dict):
            return call
        call = dict(call)
        for key in ("args", "arguments"):
            if key in call:
                call[key] = self._redact_argument_text(call[key])
        result = call.get("result")
        if isinstance(result, (dict, list)):
            call["result"] = self.redact_json(result)
        elif isinstance(result, str):
            call["result"] = self._redact_message({"role": "tool", "content": result})["content"]
        return call

    def redact_messages(self, messages: Any) -> Any:
        """Redact a conversation (a case input) as :meth:`redact_trace` redacts a request's messages, with only the
        seeded values for free text: used to compare a redacted request with its case's input."""
        if isinstance(messages, str):
            return self.redact_field_pairs(self.redact_text_with(self._base_seen, messages))
        if not isinstance(messages, list):
            return messages
        saved, self._seen = self._seen, dict(self._base_seen)
        try:
            redacted = [self._redact_message(m) for m in messages]
            return json.loads(self.redact_text_with(self._base_seen, json.dumps(redacted, ensure_ascii=False)))
        finally:
            self._seen = saved

    @staticmethod
    def redact_text_with(seen: dict[str, str], text: str) -> str:
        for raw in sorted(seen, key=len, reverse=True):
            text = text.replace(raw, seen[raw])
        return text

    def redact_trace(self, trace: dict[str, Any]) -> dict[str, Any]:
        """Redact a recorded-trace dict (messages, request, adapter/executor calls, metadata) and record the
        redacted field paths under ``redacted_fields``. Two passes: structured fields, then free text."""
        self.redacted_fields = set()
        self._seen = dict(self._base_seen)
        out = dict(trace)
        out["messages"] = [self._redact_message(m) for m in trace.get("messages") or []]
        if isinstance(trace.get("request"), dict):
            request = dict(trace["request"])
            request["messages"] = [self._redact_message(m) for m in request.get("messages") or []]
            out["request"] = request
        for key in ("adapter_calls", "executor_calls"):
            if isinstance(trace.get(key), list):
                out[key] = [self._redact_boundary_call(call) for call in trace[key]]
        if isinstance(trace.get("metadata"), dict):
            out["metadata"] = self.redact_json(trace["metadata"])
        text = self.redact_text(json.dumps(out, ensure_ascii=False))
        result = json.loads(text)
        result["redacted_fields"] = sorted(self.redacted_fields)
        return result

    def redact_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Redact one argument object (reference calls of the dataset)."""
        return self.redact_json(args)

    def seed(self, values: list[Any]) -> None:
        """Redact these JSON values (e.g. every case's reference arguments and input) once and remember their
        raw strings, so free text of *every* trace is redacted alike, whichever shard it falls in."""
        self._seen = {}
        for value in values:
            self.redact_json(value)
        self._base_seen = dict(self._seen)

    def seed_digest(self) -> str:
        """sha256 of the seeded values (raw string -> token, sorted): what free-text redaction of every trace depends
        on besides the trace itself (part of the shard cache keys, issue 9)."""
        return hashlib.sha256(canonical_json(sorted(self._base_seen.items())).encode()).hexdigest()


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
    values: list[Any] = []
    for case in cases.values():
        values += [call.args or {} for call in case.expected_calls]
        values.append(case.input)
    redactor.seed(values)
    return redactor
