"""The peers ``tooleval bench`` measures beside tooleval, each over the same traces file:

* the floor: reading and decoding the traces file with the fastest JSON parser installed, nothing else;
* the loop a ragas user writes: build ragas messages per row, ``ToolCallF1().ascore`` per row;
* agentic-evals 0.9.0 ``evaluate_suite`` with the checks of seed 004's refund example (expected tools with
  arguments, forbidden tools, order) applied to each row.

Each function returns the rows it processed; the caller times it (the two peers warm, after an untimed pass:
:func:`tooleval.bench._run.time_warm`). The two peers take ``limit``: at a million rows agentic-evals alone runs for
about an hour (~250 rows/s), so ``tooleval bench`` measures the peers' rate on the corpus's first ``--peer-rows``
lines (a rate per row, the rows drawn the same way as the rest of the corpus).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["fastest_loads", "floor", "ragas_loop", "agentic_evals_loop", "read_references"]


def fastest_loads() -> tuple[str, Callable[[bytes], Any]]:
    """``(name, loads)`` of the fastest JSON parser installed: orjson, else msgspec, else the standard library."""
    try:
        import orjson

        return "orjson", orjson.loads
    except ImportError:
        pass
    try:
        import msgspec

        return "msgspec", msgspec.json.decode
    except ImportError:
        return "json", json.loads


def floor(traces: Path) -> int:
    """Read and decode every line of ``traces``; returns the line count."""
    _, loads = fastest_loads()
    count = 0
    with traces.open("rb") as handle:
        for line in handle:
            loads(line)
            count += 1
    return count


def read_references(dataset: Path) -> dict[str, list[dict]]:
    """``case_id -> expected calls`` of every case of ``dataset``'s ``cases.jsonl``: what a peer reads once per
    corpus before it scores any row (read again on every call; the loops keep one copy, :func:`_cases`)."""
    _, loads = fastest_loads()
    with (dataset / "cases.jsonl").open("rb") as handle:
        return {str(c["case_id"]): c.get("expected_calls") or [] for c in map(loads, handle)}


_REFERENCES: dict[str, dict[str, list[dict]]] = {}


def _cases(dataset: Path) -> dict[str, list[dict]]:
    """:func:`read_references`, read once per dataset and process: a peer loads its references once per corpus,
    and :func:`tooleval.bench._run.time_warm` charges that read to the corpus's rows, not to the timed ones."""
    key = str(dataset)
    if key not in _REFERENCES:
        _REFERENCES[key] = read_references(dataset)
    return _REFERENCES[key]


def _rows(dataset: Path, limit: int | None = None) -> Iterator[tuple[list[dict], list[tuple[str, Any]]]]:
    """(expected calls, observed (name, argument text)) per trace line, the first ``limit`` lines (all: None)."""
    _, loads = fastest_loads()
    cases = _cases(dataset)
    with (dataset / "traces.jsonl").open("rb") as handle:
        for number, line in enumerate(handle):
            if limit is not None and number >= limit:
                return
            trace = loads(line)
            observed = [(c["function"]["name"], c["function"].get("arguments"))
                        for m in trace["messages"] if m.get("role") == "assistant"
                        for c in m.get("tool_calls") or []]
            yield cases[str(trace["case_id"])], observed


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a key is repeated")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_unique_keys)
"""The standard library's reader held to RFC 8259, as the traces' format reads argument text: no ``NaN`` or
``Infinity``, no repeated key."""


def _args(text: Any) -> dict:
    """ragas' ``args`` for one observed call's argument text, read as the traces' format defines it: empty text,
    whitespace and the JSON text ``null`` mean ``{}``; text that is not one JSON object is a malformed call, given
    to ragas as ``{"__malformed__": <the text>}`` so it matches nothing and two equal texts are one call."""
    if isinstance(text, dict):
        return text
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    try:
        value = _DECODER.decode(text)
    except (TypeError, ValueError, RecursionError):
        return {"__malformed__": text}
    if value is None:
        return {}
    if isinstance(value, dict) and not _unwritable(value):
        return value
    return {"__malformed__": text}


_DEEPEST = 200
"""Deepest nesting of objects and lists the traces' format accepts in argument text."""


def _unwritable(value: Any) -> bool:
    """Whether a parsed value holds what no JSON or Parquet file can hold again, which the traces' format calls
    a malformed call: a number beyond a float's range (``1e999`` reads as ``inf``), a lone surrogate in a string
    or key (``"\\ud800"``), nesting deeper than :data:`_DEEPEST`."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return True
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, (dict, list)):
            if depth > _DEEPEST:
                return True
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return False


def ragas_loop(dataset: Path, limit: int | None = None, scores: list[float] | None = None) -> int:
    """What a ragas user writes: per row, ragas messages and ``await ToolCallF1().ascore(...)``; the first
    ``limit`` rows (all: None). ``scores``, when given, receives each row's ragas value in trace order (the
    product's ``ragas_tool_call_f1`` of the same row: the argument text is read as the traces' format says)."""
    import asyncio

    from ragas.messages import AIMessage, ToolCall
    from ragas.metrics.collections import ToolCallF1

    async def run() -> int:
        metric = ToolCallF1()
        count = 0
        for expected, observed in _rows(dataset, limit):
            message = AIMessage(content="", tool_calls=[ToolCall(name=n, args=_args(a)) for n, a in observed])
            reference = [ToolCall(name=c["name"], args=c.get("args") or {}) for c in expected]
            result = await metric.ascore(user_input=[message], reference_tool_calls=reference)
            if scores is not None:
                scores.append(float(result.value))
            count += 1
        return count

    return asyncio.run(run())


def agentic_evals_loop(dataset: Path, batch: int = 1000, limit: int | None = None) -> int:
    """agentic-evals ``evaluate_suite`` over every row, in suites of ``batch`` rows: each row is a test case with
    seed 004's checks — required tools and their order (the expected calls), expected tool arguments, forbidden
    tools (every tool of the dataset's tools.json that the row does not expect) — and a sample whose trace holds
    the observed calls; the first ``limit`` rows (all: None)."""
    from agentic_evals import (EvalSpan, EvalTrace, EvaluationSample, TestCase, TestSuite, default_registry,
                               evaluate_suite)

    tools_file = dataset / "tools.json"
    every_tool = sorted(t["name"] for t in json.loads(tools_file.read_text())) if tools_file.is_file() else []
    registry = default_registry()
    count = 0
    cases: list[Any] = []
    samples: list[Any] = []

    def flush() -> None:
        if cases:
            evaluate_suite(TestSuite(name="bench", version="1", cases=cases), samples, registry=registry)
            cases.clear()
            samples.clear()

    for expected, observed in _rows(dataset, limit):
        case_id = f"row-{count}"
        names = [c["name"] for c in expected]
        cases.append(TestCase(
            id=case_id, name=case_id, input="", required_tools=names, required_tool_order=names,
            expected_tool_arguments={c["name"]: c.get("args") or {} for c in expected},
            forbidden_tools=[t for t in every_tool if t not in names],
        ))
        spans = [EvalSpan(tool_name=n, attributes={"tool_args": _args(a)}) for n, a in observed]
        samples.append(EvaluationSample(case_id=case_id, output="", trace=EvalTrace(trace_id=case_id, spans=spans)))
        count += 1
        if len(cases) >= batch:
            flush()
    flush()
    return count
