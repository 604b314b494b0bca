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
* A parameter the doc requires must be given (BFCL's ``missing_required``): the case's ``required_arguments``.
  A parameter the possible answer lists without ``""`` must be given too, so where the answer contradicts the doc
  (it lists a parameter the doc does not declare, or no value at all for one) it is both required and left out of
  the reference: no call passes, as none passes BFCL's checker.
* An integer is accepted where a float is expected: tooleval compares numbers by value already.
* Function names: BFCL's checker compares function-calling outputs with ``.`` in names replaced by ``_`` (tool
  names in the OpenAI format may not contain ``.``): reference and tool names are written that way, the
  original kept as ``metadata`` / ``original_name``.

Acceptable values belong to one reference call (``argument_rules`` on the call): in a parallel question each
call is checked against its own possible answer, as BFCL's ``parallel_function_checker_no_order`` does, so three
identical calls cannot satisfy three references that accept different values. BFCL's type rules come from the
question's function docs: an ``integer`` takes no float, items of an ``array`` of ``float`` must be floats (an
int inside is BFCL's ``type_error:nested``), a top-level ``float`` takes an int. A listed ``""`` means the
parameter may be omitted (unless the doc requires it) and, for a string, may be given as ``""``.
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
            # inside a dict BFCL's dict_checker takes "" as a listed value like any other, whatever the type
            present = _param(alternatives, f"{path}.{key}", rules, _Param(empty_is_value=True))
            if present is not _OMIT:
                out[key] = present
        return out
    if isinstance(value, list):
        return [_expand(item, f"{path}[{i}]", rules) if isinstance(item, dict) else item
                for i, item in enumerate(value)]
    return value


_OMIT = object()


class _Param:
    """What BFCL's checker knows of a parameter from the function doc: its type, whether it is required."""

    def __init__(self, doc: dict[str, Any] | None = None, required: bool = False,
                 empty_is_value: bool = False) -> None:
        doc = doc or {}
        self.type = doc.get("type")
        self.items = (doc.get("items") or {}).get("type") if isinstance(doc.get("items"), dict) else None
        self.required = required
        # string_checker compares "" like any string: an explicit "" is accepted where "" is listed
        self.empty_is_value = empty_is_value or self.type in ("string", "any")


_NUMBER_TYPES = {"float": "float", "integer": "integer"}
_PYTHON_TYPES = {"float": float, "integer": int}


def _first_type(values: list[Any]) -> type | None:
    """BFCL's ``get_possible_answer_type``: the type of the first listed value that is not ``""``."""
    return next((type(v) for v in values if v != ""), None)


def _number_rules(values: list[Any], param: _Param, path: str, rules: dict[str, dict[str, Any]]) -> None:
    """BFCL's type rules for numbers: an ``integer`` parameter takes no float; an ``array`` / ``tuple`` of
    ``float`` or ``integer`` takes items of exactly that type (``type_error:nested``); a top-level ``float``
    takes an int (Python's auto conversion). A parameter whose listed values have another type than its doc
    says is a "variable" for BFCL (values compared as listed), and a listed ``""`` passes the nested check."""
    if param.type == "integer" and _first_type(values) is int:
        rules.setdefault(path, {})["number_type"] = "integer"
    if param.type in ("array", "tuple") and param.items in _NUMBER_TYPES and "" not in values:
        lists = [v for v in values if isinstance(v, list)]
        wanted = _PYTHON_TYPES[param.items]
        if lists and all(_first_type(items) in (wanted, None) for items in lists):
            rules.setdefault(f"{path}[]", {})["number_type"] = _NUMBER_TYPES[param.items]


def _param(alternatives: Any, path: str, rules: dict[str, dict[str, Any]], param: _Param | None = None) -> Any:
    """The reference value of one parameter (``_OMIT`` when it must be omitted); its rule goes to ``rules``."""
    param = param or _Param()
    values = _alternatives(alternatives)
    given = [v for v in values if v != ""]
    rule: dict[str, Any] = {}
    empty = "" in values
    if _first_type(values) is str and not param.empty_is_value:
        # listed as text where the doc says otherwise: BFCL reads the value as a "variable" and compares it with
        # the listed values as they are, "" included
        param = _Param(empty_is_value=True, required=param.required)
    if empty and not param.required and (given or param.empty_is_value):
        rule["optional"] = True
    _number_rules(values, param, path, rules)
    if not given:
        if param.required and param.empty_is_value and empty:
            return ""  # BFCL fails the omission of a required parameter; "" is its one listed value
        if rule:  # omitted, or given as ""
            rules.setdefault(path, {}).update(rule, one_of=[""])
        return _OMIT
    reference = _expand(given[0], path, rules)
    others = [_expand(v, path, {}) for v in given[1:]]
    if empty and param.empty_is_value:
        others.append("")
    if others:
        rule["one_of"] = others
    if rule:
        rules.setdefault(path, {}).update(rule)
    return reference


def answer_calls(
    ground_truth: list[dict[str, Any]], functions: list[dict[str, Any]] | None = None
) -> tuple[list[dict[str, Any]], dict[str, dict], dict[str, list[str]]]:
    """Reference calls, each with its own argument rules, from a single-turn ``ground_truth``.

    Args:
        ground_truth: ``[{"<func>": {"<param>": [acceptable values...]}}]``.
        functions: The question's function docs (BFCL's, names with ``.``): the parameters' types and required
            names, for BFCL's type and omission rules.

    Returns:
        ``(calls, case_rules, required)``: ``[{"name", "args", "argument_rules"?}]`` in order, each call's
        acceptable values and omissions as *its own* rules (two calls of one tool in a parallel question accept
        different values, as BFCL checks each against its own possible answer); ``{tool: {"*": string rule}}``:
        BFCL's string standardisation for every argument of every tool called; and ``{tool: [parameter names]}``
        (a case's ``required_arguments``): what every call of the tool must give — the names its doc requires
        (BFCL's ``missing_required``) and any name the possible answer lists without ``""`` that the doc does not
        declare or for which it lists no value at all (``[]``). Such a name is also left out of the reference
        (BFCL's ``unexpected_param``, or no listed value equals it), so no call passes, as no call passes BFCL's
        checker when the possible answer contradicts the doc.
    """
    docs = {doc.get("name"): doc for doc in functions or [] if isinstance(doc, dict)}
    calls: list[dict[str, Any]] = []
    must_give: dict[str, set[str]] = {}
    for entry in ground_truth:
        (name, params), = entry.items()
        doc = docs.get(name)
        declared = (doc or {}).get("parameters") or {}
        properties = declared.get("properties") or {}
        required = set(declared.get("required") or [])
        must = set(required) if doc is not None else set()
        rules: dict[str, dict[str, Any]] = {}
        args = {}
        for param, alternatives in params.items():
            if docs and param not in properties and "" in _alternatives(alternatives):
                continue  # BFCL rejects a parameter its doc does not declare: it can only be omitted
            if (doc is not None and param not in properties) or _alternatives(alternatives) == []:
                # rejected when given (undeclared, or no value is acceptable), wrong when omitted (no "" listed)
                must.add(param)
                continue
            value = _param(alternatives, param, rules, _Param(properties.get(param), param in required))
            if value is not _OMIT:
                args[param] = value
        call: dict[str, Any] = {"name": tool_name(name), "args": args}
        if rules:
            # the most specific rule wins, so each path's rule carries BFCL's string standardisation itself
            call["argument_rules"] = {path: {**STRING_RULE, **rule} for path, rule in sorted(rules.items())}
        calls.append(call)
        if must:
            must_give.setdefault(call["name"], set()).update(must)
    case_rules = {call["name"]: {"*": dict(STRING_RULE)} for call in calls}
    return calls, case_rules, {tool: sorted(names) for tool, names in sorted(must_give.items())}


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
