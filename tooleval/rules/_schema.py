"""Tool schema checks: each observed call against its tool's ``parameters`` in tools.json.

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

Cost: a validator is compiled once per tool schema per process (:func:`validator_for`), not per call or per row;
what the required/unknown and the type checks need from a schema (its declared and required names, whether an
undeclared parameter is reported, which types each parameter admits) is read once per tool spec into a plan
(:class:`_ToolPlan`), so a call costs a walk over its own arguments only. jsonschema runs only on a call the plan
cannot prove free of type errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Literal

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tooleval.canonical import key_path, kept_bytes
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


def _path(parts) -> str:
    text = ""
    for part in parts:
        text = f"{text}[{part}]" if isinstance(part, int) else key_path(text, part)
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
    """Type findings of one argument object: none when :func:`_surely_typed` proves it (most calls: no jsonschema
    pass, no cache key to serialise), else :func:`_jsonschema_types`."""
    if _surely_typed(args, validator.schema):
        return []
    return _jsonschema_types(args, validator)


def _jsonschema_types(args: dict[str, Any], validator: Draft202012Validator) -> list[tuple[str, str, str]]:
    """jsonschema's type findings of one argument object, cached per (validator, argument text with its key order:
    error messages quote values as written) — most rows of a corpus repeat argument objects, and a jsonschema pass
    costs ~85 µs a call."""
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
        _TYPES[key[0], kept_bytes(key[1])] = (validator, tuple(found))  # the validator is held, so its id is not reused
    return found


_TYPES: dict[tuple[int, bytes], tuple[Draft202012Validator, tuple]] = {}
_TYPES_LIMIT = 65536


class _Shape:
    """The required/unknown-parameter check of one object or array (sub)schema, compiled once: its declared
    ``properties``, its ``required`` names, whether an undeclared parameter is reported, and the checks of its
    property and item subschemas (built the first time a value reaches this level)."""

    __slots__ = ("properties", "required", "report_unknown", "items", "_children", "_item")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        properties = schema.get("properties")
        self.properties: dict | None = properties if isinstance(properties, dict) else None
        self.required = schema.get("required") or []  # iterated as declared (validated by jsonschema separately)
        # function schemas seldom say additionalProperties: false, and an unexpected parameter is still an error
        self.report_unknown = schema.get("additionalProperties") in (None, False)
        items = schema.get("items")
        self.items: dict | None = items if isinstance(items, dict) else None
        self._children: dict[str, _Shape | None] | None = None
        self._item: _Shape | None = None

    @property
    def inert(self) -> bool:
        """True when no value can draw a finding here (neither ``properties`` nor ``items`` is declared)."""
        return self.properties is None and self.items is None

    @staticmethod
    def _of(schema: Any) -> _Shape | None:
        """The check of a subschema; ``None`` when it can find nothing (not an object, or a scalar parameter's)."""
        shape = _Shape(schema) if isinstance(schema, dict) else None
        return None if shape is None or shape.inert else shape

    def findings(self, value: Any, text: str) -> list[tuple[str, str, str]]:
        """``(kind, path, detail)`` of the missing required and unknown parameters of ``value`` at path ``text``,
        recursively wherever ``properties`` is declared."""
        found: list[tuple[str, str, str]] = []
        properties = self.properties
        if properties is not None and isinstance(value, dict):
            for name in self.required:
                if name not in value:
                    found.append(("missing_required", key_path(text, name), f"required parameter {name!r} is missing"))
            children = self._children
            if children is None:
                children = self._children = {name: self._of(sub) for name, sub in properties.items()}
            for name, item in value.items():
                if name not in properties:
                    if self.report_unknown:
                        found.append(("unknown_parameter", key_path(text, name),
                                      f"{name!r} is not a declared parameter"))
                elif (child := children[name]) is not None:
                    found += child.findings(item, key_path(text, name))
        elif self.items is not None and isinstance(value, list):
            if self._item is None:
                self._item = _Shape(self.items)
            if not self._item.inert:
                for index, item in enumerate(value):
                    found += self._item.findings(item, f"{text}[{index}]")
        return found


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def _typing_plan(schema: Any) -> Callable[[Any], bool]:
    """:func:`_surely_typed` with ``schema`` fixed: what depends on the schema alone (known keywords, declared
    types) is decided here, once; the returned function looks at the value only. Subschema plans are built the
    first time a value reaches them, so no deeper than the values go."""
    if schema is True:
        return _always
    if not isinstance(schema, dict) or not _PLAIN_KEYWORDS.issuperset(schema):
        return _never
    checks: tuple[Callable[[Any], bool], ...] | None = None
    if "type" in schema:
        declared = schema["type"]
        names = declared if isinstance(declared, list) else [declared]
        found = [_JSON_TYPES.get(name) if isinstance(name, str) else None for name in names]
        if None in found or not found:  # an unknown type, or none at all ("type": []), holds for no value
            return _never
        checks = tuple(found)  # type: ignore[arg-type]
    if not isinstance(schema.get("additionalProperties", False), bool):
        return _never
    properties = schema.get("properties")
    if properties is not None and not isinstance(properties, dict):
        return _never
    items = schema.get("items")
    if not properties and items is None:
        if checks is None:
            return _always
        if len(checks) == 1:  # a scalar parameter: the type test itself
            return checks[0]
    plans: dict[str, Callable[[Any], bool]] = {}
    item_plan: list[Callable[[Any], bool]] = []

    def plan(value: Any) -> bool:
        if checks is not None and not (checks[0](value) or any(check(value) for check in checks[1:])):
            return False
        if properties and isinstance(value, dict):
            for key, item in value.items():
                if key in properties:
                    sub = plans.get(key)
                    if sub is None:
                        sub = plans[key] = _typing_plan(properties[key])
                    if not sub(item):
                        return False
        if items is not None and isinstance(value, list):
            if not item_plan:
                item_plan.append(_typing_plan(items))
            return all(item_plan[0](item) for item in value)
        return True

    return plan


class _ToolPlan:
    """Everything about one tool's ``parameters`` that does not depend on the call, built once per tool spec."""

    __slots__ = ("spec", "parameters", "shape", "surely_typed")

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.parameters = spec.parameters
        self.shape = _Shape(spec.parameters or {})
        self.surely_typed = _typing_plan(spec.parameters)


_PLANS: dict[int, _ToolPlan] = {}
"""Compiled plans by ``id(spec)`` (the plan holds the spec, so its id is not reused)."""


def _plan_for(spec: ToolSpec) -> _ToolPlan:
    plan = _PLANS.get(id(spec))
    if plan is None or plan.spec is not spec or plan.parameters is not spec.parameters:
        if len(_PLANS) >= _CACHE_LIMIT:
            _PLANS.clear()
        plan = _PLANS[id(spec)] = _ToolPlan(spec)
    return plan


_COMPILED: dict[str, Draft202012Validator] = {}
"""Validators by canonical schema text: a tools.json loaded again (another shard) reuses the compiled one."""
_BY_SPEC: dict[int, tuple[ToolSpec, Draft202012Validator]] = {}
"""Validators by ``id(spec)`` (the spec is held, so its id is not reused): no schema serialisation per call."""
_CACHE_LIMIT = 4096


_TYPE_NAMES = frozenset(_JSON_TYPES)


def _plainly_valid(schema: Any, depth: int) -> bool:
    """True when ``schema`` is provably a valid Draft 2020-12 schema by its shape alone: a boolean, or an object
    whose every keyword is one of ``type`` (a type name, or a non-empty list of distinct ones), ``properties`` (an
    object of such schemas), ``items`` and ``additionalProperties`` (such a schema), ``required`` (a list of
    distinct strings), ``enum`` (a list), ``description`` and ``title`` (strings) and ``default`` (anything), which
    is what the meta-schema asks of them. ``False`` means only "not proven": jsonschema's ``check_schema`` decides
    (about 1-5 ms a schema, paid once per tool per process; most function schemas are plain)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 64:
        return False
    for key, value in schema.items():
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or not all(isinstance(name, str) and name in _TYPE_NAMES for name in names) \
                    or len(set(names)) != len(names):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(_plainly_valid(sub, depth + 1) for sub in value.values()):
                return False
        elif key in ("items", "additionalProperties"):
            if not _plainly_valid(value, depth + 1):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value) \
                    or len(set(value)) != len(value):
                return False
        elif key in ("description", "title"):
            if not isinstance(value, str):
                return False
        elif key == "enum":
            if not isinstance(value, list):
                return False
        elif key != "default":
            return False
    return True


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
            if not _plainly_valid(spec.parameters, 0):
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
        calls: Observed calls in trajectory order (malformed ones are skipped; one whose arguments were not
            captured is checked for its tool's declaration only).
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
        if not schema or not call.args_captured:  # arguments never recorded: the tool's name is all there is to check
            continue
        findings += [SchemaFinding(index, call.name, kind, path, detail)
                     for kind, path, detail in _call_findings(_plan_for(spec), spec, call.args or {})]
    return findings


def _call_findings(plan: _ToolPlan, spec: ToolSpec, args: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """``(kind, path, detail)`` of one argument object against its tool's schema, sorted by path then kind;
    cached per (tool plan, argument text with its key order, as :func:`_jsonschema_types` keys its cache): the
    trials of a case repeat their calls, and the findings depend on the schema and the value alone.

    Raises:
        ValueError: the tool's ``parameters`` is not a valid JSON Schema (:func:`validator_for`; never cached).
    """
    try:
        text = orjson.dumps(args)
    except TypeError:  # an integer beyond 64 bits, a key that is no string: not cached
        text = None
    # orjson writes a NaN or an infinity as null: a text holding null may stand for more than one value
    key = (id(plan), text) if text is not None and b"null" not in text else None
    hit = _FINDINGS.get(key) if key is not None else None
    if hit is not None and hit[0] is plan:
        return hit[1]
    found = plan.shape.findings(args, "")
    validator = validator_for(spec)  # raises for an invalid schema, even when the call is surely typed
    if not plan.surely_typed(args):
        found += _jsonschema_types(args, validator)
    found.sort(key=lambda finding: (finding[1], finding[0]))
    result = tuple(found)
    if key is not None:
        if len(_FINDINGS) >= _TYPES_LIMIT:
            _FINDINGS.clear()
        _FINDINGS[key[0], kept_bytes(key[1])] = (plan, result)  # the plan is held, so its id is not reused
    return result


_FINDINGS: dict[tuple[int, bytes], tuple[_ToolPlan, tuple]] = {}


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
