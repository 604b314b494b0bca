"""Rule-aware matching of observed calls against one or several reference plans.

With argument rules such as ``tolerance`` or ``one_of``, "equal" is no longer transitive, so the multiset
intersection of :func:`tooleval.matching.match_calls` is replaced by a **maximum bipartite matching** of expected
to observed calls under rule-aware equality (``tp`` = its size; ``scipy.sparse.csgraph.maximum_bipartite_matching``).
Among the maximum matchings the lexicographically first one is taken (earliest expected call to the earliest
observed call that still allows a maximum matching), which is exactly what ``match_calls`` does when equality is
plain key equality: with no rules :func:`match_with_rules` returns ``match_calls``' result field for field
(``tests/rules/test_rules_match.py`` proves it on every handed scoring case).

An observed call whose arguments were not captured equals every reference call of its tool: it matches by name
only (no rule can be applied to unknown values), and which call of that tool it takes leaves the matching's size,
hence tp, fp and fn, unchanged.

Everything else follows docs/design.md "Scoring semantics" with rule-aware equality: wrong-argument pairs by an
optimal assignment over rule-aware differing paths, ``duplicate_calls`` over rule-normalised keys
(:func:`tooleval.rules._arguments.normal_form`), ``f1 = 2tp / (2tp + fp + fn)`` and 1.0 when nothing was expected or
made.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field, fields, replace

from tooleval.canonical import canonical_json
from tooleval.capture import read_written, written_texts
from tooleval.matching import (MatchResult, WrongArgs, duplicate_count, match_calls_evidence,
                                       match_evidence, optimal_pairs)
from tooleval.models import Call
from tooleval.rules._arguments import (
    ArgumentRules,
    ToolRules,
    normal_form,
    perfect_matching,
    rule_diff_paths,
    written_type_paths,
)
from tooleval.rules._coerce import coerce_arguments
from tooleval.rules._modes import UNORDERED, MatchMode

__all__ = ["Coercion", "RuleMatch", "match_with_rules", "match_plans", "call_identity", "written_arguments"]


@dataclass(frozen=True)
class Coercion:
    """One applied ``coerce`` rule on an observed call. Values are canonical JSON text: ``from_value``
    ``"\\"49.99\\""`` (a string), ``to_value`` ``"49.99"`` (a number)."""

    call_index: int
    """0-based position of the observed call in the trajectory."""
    tool: str
    path: str
    """Argument path, formatted like wrong-argument paths (``amount``, ``items[0].qty``)."""
    from_value: str
    to_value: str

    def to_record(self) -> dict:
        """Parquet struct ``{call_index, tool, path, from_value, to_value}``."""
        return {"call_index": self.call_index, "tool": self.tool, "path": self.path,
                "from_value": self.from_value, "to_value": self.to_value}


@dataclass(frozen=True)
class RuleMatch(MatchResult):
    """:class:`~tooleval.matching.MatchResult` under argument rules, plus the applied coercions and the plan.

    ``missing_calls``/``extra_calls``/``wrong_args`` hold the calls as the agent made them (before coercion).
    """

    coercions: list[Coercion] = field(default_factory=list)
    chosen_plan: int = 0
    """Index of the reference plan scored: 0 = ``expected_calls``, i = ``accepted_plans[i - 1]``."""
    calls_match: bool = False
    """The calls match the reference under the match mode (:mod:`tooleval.rules._modes`); after
    :func:`match_plans`, under any of the plans."""

    @classmethod
    def from_match(cls, result: MatchResult, **extra) -> "RuleMatch":
        return cls(**{f.name: getattr(result, f.name) for f in fields(MatchResult)}, **extra)


def call_identity(call: Call, rules: ArgumentRules | None, args: dict | None = None) -> tuple[str, str]:
    """A call's key under the transitive rules (``Call.key`` when the tool has no rules); ``args`` overrides the
    call's own arguments (e.g. after coercion)."""
    tool_rules = rules.for_tool(call.name) if rules is not None else None
    if not call.args_known or (tool_rules is None and args is None):
        return call.key
    return (call.name, canonical_json(normal_form(call.args if args is None else args, tool_rules)))


def written_arguments(messages: list | None) -> list[object] | None:
    """The assistant's call arguments as written, in call order (:func:`tooleval.models.calls_from_messages`'
    order): argument text read with plain ``json.loads`` (``1.0`` stays a float), an object as given, ``None``
    where the text is not a JSON object. ``None`` without messages."""
    if messages is None:
        return None
    return read_written(written_texts(messages))


def _lexicographic_matching(n_rows: int, n_cols: int, adjacent: list[list[int]]) -> dict[int, int]:
    """The lexicographically first maximum matching (rows in order, each to its earliest feasible column)."""
    greedy: dict[int, int] = {}
    taken: set[int] = set()
    for i in range(n_rows):
        j = next((j for j in adjacent[i] if j not in taken), None)
        if j is not None:
            greedy[i] = j
            taken.add(j)
    edges = [(i, j) for i in range(n_rows) for j in adjacent[i]]
    target = perfect_matching(n_rows, n_cols, edges)
    if len(greedy) == target:  # greedy reached the maximum, so every greedy choice was the feasible earliest one
        return greedy
    pairs: dict[int, int] = {}
    free = set(range(n_cols))
    for i in range(n_rows):
        if target == 0:
            break
        for j in adjacent[i]:
            if j not in free:
                continue
            rest = [(r - i - 1, c) for r in range(i + 1, n_rows) for c in adjacent[r] if c in free and c != j]
            if 1 + perfect_matching(n_rows - i - 1, n_cols, rest) == target:
                pairs[i] = j
                free.discard(j)
                target -= 1
                break
    return pairs


def _differing(expected: Call, args: dict | None, written: object, rules: ToolRules | None) -> list[str]:
    """Paths at which an observed call (effective ``args``, arguments as ``written``) departs from a reference
    call under the reference call's rules; a path where only the written number type is wrong counts once."""
    paths = rule_diff_paths(expected.args, args, rules)
    return paths + [p for p in written_type_paths(written, rules) if p not in paths]


def _pair_wrong_args(missing: list[Call], extra: list[tuple[Call, dict | None, object]], rules) -> list[WrongArgs]:
    """Optimal assignment of unmatched calls of the same tool by fewest rule-aware differing paths."""
    rows_by_name: dict[str, list[int]] = defaultdict(list)
    cols_by_name: dict[str, list[int]] = defaultdict(list)
    for i, call in enumerate(missing):
        rows_by_name[call.name].append(i)
    for j, (call, _, _) in enumerate(extra):
        if call.args_known:
            cols_by_name[call.name].append(j)
    pairs: list[tuple[int, int, list[str]]] = []
    for name, rows in rows_by_name.items():
        cols = cols_by_name.get(name)
        if not cols:
            continue
        paths = [[_differing(missing[i], extra[j][1], extra[j][2], rules.for_call(missing[i]) if rules else None)
                  for j in cols] for i in rows]
        costs = [[len(p) for p in row] for row in paths]
        pairs += [(rows[r], cols[c], paths[r][c]) for r, c in optimal_pairs(costs)]
    pairs.sort(key=lambda pair: (pair[0], pair[1]))
    return [WrongArgs(missing[i].name, missing[i], extra[j][0], p) for i, j, p in pairs]


def match_with_rules(expected: list[Call], observed: list[Call], rules: ArgumentRules | None,
                     mode: MatchMode = UNORDERED, written: list[object] | None = None) -> RuleMatch:
    """Compare observed calls with one reference plan under argument rules.

    Args:
        expected: Reference calls (well-formed), in order.
        observed: The agent's calls in trajectory order, malformed ones included.
        rules: The case's resolved rules (:meth:`ArgumentRules.for_case`); ``None`` = canonical equality.
        mode: The match mode that decides :attr:`RuleMatch.calls_match` (nothing else depends on it).
        written: The observed calls' arguments as the agent wrote them (:func:`written_arguments`), for
            ``number_type`` rules; ``None``: those rules are not checked.

    Returns:
        A :class:`RuleMatch`; with ``rules=None`` it equals :func:`tooleval.matching.match_calls` field for field
        (and has no coercions).
    """
    if rules is None:
        evidence = match_calls_evidence(expected, observed)
        matches = mode.holds(len(expected), len(observed), evidence["fp"], evidence["fn"],
                             lambda i, j: expected[i].key == observed[j].key
                             or (not observed[j].args_captured and expected[i].name == observed[j].name))
        return RuleMatch(**evidence, calls_match=matches)
    coercions: list[Coercion] = []
    effective: list[dict | None] = []
    for index, call in enumerate(observed):
        tool_rules = rules.for_tool(call.name)
        if not call.args_known or tool_rules is None:
            effective.append(call.args)
            continue
        args, applied = coerce_arguments(call.args, tool_rules, rules.schemas.get(call.name))
        effective.append(args)
        coercions += [Coercion(index, call.name, p, canonical_json(a), canonical_json(b)) for p, a, b in applied]
    written = written if written is not None and len(written) == len(observed) else [None] * len(observed)
    adjacent: list[list[int]] = []
    for e in expected:
        tool_rules = rules.for_call(e)
        adjacent.append([
            j for j, o in enumerate(observed)
            if o.name == e.name and not o.malformed
            and (not o.args_captured or (o.key == e.key if tool_rules is None
                                         else not _differing(e, effective[j], written[j], tool_rules)))
        ])
    pairs = _lexicographic_matching(len(expected), len(observed), adjacent)
    matched_cols = set(pairs.values())
    missing = [e for i, e in enumerate(expected) if i not in pairs]
    extra = [(o, effective[j], written[j]) for j, o in enumerate(observed) if j not in matched_cols]
    wrong = _pair_wrong_args(missing, extra, rules)
    expected_keys = Counter(call_identity(e, rules) for e in expected)
    observed_keys = Counter(call_identity(o, rules, effective[j]) for j, o in enumerate(observed))
    duplicates = duplicate_count(expected_keys, observed_keys)
    evidence = match_evidence(expected, observed, len(pairs), missing, [call for call, _, _ in extra], wrong, duplicates)
    # the order checks of a mode use the matching's own equality (only strict and ordered modes ask for it)
    matches = mode.holds(len(expected), len(observed), evidence["fp"], evidence["fn"], lambda i, j: j in adjacent[i])
    return RuleMatch(**evidence, coercions=coercions, calls_match=matches)


def match_plans(plans: list[list[Call]], observed: list[Call], rules: ArgumentRules | None,
                mode: MatchMode = UNORDERED, written: list[object] | None = None) -> tuple[RuleMatch, int]:
    """Score ``observed`` against every reference plan and keep the best F1 (ties: the earlier plan).

    Args:
        plans: Reference plans, usually :attr:`tooleval.models.Case.plans` (``expected_calls`` first).
        rules: The case's resolved argument rules, or ``None``.
        mode: The match mode: the kept match's ``calls_match`` is true when the calls match *any* plan under it
            (the plan kept is still the best F1, so the figures do not depend on the mode).

    Returns:
        ``(match, index)``; ``match.chosen_plan == index``.

    Raises:
        ValueError: when ``plans`` is empty.
    """
    if not plans:
        raise ValueError("match_plans needs at least one reference plan")
    best: RuleMatch | None = None
    best_index = 0
    matches = False
    for index, plan in enumerate(plans):
        result = match_with_rules(plan, observed, rules, mode, written)
        matches = matches or result.calls_match
        if best is None or result.f1 > best.f1:
            best, best_index = result, index
    if best.chosen_plan != best_index or best.calls_match != matches:  # most rows: one plan, already so
        best = replace(best, chosen_plan=best_index, calls_match=matches)
    return best, best_index
