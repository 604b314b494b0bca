"""The replay agent: answers each (case, trial) with the response recorded in a traces file.

It plays the role of inspect_ai's deterministic ``mockllm``: registered like a real agent, same stage, same cache
key shape (case content digest, agent config digest, trial, seed), so the pipeline behind it is exercised exactly
as for a live agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from tooleval.capture.recorded import (TraceLine, iter_trace_lines, parse_trace, read_trace_line,
                                       trace_line_problem)
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
    trace_digest: str | None = None
    """Replay: sha256 (32 hex) of the recorded trace line's bytes, so a shard's cache key follows the content of
    its own lines, not the digest of the whole file (issue 9 item 6)."""


def _lines_at(path: Path, offsets: list[int], numbers: list[int]) -> Iterator[TraceLine]:
    """The trace lines that start at ``offsets`` (bytes; ``numbers`` are their 1-based line numbers), in file
    order (one pass, seeking forward), read like :func:`tooleval.capture.recorded.iter_trace_lines` reads them."""
    with path.open("rb") as handle:
        for offset, number in sorted(zip(offsets, numbers)):
            handle.seek(offset)
            line = read_trace_line(number, handle.readline().decode("utf-8"))
            if line is not None and isinstance(line.data, dict):  # the plan checked every line already
                yield line


def replay_generate(
    config: ReplayAgentConfig,
    items: list[WorkItem],
    offsets: list[tuple[int, int]] | None = None,
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Look up the recorded response of each work item.

    Args:
        config: Which traces file to replay.
        items: Work items; each must name a (case_id, trial) present in the file (the planner guarantees it).
        offsets: ``(byte offset, line number)`` of each item's line (from the plan's index); ``None`` or an
            offset of -1 (a gzip file) reads the file from the start until every item is found.
        transform: Applied to each parsed trace before it is serialised (redaction), so a line is decoded and
            encoded once.

    Raises:
        tooleval.errors.InputFileError: the file became unreadable, or (read at the plan's offsets) no longer
            holds a planned line: the file changed after the plan (exit 2, nothing published).

    Returns:
        Generation records ``{case_id, trial, seed, payload_json, error}`` in ``items`` order; ``payload_json``
        is the recorded trace line (JSON text); ``error`` is set when the line is not a valid recorded trace, and
        ``payload_json`` is null as well when the line holds what no row can keep
        (:func:`tooleval.capture.recorded.trace_line_problem`).
    """
    wanted = {(item.case_id, item.trial): item for item in items}
    found: dict[tuple[str, int], dict[str, Any]] = {}
    path = Path(config.traces_path)
    if "://" in config.traces_path:  # --traces s3://…: this machine's copy of the object
        from tooleval.storage._machine import local_copy

        path = local_copy(config.traces_path)
    direct = offsets is not None and all(offset >= 0 for offset, _ in offsets)
    lines = _lines_at(path, *zip(*offsets)) if direct and offsets else iter_trace_lines(path)
    for line in lines:
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
            "payload_json": None if problem is not None else json.dumps(transform(line.data) if transform else line.data,
                                                                        ensure_ascii=False),
            "error": error,
        }
        if len(found) == len(wanted):
            break
    missing = [key for key in wanted if key not in found]
    if direct and missing:  # the planner saw each of these keys at its offset: the file changed since the plan
        from tooleval.errors import InputFileError

        case_id, trial = missing[0]
        raise InputFileError(path, None, f"the traces file changed after the run was planned (case {case_id!r} "
                             f"trial {trial} is no longer where the plan found it).",
                             "keep the file unchanged during a run, and run again (the plan reads it anew).")
    records = []
    for key, item in wanted.items():
        records.append(
            found.get(key)
            or {"case_id": item.case_id, "trial": item.trial, "seed": item.seed, "payload_json": None,
                "error": f"generation_error: no recorded response for case {item.case_id!r} trial {item.trial}"}
        )
    return records
