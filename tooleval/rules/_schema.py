"""Tool schema checks (issue 13 item 6): each observed call against its tool's ``parameters`` in tools.json.

The "almost the right tool" errors: a call of a tool the dataset does not declare, a required parameter left out,
a parameter the schema does not know, a value of the wrong JSON type. BFCL's checker reports the same kinds
(``bfcl_eval/eval_checker/ast_eval/ast_checker.py``: "wrong function name", "missing required parameter",
"unexpected parameter", "wrong type"). Types are checked with ``jsonschema`` (Draft 2020-12) on the call's
canonical arguments; required and unknown parameters are checked here, at every object level that declares
``properties``, because function schemas seldom say ``additionalProperties: false`` and an unexpected parameter
is still an error for BFCL. Malformed calls (argument text that is not a JSON object) are not checked: they are
already ``malformed``. A dataset without tools.json has nothing to check against: no findings.

Pure functions; the scoring stage decides where the findings go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import Draft202012Validator

from tooleval.canonical import _key_path
from tooleval.models import Call, ToolSpec

__all__ = ["FINDING_KINDS", "SchemaFinding", "schema_findings"]

FindingKind = Literal["undeclared_tool", "missing_required", "unknown_parameter", "wrong_type"]
FINDING_KINDS: tuple[str, ...] = ("undeclared_tool", "missing_required", "unknown_parameter", "wrong_type")


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


def _types(args: dict[str, Any], validator: Draft202012Validator) -> list[tuple[str, str, str]]:
    return [("wrong_type", _path(error.absolute_path), error.message)
            for error in validator.iter_errors(args) if error.validator == "type"]


def schema_findings(calls: list[Call], tools: Mapping[str, ToolSpec]) -> list[SchemaFinding]:
    """Check observed calls against the declared tool schemas.

    Args:
        calls: Observed calls in trajectory order (malformed ones are skipped).
        tools: The dataset's tool specs by name; empty = nothing declared, nothing checked.

    Returns:
        Findings in call order, then by path. A tool with no ``parameters`` is checked for declaration only.
    """
    if not tools:
        return []
    validators: dict[str, Draft202012Validator] = {}
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
        if call.name not in validators:
            validators[call.name] = Draft202012Validator(schema)
        found = _structure(call.args or {}, schema, "") + _types(call.args or {}, validators[call.name])
        found.sort(key=lambda finding: (finding[1], finding[0]))
        findings += [SchemaFinding(index, call.name, kind, path, detail) for kind, path, detail in found]
    return findings
