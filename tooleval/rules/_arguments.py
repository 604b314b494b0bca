"""Rule-aware argument comparison (formats in docs/rules.md "Argument rules").

A rule sits on an argument *path*: dot-separated keys (``customer.email``), ``[]`` for every item of a list
(``flights[].date``), ``[n]`` for one item and ``*`` for every key at that level (``*`` alone = every argument).
Rules come in three layers: a tool's ``argument_rules`` in tools.json (the default for every case), a case's
``argument_rules[tool]``, which wins, and a reference call's own ``argument_rules``, which wins for that call only
(two calls of one tool may accept different values). Within a layer the most specific pattern wins (fewest
wildcards).

Semantics, each tested in ``tests/rules/test_rules_arguments.py``:

* ``ignore`` — neither the value nor its presence is compared.
* ``optional`` — the key may be absent on either side; present on both, it is compared.
* ``coerce`` — the *observed* value is converted to its declared type before comparing
  (:mod:`tooleval.rules._coerce`).
* ``unordered`` — a list compared as a multiset (a perfect matching of items under the item rules).
* ``tolerance`` — numbers equal when ``|e - o| <= tolerance`` (plus 1e-9 relative slack for binary floats).
* ``case_insensitive`` / ``strip_chars`` — strings compared after ``casefold`` / removing those characters.
  Both, and ``tolerance``, are inherited by nested values unless a deeper rule sets them.
* ``one_of`` — the observed value may equal the reference value or any listed value. With ``optional`` on a
  key the reference leaves out, a value given for it must be one of these (BFCL's ``""``: omit it or leave it
  empty).
* ``number_type`` — the observed number must be written as a float or as an integer in the call's argument
  text (:func:`written_type_paths`; the canonical values cannot tell ``1`` from ``1.0``).

Without a rule everything is canonical equality (docs/design.md "Canonical argument values"), and
:func:`rule_diff_paths` returns exactly :func:`tooleval.canonical.diff_paths`. ``tolerance`` and ``one_of`` make
equality non-transitive, which is why matching uses a maximum bipartite matching (:mod:`tooleval.rules._match`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

# The path format of wrong-argument pairs must be byte-identical to diff_paths', hence the private helpers.
from tooleval.canonical import MISSING, key_path, same_scalar, canonical_json, diff_paths
from tooleval.models import ArgumentRule, Call, Case, ToolSpec
from tooleval.rules._tools import ruled_tools

__all__ = ["ArgumentRules", "ToolRules", "rule_diff_paths", "written_type_paths", "normal_form", "perfect_matching"]

ANY_KEY = "\x00*"
ANY_ITEM = "\x00[]"
_ITEM_TOKEN = re.compile(r"\[(\*|\d*)\]")


def parse_pattern(pattern: str) -> tuple:
    """Parse a path pattern: ``"flights[].date"`` -> ``("flights", ANY_ITEM, "date")``; ``"*"`` ->
    ``(ANY_KEY,)``; ``"a[0]"`` -> ``("a", 0)``."""
    segments: list[Any] = []
    for part in pattern.split("."):
        head = _ITEM_TOKEN.split(part, maxsplit=1)[0] if "[" in part else part
        if head:
            segments.append(ANY_KEY if head == "*" else head)
        for index in _ITEM_TOKEN.findall(part[len(head):]):
            segments.append(ANY_ITEM if index in ("", "*") else int(index))
    return tuple(segments)


def _segment_matches(pattern: Any, concrete: Any) -> bool:
    if pattern == ANY_KEY:
        return isinstance(concrete, str) and concrete != ANY_ITEM
    if pattern == ANY_ITEM:
        return isinstance(concrete, int) or concrete == ANY_ITEM
    return pattern == concrete and type(pattern) is type(concrete)


@dataclass
class ToolRules:
    """The argument rules of one tool in one case: the case layer first, then the tool layer."""

    layers: list[list[tuple[tuple, ArgumentRule]]]
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_layers(cls, *layers: Mapping[str, ArgumentRule] | None) -> "ToolRules":
        parsed = []
        for layer in layers:
            items = [(parse_pattern(path), rule) for path, rule in sorted((layer or {}).items())]
            items.sort(key=lambda item: sum(s in (ANY_KEY, ANY_ITEM) for s in item[0]))  # stable: specific first
            parsed.append(items)
        return cls(parsed)

    def lookup(self, path: tuple) -> ArgumentRule | None:
        """The rule for a concrete path (keys and list indices; ``ANY_ITEM`` inside unordered lists)."""
        if path not in self._memo:
            found = None
            for layer in self.layers:
                for pattern, rule in layer:
                    if len(pattern) == len(path) and all(map(_segment_matches, pattern, path)):
                        found = rule
                        break
                if found is not None:
                    break
            self._memo[path] = found
        return self._memo[path]


@dataclass(frozen=True)
class ArgumentRules:
    """Resolved argument rules of one case: :class:`ToolRules` and the JSON Schema of each tool that has rules."""

    tools: Mapping[str, ToolRules]
    schemas: Mapping[str, dict] = field(default_factory=dict)
    layers: Mapping[str, tuple] = field(default_factory=dict)
    """The case and tool layers of each tool, under which a reference call's own rules are laid."""
    written_numbers: bool = False
    """Whether a rule asks how a number was written (``number_type``): only then is the argument text read."""
    _calls: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def for_case(cls, case: Case, tools: Mapping[str, ToolSpec]) -> "ArgumentRules | None":
        """The case's rules laid over its tools' rules; ``None`` when neither side declares any."""
        case_rules = case.argument_rules or {}
        called = {call.name for plan in case.plans for call in plan if call.argument_rules}
        names = ruled_tools(tools).union(case_rules, called)
        if not names:
            return None
        layers = {name: (case_rules.get(name), tools[name].argument_rules if name in tools else None)
                  for name in sorted(names)}
        resolved = {name: ToolRules.from_layers(*layers[name]) for name in layers}
        schemas = {name: tools[name].parameters or {} for name in resolved if name in tools}
        every = [*(layer for pair in layers.values() for layer in pair if layer),
                 *(call.argument_rules for plan in case.plans for call in plan if call.argument_rules)]
        written = any(rule.number_type for layer in every for rule in layer.values())
        return cls(resolved, schemas, layers, written)

    @classmethod
    def from_mapping(
        cls, rules: Mapping[str, Mapping[str, Any]], tools: Mapping[str, ToolSpec] | None = None
    ) -> "ArgumentRules":
        """Build from plain ``{tool: {path: rule}}`` data (a case's ``argument_rules`` shape); never ``None``
        (``from_mapping({})`` holds no rule: matching takes the bipartite path with plain equality)."""
        case = Case(case_id="-", input="", expected_calls=[], argument_rules=dict(rules))
        return cls.for_case(case, tools or {}) or cls({})

    def for_tool(self, name: str) -> ToolRules | None:
        return self.tools.get(name)

    def for_call(self, call: Call) -> ToolRules | None:
        """The rules that compare ``call`` (a reference call): its own rules laid over its tool's."""
        if not call.argument_rules:
            return self.tools.get(call.name)
        key = id(call)
        if key not in self._calls:  # the call is held by the case for as long as these rules are
            self._calls[key] = (call, ToolRules.from_layers(call.argument_rules,
                                                            *self.layers.get(call.name, (None, None))))
        return self._calls[key][1]



@dataclass(frozen=True)
class _Leaf:
    """Comparison settings inherited by nested values."""

    case_insensitive: bool = False
    strip_chars: str = ""
    tolerance: float | None = None

    def merge(self, rule: ArgumentRule | None) -> "_Leaf":
        if rule is None:
            return self
        return _Leaf(
            self.case_insensitive if rule.case_insensitive is None else rule.case_insensitive,
            self.strip_chars if rule.strip_chars is None else rule.strip_chars,
            self.tolerance if rule.tolerance is None else rule.tolerance,
        )

    def text(self, value: str) -> str:
        if self.strip_chars:
            value = value.translate({ord(c): None for c in self.strip_chars})
        return value.casefold() if self.case_insensitive else value


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _leaf_equal(expected: Any, observed: Any, leaf: _Leaf) -> bool:
    if isinstance(expected, str) and isinstance(observed, str):
        return leaf.text(expected) == leaf.text(observed)
    if leaf.tolerance is not None and is_number(expected) and is_number(observed):
        slack = 1e-9 * max(1.0, abs(expected), abs(observed))
        return abs(expected - observed) <= leaf.tolerance + slack
    return same_scalar(expected, observed)


def perfect_matching(n_rows: int, n_cols: int, edges: list[tuple[int, int]]) -> int:
    """Size of a maximum bipartite matching (``scipy.sparse.csgraph.maximum_bipartite_matching``)."""
    if not edges or n_rows == 0 or n_cols == 0:
        return 0
    from scipy.sparse import csr_matrix  # imported when first needed: scipy costs start-up time
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rows, cols = zip(*edges)
    graph = csr_matrix((np.ones(len(edges), dtype=np.int8), (rows, cols)), shape=(n_rows, n_cols))
    return int((maximum_bipartite_matching(graph, perm_type="column") >= 0).sum())


def _diff(expected: Any, observed: Any, path: tuple, text: str, rules: ToolRules, leaf: _Leaf) -> list[str]:
    rule = rules.lookup(path) if path else None
    if rule is not None and rule.ignore:
        return []
    leaf = leaf.merge(rule)
    if expected is MISSING or observed is MISSING:
        if expected is MISSING and observed is not MISSING and rule is not None and rule.optional and rule.one_of:
            # a key the reference leaves out, with acceptable values: absent, or one of them
            return [] if any(not _diff_node(c, observed, path, text, rules, rule, leaf) for c in rule.one_of) \
                else [text]
        return [] if expected is observed or (rule is not None and rule.optional) else [text]
    if rule is not None and rule.one_of is not None:
        candidates = [expected, *rule.one_of]
        ok = any(not _diff_node(c, observed, path, text, rules, rule, leaf) for c in candidates)
        return [] if ok else [text]
    return _diff_node(expected, observed, path, text, rules, rule, leaf)


def _diff_node(expected, observed, path, text, rules, rule, leaf) -> list[str]:
    if isinstance(expected, dict) and isinstance(observed, dict):
        paths: list[str] = []
        for key in sorted(set(expected) | set(observed)):
            child = key_path(text, key)
            paths += _diff(expected.get(key, MISSING), observed.get(key, MISSING), path + (key,), child, rules, leaf)
        return paths
    if isinstance(expected, list) and isinstance(observed, list):
        if rule is not None and rule.unordered:
            if len(expected) != len(observed):
                return [text]
            item = path + (ANY_ITEM,)
            edges = [
                (i, j)
                for i, e in enumerate(expected)
                for j, o in enumerate(observed)
                if not _diff(e, o, item, f"{text}[]", rules, leaf)
            ]
            return [] if perfect_matching(len(expected), len(observed), edges) == len(expected) else [text]
        paths = []
        for i in range(max(len(expected), len(observed))):
            left = expected[i] if i < len(expected) else MISSING
            right = observed[i] if i < len(observed) else MISSING
            paths += _diff(left, right, path + (i,), f"{text}[{i}]", rules, leaf)
        return paths
    if isinstance(expected, (dict, list)) or isinstance(observed, (dict, list)):
        return [text]
    return [] if _leaf_equal(expected, observed, leaf) else [text]


def written_type_paths(written: Any, rules: ToolRules | None) -> list[str]:
    """Paths of ``written`` (arguments as the agent wrote them: ``1.0`` a float, ``1`` an int) whose number is
    not of the ``number_type`` its rule asks for; ``[]`` without rules or without such a rule."""
    if rules is None or not isinstance(written, dict):
        return []
    found: list[str] = []

    def walk(value: Any, path: tuple, text: str) -> None:
        rule = rules.lookup(path) if path else None
        if rule is not None and rule.number_type and is_number(value):
            if isinstance(value, float) is not (rule.number_type == "float"):
                found.append(text)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, path + (key,), key_path(text, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, path + (i,), f"{text}[{i}]")

    walk(written, (), "")
    return found


def rule_diff_paths(expected: dict, observed: dict, rules: ToolRules | None) -> list[str]:
    """Argument paths at which two canonical argument objects differ under ``rules``.

    Returns:
        ``[]`` when the calls are equal under the rules; :func:`tooleval.canonical.diff_paths` when ``rules`` is
        ``None`` (identical output).
    """
    if rules is None:
        return diff_paths(expected, observed)
    return _diff(expected, observed, (), "", rules, _Leaf())


_DROP = object()


def normal_form(value: Any, rules: ToolRules | None, path: tuple = (), leaf: _Leaf = _Leaf()) -> Any:
    """The value with the *transitive* rules applied (ignore, unordered, case_insensitive, strip_chars): two
    calls with equal normal forms are "the same call" for ``duplicate_calls`` and the repeat rules."""
    if rules is None:
        return value
    rule = rules.lookup(path) if path else None
    if rule is not None and rule.ignore:
        return _DROP
    leaf = leaf.merge(rule)
    if isinstance(value, dict):
        pairs = ((k, normal_form(v, rules, path + (k,), leaf)) for k, v in value.items())
        return {k: v for k, v in pairs if v is not _DROP}
    if isinstance(value, list):
        if rule is not None and rule.unordered:
            items = [normal_form(v, rules, path + (ANY_ITEM,), leaf) for v in value]
            return sorted(items, key=canonical_json)
        items = (normal_form(v, rules, path + (i,), leaf) for i, v in enumerate(value))
        return [v for v in items if v is not _DROP]
    return leaf.text(value) if isinstance(value, str) else value
