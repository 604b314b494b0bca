"""What ``tooleval gate`` prints: a verdict that fits a screen at any corpus size.

A verdict line, the reasons, the failing rows counted per rule and per slice, then the worst rows, each with only
what differs from its reference (the tools with wrong arguments and the differing argument paths, the names of
missing and extra calls) — never whole argument objects: those are in ``gate.json`` and ``junit.xml``, and
``--format json`` prints everything.

By default the text fits :data:`MAX_LINES` lines: as many of the worst rows as fit are shown (``--show N`` shows
N). Lines are wrapped at a width (:func:`view_width`) between items, never inside a command or a path: a command
or a path that is wider than the width gets a line of its own and stays whole.

Pure functions over a :class:`~tooleval.rules.GateVerdict`: the command prints the lines they return.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Iterable

from tooleval.rules import ROW_OUTCOMES, GateVerdict, RowOutcome
from tooleval.rules import worst_key

__all__ = ["MAX_LINES", "MAX_WIDTH", "gate_lines", "view_width", "wrap_items"]

MAX_LINES = 40
"""Lines ``tooleval gate`` prints by default (without ``--show``)."""

MAX_WIDTH = 100
"""Widest line on a terminal (a narrower terminal narrows it); off a terminal, ``COLUMNS`` or this."""

_REASONS = 5
"""Reasons printed one by one; the rest are counted (all are in gate.json)."""
_SLICES = 8
"""Slices printed by name (the most failing rows first); the rest are counted."""


def view_width(terminal_width: int | None) -> int:
    """The width to wrap at: a terminal's width up to :data:`MAX_WIDTH`; off a terminal (``None``), ``$COLUMNS``
    when it is a positive integer, else :data:`MAX_WIDTH`."""
    if terminal_width is not None:
        return max(20, min(terminal_width, MAX_WIDTH))
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else MAX_WIDTH


def wrap_items(head: str, items: Iterable[str], width: int, *, indent: str = "    ", sep: str = ", ") -> list[str]:
    """``head`` followed by ``items`` joined with ``sep``, wrapped at ``width`` between items only: an item is
    never split, and one wider than a line stands on a line of its own, whole."""
    lines, line, empty = [], head, True
    for item in items:
        candidate = line + item if empty else line + sep + item
        if len(candidate) > width and (not empty or head.strip()):
            lines.append(line.rstrip() if empty else line + sep.rstrip())  # a head alone keeps its own line
            line = indent + item
        else:
            line = candidate
        empty = False
    lines.append(line)
    return lines


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (for row lines: a case id may be any length)."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _fit(prefix: str, items: list[str], width: int, *, sep: str = ", ") -> str:
    """``prefix`` and as many of ``items`` as fit in ``width`` with ``+N more`` for the rest (the first item is
    always given, cut with an ellipsis if it alone is too wide)."""
    for shown in range(len(items), 0, -1):
        more = len(items) - shown
        text = prefix + sep.join(items[:shown]) + (f"{sep}+{more} more" if more else "")
        if len(text) <= width:
            return text
    return _cut(prefix + items[0] + (f"{sep}+{len(items) - 1} more" if len(items) > 1 else ""), width)


def _named(names: list[str]) -> list[str]:
    """``[a, b x2, c]``: each name once, in order of first appearance, with its count when above one."""
    counts = Counter(names)
    return [f"{n} x{counts[n]}" if counts[n] > 1 else n for n in dict.fromkeys(names)]


def _call_name(call: dict) -> str:
    return call["name"] + (" (malformed)" if call.get("args_json") is None and call.get("args_raw") is not None
                           else "")


def row_lines(o: RowOutcome, width: int) -> list[str]:
    """One failing row: ``case#trial  f1 0.3077  rules``, then the tools with wrong arguments and their differing
    paths, then the missing and extra calls by name (those already paired as wrong arguments left out)."""
    trial = "-" if o.no_trial else str(o.trial)
    f1 = "unscored" if o.f1 is None else f"f1 {o.f1:.4f}"
    lines = wrap_items(f"  {_cut(o.case_id, width // 2)}#{trial}  {f1}  ", list(o.rules) or ["-"], width,
                       indent="      ")  # every rule is named: they are why the row fails
    for w in o.wrong_args:  # one line per pair: the tool and only the argument paths that differ
        lines.append(_fit(f"      wrong args {w['name']}: ", list(w.get("paths") or []) or ["(none)"], width))
    paired = Counter(w["name"] for w in o.wrong_args)
    for label, calls in (("missing", o.missing_calls), ("extra", o.extra_calls)):
        names = _named(_unpaired(calls, paired))
        if names:
            lines.append(_fit(f"      {label}: ", names, width))
    for v in o.violations:  # an unscored or error row says why, in words
        if v["rule"] in ("unscored", "row_error") and v.get("detail"):
            lines.append(_cut(f"      {v['rule']}: {v['detail']}", width))
    return lines


def _unpaired(calls: list[dict], paired: Counter) -> list[str]:
    left = Counter(paired)
    names = []
    for call in calls:
        if left[call["name"]] > 0 and call.get("args_json") is not None:
            left[call["name"]] -= 1
            continue
        names.append(_call_name(call))
    return names


def gate_lines(verdict: GateVerdict, run_id: str, *, width: int, show: int | None = None,
               footer: list[str] | None = None, outcome_source: str | None = "") -> list[str]:
    """The text of ``tooleval gate``, line by line, none wider than ``width`` except a whole command or path.

    Args:
        verdict: The gate's verdict (its ``failing_rows`` are the listed rows, ``counts`` cover all rows).
        run_id: The run judged.
        width: The width to wrap at (:func:`view_width`).
        show: Failing rows to show; ``None``: as many of the worst as fit in :data:`MAX_LINES` lines.
        footer: Lines printed last (the files written), kept whole.
        outcome_source: The gate.toml that set the row outcome, ``None`` for the default (no gate.toml): a line
            says when a row passes and who decided it; ``""`` leaves the line out.

    Returns:
        The lines, without trailing newlines; the first is the verdict line.
    """
    counts = verdict.counts
    footer = list(footer or [])
    blocking = counts["blocking_rows"]
    judged = counts["rows_evaluated"] + counts.get("unscored_cases", 0)
    head = [f"gate {'PASS' if verdict.passed else 'FAIL'} for run {run_id}: {blocking} of {judged} rows fail "
            f"({counts['exact_match_rows']} exact; row outcome {verdict.row_outcome})"]
    head = wrap_items("", head[0].split(" "), width, indent="  ", sep=" ")
    reasons = verdict.reasons
    for reason in reasons[:_REASONS]:
        head += wrap_items("  - ", reason.split(" "), width, indent="    ", sep=" ")
    if len(reasons) > _REASONS:
        head.append(f"  - and {len(reasons) - _REASONS} more reasons (gate.json: reasons)")
    if outcome_source != "":
        source = "the default: no gate.toml" if outcome_source is None else f"set by {outcome_source}"
        words = f"row outcome {verdict.row_outcome} ({source}): a row passes when {ROW_OUTCOMES[verdict.row_outcome]}"
        head += wrap_items("", words.split(" "), width, indent="  ", sep=" ")
    by_rule = counts.get("failures_by_rule") or {}
    if by_rule:
        ranked = sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))
        head += wrap_items("failing rows by rule: ", [f"{rule} {n}" for rule, n in ranked], width)
    slices = counts.get("rows_by_slice") or {}
    if slices:
        ranked = sorted(slices.items(), key=lambda kv: (-kv[1]["failing"], kv[0]))
        items = [f"{name} {c['failing']}/{c['rows']}" for name, c in ranked[:_SLICES]]
        if len(ranked) > _SLICES:
            items.append(f"+{len(ranked) - _SLICES} more slices")
        head += wrap_items("failing rows by slice (failing/rows): ", items, width)
    tail: list[str] = []
    others = [("waived", counts["waived_rows"], verdict.waived), ("quarantined", counts["quarantined_rows"],
                                                                  verdict.quarantined)]
    for label, n, rows in others:
        if n:
            names = [f"{o.case_id}#{'-' if o.no_trial else o.trial}" for o in rows[:3]]
            more = [f"+{n - len(names)} more"] if n > len(names) else []
            tail += wrap_items(f"{label} rows ({n}): ", names + more, width)
    advisories = verdict.advisories
    for note in advisories[:3]:
        tail += wrap_items("advisory: ", note.split(" "), width, sep=" ")
    if len(advisories) > 3:
        tail.append(f"advisory: and {len(advisories) - 3} more (gate.json: advisories)")
    tail += footer
    failing = sorted(verdict.failing_rows, key=worst_key)
    if not failing:
        return head + tail
    budget = MAX_LINES - len(head) - len(tail) - len(_title(len(failing), blocking, width, hint=True))
    body: list[str] = []
    shown = 0
    for o in failing[: len(failing) if show is None else show]:
        lines = row_lines(o, width)
        if show is None and shown and len(body) + len(lines) > budget:
            break  # the first row is always shown
        body += lines
        shown += 1
    return head + _title(shown, blocking, width) + body + tail


def _title(shown: int, blocking: int, width: int, *, hint: bool = False) -> list[str]:
    """``worst failing rows (10 of 117; --show N for more; --format json for all):``, wrapped; the hint when
    rows are left out (or ``hint``: the longest the title can be, for the line budget)."""
    hint = ["--show N for more", "--format json for all"] if hint or blocking > shown else []
    title = wrap_items("", [f"worst failing rows ({shown} of {blocking}", *hint], width - 2, indent="  ", sep="; ")
    title[-1] += "):"
    return title
