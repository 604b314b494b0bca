"""The release gate: judge a run's rows against a :class:`~tooleval.rules.GateConfig`.

Decisions (docs/rules.md "Gate"):

* Under the row outcome ``match`` (``GateConfig.row_outcome``, the default: a dataset without gate.toml), a
  scored row whose calls do not match the reference under its case's match mode (``calls_match`` false; rows
  before schema 5: ``exact_match``) has a blocking violation of rule ``reference_mismatch``; ``no_blocking`` leaves the verdict to the rules alone.
* A row **fails** when it has a blocking violation — severity as recorded on the row unless ``[severity]``
  re-grades the rule, and a ``tool_schema`` violation of a tool named in ``[tool_schema] blocking_tools`` is
  blocking — that no active waiver covers, or (``row_errors_block``) when it could not be scored
  (rule ``row_error``). Advisory violations never fail; they are counted and reported.
* **Nothing unscored passes** (docs/design.md "Trust rules"), since a case the agent never answered is not a
  case it passed: the caller adds one placeholder row (:func:`tooleval.runs.gate.unscored_rows`, ``unscored: true``)
  per case in the run's scope that has no row and per trace that made none (unknown case, unreadable line); each fails
  as rule ``unscored`` unless a waiver or a quarantine names it (``row_errors_block = false`` opts out). A run with
  **no scored row** fails, always.
* **Waivers** cover a case, a rule, or a rule on one case until their ``expires`` date (inclusive). Waived rows
  are listed in ``waived``. Any waiver past its date fails the gate (and covers nothing).
* **Quarantined** cases leave the blocking totals and the slice floors; their rows are listed in
  ``quarantined`` with the rules they would fail.
* **Name-only rows** (a call whose arguments were not captured, matched by name only: row column ``name_only``)
  fail as rule ``args_not_captured`` unless ``accept_name_only = true``; they leave the slices' and the run's
  argument-level figures (mean and min F1, exact-match rows and rate).
* **Slices**: every case ``slice`` and tool family seen is reported (rows, exact-match rows, mean and min F1,
  fp, fn, failing rows — never only the mean); floors apply to configured ones, and a configured slice with
  fewer rows than ``min_rows`` (0: missing from the run) fails. Run-wide ``[f1]`` thresholds only advise.
"""

from __future__ import annotations

import heapq
from collections import Counter
from datetime import date
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from tooleval.rules._gate_config import MISMATCH_RULE, Floor, GateConfig, Waiver
from tooleval.rules._name_only import NAME_ONLY_RULE
from tooleval.rules._schema import SCHEMA_RULE
from tooleval.rules._verdict import NO_SLICE, GateVerdict, RowOutcome, SliceResult, worst_key

if TYPE_CHECKING:
    import pyarrow as pa

    from tooleval.rules._gate_table import GroupPart

__all__ = ["GateTally", "calls_match", "evaluate_gate"]

def _rule_label(rule: str | None) -> str:
    """``rule 'x'``, or ``all rules`` for a waiver that names no rule (it covers the whole case)."""
    return "all rules" if rule is None else f"rule {rule!r}"


def _severity(violation: dict, config: GateConfig) -> str:
    """The gate's severity of a recorded violation: a schema finding of a blocking tool, else ``[severity]``, else
    for a call whose arguments were not captured ``accept_name_only`` (blocking unless it is true)."""
    rule = violation["rule"]
    if rule == SCHEMA_RULE and violation["tool"] in config.tool_schema.blocking_tools:
        return "blocking"
    if rule == NAME_ONLY_RULE and rule not in config.severity:
        return violation["severity"] if config.accept_name_only else "blocking"
    return config.severity.get(rule, violation["severity"])


def _outcome(row: dict, config: GateConfig, active: list[Waiver], quarantine: dict) -> RowOutcome:
    case_id = str(row["case_id"])
    violations = [dict(v, severity=_severity(v, config)) for v in row.get("violations") or []]
    if row.get("error_kind") and config.row_errors_block:
        rule = "unscored" if row.get("unscored") else "row_error"
        detail = f"{row['error_kind']}: {row.get('error_message') or ''}"
        violations.append({"rule": rule, "severity": "blocking", "tool": None, "detail": detail})
    elif config.row_outcome == "match" and calls_match(row) is False:
        violations.append({"rule": MISMATCH_RULE, "severity": config.severity.get(MISMATCH_RULE, "blocking"),
                           "tool": None, "detail": _mismatch_detail(row)})
    blocking = [v for v in violations if v["severity"] == "blocking"]
    waivers = {id(w): w for v in blocking for w in active if w.covers(case_id, v["rule"])}
    waived = {v["rule"] for v in blocking if any(w.covers(case_id, v["rule"]) for w in active)}
    return RowOutcome(
        case_id=case_id,
        trial=int(row.get("trial") or 0),
        slice=row.get("slice"),
        rules=sorted({v["rule"] for v in blocking} - waived),
        violations=violations,
        missing_calls=list(row.get("missing_calls") or []),
        extra_calls=list(row.get("extra_calls") or []),
        wrong_args=list(row.get("wrong_args") or []),
        f1=row.get("f1"),
        exact_match=row.get("exact_match"),
        fp=int(row.get("fp") or 0),
        fn=int(row.get("fn") or 0),
        tool_families=sorted(row.get("tool_families") or []),
        waived_rules=sorted(waived),
        waivers=[w.to_dict() for w in waivers.values()],
        quarantine=quarantine[case_id].to_dict() if case_id in quarantine else None,
        no_trial=row.get("trial") is None,
        name_only=bool(row.get("name_only")),
    )


def calls_match(row: dict) -> bool | None:
    """Whether a row's calls match its reference under its match mode: ``calls_match`` (row schema 5), else
    ``exact_match`` (older rows had the one unordered rule); ``None`` for a row that was not scored."""
    verdict = row.get("calls_match")
    if verdict is None:
        verdict = row.get("exact_match")
    return None if verdict is None else bool(verdict)


def _mismatch_detail(row: dict) -> str:
    """``match mode unordered: 2 missing and 1 extra call(s); wrong arguments in book_reservation`` — what keeps a
    row from matching (under ``strict`` the same calls in another order: 0 missing and 0 extra)."""
    mode = row.get("match_mode") or "unordered"
    text = f"match mode {mode}: {row.get('fn') or 0} missing and {row.get('fp') or 0} extra call(s)"
    wrong = sorted({w["name"] for w in row.get("wrong_args") or []})
    return text + (f"; wrong arguments in {', '.join(wrong)}" if wrong else "")


class _GroupTally:
    """Running figures of one slice or tool family (what :class:`SliceResult` reports)."""

    __slots__ = ("rows", "quarantined", "exact", "f1_sum", "f1_count", "f1_min", "fp", "fn", "failing")

    def __init__(self) -> None:
        self.rows = self.quarantined = self.exact = self.f1_count = self.fp = self.fn = self.failing = 0
        self.f1_sum, self.f1_min = 0, None

    def add(self, o: RowOutcome) -> None:
        if o.quarantine is not None:
            self.quarantined += 1
            return
        self.rows += 1
        if o.f1 is not None and not o.name_only:  # in row order, as ``sum()`` over the list did; name-level F1 apart
            self.f1_sum += o.f1
            self.f1_count += 1
            self.f1_min = o.f1 if self.f1_min is None or o.f1 < self.f1_min else self.f1_min
        self.exact += 1 if o.exact_match else 0
        self.fp += o.fp
        self.fn += o.fn
        self.failing += 1 if o.rules else 0

    def fold(self, part: "GroupPart") -> None:
        """Add a table's share of this group (:mod:`tooleval.rules._gate_table`; no quarantined row in it)."""
        self.rows += part.rows
        if part.f1.size:
            # one value after the other from the running sum, as ``add`` sums them: the same float
            self.f1_sum = float(np.add.accumulate(np.concatenate(([self.f1_sum], part.f1)))[-1])
            self.f1_count += int(part.f1.size)
            low = float(part.f1.min())
            self.f1_min = low if self.f1_min is None or low < self.f1_min else self.f1_min
        self.exact += part.exact
        self.fp += part.fp
        self.fn += part.fn
        self.failing += part.failing

    def result(self, kind: str, name: str, floor: Floor | None) -> SliceResult:
        mean = self.f1_sum / self.f1_count if self.f1_count else None
        failures: list[str] = []
        label = f"{kind} {name!r}"
        if floor is not None:
            if self.rows < floor.min_rows:
                what = "missing from the run" if not self.rows else f"{self.rows} row(s)"
                failures.append(f"{label}: {what}; min_rows is {floor.min_rows}")
            if floor.min_mean_f1 is not None and (mean is None or mean < floor.min_mean_f1):
                failures.append(f"{label}: mean f1 {'n/a' if mean is None else f'{mean:.4f}'} "
                                f"is below its floor {floor.min_mean_f1}")
            rate = self.exact / self.f1_count if self.f1_count else None
            if floor.min_exact_match_rate is not None and (rate is None or rate < floor.min_exact_match_rate):
                failures.append(f"{label}: exact-match rate {'n/a' if rate is None else f'{rate:.4f}'} "
                                f"is below its floor {floor.min_exact_match_rate}")
        return SliceResult(
            kind=kind, name=name, rows=self.rows, quarantined_rows=self.quarantined, exact_match_rows=self.exact,
            mean_f1=mean, min_f1=self.f1_min, fp=self.fp, fn=self.fn, failing_rows=self.failing,
            configured=floor is not None, passed=not failures, failures=failures,
        )


class _Listed:
    """The ``limit`` worst outcomes of one list (failing, waived, quarantined) and the count of all of them.

    :meth:`items` gives them in arrival order while the list holds no more than ``limit``, else the worst first.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.count = limit, 0
        self._heap: list[tuple[_Desc, int, RowOutcome]] = []

    def add(self, o: RowOutcome, arrival: int | None = None) -> None:
        """Add ``o``; ``arrival`` (default: the next) is its place among every outcome offered to this list."""
        if arrival is not None:
            self.count = arrival
        item = (_Desc(worst_key(o)), self.count, o)
        self.count += 1
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        elif self.limit and item[0] > self._heap[0][0]:
            heapq.heapreplace(self._heap, item)

    def items(self) -> list[RowOutcome]:
        if self.count <= self.limit:
            return [o for _, _, o in sorted(self._heap, key=lambda i: i[1])]
        return [o for _, _, o in sorted(self._heap, key=lambda i: worst_key(i[2]))]


class _Desc:
    """A key in reverse order: the heap's top is the *best* of the kept (worst) rows, the first to give way."""

    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key

    def __lt__(self, other: "_Desc") -> bool:
        return self.key > other.key

    def __gt__(self, other: "_Desc") -> bool:
        return self.key < other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


_SLICE_TALLY = ("rows", "failing", "waived", "quarantined", "quarantined_failing", "advisory_violations")


class GateTally:
    """The release gate over rows streamed one at a time, in memory bounded by ``listed`` (the rows kept with
    their evidence) and by the number of slices, tool families and rules — never by the number of rows.

    Feed every row (then the placeholders of unscored cases) to :meth:`add`; :meth:`verdict` gives the
    :class:`GateVerdict`. Its ``failing_rows``, ``waived`` and ``quarantined`` list at most ``listed`` rows each
    (the worst first once there are more; in row order otherwise); every count covers all rows.

    Args:
        config: The gate configuration.
        today: The date waivers are checked against.
        listed: Rows listed per list; default ``config.listed_rows``.
    """

    def __init__(self, config: GateConfig, *, today: date, listed: int | None = None) -> None:
        self.config = config
        self.listed = config.listed_rows if listed is None else listed
        self._quarantine = {q.case: q for q in config.quarantine}
        self._active = [w for w in config.waivers if not w.expired(today)]
        self._expired = [w for w in config.waivers if w.expired(today)]
        self._lists = {name: _Listed(self.listed) for name in ("failing", "waived", "quarantined")}
        self._groups: dict[tuple[str, str], _GroupTally] = {}
        self._matched: set[int] = set()
        self._counted = _GroupTally()
        self._rows = self._scored = self._unscored = self._exact = self._fp = self._fn = self._advisory = 0
        self._by_rule: Counter = Counter()
        self._failing_family: Counter = Counter()
        self._failing_slice: Counter = Counter()
        self._failing_slice_rule: Counter = Counter()
        self._failing_rule: Counter = Counter()
        self._by_slice: dict[str, Counter] = {}

    def add(self, row: dict[str, Any]) -> RowOutcome:
        """Judge one row (a row dict as in :func:`evaluate_gate`) and fold it into the figures."""
        o = _outcome(row, self.config, self._active, self._quarantine)
        unscored = bool(row.get("unscored"))
        self._rows += 0 if unscored else 1
        self._unscored += 1 if unscored else 0
        self._scored += 1 if not row.get("error_kind") and not unscored else 0
        self._exact += 1 if row.get("exact_match") else 0
        self._fp += row.get("fp") or 0
        self._fn += row.get("fn") or 0
        for v in o.violations:
            self._by_rule[v["rule"]] += 1
            self._advisory += 1 if v["severity"] == "advisory" else 0
            for index, w in enumerate(self._active):
                if index not in self._matched and w.covers(o.case_id, v["rule"]):
                    self._matched.add(index)
        slice_ = o.slice or NO_SLICE
        tally = self._by_slice.get(slice_)
        if tally is None:
            tally = self._by_slice[slice_] = Counter(dict.fromkeys(_SLICE_TALLY, 0))
        tally["rows"] += 1
        tally["advisory_violations"] += sum(1 for v in o.violations if v["severity"] == "advisory")
        failing = bool(o.rules) and o.quarantine is None
        if failing:
            self._lists["failing"].add(o)
            self._failing_slice[slice_] += 1
            for family in o.tool_families or [NO_SLICE]:
                self._failing_family[family] += 1
            for rule in o.rules:
                self._failing_slice_rule[(slice_, rule)] += 1
                self._failing_rule[rule] += 1
            tally["failing"] += 1
        if o.gate_verdict == "waived":  # every blocking rule waived: a row with one left unwaived fails, and
            # is counted and listed there only (not among the waived rows, which pass)
            self._lists["waived"].add(o)
            tally["waived"] += 1
        if o.quarantine is not None:
            self._lists["quarantined"].add(o)
            tally["quarantined"] += 1
            tally["quarantined_failing"] += 1 if o.rules else 0
        self._counted.add(o)
        if o.slice is not None:
            self._groups.setdefault(("slice", o.slice), _GroupTally()).add(o)
        for family in o.tool_families:
            self._groups.setdefault(("family", family), _GroupTally()).add(o)
        return o

    def add_table(self, table: "pa.Table") -> "pa.Table":
        """Judge every row of an Arrow table of row columns, in order: the same figures as :meth:`add` of each row
        (``table.to_pylist()``), computed over the columns (:mod:`tooleval.rules._gate_table`); only the rows
        that may be listed, and those the columns cannot judge alone (a quarantined case, one an active waiver may
        cover), become row dicts and :class:`RowOutcome` objects.

        Args:
            table: Columns of the row schema (those the gate reads: ``case_id``, ``trial``, ``slice``,
                ``violations``, ``error_kind``, ``error_message``, the call lists, ``f1``, ``exact_match``, ``fp``,
                ``fn``, ``tool_families``, ``match_mode``, ``calls_match``, ``name_only``); absent ones read as null.

        Returns:
            The verdict of each row, in the table's order: a table of ``gate_verdict`` (string: ``pass`` |
            ``fail`` | ``waived`` | ``quarantined``, :attr:`RowOutcome.gate_verdict`) and ``gate_rules``
            (``list<string>``, :attr:`RowOutcome.gate_rules`), with the table's number of rows.
        """
        import pyarrow as pa

        from tooleval.rules._gate_table import rows_for_columns

        verdicts: list[pa.Array] = []
        rules: list[pa.Array] = []
        fast = rows_for_columns(table, self.config, self._active)
        edges = np.flatnonzero(np.diff(fast.astype(np.int8))) + 1
        for start, stop in zip([0, *edges.tolist()], [*edges.tolist(), table.num_rows]):
            segment = table.slice(start, stop - start)
            if stop > start and fast[start]:
                # judged by the columns alone: no waiver or quarantine names these rows, so a row with a blocking
                # rule fails and any other passes
                row_rules = self._fold(segment)
                verdicts.append(_pass_or_fail(row_rules))
                rules.append(row_rules)
            else:
                outcomes = [self.add(row) for row in segment.to_pylist()]
                verdicts.append(pa.array([o.gate_verdict for o in outcomes], pa.string()))
                rules.append(pa.array([o.gate_rules for o in outcomes], pa.list_(pa.string())))
        return pa.table({"gate_verdict": pa.chunked_array(verdicts, pa.string()),
                         "gate_rules": pa.chunked_array(rules, pa.list_(pa.string()))})

    def _fold(self, table: "pa.Table") -> "pa.Array":
        """Add the rows of ``table``, every one judged by its columns alone (:func:`_gate_table.table_part`);
        return each row's blocking rules (``list<string>``, ``[]`` for a passing row)."""
        import pyarrow as pa

        from tooleval.rules._gate_table import table_part

        part = table_part(table, self.config, self.listed, lambda v: _severity(v, self.config))
        row_rules = part.row_rules if part.row_rules is not None else pa.array([], pa.list_(pa.string()))
        self._rows += part.rows
        self._scored += part.scored
        self._exact += part.exact
        self._fp += part.fp
        self._fn += part.fn
        self._advisory += part.advisory
        self._by_rule.update(part.by_rule)
        for name, figures in part.by_slice.items():
            tally = self._by_slice.get(name)
            if tally is None:
                tally = self._by_slice[name] = Counter(dict.fromkeys(_SLICE_TALLY, 0))
            for key, value in figures.items():
                tally[key] += value
        self._failing_slice.update(part.failing_slice)
        self._failing_family.update(part.failing_family)
        self._failing_rule.update(part.failing_rule)
        self._failing_slice_rule.update(part.failing_slice_rule)
        self._counted.fold(part.counted)
        for key, group in part.groups.items():
            self._groups.setdefault(key, _GroupTally()).fold(group)
        failing = self._lists["failing"]
        first = failing.count
        candidates = part.listed_candidates
        rows = table.take(part.failing_rows[candidates]).to_pylist() if candidates.size else []
        for position, row in zip(candidates.tolist(), rows):
            o = _outcome(row, self.config, self._active, self._quarantine)
            if not o.rules:
                raise AssertionError(f"row {o.case_id!r} #{o.trial}: judged failing by its columns, not by its row")
            failing.add(o, arrival=first + position)
        failing.count = first + part.failing_rows.size
        return row_rules

    def verdict(self) -> GateVerdict:
        """The :class:`GateVerdict` of every row added so far."""
        config = self.config
        floors = {**{("slice", k): v for k, v in config.slices.items()},
                  **{("family", k): v for k, v in config.families.items()}}
        keys = sorted(set(self._groups) | set(floors))
        slices = [self._groups.get(key, _GroupTally()).result(*key, floors.get(key)) for key in keys]
        failing, waived, quarantined = (self._lists[n] for n in ("failing", "waived", "quarantined"))
        reasons = [] if self._scored else ["no scored row: nothing was evaluated"]
        reasons += [f"{failing.count} blocking row(s)"] if failing.count else []
        reasons += [f for s in slices for f in s.failures]
        reasons += [f"waiver (case {w.case!r}, {_rule_label(w.rule)}, owner {w.owner}) expired on "
                    f"{w.expires.isoformat()}" for w in self._expired]
        by_slice_rule: dict[str, dict[str, int]] = {}
        for (slice_, rule), n in sorted(self._failing_slice_rule.items()):
            by_slice_rule.setdefault(slice_, {})[rule] = n
        counts = {
            "rows_evaluated": self._rows,
            "scored_rows": self._scored,
            "unscored_cases": self._unscored,
            "exact_match_rows": self._exact,
            "false_positive_calls": self._fp,
            "false_negative_calls": self._fn,
            "blocking_rows": failing.count,
            "waived_rows": waived.count,
            "quarantined_rows": quarantined.count,
            "advisory_violations": self._advisory,
            "violations_by_rule": dict(sorted(self._by_rule.items())),
            "failures_by_rule": dict(sorted(self._failing_rule.items())),
            "failures_by_tool_family": dict(sorted(self._failing_family.items())),
            "failures_by_slice": dict(sorted(self._failing_slice.items())),
            "failures_by_slice_and_rule": by_slice_rule,
            "rows_by_slice": {name: dict(sorted(c.items())) for name, c in sorted(self._by_slice.items())},
        }
        return GateVerdict(
            passed=not reasons, reasons=reasons, failing_rows=failing.items(), waived=waived.items(),
            quarantined=quarantined.items(), slices=slices, counts=counts, expired_waivers=self._expired,
            advisories=self._advisories(counts), listed=self.listed, row_outcome=config.row_outcome,
        )

    def _advisories(self, counts: dict) -> list[str]:
        config, counted = self.config, self._counted
        notes: list[str] = []
        mean = counted.f1_sum / counted.f1_count if counted.f1_count else None
        if config.f1.min_mean is not None and mean is not None and mean < config.f1.min_mean:
            notes.append(f"mean f1 {mean:.4f} is below the advisory threshold {config.f1.min_mean}")
        if config.f1.min_exact_match_rate is not None and counted.f1_count:
            rate = counted.exact / counted.f1_count
            if rate < config.f1.min_exact_match_rate:
                notes.append(f"exact-match rate {rate:.4f} is below the advisory threshold "
                             f"{config.f1.min_exact_match_rate}")
        if counts["advisory_violations"]:
            notes.append(f"{counts['advisory_violations']} advisory violation(s)")
        for index, w in enumerate(self._active):
            if index not in self._matched:
                cases = "every case" if w.case is None else f"case {w.case!r}"  # a rule waiver names no case
                notes.append(f"waiver ({cases}, {_rule_label(w.rule)}) matched no violation")
        return notes


def _pass_or_fail(row_rules: "pa.Array") -> "pa.Array":
    """``fail`` for a row with blocking rules, ``pass`` for one without (rows no waiver or quarantine names)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    failing = pc.greater(pc.list_value_length(row_rules), 0)
    return pc.if_else(failing, pa.scalar("fail", pa.string()), pa.scalar("pass", pa.string()))


def evaluate_gate(rows: Iterable[dict[str, Any]], config: GateConfig, *, today: date,
                  listed: int | None = None) -> GateVerdict:
    """Judge a run.

    Args:
        rows: Row dicts with at least ``case_id``, ``trial``, ``slice``, ``f1``, ``exact_match``, ``fp``, ``fn``,
            ``missing_calls``, ``extra_calls``, ``wrong_args``, ``violations`` (``[{rule, severity, tool,
            detail}]``) and optionally ``tool_families`` and ``error`` (as read back from ``rows/``), followed
            by the placeholder rows of unscored cases (``unscored: true``, ``error`` saying why). Any iterable:
            they are judged one at a time (:class:`GateTally`).
        config: The gate configuration.
        today: The date waivers are checked against (pass it explicitly: the verdict must be reproducible).
        listed: Rows listed per list (failing, waived, quarantined); default ``config.listed_rows``.

    Returns:
        A :class:`GateVerdict`.
    """
    tally = GateTally(config, today=today, listed=listed)
    for row in rows:
        tally.add(row)
    return tally.verdict()
