"""Data models shared by every stage (pure pydantic; no Prefect import).

Persisted shapes are described in DESIGN.md "Inputs" and "Output layout"; the models here are the in-memory
form. Models live in this importable module (never ``__main__``) so that results cached by Prefect restore as
the same class in another process (handed case H20). Set-valued fields are stored as sorted lists, because a
``set`` iterates in a different order in each process and would change Prefect's cache key (handed case H19).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tooleval.canonical import canonical_json, parse_arguments

__all__ = [
    "REVISION_PATTERN",
    "Call",
    "Case",
    "DatasetManifest",
    "ToolSpec",
    "AgentInfo",
    "RecordedTrace",
    "calls_from_messages",
]

REVISION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A dataset revision / run id: 1–64 of ``[A-Za-z0-9._-]``, starting with a letter or digit (DESIGN.md)."""


class Call(BaseModel):
    """One tool call, as referenced or as observed.

    Exactly one of ``args`` and ``parse_error`` is set: a well-formed call has canonical ``args``; a malformed
    call keeps its ``args_raw`` text and ``parse_error`` and matches nothing (DESIGN.md scoring semantics).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    """Tool name, compared exactly."""
    args: dict[str, Any] | None = None
    """Canonical arguments (integral floats as ints); ``None`` only for a malformed call."""
    args_raw: str | None = None
    """The raw argument text; kept only for a malformed call."""
    parse_error: str | None = None
    """Why the argument text could not be read; ``None`` for a well-formed call."""

    @property
    def malformed(self) -> bool:
        """True when the argument text was not a JSON object."""
        return self.parse_error is not None

    @property
    def args_json(self) -> str | None:
        """Canonical JSON text of ``args``; ``None`` for a malformed call."""
        return None if self.args is None else canonical_json(self.args)

    @property
    def key(self) -> tuple[str, str]:
        """Multiset key: ``(name, canonical args)``; a malformed call's key is ``(name, raw text)`` tagged so
        that it never equals a well-formed call's key."""
        if self.malformed:
            return (self.name, "\x00malformed:" + (self.args_raw or ""))
        return (self.name, self.args_json or "{}")

    @classmethod
    def from_raw(cls, name: str, raw: str | dict | None) -> "Call":
        """Build a call from a name and argument text or object (see :func:`tooleval.canonical.parse_arguments`)."""
        args, error = parse_arguments(raw)
        if error is not None:
            text = raw if isinstance(raw, str) else repr(raw)
            return cls(name=name, args=None, args_raw=text, parse_error=error)
        return cls(name=name, args=args)

    def to_record(self) -> dict[str, str | None]:
        """Return the Parquet struct ``{name, args_json, args_raw, parse_error}`` (DESIGN.md row columns)."""
        return {
            "name": self.name,
            "args_json": self.args_json,
            "args_raw": self.args_raw,
            "parse_error": self.parse_error,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Call":
        """Inverse of :meth:`to_record`."""
        if record.get("parse_error") is not None:
            return cls(name=record["name"], args_raw=record.get("args_raw"), parse_error=record["parse_error"])
        return cls.from_raw(record["name"], record.get("args_json"))


class ToolSpec(BaseModel):
    """One entry of a dataset's ``tools.json``."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments."""
    side_effect: Literal["read", "write"] = "read"
    idempotent: bool | None = None
    requires_confirmation: bool = False
    family: str | None = None


class Case(BaseModel):
    """One line of ``cases.jsonl`` (DESIGN.md "Inputs"). Unknown keys are kept (forward compatibility)."""

    model_config = ConfigDict(extra="allow")

    case_id: str = Field(min_length=1)
    input: Any
    """Chat messages (OpenAI format) or text."""
    expected_calls: list[Call]
    slice: str | None = None
    accepted_plans: list[list[Call]] | None = None
    forbidden_tools: list[str] | None = None
    sequence_rules: list[dict[str, Any]] | None = None
    argument_rules: dict[str, Any] | None = None
    max_calls: Any = None
    expected_outputs: list[str] | None = None
    risk: str | None = None
    owner: str | None = None
    provenance: Any = None
    last_reviewed: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("expected_calls", mode="before")
    @classmethod
    def _parse_expected(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("expected_calls must be a list of {name, args}")
        calls = []
        for i, item in enumerate(value):
            if isinstance(item, Call):
                calls.append(item)
                continue
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ValueError(f"expected_calls[{i}] must be an object with a string 'name'")
            args = item.get("args", {})
            if args is None:
                args = {}
            if not isinstance(args, dict):
                raise ValueError(f"expected_calls[{i}].args must be a JSON object, got {type(args).__name__}")
            calls.append(Call.from_raw(item["name"], args))
        return calls

    @field_validator("forbidden_tools", mode="after")
    @classmethod
    def _sorted_names(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else sorted(set(value))


class DatasetManifest(BaseModel):
    """``dataset.json``."""

    model_config = ConfigDict(extra="allow")

    name: str
    revision: str
    schema_version: Literal[1]
    description: str | None = None
    license: str | None = None
    source: str | None = None


class AgentInfo(BaseModel):
    """Who produced a trace."""

    name: str = "unknown"
    version: str | None = None
    model: str | None = None


class RecordedTrace(BaseModel):
    """One line of a recorded traces file (DESIGN.md "Recorded traces")."""

    model_config = ConfigDict(extra="allow")

    case_id: str = Field(min_length=1)
    trial: int = Field(ge=0)
    agent: AgentInfo = Field(default_factory=AgentInfo)
    request_id: str | None = None
    response_id: str | None = None
    messages: list[dict[str, Any]]
    metadata: dict[str, Any] | None = None
    adapter_calls: list[dict[str, Any]] | None = None
    executor_calls: list[dict[str, Any]] | None = None

    @field_validator("case_id", mode="before")
    @classmethod
    def _case_id_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def calls_from_messages(messages: list[dict[str, Any]]) -> list[Call]:
    """Extract the assistant's tool calls, in order, from an OpenAI chat-completions message list.

    Accepts ``tool_calls[].function.{name, arguments}`` (arguments as JSON text, the OpenAI wire format) and the
    flattened ``tool_calls[].{name, arguments|args}`` shape (arguments already an object, as in tau2 and
    LangChain). Calls are keyed by position, never by id (ids repeat within tau-bench runs).

    Raises:
        ValueError: when a tool call has no string name.
    """
    calls: list[Call] = []
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for c_index, tool_call in enumerate(message.get("tool_calls") or []):
            body = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else None
            name = body.get("name") if isinstance(body, dict) else None
            if not isinstance(name, str):
                raise ValueError(f"messages[{m_index}].tool_calls[{c_index}] has no tool name")
            raw = body["arguments"] if "arguments" in body else body.get("args")
            calls.append(Call.from_raw(name, raw))
    return calls
