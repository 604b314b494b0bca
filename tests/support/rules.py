"""Helpers shared by the tests of ``tooleval.rules``: calls and messages written short, a dataset folder's traces
scored by the rules, and the rules a row broke."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from tooleval.dataset import load_dataset
from tooleval.models import Call, calls_from_messages
from tooleval.rules import evaluate_row, load_policy

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "datasets" / "examples"


def call(name: str, **args: Any) -> dict:
    """A reference call ``{"name", "args"}``."""
    return {"name": name, "args": args}


def calls(*items: dict) -> list[Call]:
    """:class:`Call` objects from ``{"name", "args"}`` dicts."""
    return [Call.from_raw(item["name"], item["args"]) for item in items]


def messages(user: str, *turns: Any) -> list[dict]:
    """A trajectory: ``turns`` are ``(call_dict, result)`` pairs (one assistant tool call each, ``result`` a dict
    as JSON text or a string such as ``"Error: ..."``), ``("assistant", text)`` or ``("user", text)``."""
    out: list[dict] = [{"role": "user", "content": user}]
    number = 0
    for turn in turns:
        if turn[0] in ("assistant", "user"):
            out.append({"role": turn[0], "content": turn[1]})
            continue
        made, result = turn
        number += 1
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{number}", "type": "function",
            "function": {"name": made["name"], "arguments": json.dumps(made["args"])}}]})
        out.append({"role": "tool", "tool_call_id": f"c{number}", "name": made["name"],
                    "content": result if isinstance(result, str) else json.dumps(result)})
    return out


def read_traces(folder: Path) -> list[dict]:
    path = folder / "traces.jsonl"
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    with gzip.open(folder / "traces.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def score_folder(folder: Path) -> list[dict]:
    """Rows (the columns the gate reads) for every recorded trace of a dataset folder, scored by
    :func:`tooleval.rules.evaluate_row` with the dataset's own ``[policy]``."""
    dataset = load_dataset(folder)
    tools = {spec.name: spec for spec in dataset.tools}
    policy = load_policy(folder)
    rows = []
    for line in read_traces(folder):
        case = dataset.cases[str(line["case_id"])]
        observed = calls_from_messages(line["messages"])
        result = evaluate_row(case, tools, line["messages"], observed, policy=policy)
        rows.append({"dataset_revision": dataset.revision, "case_id": case.case_id, "trial": line["trial"],
                     "slice": case.slice, "error_kind": None, "recorded_reward": (line.get("metadata") or {}).get("reward"),
                     **result.columns()})
    return rows


def rules_of(row: dict, severity: str | None = None) -> list[str]:
    """The rule names of a row's violations, in report order (optionally of one severity)."""
    return [v["rule"] for v in row["violations"] if severity is None or v["severity"] == severity]
