"""Data models shared by every stage (pure pydantic; no Prefect import).

Persisted shapes are described in docs/design.md "Inputs" and "Output layout"; the models here are the
in-memory form. Models live in this importable module (never ``__main__``) because Prefect's cache key and its
cached results name a class by its import path: a class defined in ``__main__`` neither shares a cache with the
imported module nor restores as the same class in another process. Set-valued fields are stored as sorted lists,
because a ``set`` iterates in a different order in each process and would change Prefect's cache key.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tooleval.canonical import (canonical_dumps, canonical_json, canonical_value, compact_arguments,
                                json_type_name, loads_canonical_text, parse_arguments)

__all__ = [
    "REVISION_PATTERN",
    "TRIAL_MAX",
    "Call",
    "NOT_CAPTURED_KEY",
    "Case",
    "DatasetManifest",
    "ToolSpec",
    "ArgumentRule",
    "SequenceRule",
    "CallBudget",
    "AgentInfo",
    "RecordedTrace",
    "MATCH_MODES",
    "MatchModeName",
    "calls_from_messages",
    "call_records_from_messages",
    "with_rules",
]

REVISION_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A dataset revision / run id: 1–64 of ``[A-Za-z0-9._-]``, starting with a letter or digit, so it is always
a safe folder name and never reads as a path (docs/design.md "Dataset folder")."""

TRIAL_MAX = 2**31 - 1
"""The largest trial index: a trial is an ``int32`` column in rows, trace envelopes and stage files."""

Trial = Annotated[int, Field(strict=True, ge=0, le=TRIAL_MAX)]
"""A trial index: a JSON integer in ``0..TRIAL_MAX`` (``true`` is not 1, ``1.0`` not 1: a key is read exactly)."""


_set_attr = object.__setattr__

NOT_CAPTURED_KEY = "\x00not_captured"
"""The second part of :attr:`Call.key` for a call whose arguments were not captured (never canonical JSON)."""


class Call(BaseModel):
    """One tool call, as referenced or as observed.

    A well-formed call has canonical ``args``; a malformed call keeps its ``args_raw`` text and ``parse_error`` and
    matches nothing (docs/design.md "Scoring semantics"); a call whose arguments the source never recorded (content
    capture off) has neither, ``args_captured`` false, and matches a reference call of the same tool by name only
    (docs/rules.md "Arguments that were never captured"). Its record (:meth:`to_record`) is ``args_json`` null with
    ``parse_error`` null: a well-formed call always has ``args_json`` and a malformed one a ``parse_error``.
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
    args_captured: bool = Field(default=True, exclude=True)
    """False when the source recorded the call's name but not its arguments (an OpenTelemetry or OpenInference
    span with content capture off): the arguments are unknown, neither ``{}`` nor wrong. Left out of
    ``model_dump`` (a reference call always has it true, and a case's digest stays what it was); the call's record
    says it instead (:meth:`to_record`)."""
    argument_rules: dict[str, ArgumentRule] | None = None
    """A reference call's own ``{path: rule}``, laid over its tool's rules in the case and in tools.json for this
    call only: two reference calls of one tool may accept different values (BFCL's parallel calls). ``None`` on
    observed calls. Not part of :attr:`key` nor of the row's call records."""

    @property
    def malformed(self) -> bool:
        """True when the argument text was not a JSON object."""
        return self.parse_error is not None

    @property
    def args_known(self) -> bool:
        """True when the arguments can be compared: the call is neither malformed nor without captured arguments."""
        return self.args_captured and self.parse_error is None

    @cached_property
    def args_json(self) -> str | None:
        """Canonical JSON text of ``args``; ``None`` for a malformed call and a call whose arguments were not
        captured."""
        return None if self.args is None else canonical_json(self.args)

    @cached_property
    def key(self) -> tuple[str, str]:
        """Multiset key: ``(name, canonical args)``; a malformed call's key is ``(name, raw text)`` and a call
        without captured arguments ``(name, tag)``, each tagged so that it never equals a well-formed call's key
        (a call without captured arguments is matched by name, apart from the keys:
        :func:`tooleval.matching.match_calls`)."""
        if self.malformed:
            return (self.name, "\x00malformed:" + (self.args_raw or ""))
        if not self.args_captured:
            return (self.name, NOT_CAPTURED_KEY)
        return (self.name, self.args_json or "{}")

    @classmethod
    def not_captured(cls, name: str) -> "Call":
        """A call whose arguments the source did not record: its name only (``args_captured`` false)."""
        return cls(name=name, args=None, args_captured=False)

    @classmethod
    def from_raw(cls, name: str, raw: str | dict | None) -> "Call":
        """Build a call from a name and argument text or object (see :func:`tooleval.canonical.parse_arguments`)."""
        if type(raw) is str and type(name) is str:
            compact = compact_arguments(raw)  # most model-written text: read and written by orjson, checked once
            if compact is not None:
                return cls._well_formed(name, *compact)
        args, error = parse_arguments(raw)
        if error is not None:
            text = raw if isinstance(raw, str) else repr(raw)
            return cls(name=name, args=None, args_raw=text, parse_error=error)
        if not isinstance(name, str):
            return cls(name=name, args=args)  # validation names the problem
        # parse_arguments returns a fresh canonical dict with string keys: nothing to validate or walk again,
        # and its canonical text is serialised once, here
        return cls._well_formed(name, args, canonical_dumps(args))

    @classmethod
    def from_plain_args(cls, name: str, args: dict) -> "Call":
        """:meth:`from_raw` of an argument object known to hold no non-finite number, no lone surrogate and no
        nesting :data:`tooleval.canonical.MAX_DEPTH` deep (see :data:`PLAIN_VALUES`): the same call, without the
        walk that looks for them."""
        if type(name) is not str:
            return cls.from_raw(name, args)
        args = canonical_value(args)
        return cls._well_formed(name, args, canonical_dumps(args))

    def to_record(self) -> dict[str, str | None]:
        """Return the Parquet struct ``{name, args_json, args_raw, parse_error}`` (docs/design.md "Row columns")."""
        return {
            "name": self.name,
            "args_json": self.args_json,
            "args_raw": self.args_raw,
            "parse_error": self.parse_error,
        }

    @classmethod
    def from_canonical(cls, name: str, args_json: str) -> "Call":
        """A well-formed call from canonical argument text that this package wrote (:attr:`args_json` of a call it
        built, as stored in an envelope it verified): read once, without the checks :meth:`from_raw` applies to
        text from outside, and not serialised again: on a large corpus those checks and a second serialisation
        cost more than the scoring itself."""
        return cls._well_formed(name, loads_canonical_text(args_json), args_json)

    @classmethod
    def _well_formed(cls, name: str, args: dict[str, Any], args_json: str) -> "Call":
        """A well-formed call from values already checked (``args`` canonical, ``args_json`` its canonical
        text): what ``model_construct`` builds, set directly (a quarter of its time; a row builds one per call at
        each boundary)."""
        call = cls.__new__(cls)
        _set_attr(call, "__dict__", {"name": name, "args": args, "args_raw": None, "parse_error": None,
                                     "args_captured": True, "argument_rules": None, "args_json": args_json})
        _set_attr(call, "__pydantic_fields_set__", {"name", "args"})
        _set_attr(call, "__pydantic_extra__", None)
        _set_attr(call, "__pydantic_private__", None)
        return call

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Call":
        """Inverse of :meth:`to_record` (``args_json`` and ``parse_error`` both null: arguments not captured)."""
        if record.get("parse_error") is not None:
            return cls(name=record["name"], args_raw=record.get("args_raw"), parse_error=record["parse_error"])
        if record.get("args_json") is None:
            return cls.not_captured(record["name"])
        return cls.from_raw(record["name"], record.get("args_json"))


MatchModeName = Literal["unordered", "strict", "subset", "superset"]
"""How a row's calls must compare with its reference plan for ``calls_match`` (multiset semantics: a call counts as
often as it occurs): ``unordered`` the same calls in any order (``exact_match``), ``strict`` the same calls in the
same order, ``subset`` every observed call is expected, ``superset`` every expected call was made (extra calls
allowed). Semantics and decisions: :mod:`tooleval.rules._modes`, docs/rules.md "Match modes"."""

MATCH_MODES: tuple[str, ...] = ("unordered", "strict", "subset", "superset")
"""The values of :data:`MatchModeName`, the default first."""

RULE_FLAGS = ("ignore", "optional", "unordered", "case_insensitive", "coerce")
"""Argument rules that may be written as a bare name (``"ignore"``) instead of an object."""


class ArgumentRule(BaseModel):
    """How one argument path is compared (semantics in ``tooleval/rules/_arguments.py`` and docs/rules.md).

    Written in ``tools.json`` (``argument_rules: {path: rule}``, the default for every case) or in a case
    (``argument_rules: {tool: {path: rule}}``, which wins). A rule is an object (``{"tolerance": 0.01}``), a bare
    flag name (``"ignore"``) or a list of both (``["case_insensitive", {"strip_chars": " -"}]``), merged.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ignore: bool = False
    """The value is not compared at all, nor its presence (volatile fields such as correlation ids)."""
    optional: bool = False
    """The key may be absent on either side (an executor default); when present on both it is compared."""
    unordered: bool = False
    """A list compared as a multiset (every item matched once, under the item rules)."""
    case_insensitive: bool | None = None
    """Strings compared after ``str.casefold``. Inherited by nested values unless they set it."""
    strip_chars: str | None = None
    """Characters removed from both strings before comparing (BFCL's checker strips spaces and punctuation)."""
    tolerance: float | None = Field(default=None, ge=0)
    """Absolute tolerance for numbers (``|expected - observed| <= tolerance``); booleans are never numbers."""
    one_of: list[Any] | None = None
    """Acceptable observed values (besides the reference's own value)."""
    coerce: bool | Literal["string", "number", "integer", "boolean"] = False
    """Convert the observed value to a declared type before comparing: ``true`` takes the type from the tool's
    JSON Schema, a type name forces it. Every applied coercion is recorded on the row."""
    number_type: Literal["float", "integer"] | None = None
    """The observed number must be *written* as a float (``1.0``, ``1e0``) or as an integer (``1``) in the call's
    argument text. Canonical values cannot tell ``1`` from ``1.0``, so this is checked on the text as the agent
    wrote it (the trajectory's messages); a call known only by its canonical arguments passes it. BFCL's checker
    rejects an integer inside an ``array`` of ``float`` (its ``type_error:nested``)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        parts = value if isinstance(value, list) else [value]
        merged: dict[str, Any] = {}
        for part in parts:
            if isinstance(part, str):
                if part not in RULE_FLAGS:
                    raise ValueError(f"unknown argument rule {part!r}; bare names are {list(RULE_FLAGS)}")
                part = {part: True}
            if isinstance(part, ArgumentRule):
                part = part.model_dump(exclude_defaults=True)
            if not isinstance(part, dict):
                raise ValueError("an argument rule is a name, an object or a list of them")
            merged.update(part)
        return merged

    @field_validator("one_of", mode="after")
    @classmethod
    def _canonical_values(cls, value: list[Any] | None) -> list[Any] | None:
        return None if value is None else [canonical_value(v) for v in value]


class SequenceRule(BaseModel):
    """``{"before": A, "then": B}``: every call of B must come after a successful call of A."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    before: str
    then: str


class CallBudget(BaseModel):
    """``max_calls``: ``{"total": N, "per_tool": {name: N}}`` (calls, failed attempts included)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total: int | None = Field(default=None, ge=0)
    per_tool: dict[str, int] = Field(default_factory=dict)

    @field_validator("per_tool", mode="after")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        if any(n < 0 for n in value.values()):
            raise ValueError("per_tool budgets must be >= 0")
        return dict(sorted(value.items()))


def _sorted_unique(value: list[str] | None) -> list[str] | None:
    return None if value is None else sorted(set(value))


PLAIN_VALUES = "plain_values"
"""Validation context key (``Case.model_validate(data, context={PLAIN_VALUES: True})``): the caller's reading of
the case's JSON line proved that no value in it is a non-finite number, holds a lone surrogate or nests
:data:`tooleval.canonical.MAX_DEPTH` levels deep (orjson read it, and it has fewer brackets than that), so each
reference call's arguments are not walked for those problems again: the same calls, a fifth of the case's time."""


def _plain_values(info: ValidationInfo) -> bool:
    return bool(info.context) and info.context.get(PLAIN_VALUES) is True


def _parse_calls(value: Any, where: str, plain: bool = False) -> list[Call]:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list of {{name, args}}")
    calls = []
    for i, item in enumerate(value):
        if isinstance(item, Call):
            calls.append(item)
            continue
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"{where}[{i}] must be an object with a string 'name'")
        args = item.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ValueError(f"{where}[{i}].args must be a JSON object, got {type(args).__name__}")
        call = Call.from_plain_args(item["name"], args) if plain else Call.from_raw(item["name"], args)
        calls.append(with_rules(call, item.get("argument_rules")))
    return calls


def with_rules(call: Call, rules: Any) -> Call:
    """``call`` carrying its own argument rules (``{path: rule}``, validated), or ``call`` itself for none."""
    if not rules:
        return call
    if not isinstance(rules, dict):
        raise ValueError("a call's argument_rules must be an object {path: rule}")
    parsed = {path: ArgumentRule.model_validate(rule) for path, rule in sorted(rules.items())}
    copy = call.model_copy(update={"argument_rules": parsed})
    if call.args_json is not None:
        copy.__dict__["args_json"] = call.args_json
    return copy


class ToolSpec(BaseModel):
    """One entry of a dataset's ``tools.json``."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments (also the source of the declared types used by ``coerce``)."""
    side_effect: Literal["read", "write"] = "read"
    """``write`` makes the tool a reference write: missing or wrong-argument reference calls of it block."""
    idempotent: bool | None = None
    """``false``: the same call (name + canonical args) made twice is a ``repeated_side_effect``."""
    requires_confirmation: bool = False
    """Each call must follow an explicit user confirmation given since the agent's last proposal."""
    family: str | None = None
    """Tool family (``payments``, ``search``): a gate slice."""
    argument_rules: dict[str, ArgumentRule] | None = None
    """``{path: rule}``: the default argument rules of this tool for every case (a case's rules win)."""
    required_arguments: list[str] | None = None
    """Argument names every call of this tool must carry (presence only), in every case."""
    confidential_fields: list[str] | None = None
    """Keys of this tool's JSON result (at any depth) whose values must never appear in an assistant message."""

    @field_validator("required_arguments", "confidential_fields", mode="after")
    @classmethod
    def _sorted_names(cls, value: list[str] | None) -> list[str] | None:
        return _sorted_unique(value)


class Case(BaseModel):
    """One line of ``cases.jsonl`` (docs/design.md "Cases"; the rule keys in docs/rules.md). Unknown keys are
    kept, so that a dataset written for a newer tooleval still loads."""

    model_config = ConfigDict(extra="allow")

    case_id: str = Field(min_length=1)
    input: Any
    """Chat messages (OpenAI format: a list of objects, each with a non-empty string ``role``) or text."""
    expected_calls: list[Call]
    slice: str | None = None
    accepted_plans: list[list[Call]] | None = None
    """Alternative reference plans; the row is scored against ``expected_calls`` (plan 0) and each of these
    (plan i), and the best F1 wins, ties by list order (this changes the metric's definition: docs/rules.md)."""
    forbidden_tools: list[str] | None = None
    """Any call of these tools is a ``forbidden_tool`` violation."""
    allowed_tools: list[str] | None = None
    """When set, a call of any other tool is an ``unexpected_tool`` violation."""
    no_repeated_calls: bool = False
    """Any call identical to an earlier one (reads included) is a ``repeated_call`` violation."""
    min_f1: float | None = Field(default=None, ge=0, le=1)
    """Row floor: ``f1 < min_f1`` is an ``f1_below_floor`` violation."""
    require_exact: bool = False
    """Row floor: anything but an exact match is an ``f1_below_floor`` violation."""
    sequence_rules: list[SequenceRule] | None = None
    argument_rules: dict[str, dict[str, ArgumentRule]] | None = None
    """``{tool: {path: rule}}``; wins over the tool's own ``argument_rules`` in tools.json."""
    required_arguments: dict[str, list[str]] | None = None
    """``{tool: [argument names]}``: every call of the tool must carry them (presence only)."""
    max_calls: CallBudget | None = None
    tools: list[ToolSpec] | None = None
    """The case's own tool specs: for this case they replace tools.json's spec of the same name (BFCL documents one
    function name differently across questions), in argument rules and in the schema check alike."""
    expected_outputs: list[str] | None = None
    """Strings the final reply must contain (``missing_output`` otherwise)."""
    risk: str | None = None
    owner: str | None = None
    provenance: Any = None
    last_reviewed: str | None = None
    metadata: dict[str, Any] | None = None
    match_mode: MatchModeName = "unordered"
    """How the calls must compare with the reference for the row's ``calls_match`` (:data:`MatchModeName`)."""
    ordered: bool = False
    """With ``subset`` / ``superset``: the calls must also keep the reference's order, as a subsequence (the
    observed calls in the reference's order for ``subset``, the reference's calls in the observed order for
    ``superset``). ``strict`` is ordered by definition and ``unordered`` by name, so neither takes it."""

    pairing: Literal["maximum", "first_fit"] = "maximum"
    """How reference calls are paired with observed calls for ``calls_match`` under ``unordered``: ``maximum`` (a
    maximum matching: the verdict does not depend on the order of the calls) or ``first_fit`` (each reference call,
    in the reference's order, takes the first equal observed call not yet taken; BFCL's parallel checker, whose
    verdict its importer reproduces). The figures (``tp``, ``f1``) always come from the maximum matching."""

    @model_validator(mode="after")
    def _ordered_needs_subset_or_superset(self) -> "Case":
        if self.ordered and self.match_mode not in ("subset", "superset"):
            raise ValueError(f"ordered: true applies to match_mode subset or superset, not {self.match_mode!r} "
                             "(strict is already ordered)")
        if self.pairing == "first_fit" and self.match_mode != "unordered":
            raise ValueError(f"pairing: first_fit applies to match_mode unordered, not {self.match_mode!r}")
        return self

    @field_validator("input", mode="after")
    @classmethod
    def _messages_have_roles(cls, value: Any) -> Any:
        # a message without a role cannot be sent to a model, nor compared with a recorded request
        if isinstance(value, list):
            for i, message in enumerate(value):
                if not isinstance(message, dict):
                    raise ValueError(f"input[{i}] must be a chat message object ({{\"role\", \"content\"}}), "
                                     f"not a JSON {json_type_name(message)}")
                role = message.get("role")
                if not isinstance(role, str) or not role:
                    raise ValueError(f"input[{i}] has no 'role' (a chat message names its role: user, assistant, "
                                     "system or tool)")
        return value

    @field_validator("expected_calls", mode="before")
    @classmethod
    def _parse_expected(cls, value: Any, info: ValidationInfo) -> Any:
        return _parse_calls(value, "expected_calls", _plain_values(info))

    @field_validator("accepted_plans", mode="before")
    @classmethod
    def _parse_plans(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if not isinstance(value, list):
            raise ValueError("accepted_plans must be a list of call lists")
        plain = _plain_values(info)
        return [_parse_calls(plan, f"accepted_plans[{i}]", plain) for i, plan in enumerate(value)]

    @field_validator("forbidden_tools", "allowed_tools", mode="after")
    @classmethod
    def _sorted_names(cls, value: list[str] | None) -> list[str] | None:
        return _sorted_unique(value)

    @field_validator("required_arguments", mode="after")
    @classmethod
    def _sorted_arguments(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        return None if value is None else {tool: sorted(set(names)) for tool, names in sorted(value.items())}

    @property
    def plans(self) -> list[list[Call]]:
        """Every reference plan: ``expected_calls`` first (plan 0), then ``accepted_plans`` (plans 1..n)."""
        return [self.expected_calls, *(self.accepted_plans or [])]


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
    """One line of a recorded traces file (docs/design.md "Recorded traces")."""

    model_config = ConfigDict(extra="allow")

    case_id: str = Field(min_length=1)
    trial: Trial
    """In ``0..TRIAL_MAX``; a boolean or a float is refused."""
    agent: AgentInfo = Field(default_factory=AgentInfo)
    request_id: str | None = None
    response_id: str | None = None
    messages: list[dict[str, Any]]
    metadata: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    """What was sent to the model: ``{"messages": [...]}`` (provenance compares it with the case's
    input, to catch a trace joined to the wrong case)."""
    adapter_calls: list[dict[str, Any]] | None = None
    """Calls after the adapter parsed, validated and defaulted them: ``[{"name", "args"}]``."""
    executor_calls: list[dict[str, Any]] | None = None
    """Payloads the tools received: ``[{"name", "args", "executions"?: int, "status"?: str}]``."""
    prompt_version: str | None = None
    tool_schema_version: str | None = None
    generation_started_at: datetime | None = None
    generation_finished_at: datetime | None = None

    @field_validator("case_id", mode="before")
    @classmethod
    def _case_id_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("metadata", mode="after")
    @classmethod
    def _reward_is_a_number(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # the row's recorded_reward and pass^k read it: a text there would silently count as "no reward"
        reward = (value or {}).get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            raise ValueError(f"metadata.reward must be a number or null (the recorded outcome), not a JSON "
                             f"{json_type_name(reward)}")
        return value

    @field_validator("executor_calls", mode="after")
    @classmethod
    def _executions_in_range(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        # stored as an int32 column: a count out of that range would stop the whole capture stage
        for i, call in enumerate(value or []):
            executions = call.get("executions")
            if executions is not None and (type(executions) is not int or not 0 <= executions <= TRIAL_MAX):
                raise ValueError(f"executor_calls[{i}].executions must be an integer in 0..{TRIAL_MAX} (times "
                                 f"the tool ran), not {executions!r}")
        return value


def calls_from_messages(messages: list[dict[str, Any]]) -> list[Call]:
    """Extract the assistant's tool calls, in order, from an OpenAI chat-completions message list.

    Accepts ``tool_calls[].function.{name, arguments}`` (arguments as JSON text, the OpenAI wire format) and the
    flattened ``tool_calls[].{name, arguments|args}`` shape (arguments already an object, as in tau2 and
    LangChain). Calls are keyed by position, never by id (ids repeat within tau-bench runs). A tool call marked
    ``"arguments_captured": false`` (beside ``function``; its arguments absent or null: what the span importers
    write when content capture was off) becomes :meth:`Call.not_captured`.

    Raises:
        ValueError: when a tool call has no string name, or its ``arguments_captured`` is not a boolean, or is
            false while arguments are given.
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
            captured = tool_call.get("arguments_captured", True)
            if captured is True:
                calls.append(Call.from_raw(name, raw))
            elif captured is False and raw is None:
                calls.append(Call.not_captured(name))
            elif captured is False:
                raise ValueError(f"messages[{m_index}].tool_calls[{c_index}] says arguments_captured: false but "
                                 "gives arguments (drop one of them)")
            else:
                raise ValueError(f"messages[{m_index}].tool_calls[{c_index}].arguments_captured must be true or "
                                 f"false, not {json_type_name(captured)}")
    return calls


def call_records_from_messages(messages: list[dict[str, Any]],
                               seen: dict[tuple[str, str], dict[str, str | None]] | None = None
                               ) -> list[dict[str, str | None]]:
    """``[call.to_record() for call in calls_from_messages(messages)]``, without building a :class:`Call` for a
    call whose argument text reads the compact way (:func:`tooleval.canonical.compact_arguments`: nearly every
    call; its record is the canonical text itself). A call of any other shape is read by :meth:`Call.from_raw`,
    and a message list holding a tool call that is not a plain object with a string name (or that says
    ``arguments_captured``) by :func:`calls_from_messages` itself, which names the problem.

    Args:
        messages: The chat messages.
        seen: ``(tool name, argument text) -> record`` of the calls read before (a batch's memo: a call's record
            depends on its name and text alone), added to here; the records are shared, never to be modified.

    Raises:
        ValueError: as :func:`calls_from_messages`.
    """
    records: list[dict[str, str | None]] = []
    memo = {} if seen is None else seen
    for message in messages:
        if type(message) is not dict:
            if not isinstance(message, dict):
                continue
        if message.get("role") != "assistant":
            continue
        tool_calls = message.get("tool_calls")
        if not tool_calls:
            continue
        if type(tool_calls) is not list:
            return [call.to_record() for call in calls_from_messages(messages)]
        for tool_call in tool_calls:
            body = tool_call.get("function", tool_call) if type(tool_call) is dict else None
            name = body.get("name") if type(body) is dict else None
            if type(name) is not str or "arguments_captured" in tool_call:
                return [call.to_record() for call in calls_from_messages(messages)]
            raw = body["arguments"] if "arguments" in body else body.get("args")
            if type(raw) is not str:
                records.append(Call.from_raw(name, raw).to_record())
                continue
            record = memo.get((name, raw))
            if record is None:
                compact = compact_arguments(raw)
                record = Call.from_raw(name, raw).to_record() if compact is None else \
                    {"name": name, "args_json": compact[1], "args_raw": None, "parse_error": None}
                memo[name, raw] = record
            records.append(record)
    return records


Call.model_rebuild()  # ``argument_rules`` names ArgumentRule, defined after Call
