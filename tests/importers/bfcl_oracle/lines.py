"""Result lines generated and mutated from BFCL's own questions, for judging by BFCL's checker and by tooleval.

Every line is ``{key, category, kind, mode, id, result}`` where ``result`` is what a BFCL result file holds for the
question (``[{"<func>": "<JSON argument text>"}]``, text, or turns -> steps -> calls for multi-turn) and ``mode``
is ``fc`` (a function-calling model: names with ``_``) or ``prompt`` (a prompt model keeps BFCL's dotted names).
Kinds (each only where it applies to the question): ``correct``; ``alt`` (each acceptable alternative value);
``wrong_value``; ``extra_call``; ``missing_call``; ``reordered`` (parallel calls in reverse order);
``swapped`` (two calls of one tool exchange a value); ``int_in_float_array`` / ``float_for_integer`` /
``int_for_float`` (number types); ``explicit_empty``; ``omit_optional``; ``dotted`` (prompt mode); ``text``;
``malformed``; multi-turn ``split_steps``, ``extra_read``, ``extra_write``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

from tooleval.importers._bfcl import MULTI_TURN_DOCS, STATE_CHANGING
from tooleval.importers._bfcl_answers import parse_call_string, tool_name


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


_NONE = object()


def _first(values: list[Any]) -> Any:
    given = [v for v in values if v != ""]
    return given[0] if given else _NONE


def _materialise(value: Any) -> Any:
    """A listed value with nested alternatives resolved to their first choices."""
    if isinstance(value, dict):
        out = {}
        for key, alternatives in value.items():
            chosen = _first(alternatives if isinstance(alternatives, list) else [alternatives])
            if chosen is not _NONE:
                out[key] = _materialise(chosen)
        return out
    if isinstance(value, list):
        return [_materialise(v) for v in value]
    return value


def _correct_calls(truth: list[dict]) -> list[tuple[str, dict]]:
    calls = []
    for entry in truth:
        (name, params), = entry.items()
        args = {p: _materialise(_first(v)) for p, v in params.items() if _first(v) is not _NONE}
        calls.append((name, args))
    return calls


def _result(calls: list[tuple[str, dict]], *, dotted: bool = False) -> list[dict]:
    return [{(name if dotted else tool_name(name)): json.dumps(args)} for name, args in calls]


def _doc(question: dict, name: str) -> dict:
    return next((d for d in question["function"] if d["name"] == name), {})


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1001
    if isinstance(value, str):
        return value + " zzz"
    if isinstance(value, list):
        return [*value, "zzz"]
    if isinstance(value, dict):
        return {**value, "zzz": 1}
    return "zzz"


def single_turn(category: str, question: dict, answer: dict | None) -> Iterator[dict]:
    base = {"category": category, "id": question["id"], "mode": "fc"}
    if answer is None:  # irrelevance: no possible answer
        yield {**base, "kind": "text", "result": "I cannot do that with these tools."}
        yield {**base, "kind": "empty", "result": []}
        if not question["function"]:
            return
        doc = question["function"][0]
        params = (doc.get("parameters") or {}).get("properties") or {}
        yield {**base, "kind": "extra_call", "result": _result([(doc["name"], {p: 1 for p in list(params)[:1]})])}
        yield {**base, "kind": "malformed", "result": [{tool_name(doc["name"]): '{"x": 1'}]}
        return
    truth = answer["ground_truth"]
    calls = _correct_calls(truth)
    yield {**base, "kind": "correct", "result": _result(calls)}
    yield {**base, "kind": "text", "result": "Here is my answer in words."}
    yield {**base, "kind": "malformed", "result": [{tool_name(calls[0][0]): '{"broken": '}]}
    yield {**base, "kind": "extra_call", "result": _result([*calls, calls[0]])}
    yield {**base, "kind": "missing_call", "result": _result(calls[:-1])}
    if any("." in name for name, _ in calls):
        yield {**base, "kind": "dotted", "mode": "prompt", "result": _result(calls, dotted=True)}
    if len(calls) > 1:
        yield {**base, "kind": "reordered", "result": _result(calls[::-1])}
        names = [name for name, _ in calls]
        for i in range(len(calls)):
            j = next((j for j in range(i + 1, len(calls)) if names[j] == names[i]), None)
            if j is None:
                continue
            shared = [p for p in calls[i][1] if p in calls[j][1] and calls[i][1][p] != calls[j][1][p]]
            if shared:
                swapped = copy.deepcopy(calls)
                p = shared[0]
                swapped[i][1][p], swapped[j][1][p] = calls[j][1][p], calls[i][1][p]
                yield {**base, "kind": "swapped", "result": _result(swapped)}
                break
    alt = 0
    for index, entry in enumerate(truth):
        (name, params), = entry.items()
        doc = _doc(question, name)
        props = (doc.get("parameters") or {}).get("properties") or {}
        for param, values in params.items():
            given = [v for v in values if v != ""]
            for other in given[1:3]:
                changed = copy.deepcopy(calls)
                changed[index][1][param] = _materialise(other)
                alt += 1
                yield {**base, "kind": "alt", "result": _result(changed)}
            if given and index == 0 and "wrong" not in base:
                changed = copy.deepcopy(calls)
                changed[index][1][param] = _wrong(changed[index][1][param])
                base["wrong"] = True
                yield {**{k: v for k, v in base.items() if k != "wrong"}, "kind": "wrong_value",
                       "result": _result(changed)}
            if "" in values:
                changed = copy.deepcopy(calls)
                changed[index][1][param] = ""
                yield {**base, "kind": "explicit_empty", "result": _result(changed)}
                if param in changed[index][1] and given:
                    omitted = copy.deepcopy(calls)
                    omitted[index][1].pop(param, None)
                    yield {**base, "kind": "omit_optional", "result": _result(omitted)}
            kind = (props.get(param) or {}).get("type")
            value = calls[index][1].get(param)
            items = ((props.get(param) or {}).get("items") or {}).get("type")
            if kind in ("array", "tuple") and items == "float" and isinstance(value, list) and value and \
                    all(isinstance(v, float) and v.is_integer() for v in value):
                changed = copy.deepcopy(calls)
                changed[index][1][param] = [int(v) for v in value]
                yield {**base, "kind": "int_in_float_array", "result": _result(changed)}
            if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
                changed = copy.deepcopy(calls)
                changed[index][1][param] = float(value)
                yield {**base, "kind": "float_for_integer", "result": _result(changed)}
            if kind == "float" and isinstance(value, float) and value.is_integer():
                changed = copy.deepcopy(calls)
                changed[index][1][param] = int(value)
                yield {**base, "kind": "int_for_float", "result": _result(changed)}


def _docs(root: Path, classes: list[str]) -> dict[str, dict]:
    docs = {}
    for cls in classes:
        for doc in read_lines(root / "multi_turn_func_doc" / MULTI_TURN_DOCS[cls]):
            docs[doc["name"]] = doc
    return docs


def multi_turn(category: str, question: dict, answer: dict, root: Path) -> Iterator[dict]:
    base = {"category": category, "id": question["id"], "mode": "fc"}
    docs = _docs(root, question.get("involved_classes") or [])
    turns = [[parse_call_string(text, docs) for text in turn] for turn in answer["ground_truth"]]

    def steps(calls: list[dict]) -> list[list[dict]]:
        return [[{c["name"]: json.dumps(c["args"])} for c in calls]] if calls else []

    yield {**base, "kind": "correct", "result": [steps(t) for t in turns]}
    yield {**base, "kind": "split_steps", "result": [[[{c["name"]: json.dumps(c["args"])}] for c in t] for t in turns]}
    last = max((i for i, t in enumerate(turns) if t), default=None)
    if last is not None:
        missing = [list(t) for t in turns]
        missing[last] = missing[last][:-1]
        yield {**base, "kind": "missing_call", "result": [steps(t) for t in missing]}
        first = next(i for i, t in enumerate(turns) if t)
        call = turns[first][0]
        text_args = [k for k, v in call["args"].items() if isinstance(v, str)]
        if text_args:
            wrong = [list(t) for t in turns]
            wrong[first] = [{"name": call["name"], "args": {**call["args"], text_args[0]: call["args"][text_args[0]] + "_zzz"}},
                            *turns[first][1:]]
            yield {**base, "kind": "wrong_value", "result": [steps(t) for t in wrong]}
    empty = [i for i, t in enumerate(turns) if not t]
    if empty:
        # BFCL's runner skips a turn whose ground truth is empty: a call there (a read the conversation's ground
        # truth makes, so that the state the later turns check stays as it was) fails nothing
        again = next((c for t in turns for c in t if c["name"] not in STATE_CHANGING),
                     next(c for t in reversed(turns) for c in reversed(t)))
        made = [steps(t) if t else steps([again]) for t in turns]
        yield {**base, "kind": "call_in_empty_turn", "result": made}
    if len(turns) > 1:
        yield {**base, "kind": "ended_early", "result": [steps(t) for t in turns[:-1]]}
    if "GorillaFileSystem" in (question.get("involved_classes") or []):
        read = {"name": "pwd", "args": {}}
        yield {**base, "kind": "extra_read", "result": [steps([*t, read] if t else t) for t in turns]}
        write = {"name": "mkdir", "args": {"dir_name": "zzz_extra"}}
        yield {**base, "kind": "extra_write", "result": [steps([*t, write] if t else t) for t in turns]}


def generate(root: Path) -> list[dict]:
    """Every generated line for the BFCL data folder ``root``, keys numbered in order."""
    out: list[dict] = []
    for question_file in sorted(root.glob("BFCL_v4_*.json")):
        category = question_file.stem.removeprefix("BFCL_v4_")
        answers_path = root / "possible_answer" / question_file.name
        answers = {a["id"]: a for a in read_lines(answers_path)} if answers_path.exists() else {}
        for question in read_lines(question_file):
            answer = answers.get(question["id"])
            if "multi_turn" in category:
                made = multi_turn(category, question, answer, root)
            else:
                made = single_turn(category, question, answer)
            for line in made:
                line.pop("wrong", None)
                out.append({"key": len(out), **line})
    return out
