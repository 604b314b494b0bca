"""BFCL's function docs, possible answers and call strings, turned into tool specs, reference calls and rules.

BFCL (ShishirPatil/gorilla, ``berkeley-function-call-leaderboard``, Apache-2.0) states its checker's rules in
``bfcl_eval/eval_checker/ast_eval/ast_checker.py``; each is declared here as a tooleval argument rule:

* Every parameter lists its acceptable values. The first one that is not ``""`` is the reference value; the
  others become ``one_of``. ``""`` among them means the parameter may be omitted (``optional``); a parameter
  whose only value is ``""`` must be omitted (it is left out of the reference, with no ``optional`` rule, so a
  value given for it differs, as in BFCL).
* Nested objects list alternatives again, key by key: their first values make the reference object, the others
  become ``one_of`` on the nested path (``param.key``, ``param[0].key`` inside lists). When a parameter lists
  several objects, the later ones are whole-value ``one_of`` alternatives (with their own first choices).
* Strings are compared after BFCL's ``standardize_string``: lower-cased, with spaces and ``,./-_*^`` removed
  (``case_insensitive`` + ``strip_chars``, inherited by nested values). BFCL also turns ``'`` into ``"``; that
  last step is not declared.
* An integer is accepted where a float is expected: tooleval compares numbers by value already.
* Function names: BFCL's checker compares function-calling outputs with ``.`` in names replaced by ``_`` (tool
  names in the OpenAI format may not contain ``.``): reference and tool names are written that way, the
  original kept as ``metadata`` / ``original_name``.

Rules are per tool in a case: when a case calls one tool several times (parallel categories), the rules of its
calls are merged (``one_of`` values united, ``optional`` when any call allows omission); the import counts
those cases.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = [
    "STRING_RULE",
    "tool_name",
    "tool_spec",
    "answer_calls",
    "parse_call_string",
]

STRING_RULE = {"case_insensitive": True, "strip_chars": " ,./-_*^"}
"""BFCL's ``standardize_string`` as argument-rule fields (``re.sub(r"[ \\,\\.\\/\\-\\_\\*\\^]", "", s).lower()``)."""

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer",
          "str": "string", "bool": "boolean"}


def tool_name(name: str) -> str:
    """A BFCL function name as a function-calling model writes it (``math.factorial`` -> ``math_factorial``)."""
    return name.replace(".", "_")


def _schema(node: Any) -> Any:
    """BFCL's Python-flavoured schema (``dict``, ``float``, ``tuple``, ``any``) as JSON Schema."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = _schema(value)
        else:
            out[key] = value
    return out


def tool_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as a tooleval ``tools.json`` entry (JSON Schema parameters, ``_`` names)."""
    spec = {"name": tool_name(doc["name"]), "description": doc.get("description"),
            "parameters": _schema(doc.get("parameters") or {"type": "object", "properties": {}})}
    if spec["name"] != doc["name"]:
        spec["original_name"] = doc["name"]
    return spec


def _alternatives(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _expand(value: Any, path: str, rules: dict[str, dict[str, Any]]) -> Any:
    """A value's first choices, recursively; nested alternatives go to ``rules`` keyed by path."""
    if isinstance(value, dict):
        out = {}
        for key, alternatives in value.items():
            present = _param(alternatives, f"{path}.{key}", rules)
            if present is not _OMIT:
                out[key] = present
        return out
    if isinstance(value, list):
        return [_expand(item, f"{path}[{i}]", rules) if isinstance(item, dict) else item
                for i, item in enumerate(value)]
    return value


_OMIT = object()


def _param(alternatives: Any, path: str, rules: dict[str, dict[str, Any]]) -> Any:
    """The reference value of one parameter (``_OMIT`` when it must be omitted); its rule goes to ``rules``."""
    values = _alternatives(alternatives)
    given = [v for v in values if v != ""]
    rule: dict[str, Any] = {}
    if "" in values and given:
        rule["optional"] = True
    if not given:
        return _OMIT
    reference = _expand(given[0], path, rules)
    others = [_expand(v, path, {}) for v in given[1:]]
    if others:
        rule["one_of"] = others
    if rule:
        rules[path] = rule
    return reference


def answer_calls(ground_truth: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, dict], int]:
    """Reference calls and argument rules from a single-turn ``ground_truth``.

    Args:
        ground_truth: ``[{"<func>": {"<param>": [acceptable values...]}}]``.

    Returns:
        ``(calls, rules, merged)``: ``[{"name", "args"}]`` in order, ``{tool: {path: rule}}`` with BFCL's string
        normalisation on every argument, and how many tools had the rules of several calls merged.
    """
    calls: list[dict[str, Any]] = []
    per_tool: dict[str, list[dict[str, dict]]] = {}
    for entry in ground_truth:
        (name, params), = entry.items()
        rules: dict[str, dict[str, Any]] = {}
        args = {}
        for param, alternatives in params.items():
            value = _param(alternatives, param, rules)
            if value is not _OMIT:
                args[param] = value
        calls.append({"name": tool_name(name), "args": args})
        per_tool.setdefault(tool_name(name), []).append(rules)
    merged_rules = {name: _merge(layers) for name, layers in per_tool.items()}
    merged = sum(1 for layers in per_tool.values() if len(layers) > 1 and any(layers))
    return calls, merged_rules, merged


def _merge(layers: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for path, rule in layer.items():
            into = merged.setdefault(path, {})
            if rule.get("optional"):
                into["optional"] = True
            for value in rule.get("one_of", []):
                into.setdefault("one_of", [])
                if value not in into["one_of"]:
                    into["one_of"].append(value)
    # BFCL compares every string after standardize_string; the most specific rule wins, so each carries it.
    return {"*": dict(STRING_RULE), **{path: {**STRING_RULE, **rule} for path, rule in sorted(merged.items())}}


def parse_call_string(text: str, docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Parse a BFCL multi-turn call string (``mv(source='a.pdf', destination='temp')``) with :mod:`ast`.

    Nothing is evaluated: argument values are read with :func:`ast.literal_eval`. Positional arguments are
    named after the function doc's parameters, in order.

    Args:
        text: One call string.
        docs: Function docs by (BFCL) name, for positional arguments.

    Returns:
        ``{"name", "args"}``.

    Raises:
        ValueError: not a single call of a named function with literal arguments, or more positional arguments
            than the doc has parameters.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a Python call: {exc.msg}") from exc
    if not isinstance(node, ast.Call):
        raise ValueError("not a function call")
    name = ast.unparse(node.func)
    args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    if node.args:
        params = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
        if len(node.args) > len(params):
            raise ValueError(f"{len(node.args)} positional arguments and {len(params)} documented parameters")
        for param, value in zip(params, node.args):
            args[param] = ast.literal_eval(value)
    return {"name": tool_name(name), "args": args}
