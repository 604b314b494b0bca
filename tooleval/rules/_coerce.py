"""The ``coerce`` argument rule: convert an observed value to its declared type, and say so.

The declared type comes from the tool's JSON Schema (``parameters``; ``properties`` and ``items`` are followed
into nested values) when the rule is ``coerce: true``, or from the rule itself (``{"coerce": "number"}``). A value
is converted only when its JSON type is not a declared one, and only in these ways: string -> number or integer
(JSON number text, integral for an integer), number -> string (its JSON text), ``"true"``/``"false"`` ->
boolean (any case). Anything else is left alone, and so still differs. ``coerce: true`` on a path is inherited by
the values under it (``"*": "coerce"`` coerces every argument per the schema); a named type is not.

The scoring contract (docs/design.md "Canonical argument values"): a string is not a number "unless a declared
per-field rule coerces it — and every applied coercion is recorded": the caller turns each returned ``(path, from,
to)`` into a row ``coercions`` entry. Reference calls are never coerced (the reference is the contract).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from tooleval.canonical import key_path, canonical_value
from tooleval.rules._arguments import ToolRules, is_number

__all__ = ["coerce_arguments"]

_NUMBER_TEXT = re.compile(r"^\s*-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?\s*$")
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}


def _declared_types(schema: Mapping | None) -> list[str]:
    declared = (schema or {}).get("type")
    return [declared] if isinstance(declared, str) else [t for t in declared or [] if isinstance(t, str)]


def _fits(value: Any, types: list[str]) -> bool:
    kind = "null" if value is None else _JSON_TYPES.get(type(value))
    return kind in types or (kind == "integer" and "number" in types)


def _convert(value: Any, target: str) -> tuple[bool, Any]:
    if target in ("number", "integer") and isinstance(value, str) and _NUMBER_TEXT.match(value):
        try:
            number = canonical_value(json.loads(value))
        except ValueError:  # "1e400" overflows a float: not a JSON number here either (tooleval.canonical)
            return False, value
        return (True, number) if target == "number" or isinstance(number, int) else (False, value)
    if target == "string" and is_number(value):
        return True, json.dumps(value)
    if target == "boolean" and isinstance(value, str) and value.strip().casefold() in ("true", "false"):
        return True, value.strip().casefold() == "true"
    return False, value


def coerce_arguments(args: dict, rules: ToolRules | None, schema: Mapping | None) -> tuple[dict, list[tuple]]:
    """Apply the ``coerce`` rules to one observed call's canonical arguments.

    Args:
        args: Canonical observed arguments.
        rules: The tool's rules; ``None`` -> no change.
        schema: The tool's ``parameters`` JSON Schema (source of declared types for ``coerce: true``).

    Returns:
        ``(new_args, [(path, from_value, to_value), ...])``; ``args`` itself when nothing was coerced.
    """
    if rules is None:
        return args, []
    applied: list[tuple] = []

    def walk(value: Any, path: tuple, text: str, node: Mapping | None, inherited: bool) -> Any:
        rule = rules.lookup(path) if path else None
        mode = rule.coerce if rule is not None and rule.coerce else inherited
        if mode and path:
            targets = [mode] if isinstance(mode, str) else _declared_types(node)
            if targets and not _fits(value, targets):
                for target in targets:
                    changed, new = _convert(value, target)
                    if changed:
                        applied.append((text, value, new))
                        value = new
                        break
        inherit = mode is True or inherited
        node = node or {}
        if isinstance(value, dict):
            props = node.get("properties") or {}
            return {k: walk(v, path + (k,), key_path(text, k), props.get(k), inherit) for k, v in value.items()}
        if isinstance(value, list):
            items = node.get("items") if isinstance(node.get("items"), dict) else None
            return [walk(v, path + (i,), f"{text}[{i}]", items, inherit) for i, v in enumerate(value)]
        return value

    new_args = walk(args, (), "", schema, False)
    return (new_args, applied) if applied else (args, [])
