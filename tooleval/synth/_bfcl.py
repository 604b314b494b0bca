"""The ``bfcl`` synthetic profile: single-call-heavy function-calling rows shaped like BFCL results.

Figures it follows (those of 25,725 real BFCL-style rows of 3,675 cases, which are not bundled): 7 trials per case;
1.17 expected and 1.05 observed calls per row; 30.6 % of rows expect no call and 28.3 % make none; 41 % of rows miss a
call, 36 % add one, 27 % have a same-name call with wrong arguments, 1.8 % repeat a call, 0.14 % hold malformed
argument text; ~1 KB per trace line.

How the rates are met (derivation, with ``p`` the share of rows that expect at least one call, 0.694):

* a row that expects nothing stays silent with probability 0.8, else makes one unrelated call
  (0.306 x 0.8 = 24.5 % silent rows);
* a row that expects calls makes none with probability 0.055 (0.694 x 0.055 = 3.8 %; with the above, 28.3 %);
* otherwise (65.6 % of rows) each event is drawn independently: wrong arguments on one expected call
  (``0.27 / 0.656 = 0.41``), one of several expected calls dropped (never the changed one nor a row's only
  call: 0.57 of the 46 % of these rows that expect two or more, so that missing = 3.8 % + 65.6 % x P(wrong or
  drop) = 41 %),
  an unrelated extra call (0.047), a repeated call (``0.018 / 0.656 = 0.027``), malformed argument text
  (``0.0014 / 0.656 = 0.0021``).

Expected call counts for rows that expect calls: 1 (54 %), 2 (28 %), 3 (13 %), 4 (5 %): mean 1.69, so
0.694 x 1.69 = 1.17 expected calls per row. Argument values include the equality edges where tooleval and ragas
differ on purpose: an integral float written ``10.0`` for ``10`` (equal for both) and ``1`` for ``true`` (equal
for ragas' Python equality, different for tooleval).
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator

__all__ = ["BFCL_TRIALS", "bfcl_tools", "bfcl_case", "bfcl_trace"]

BFCL_TRIALS = 7
"""Trials per case: 25,725 rows / 3,675 cases."""

_VERBS = ["get", "find", "list", "create", "update", "cancel", "search", "calculate", "convert", "send"]
_NOUNS = ["weather", "flight", "hotel", "order", "invoice", "stock_price", "route", "recipe", "ticket", "account",
          "exchange_rate", "calendar_event"]
_PARAMS: list[tuple[str, str]] = [
    ("city", "string"), ("date", "string"), ("count", "integer"), ("amount", "number"), ("unit", "string"),
    ("include_details", "boolean"), ("tags", "array"), ("user_id", "string"), ("limit", "integer"),
    ("currency", "string"), ("priority", "integer"), ("notify", "boolean"),
]
_WORDS = ["alpha", "berlin", "paris", "tokyo", "lima", "oslo", "delta", "metric", "imperial", "usd", "eur", "jpy",
          "blue", "green", "north", "south", "urgent", "weekly", "draft", "final"]

_P_NO_CALL_EXPECTED = 0.306
_P_SILENT_WHEN_NONE_EXPECTED = 0.8
_P_NONE_WHEN_EXPECTED = 0.055
_P_WRONG = 0.4116
_P_DROP = 0.57
_P_EXTRA = 0.047
_P_REPEAT = 0.0274
_P_MALFORMED = 0.00213
_EXPECTED_COUNTS = ([1, 2, 3, 4], [0.54, 0.28, 0.13, 0.05])


def bfcl_tools() -> list[dict[str, Any]]:
    """The profile's tool specs (``tools.json`` entries): every verb x noun, 2-4 typed parameters each."""
    tools = []
    for i, verb in enumerate(_VERBS):
        for j, noun in enumerate(_NOUNS):
            params = [_PARAMS[(i * 3 + j * 5 + k * 7) % len(_PARAMS)] for k in range(2 + (i + j) % 3)]
            properties = {name: {"type": kind} for name, kind in dict(params).items()}
            tools.append({
                "name": f"{verb}_{noun}",
                "description": f"{verb.title()} {noun.replace('_', ' ')} records.",
                "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
                "side_effect": "write" if verb in ("create", "update", "cancel", "send") else "read",
            })
    return tools


def _value(rng: random.Random, kind: str) -> Any:
    if kind == "integer":
        return rng.randint(1, 500)
    if kind == "number":
        return round(rng.uniform(1, 1000), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return rng.sample(_WORDS, 2)
    return rng.choice(_WORDS)


def _call(rng: random.Random, tool: dict[str, Any]) -> dict[str, Any]:
    props = tool["parameters"]["properties"]
    return {"name": tool["name"], "args": {name: _value(rng, spec["type"]) for name, spec in props.items()}}


def bfcl_case(rng: random.Random, case_id: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One case: a user question (padded to BFCL's length) and 0-4 expected calls."""
    expected = []
    if rng.random() >= _P_NO_CALL_EXPECTED:
        count = rng.choices(*_EXPECTED_COUNTS)[0]
        expected = [_call(rng, tool) for tool in rng.sample(tools, count)]
    words = " ".join(rng.choice(_WORDS) for _ in range(40))
    question = f"Please help with the following request ({case_id}): {words}."
    return {"case_id": case_id, "input": [{"role": "user", "content": question}], "expected_calls": expected,
            "slice": "bfcl_multiple" if len(expected) > 1 else "bfcl_simple" if expected else "bfcl_irrelevance"}


def _changed(rng: random.Random, call: dict[str, Any], tools_by_name: dict[str, dict]) -> dict[str, Any]:
    args = dict(call["args"])
    name = rng.choice(sorted(args))
    kind = tools_by_name[call["name"]]["parameters"]["properties"][name]["type"]
    value = args[name]
    while value == args[name] and type(value) is type(args[name]):
        value = _value(rng, kind)
    args[name] = value
    return {"name": call["name"], "args": args}


def _arguments_text(rng: random.Random, args: dict[str, Any]) -> str:
    """Argument JSON text; sometimes with an integral number written as a float or ``true`` written as ``1``."""
    edge = rng.random()
    if edge < 0.05:
        args = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in args.items()}
    elif edge < 0.08:
        args = {k: (1 if v is True else v) for k, v in args.items()}
    return json.dumps(args)


def _observed(rng: random.Random, expected: list[dict], tools: list[dict], tools_by_name: dict) -> Iterator[Any]:
    if not expected:
        if rng.random() >= _P_SILENT_WHEN_NONE_EXPECTED:
            yield _call(rng, rng.choice(tools))
        return
    if rng.random() < _P_NONE_WHEN_EXPECTED:
        return
    calls = list(expected)
    changed = None
    if rng.random() < _P_WRONG:
        changed = rng.randrange(len(calls))
        calls[changed] = _changed(rng, calls[changed], tools_by_name)
    if len(calls) > 1 and rng.random() < _P_DROP:  # a single expected call is never dropped: that is a silent row
        calls.pop(rng.choice([i for i in range(len(calls)) if i != changed]))
    if rng.random() < _P_EXTRA:
        calls.insert(rng.randrange(len(calls) + 1), _call(rng, rng.choice(tools)))
    if calls and rng.random() < _P_REPEAT:
        calls.append(rng.choice(calls))
    if calls and rng.random() < _P_MALFORMED:
        index = rng.randrange(len(calls))
        calls[index] = {"name": calls[index]["name"], "raw": json.dumps(calls[index]["args"])[:-1]}
    yield from calls


def bfcl_trace(rng: random.Random, case: dict[str, Any], trial: int, tools: list[dict],
               tools_by_name: dict[str, dict]) -> dict[str, Any]:
    """One recorded trace line for ``case``: the user turn, the assistant's calls, tool results, a final reply."""
    messages: list[dict[str, Any]] = list(case["input"])
    calls = list(_observed(rng, case["expected_calls"], tools, tools_by_name))
    if calls:
        tool_calls = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": c["raw"] if "raw" in c else _arguments_text(rng, c["args"])}}
            for i, c in enumerate(calls)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for i, c in enumerate(calls):
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "name": c["name"],
                             "content": json.dumps({"status": "ok", "result": rng.choice(_WORDS)})})
    messages.append({"role": "assistant", "content": "Done: " + " ".join(rng.choice(_WORDS) for _ in range(12))})
    return {"case_id": case["case_id"], "trial": trial,
            "agent": {"name": "synth-bfcl", "version": "1", "model": "synthetic"},
            "messages": messages, "metadata": {"reward": 1.0 if rng.random() < 0.5 else 0.0}}
