"""Dataset folders written on the spot, the tiny dataset most flow tests run, and the handed cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.support.paths import BUNDLED, GOLDEN


def write_dataset(
    folder: Path,
    cases: list[dict],
    traces: list[dict] | None,
    *,
    revision: str = "r1",
    name: str = "tiny",
) -> Path:
    """Write a dataset folder (dataset.json, cases.jsonl, traces.jsonl) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "revision": revision, "schema_version": 1, "description": None, "license": None,
                "source": None}
    (folder / "dataset.json").write_text(json.dumps(manifest))
    (folder / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    if traces is not None:
        (folder / "traces.jsonl").write_text("".join(json.dumps(trace) + "\n" for trace in traces))
    return folder


def tool_call(name: str, arguments: str) -> dict:
    """An OpenAI chat-completions tool call with argument text."""
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def trace(case_id: str, trial: int, calls: list[dict], reward: float | None = None) -> dict:
    """A recorded trace line whose assistant made ``calls``."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    line = {"case_id": case_id, "trial": trial, "agent": {"name": "test-agent", "version": "1", "model": "m"},
            "messages": messages}
    if reward is not None:
        line["metadata"] = {"reward": reward}
    return line


TINY_CASES = [
    {"case_id": "A", "input": "refund A", "expected_calls": [{"name": "get_order", "args": {"id": "A"}},
                                                            {"name": "refund", "args": {"id": "A", "cents": 9800}}]},
    {"case_id": "B", "input": "look up B", "expected_calls": [{"name": "get_order", "args": {"id": "B"}}]},
    {"case_id": "C", "input": "say hi", "expected_calls": []},
]
"""The tiny dataset's three cases (the conftest's ``tiny_dataset`` fixture writes them with :data:`TINY_TRACES`)."""

TINY_TRACES = [
    # A: exact (250.0 style integral float equals int)
    trace("A", 0, [tool_call("get_order", '{"id": "A"}'), tool_call("refund", '{"cents": 9800.0, "id": "A"}')], 1.0),
    # A trial 1: wrong amount -> tp 1, fp 1, fn 1, wrong_args [cents]
    trace("A", 1, [tool_call("get_order", '{"id": "A"}'), tool_call("refund", '{"id": "A", "cents": 8900}')], 0.0),
    # B: malformed argument text, kept raw
    trace("B", 0, [tool_call("get_order", '{"id": "B"')], 0.0),
    # C: correct abstention
    trace("C", 0, [], 1.0),
]
"""Four traces: an exact row, a wrong-argument row, a malformed call, an abstention."""


def handed_cases(kind: str) -> list[dict]:
    """The handed cases (a copy of ../shared/cases/handed.jsonl) of one kind."""
    with (GOLDEN / "handed.jsonl").open() as handle:
        return [case for case in map(json.loads, handle) if case["kind"] == kind]


CHANGED_CASE = ("2", 0)
"""The (case_id, trial) whose recorded trace differs between the bundled runs ``base`` and ``head`` (the
conftest's ``bundled_pair``)."""


def bundled_traces_with_exact_case(folder: Path, case_id: str, trial: int) -> Path:
    """A copy of the bundled traces in which ``case_id``'s trial ``trial`` makes exactly the expected calls."""
    cases = {c["case_id"]: c for c in map(json.loads, (BUNDLED / "cases.jsonl").read_text().splitlines())}
    lines = []
    with gzip.open(BUNDLED / "traces.jsonl.gz", "rt") as handle:
        for line in map(json.loads, handle):
            if (line["case_id"], line["trial"]) == (case_id, trial):
                calls = [tool_call(c["name"], json.dumps(c["args"])) for c in cases[case_id]["expected_calls"]]
                first_user = next(m for m in line["messages"] if m["role"] == "user")
                line["messages"] = [first_user, {"role": "assistant", "content": "", "tool_calls": calls}]
            lines.append(json.dumps(line))
    path = folder / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path
