"""The replay agent: answers each (case, trial) with the response recorded in a traces file.

It plays the role of inspect_ai's deterministic ``mockllm``: registered like a real agent, same stage, same cache
key shape (case content digest, agent config digest, trial, seed), so the pipeline behind it is exercised exactly
as for a live agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tooleval.capture.recorded import iter_trace_lines, parse_trace, trace_line_problem
from tooleval.errors import RowError

__all__ = ["ReplayAgentConfig", "WorkItem", "replay_generate"]


class ReplayAgentConfig(BaseModel):
    """Configuration of the replay agent. ``traces_digest`` (sha256 of the file) makes it content-addressed."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["replay"] = "replay"
    traces_path: str
    traces_digest: str


class WorkItem(BaseModel):
    """One generation to perform: a case (by id and content digest), a trial index and a seed."""

    model_config = ConfigDict(frozen=True)

    case_id: str
    case_digest: str
    trial: int
    seed: int


def replay_generate(config: ReplayAgentConfig, items: list[WorkItem]) -> list[dict[str, Any]]:
    """Look up the recorded response of each work item.

    Args:
        config: Which traces file to replay.
        items: Work items; each must name a (case_id, trial) present in the file (the planner guarantees it).

    Returns:
        Generation records ``{case_id, trial, seed, payload_json, error}`` in ``items`` order; ``payload_json``
        is the recorded trace line (JSON text); ``error`` is set when the line is not a valid recorded trace, and
        ``payload_json`` is null as well when the line holds what no row can keep
        (:func:`tooleval.capture.recorded.trace_line_problem`).
    """
    wanted = {(item.case_id, item.trial): item for item in items}
    found: dict[tuple[str, int], dict[str, Any]] = {}
    path = Path(config.traces_path)
    for line in iter_trace_lines(path):
        key = (str(line.data.get("case_id")), line.data.get("trial"))
        if key not in wanted or key in found:
            continue
        problem = trace_line_problem(line)
        trace = parse_trace(path, line) if problem is None else None
        error = str(trace) if isinstance(trace, RowError) else None
        if problem is not None:
            error = str(RowError("bad_trace", key[0], key[1], problem, str(path), line.line))
        found[key] = {
            "case_id": key[0],
            "trial": key[1],
            "seed": wanted[key].seed,
            "payload_json": None if problem is not None else json.dumps(line.data, ensure_ascii=False),
            "error": error,
        }
        if len(found) == len(wanted):
            break
    records = []
    for key, item in wanted.items():
        records.append(
            found.get(key)
            or {"case_id": item.case_id, "trial": item.trial, "seed": item.seed, "payload_json": None,
                "error": f"generation_error: no recorded response for case {item.case_id!r} trial {item.trial}"}
        )
    return records
