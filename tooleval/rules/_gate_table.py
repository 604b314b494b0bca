"""The release gate's figures of many rows at once, from an Arrow table of row columns (:meth:`GateTally.add_table
<tooleval.rules.GateTally.add_table>`): what :meth:`GateTally.add <tooleval.rules.GateTally.add>` would fold in
one row at a time, computed with Arrow compute and numpy over the columns instead of a Python object per row.

A publication judges every row of a run in the flow's own process while the workers score the next shards; one
``RowOutcome`` and a dict per violation for each row cost that process ~30 us a row. Here the per-row verdict
(gate severity of each recorded violation, the row error or reference mismatch the gate adds, the blocking rules
left) becomes a few arrays, and only the rows that may be listed with their evidence (the worst ``listed`` failing
rows of the table) become :class:`~tooleval.rules.RowOutcome` objects, built by the same function as before.

Rows whose verdict needs more than the columns can say — a quarantined case, a case an active waiver may cover,
values Python and Arrow order differently (NaN, negative zero) or that the per-row path would refuse (a null case
id, a null violation or tool family) — are left to the per-row path (:func:`rows_for_columns`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tooleval.rules._gate_config import MISMATCH_RULE, GateConfig, Waiver
from tooleval.rules._verdict import NO_SLICE

__all__ = ["GroupPart", "TablePart", "rows_for_columns", "table_part"]

_ROW_ERROR = "row_error"


@dataclass
class GroupPart:
    """A slice's or tool family's share of a table: what ``_GroupTally.add`` adds for its rows, with the F1
    values it sums kept in row order (their sum is taken one value after the other, as the row path does)."""

    rows: int
    exact: int
    fp: int
    fn: int
    failing: int
    f1: np.ndarray
    """F1 of the group's rows that have one and are not name-only, in row order (float64)."""


@dataclass
class TablePart:
    """What a table of rows adds to a :class:`~tooleval.rules.GateTally` (every row judged, none listed yet)."""

    rows: int = 0
    scored: int = 0
    exact: int = 0
    fp: int = 0
    fn: int = 0
    advisory: int = 0
    by_rule: Counter = field(default_factory=Counter)
    by_slice: dict[str, dict[str, int]] = field(default_factory=dict)
    """Slice (``(none)`` for none) -> ``rows``, ``failing``, ``advisory_violations`` of the table."""
    failing_slice: Counter = field(default_factory=Counter)
    failing_family: Counter = field(default_factory=Counter)
    failing_rule: Counter = field(default_factory=Counter)
    failing_slice_rule: Counter = field(default_factory=Counter)
    counted: GroupPart | None = None
    groups: dict[tuple[str, str], GroupPart] = field(default_factory=dict)
    """``("slice", name)`` / ``("family", name)`` -> its share, as ``GateTally``'s groups are keyed."""
    failing_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Indices of the failing rows in the table, in row order."""
    listed_candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Positions (in ``failing_rows``) of the failing rows that may be listed: the ``listed`` worst of the table
    (the others cannot be among the run's worst ``listed``), in row order."""
    row_rules: pa.Array | None = None
    """Each row's blocking rules, sorted and unique (``list<string>``, one entry per row of the table, ``[]`` for
    a passing row): what :attr:`RowOutcome.rules <tooleval.rules.RowOutcome.rules>` would hold."""


def rows_for_columns(table: pa.Table, config: GateConfig, active: list[Waiver]) -> np.ndarray:
    """Which rows :func:`table_part` judges exactly as the per-row path would (a bool per row); the others go
    through ``GateTally.add`` one at a time."""
    n = table.num_rows
    if "unscored" in table.column_names or any(w.case is None for w in active):
        return np.zeros(n, bool)
    case = _column(table, "case_id", pa.string())
    fast = _bools(pc.is_valid(case))
    named = sorted({q.case for q in config.quarantine} | {w.case for w in active if w.case is not None})
    if named:
        fast &= ~_bools(pc.is_in(case, value_set=pa.array(named, pa.string())))
    f1 = _column(table, "f1", pa.float64())
    values = f1.to_numpy(zero_copy_only=False)  # nulls become NaN; a real NaN or -0.0 is what Python orders apart
    odd = _bools(pc.is_valid(f1)) & (np.isnan(values) | ((values == 0.0) & np.signbit(values)))
    fast &= ~odd
    violations = _column(table, "violations", _VIOLATIONS)
    flat = pc.list_flatten(violations)
    bad = pc.or_kleene(pc.is_null(flat), pc.is_null(pc.struct_field(flat, "rule")))
    fast[_parents(violations)[_bools(bad)]] = False
    families = _column(table, "tool_families", pa.list_(pa.string()))
    fast[_parents(families)[_bools(pc.is_null(pc.list_flatten(families)))]] = False
    return fast


def table_part(table: pa.Table, config: GateConfig, listed: int,
               severity_of: Callable[[dict], str | None]) -> TablePart:
    """The gate's figures of ``table``'s rows (each one :func:`rows_for_columns` accepts), as ``GateTally.add``
    would add them row after row.

    Args:
        table: Row columns (the gate's columns of the row schema; absent ones count as null).
        config: The gate configuration (no active waiver or quarantine names these rows).
        listed: Rows listed per list: the table's failing rows beyond its ``listed`` worst are only counted.
        severity_of: The gate's severity of one recorded violation ``{rule, severity, tool}`` (the per-row
            path's own function, called once per distinct violation kind).
    """
    n = table.num_rows
    part = TablePart(rows=n)
    if n == 0:
        return part
    error_kind = _column(table, "error_kind", pa.string())
    errors = _bools(pc.fill_null(pc.not_equal(error_kind, ""), False))  # the row path tests the text's truth
    exact = _bools(pc.fill_null(_column(table, "exact_match", pa.bool_()), False))
    fp = _ints(_column(table, "fp", pa.int64()))
    fn = _ints(_column(table, "fn", pa.int64()))
    part.scored, part.exact, part.fp, part.fn = int((~errors).sum()), int(exact.sum()), int(fp.sum()), int(fn.sum())

    rows, rules, kinds, names = _violations(table, config, errors, severity_of)
    blocking = kinds == _BLOCKING
    part.by_rule = Counter({names[r]: int(c) for r, c in enumerate(np.bincount(rules, minlength=len(names))) if c})
    advisory = np.bincount(rows[kinds == _ADVISORY], minlength=n)
    part.advisory = int(advisory.sum())
    pairs = np.unique(rows[blocking] * len(names) + rules[blocking])  # (row, rule) once each: a row's rule set
    pair_rows, pair_rules = pairs // len(names), pairs % len(names)
    failing = np.zeros(n, bool)
    failing[pair_rows] = True
    part.failing_rows = np.flatnonzero(failing)
    part.row_rules = _row_rules(n, pair_rows, pair_rules, names)

    slices = _column(table, "slice", pa.string())
    labels = pc.if_else(pc.fill_null(pc.equal(slices, ""), True), NO_SLICE, slices)  # ``o.slice or NO_SLICE``
    label_index, label_names = _codes(labels)
    for code, name in enumerate(label_names):
        mine = label_index == code
        part.by_slice[name] = {"rows": int(mine.sum()), "failing": int((mine & failing).sum()),
                               "advisory_violations": int(advisory[mine].sum())}
        if part.by_slice[name]["failing"]:
            part.failing_slice[name] = part.by_slice[name]["failing"]
    for rule, count in zip(*np.unique(pair_rules, return_counts=True)):
        part.failing_rule[names[rule]] = int(count)
    slice_rule = label_index[pair_rows] * len(names) + pair_rules
    for key, count in zip(*np.unique(slice_rule, return_counts=True)):
        part.failing_slice_rule[(label_names[key // len(names)], names[key % len(names)])] = int(count)

    families = _column(table, "tool_families", pa.list_(pa.string()))
    family_rows = _parents(families)
    family_index, family_names = _codes(pc.list_flatten(families))
    for code, count in zip(*np.unique(family_index[failing[family_rows]], return_counts=True)):
        part.failing_family[family_names[code]] += int(count)
    without = failing & (np.bincount(family_rows, minlength=n) == 0)  # no family: counted under (none)
    if without.any():
        part.failing_family[NO_SLICE] += int(without.sum())

    f1 = _column(table, "f1", pa.float64())
    f1_values = f1.to_numpy(zero_copy_only=False)
    averaged = _bools(pc.is_valid(f1)) & ~_bools(pc.fill_null(_column(table, "name_only", pa.bool_()), False))

    def group(members: np.ndarray) -> GroupPart:
        return GroupPart(rows=int(members.size), exact=int(exact[members].sum()), fp=int(fp[members].sum()),
                         fn=int(fn[members].sum()), failing=int(failing[members].sum()),
                         f1=f1_values[members[averaged[members]]])

    part.counted = group(np.arange(n))
    raw_index, raw_names = _codes(slices)  # a group per slice as recorded ("" is a slice of its own)
    for code, name in enumerate(raw_names):
        part.groups[("slice", name)] = group(np.flatnonzero(raw_index == code))
    for code, name in enumerate(family_names):
        part.groups[("family", name)] = group(family_rows[family_index == code])

    part.listed_candidates = _worst(table, f1, part.failing_rows, listed)
    return part


_VIOLATIONS = pa.list_(pa.struct([("rule", pa.string()), ("severity", pa.string()), ("tool", pa.string()),
                                  ("detail", pa.string())]))
_OTHER, _BLOCKING, _ADVISORY = 0, 1, 2


def _violations(table: pa.Table, config: GateConfig, errors: np.ndarray,
                severity_of: Callable[[dict], str | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Every violation the gate sees, recorded or added: ``(row, rule code, severity kind, rule names)``."""
    violations = _column(table, "violations", _VIOLATIONS)
    flat = pc.list_flatten(violations)
    rows = _parents(violations)
    rule_index, rule_names = _codes(pc.struct_field(flat, "rule"))
    severity_index, severity_names = _codes(pc.struct_field(flat, "severity"))
    blocking_tool = _bools(pc.is_in(pc.struct_field(flat, "tool"),
                                    value_set=pa.array(sorted(config.tool_schema.blocking_tools), pa.string())))
    names = list(dict.fromkeys([*rule_names, _ROW_ERROR, MISMATCH_RULE]))
    code_of = {name: code for code, name in enumerate(names)}
    rules = np.array([code_of[name] for name in rule_names], np.int64)[rule_index]
    # the gate's severity depends on the rule, the recorded severity and whether the tool blocks: ask the row
    # path's own function once per distinct triple
    none = len(severity_names)  # code of a null recorded severity
    recorded = np.where(severity_index < 0, none, severity_index)
    triple = (rule_index * (none + 1) + recorded) * 2 + blocking_tool
    distinct, inverse = np.unique(triple, return_inverse=True)
    kinds = np.empty(distinct.size, np.int8)
    blocking_tools = sorted(config.tool_schema.blocking_tools)
    for i, key in enumerate(distinct.tolist()):
        rest, tool_blocks = divmod(key, 2)
        rule, severity = divmod(rest, none + 1)
        kinds[i] = _kind(severity_of({"rule": rule_names[rule],
                                      "severity": None if severity == none else severity_names[severity],
                                      "tool": blocking_tools[0] if tool_blocks else None}))
    kinds = kinds[inverse] if distinct.size else np.zeros(0, np.int8)
    added_rows, added_rules, added_kinds = [], [], []
    if config.row_errors_block:
        added_rows.append(np.flatnonzero(errors))
        added_rules.append(code_of[_ROW_ERROR])
        added_kinds.append(_BLOCKING)
        unblocked = ~errors
    else:
        unblocked = np.ones(table.num_rows, bool)
    if config.row_outcome == "match":
        verdict = pc.coalesce(_column(table, "calls_match", pa.bool_()), _column(table, "exact_match", pa.bool_()))
        mismatched = _bools(pc.fill_null(pc.invert(verdict), False)) & unblocked
        added_rows.append(np.flatnonzero(mismatched))
        added_rules.append(code_of[MISMATCH_RULE])
        added_kinds.append(_kind(config.severity.get(MISMATCH_RULE, "blocking")))
    order = [rows, *added_rows]
    rule_parts = [rules, *(np.full(a.size, r, np.int64) for a, r in zip(added_rows, added_rules))]
    kind_parts = [kinds, *(np.full(a.size, k, np.int8) for a, k in zip(added_rows, added_kinds))]
    return np.concatenate(order), np.concatenate(rule_parts), np.concatenate(kind_parts), names


def _row_rules(n: int, pair_rows: np.ndarray, pair_rules: np.ndarray, names: list[str]) -> pa.Array:
    """``list<string>`` of each row's rules, sorted by name as ``RowOutcome.rules`` is (the pairs come sorted by
    row, then by rule code, which is not the names' order)."""
    rank = np.empty(len(names), np.int64)
    rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
    order = np.lexsort((rank[pair_rules], pair_rows))
    offsets = np.concatenate(([0], np.cumsum(np.bincount(pair_rows, minlength=n)))).astype(np.int32)
    values = pa.array(names, pa.string()).take(pa.array(pair_rules[order], pa.int64()))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _kind(severity: str | None) -> int:
    return _BLOCKING if severity == "blocking" else _ADVISORY if severity == "advisory" else _OTHER


def _worst(table: pa.Table, f1: pa.Array, failing_rows: np.ndarray, listed: int) -> np.ndarray:
    """Positions in ``failing_rows`` of the table's ``listed`` worst failing rows by the listing order (no F1
    first, then the lowest F1, then case id and trial: ``worst_key``), in row order."""
    if failing_rows.size <= listed:
        return np.arange(failing_rows.size)
    if listed == 0:
        return np.zeros(0, np.int64)
    take = pa.array(failing_rows)
    keys = pa.table({"has_f1": pc.is_valid(pc.take(f1, take)), "f1": pc.fill_null(pc.take(f1, take), 0.0),
                     "case_id": pc.take(_column(table, "case_id", pa.string()), take),
                     "trial": pc.fill_null(pc.take(_column(table, "trial", pa.int64()), take), 0)})
    order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in keys.column_names])  # stable
    return np.sort(order.to_numpy()[:listed])


def _column(table: pa.Table, name: str, kind: pa.DataType) -> pa.Array:
    """One column as one array (all nulls when the table has no such column, as ``row.get`` reads it)."""
    if name not in table.column_names:
        return pa.nulls(table.num_rows, kind)
    column = table.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _codes(values: pa.Array) -> tuple[np.ndarray, list[Any]]:
    """``(code per value, -1 for null; the distinct values)`` of a string array."""
    encoded = pc.dictionary_encode(values)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary.to_pylist()


def _parents(lists: pa.Array) -> np.ndarray:
    return pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def _bools(values: pa.Array) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def _ints(values: pa.Array) -> np.ndarray:
    return pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.int64)
