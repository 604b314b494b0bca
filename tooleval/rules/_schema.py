"""Tool schema checks (issue 13 item 6): each observed call against its tool's ``parameters`` in tools.json.

The "almost the right tool" errors: a call of a tool the dataset does not declare, a required parameter left out,
a parameter the schema does not know, a value of the wrong JSON type. BFCL's checker reports the same kinds
(``bfcl_eval/eval_checker/ast_eval/ast_checker.py``: "wrong function name", "missing required parameter",
"unexpected parameter", "wrong type"). Types are checked with ``jsonschema`` (Draft 2020-12) on the call's
canonical arguments; required and unknown parameters are checked here, at every object level that declares
``properties``, because function schemas seldom say ``additionalProperties: false`` and an unexpected parameter
is still an error for BFCL. Malformed calls (argument text that is not a JSON object) are not checked: they are
already ``malformed``. A dataset without tools.json has nothing to check against: no findings.

Where the findings go (wired by :func:`tooleval.rules.evaluate_row`): the row column ``schema_findings``, the
mismatch category ``schema`` (never an f1 or exact-match change: the call is still matched as made), and one
``tool_schema`` violation per call with findings — advisory unless gate.toml's ``[tool_schema] blocking_tools``
names the tool (docs/rules.md).

Cost: a validator is compiled once per tool schema per process (:func:`validator_for`), not per call or per row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tooleval.canonical import _key_path
from tooleval.models import Call, ToolSpec
from tooleval.rules._policy import Violation, describe_call

__all__ = ["FINDING_KINDS", "SCHEMA_RULE", "SchemaFinding", "schema_findings", "schema_violations", "validator_for"]

FindingKind = Literal["undeclared_tool", "missing_required", "unknown_parameter", "wrong_type"]
FINDING_KINDS: tuple[str, ...] = ("undeclared_tool", "missing_required", "unknown_parameter", "wrong_type")
SCHEMA_RULE = "tool_schema"
"""The violation rule of a call with schema findings (advisory by default)."""
_KIND_LABELS = {"undeclared_tool": "undeclared tool", "missing_required": "missing required parameter",
                "unknown_parameter": "unknown parameter", "wrong_type": "wrong type"}


@dataclass(frozen=True)
class SchemaFinding:
    """One way an observed call departs from its tool's declared schema."""

    call_index: int
    """0-based position of the call among the observed calls."""
    tool: str
    kind: FindingKind
    path: str
    """Argument path (``customer.email``, ``items[0].qty``); ``""`` for the whole call (an undeclared tool)."""
    detail: str
    """Human-readable detail (the expected type, the missing name)."""

    def to_record(self) -> dict[str, Any]:
        """``{call_index, tool, kind, path, detail}`` (a row column's struct)."""
        return {"call_index": self.call_index, "tool": self.tool, "kind": self.kind, "path": self.path,
                "detail": self.detail}


def _structure(value: Any, schema: Mapping[str, Any], text: str) -> list[tuple[str, str, str]]:
    """Missing required and unknown parameters, recursively wherever ``properties`` is declared."""
    found: list[tuple[str, str, str]] = []
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        for name in schema.get("required") or []:
            if name not in value:
                found.append(("missing_required", _key_path(text, name), f"required parameter {name!r} is missing"))
        for name, item in value.items():
            if name not in properties:
                if schema.get("additionalProperties") in (None, False):
                    found.append(("unknown_parameter", _key_path(text, name), f"{name!r} is not a declared parameter"))
            elif isinstance(properties[name], dict):
                found += _structure(item, properties[name], _key_path(text, name))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            found += _structure(item, schema["items"], f"{text}[{index}]")
    return found


def _path(parts) -> str:
    text = ""
    for part in parts:
        text = f"{text}[{part}]" if isinstance(part, int) else _key_path(text, part)
    return text


_PLAIN_KEYWORDS = frozenset({
    "type", "properties", "items", "required", "additionalProperties", "description", "title", "default",
    "examples", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "$schema",
    "$id", "$comment", "deprecated", "readOnly", "writeOnly",
})
"""Keywords whose only ``type`` errors come from ``type`` itself, ``properties`` and ``items`` (the others apply no
subschema; their errors are not type errors)."""

_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}
"""jsonschema's Draft 2020-12 type checker (``jsonschema._types.draft202012_type_checker``) over the values a
canonical argument object holds."""


def _surely_typed(value: Any, schema: Any) -> bool:
    """True when ``value`` provably draws no ``type`` error from ``schema``: every keyword met is in
    :data:`_PLAIN_KEYWORDS` (``additionalProperties`` only as a boolean), every ``type`` met holds, and so do the
    ``properties`` and ``items`` subschemas. ``False`` means only "not proven": jsonschema decides."""
    if schema is True:
        return True
    if not isinstance(schema, dict) or not _PLAIN_KEYWORDS.issuperset(schema):
        return False
    if "type" in schema:
        declared = schema["type"]
        names = declared if isinstance(declared, list) else [declared]
        checks = [_JSON_TYPES.get(name) if isinstance(name, str) else None for name in names]
        if None in checks or not any(check(value) for check in checks):
            return False
    if not isinstance(schema.get("additionalProperties", False), bool):
        return False
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            return False
        if isinstance(value, dict):
            for key, item in value.items():
                if key in properties and not _surely_typed(item, properties[key]):
                    return False
    items = schema.get("items")
    if items is not None and isinstance(value, list):
        return all(_surely_typed(item, items) for item in value)
    return True


def _types(args: dict[str, Any], validator: Draft202012Validator) -> list[tuple[str, str, str]]:
    """Type findings of one argument object, cached per (validator, argument text with its key order: error
    messages quote values as written) — most rows of a corpus repeat argument objects (issue 9: jsonschema cost
    ~85 µs a call)."""
    if _surely_typed(args, validator.schema):  # most calls: no jsonschema pass, no cache key to serialise
        return []
    try:
        key = (id(validator), orjson.dumps(args))
    except TypeError:  # an integer beyond 64 bits: not cached
        key = None
    hit = _TYPES.get(key) if key is not None else None
    if hit is not None and hit[0] is validator:
        return list(hit[1])
    found = [("wrong_type", _path(error.absolute_path), error.message)
             for error in validator.iter_errors(args) if error.validator == "type"]
    if key is not None:
        if len(_TYPES) >= _TYPES_LIMIT:
            _TYPES.clear()
        _TYPES[key] = (validator, tuple(found))  # the validator is held, so its id is not reused
    return found


_TYPES: dict[tuple[int, bytes], tuple[Draft202012Validator, tuple]] = {}
_TYPES_LIMIT = 65536


_COMPILED: dict[str, Draft202012Validator] = {}
"""Validators by canonical schema text: a tools.json loaded again (another shard) reuses the compiled one."""
_BY_SPEC: dict[int, tuple[ToolSpec, Draft202012Validator]] = {}
"""Validators by ``id(spec)`` (the spec is held, so its id is not reused): no schema serialisation per call."""
_CACHE_LIMIT = 4096


def validator_for(spec: ToolSpec) -> Draft202012Validator:
    """The compiled validator of ``spec.parameters``, built once per tool schema per process.

    Raises:
        ValueError: ``parameters`` is not a valid JSON Schema (names the tool; the row is scored as an error).
    """
    hit = _BY_SPEC.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    text = json.dumps(spec.parameters, sort_keys=True, default=str)
    validator = _COMPILED.get(text)
    if validator is None:
        try:
            Draft202012Validator.check_schema(spec.parameters)
        except SchemaError as exc:
            raise ValueError(f"tools.json: the parameters of tool {spec.name!r} are not a valid JSON Schema "
                             f"({exc.message}); fix that schema") from None
        if len(_COMPILED) >= _CACHE_LIMIT:
            _COMPILED.clear()
        validator = _COMPILED[text] = Draft202012Validator(spec.parameters)
    if len(_BY_SPEC) >= _CACHE_LIMIT:
        _BY_SPEC.clear()
    _BY_SPEC[id(spec)] = (spec, validator)
    return validator


def schema_findings(calls: list[Call], tools: Mapping[str, ToolSpec]) -> list[SchemaFinding]:
    """Check observed calls against the declared tool schemas.

    Args:
        calls: Observed calls in trajectory order (malformed ones are skipped).
        tools: The dataset's tool specs by name; empty = nothing declared, nothing checked.

    Returns:
        Findings in call order, then by path. A tool with no ``parameters`` is checked for declaration only.

    Raises:
        ValueError: a tool's ``parameters`` is not a valid JSON Schema (:func:`validator_for`).
    """
    if not tools:
        return []
    findings: list[SchemaFinding] = []
    for index, call in enumerate(calls):
        if call.malformed:
            continue
        spec = tools.get(call.name)
        if spec is None:
            findings.append(SchemaFinding(index, call.name, "undeclared_tool", "", "no such tool in tools.json"))
            continue
        schema = spec.parameters
        if not schema:
            continue
        found = _structure(call.args or {}, schema, "") + _types(call.args or {}, validator_for(spec))
        found.sort(key=lambda finding: (finding[1], finding[0]))
        findings += [SchemaFinding(index, call.name, kind, path, detail) for kind, path, detail in found]
    return findings


def schema_violations(findings: list[SchemaFinding], calls: list[Call]) -> list[Violation]:
    """One advisory ``tool_schema`` violation per call with findings (gate.toml may make a tool's blocking).

    Args:
        findings: :func:`schema_findings` of ``calls``.
        calls: The observed calls the findings index into.

    Returns:
        Violations in call order; ``detail`` is ``call #n name(args): kind at path; ...`` (n 1-based).
    """
    by_call: dict[int, list[SchemaFinding]] = {}
    for finding in findings:
        by_call.setdefault(finding.call_index, []).append(finding)
    out: list[Violation] = []
    for index, found in by_call.items():
        what = "; ".join(f"{_KIND_LABELS[f.kind]}{f' at {f.path}' if f.path else ''} ({f.detail})" for f in found)
        out.append(Violation(SCHEMA_RULE, "advisory", found[0].tool,
                             f"call #{index + 1} {describe_call(calls[index])}: {what}"))
    return out
