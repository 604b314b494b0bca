"""A row's verdict in a few lines a person reads in a failing test (no wall of JSON).

One line per finding, diff-style, under a headline that names the match mode::

    tool calls do not match (unordered): 1 with wrong arguments
      ~ issue_refund  amount: expected 49.99, got 499.9

``-`` an expected call never made, ``+`` a call made but not expected (repeats counted, ``x3``), ``~`` a call made
with other arguments (each differing path with both values), ``order`` the two call sequences when only their
order fails the mode, ``!`` a blocking rule violated, by name with its detail. Calls are written
``name(key=value, ...)`` with JSON values, cut at :data:`WIDTH` characters.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tooleval.canonical import MISSING, value_at
from tooleval.rules import MatchMode
from tooleval.storage import Row

__all__ = ["explain", "format_call", "WIDTH"]

WIDTH = 100
"""Longest call written (characters); a longer one ends in ``…``; a value is cut at 40, a rule's detail at twice
this width."""


def _cut(text: str, width: int = WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _value(value: Any) -> str:
    return "(absent)" if value is MISSING else _cut(json.dumps(value, ensure_ascii=False), 40)


def format_call(call: dict[str, Any]) -> str:
    """``name(key=value, ...)`` of a row's call struct (``{name, args_json, args_raw, parse_error}``); a malformed
    call shows its raw argument text, a call whose arguments were not captured says so."""
    if call.get("args_json") is None and call.get("parse_error") is None:
        return _cut(f"{call['name']}(<arguments not captured>)")
    if call.get("args_json") is None:
        return _cut(f"{call['name']}(<not a JSON object: {call.get('args_raw')!r}>)")
    args = json.loads(call["args_json"])
    inner = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items())
    return _cut(f"{call['name']}({inner})")


def _key(call: dict[str, Any]) -> tuple:
    return call["name"], call.get("args_json"), call.get("args_raw")


def _unpaired(calls: list[dict], paired: Counter) -> list[dict]:
    """``calls`` without those a wrong-argument pair already shows (each pair consumes one equal call)."""
    left, out = Counter(paired), []
    for call in calls:
        key = (call["name"], call.get("args_json"))
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(call)
    return out


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _extra_lines(extra: list[dict], observed: list[dict], reference: list[dict]) -> list[str]:
    """One ``+`` line per distinct extra call (``x n`` when repeated), saying whether it repeats an expected one."""
    made, expected = Counter(map(_key, observed)), Counter(map(_key, reference))
    lines = []
    for key, count in Counter(map(_key, extra)).items():
        call = next(c for c in extra if _key(c) == key)
        repeat = f" x{count}" if count > 1 else ""
        if call.get("args_json") is None and call.get("parse_error") is None:
            why = "no reference call of this tool was left to match by name"
        elif call.get("args_json") is None:
            why = "its arguments are not a JSON object"
        elif expected[key]:
            why = f"called {_times(made[key])}, expected {_times(expected[key])}"
        else:
            why = "not expected"
        lines.append(f"  + {format_call(call)}{repeat}  ({why})")
    return lines


def _wrong_lines(wrong: list[dict]) -> list[str]:
    lines = []
    for pair in wrong:
        expected, observed = json.loads(pair["expected_args_json"]), json.loads(pair["observed_args_json"])
        diffs = "; ".join(f"{path}: expected {_value(value_at(expected, path))}, got {_value(value_at(observed, path))}"
                          for path in pair["paths"])
        lines.append(f"  ~ {pair['name']}  {diffs}")
    return lines


def _sequence(calls: list[dict], by_name: bool) -> str:
    return ", ".join(c["name"] if by_name else format_call(c) for c in calls) or "(no calls)"


def explain(row: Row, mode: str, blocking: list[dict[str, Any]]) -> str:
    """The verdict of a scored row as text (see the module docstring).

    Args:
        row: The row (:class:`tooleval.storage.Row`).
        mode: Its ``match_mode`` label.
        blocking: Its violations with severity ``blocking``.

    Returns:
        Lines joined by newlines; the first says whether the calls match under ``mode``.
    """
    if row.error_kind is not None:
        return f"the trajectory could not be scored ({row.error_kind}): {row.error_message}"
    match_mode = MatchMode.from_label(mode)
    wrong = list(row.wrong_args or [])
    missing = _unpaired(list(row.missing_calls or []),
                        Counter((w["name"], w["expected_args_json"]) for w in wrong))
    extra = _unpaired(list(row.extra_calls or []), Counter((w["name"], w["observed_args_json"]) for w in wrong))
    observed, reference = list(row.observed_calls or []), list(row.reference_calls or row.expected_calls or [])
    counts_missing = match_mode.name != "subset"
    counts_extra = match_mode.name != "superset"
    parts, lines = [], []
    if counts_missing and missing:
        parts.append(f"{len(missing)} missing")
        lines += [f"  - {format_call(call)}  (expected, not called)" for call in missing]
    if counts_extra and extra:
        parts.append(f"{len(extra)} extra")
        lines += _extra_lines(extra, observed, reference)
    if wrong:
        parts.append(f"{len(wrong)} with wrong arguments")
        lines += _wrong_lines(wrong)
    if not row.calls_match and not parts:  # the calls are there; their order is not
        parts.append("the order differs")
        by_name = [c["name"] for c in reference] != [c["name"] for c in observed]
        lines += [f"  order: expected {_sequence(reference, by_name)}",
                  f"         observed {_sequence(observed, by_name)}"]
    if not counts_missing and missing:
        lines.append(f"  ({len(missing)} expected call(s) not made: allowed in {mode} mode)")
    if not counts_extra and extra:
        lines.append(f"  ({len(extra)} extra call(s): allowed in {mode} mode)")
    if row.calls_match and blocking:
        head = f"tool calls match ({mode}), but {len(blocking)} blocking rule(s) were violated"
    elif row.calls_match:
        head = f"tool calls match ({mode})"
    else:
        head = f"tool calls do not match ({mode}): {', '.join(parts)}"
    lines += [f"  ! {v['rule']}: {_cut(v['detail'], 2 * WIDTH)}" for v in blocking]
    return "\n".join([head, *lines])
