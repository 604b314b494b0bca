"""The replay agent: answers each (case, trial) with the response recorded in a traces file.

It plays the role of inspect_ai's deterministic ``mockllm``: registered like a real agent, same stage, same cache
key shape (case content digest, agent config digest, trial, seed), so the pipeline behind it is exercised exactly
as for a live agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from pydantic import BaseModel, ConfigDict

from tooleval.canonical import dumps_text
from tooleval.capture.recorded import (TraceLine, iter_json_lines, iter_trace_lines, parse_trace,
                                       plainly_recorded_trace, read_trace_bytes, trace_key, trace_line_problem)
from tooleval.errors import RowError

__all__ = ["ReplayAgentConfig", "WorkItem", "as_text_record", "replay_generate"]


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
    its own lines, not the digest of the whole file: a traces file that grows by a few lines keeps every other
    shard's cached generation."""


def _record(path: Path, line: TraceLine, key: tuple[str, Any], seed: int,
            encode: Callable[[dict[str, Any]], str] | None, keep_values: bool = False) -> dict[str, Any]:
    """The generation record of one trace line (see :func:`replay_generate`): the one place a replayed line is
    validated (the plan read only its key)."""
    problem = trace_line_problem(line)
    kind = line.kind
    if problem is None and not plainly_recorded_trace(line):  # the shape alone rarely leaves a doubt
        trace = parse_trace(path, line)
        if isinstance(trace, RowError):  # a field of the wrong type or range: the row carries the error
            problem, kind = trace.message, trace.kind
    if problem is not None:  # the row's message names the file and line, as an errors.json entry would
        error = str(RowError(kind, key[0], key[1], f"{problem} (line {line.line} of {path})", str(path),
                             line.line))
        return {"case_id": key[0], "trial": key[1], "seed": seed, "payload_json": None, "error": error}
    return _payload_record(line.data, key, seed, encode, f"line {line.line} of {path}", str(path), line.line,
                           keep_values)


def _payload_record(data: dict[str, Any], key: tuple[str, Any], seed: int,
                    encode: Callable[[dict[str, Any]], str | dict[str, Any]] | None, where: str,
                    path: str | None = None,
                    line: int | None = None, keep_values: bool = False) -> dict[str, Any]:
    """The record of a trace whose payload ``encode`` makes (redaction); a value it cannot process (text it cannot
    write as UTF-8, a number without canonical JSON, nesting beyond Python's recursion limit) makes that row's
    error instead of stopping the shard. ``keep_values`` without ``encode``, or an ``encode`` that returns JSON
    values rather than text: the decoded (or encoded) values are the record's ``payload``, for a reader in the same
    process that would only decode the text again (:func:`as_text_record` gives the record of the text)."""
    if keep_values and encode is None:
        return {"case_id": key[0], "trial": key[1], "seed": seed, "payload": data, "payload_json": None,
                "error": None, "source": (where, path, line)}
    try:
        payload = encode(data) if encode else dumps_text(data)
        if isinstance(payload, dict):  # an encoding to values (redaction for trace capture): kept as they are
            return {"case_id": key[0], "trial": key[1], "seed": seed, "payload": payload, "payload_json": None,
                    "error": None, "source": (where, path, line)}
    except (ValueError, RecursionError) as exc:  # UnicodeError is a ValueError
        error = str(RowError("bad_trace", key[0], key[1], f"the trace cannot be redacted: "
                             f"{type(exc).__name__}: {exc} ({where})", path, line))
        return {"case_id": key[0], "trial": key[1], "seed": seed, "payload_json": None, "error": error}
    return {"case_id": key[0], "trial": key[1], "seed": seed, "payload_json": payload, "error": None}


def as_text_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record made with ``keep_values`` (its ``payload`` the decoded line) as the record the default encoding
    makes of it: the payload written as text, or the row's error when its values cannot be written (nesting beyond
    Python's recursion limit), for a reader that could not take the values as they are."""
    where, path, line = record["source"]
    return _payload_record(record["payload"], (record["case_id"], record["trial"]), record["seed"], None, where,
                           path, line)


_READ_BUFFER = 1 << 20
"""Bytes read ahead at a time: a shard's lines follow one another in the file, and a multi-turn line (~16 KB) read
through the default 8 KB buffer after a seek cost ~3x as much (measured on tau lines)."""


def _records_at(path: Path, items: list[WorkItem], offsets: list[tuple[int, ...]],
                encode: Callable[[dict[str, Any]], str] | None, keep_values: bool = False
                ) -> Iterator[dict[str, Any]]:
    """The records of ``items``, in their order, each read from its line at its ``(byte offset, line number)`` the
    moment it is asked for (a shard's records are never all held at once). Each line is decoded and validated here,
    once (:func:`tooleval.capture.recorded.read_trace_bytes`, then :func:`_record`): the plan read only its key.

    Raises:
        tooleval.errors.InputFileError: a planned line is no longer at its offset (the file changed).
    """
    first: dict[tuple[str, int], tuple[WorkItem, int, int]] = {}
    for item, where in zip(items, offsets):
        first.setdefault((item.case_id, item.trial), (item, where[0], where[1]))
    with path.open("rb", buffering=_READ_BUFFER) as handle:
        for key, (item, offset, number) in first.items():
            handle.seek(offset)
            line = read_trace_bytes(number, handle.readline())
            if line is None or trace_key(line.data) != key:
                from tooleval.errors import InputFileError

                raise InputFileError(path, None, f"the traces file changed after the run was planned (case "
                                     f"{key[0]!r} trial {key[1]} is no longer where the plan found it).",
                                     "keep the file unchanged during a run, and run again (the plan reads it anew).")
            yield _record(path, line, key, item.seed, encode, keep_values)


def _records_numbered(path: Path, items: list[WorkItem], offsets: list[tuple[int, ...]],
                      encode: Callable[[dict[str, Any]], str] | None, keep_values: bool = False
                      ) -> Iterator[dict[str, Any]]:
    """The records of ``items``, in their order, from a file read from its start (a gzip file: no offsets to seek
    to) where the plan gave each item's line number: only those lines are decoded, each once, and the reading
    stops after the last of them (every other line is passed over as bytes).

    Raises:
        tooleval.errors.InputFileError: a planned line no longer holds its key (the file changed).
    """
    wanted: dict[int, tuple[tuple[str, int], WorkItem]] = {}
    for item, where in zip(items, offsets):
        wanted.setdefault(where[1], ((item.case_id, item.trial), item))
    last = max(wanted)
    found: dict[tuple[str, int], dict[str, Any]] = {}

    def parse(number: int, raw: bytes) -> Any:
        return read_trace_bytes(number, raw) if number in wanted else None

    for line in iter_json_lines(path, missing="traces file not found.", fix="check the --traces path.",
                                parse_line=parse):
        key, item = wanted[line.line]
        if trace_key(line.data) != key:
            break  # the file changed: named below
        found[key] = _record(path, line, key, item.seed, encode, keep_values)
        if line.line == last:
            break
    for key in dict.fromkeys((item.case_id, item.trial) for item in items):
        if key not in found:
            from tooleval.errors import InputFileError

            raise InputFileError(path, None, f"the traces file changed after the run was planned (case {key[0]!r} "
                                 f"trial {key[1]} is no longer on the line where the plan found it).",
                                 "keep the file unchanged during a run, and run again (the plan reads it anew).")
        yield found.pop(key)


def replay_generate(
    config: ReplayAgentConfig,
    items: list[WorkItem],
    offsets: list[tuple[int, int]] | None = None,
    encode: Callable[[dict[str, Any]], str] | None = None,
    keep_values: bool = False,
) -> Iterator[dict[str, Any]]:
    """Look up the recorded response of each work item, one at a time (a generator: read at the plan's offsets,
    a shard's records are made as the stage writer asks for them, never all held at once).

    Args:
        config: Which traces file to replay.
        items: Work items; each must name a (case_id, trial) present in the file (the planner guarantees it).
        offsets: ``(byte offset, line number)`` of each item's line (from the plan's index); ``None`` or an offset
            of -1 (a gzip file) reads the file from the start until every item is found.
        encode: Turns each parsed trace into its payload text (redaction:
            :meth:`tooleval.capture.redaction.Redactor.redact_trace_text`), so a line is decoded and encoded once;
            default :func:`tooleval.canonical.dumps_text`.
        keep_values: Without ``encode``, hand each decoded line over as the record's ``payload`` (its JSON values)
            instead of writing it as text: for trace capture, which builds the envelope from the values at once.

    Raises:
        tooleval.errors.InputFileError: the file became unreadable, or (read at the plan's offsets) no longer
            holds a planned line: the file changed after the plan (exit 2, nothing published).

    Yields:
        Generation records ``{case_id, trial, seed, payload_json, error}`` in ``items`` order; ``payload_json``
        is the recorded trace line (JSON text); ``error`` is set when the line is not a valid recorded trace, and
        ``payload_json`` is null as well when the line holds what no row can keep
        (:func:`tooleval.capture.recorded.trace_line_problem`).
    """
    path = Path(config.traces_path)
    if "://" in config.traces_path:  # --traces s3://…: this machine's copy of the object
        from tooleval.storage import local_copy

        path = local_copy(config.traces_path)
    if offsets is not None and all(where[0] >= 0 for where in offsets):
        yield from _records_at(path, items, offsets, encode, keep_values)
        return
    if offsets is not None and offsets and all(where[1] > 0 for where in offsets):
        yield from _records_numbered(path, items, offsets, encode, keep_values)
        return
    wanted = {(item.case_id, item.trial): item for item in items}
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for line in iter_trace_lines(path, keep_unreadable=True):  # a gzip file, or no offsets: read from the start
        key = trace_key(line.data)  # until all are found; a line naming no row is passed over, as planned
        if key not in wanted or key in found:
            continue
        found[key] = _record(path, line, key, wanted[key].seed, encode, keep_values)
        if len(found) == len(wanted):
            break
    for key, item in wanted.items():
        yield (found.get(key)
               or {"case_id": item.case_id, "trial": item.trial, "seed": item.seed, "payload_json": None,
                   "error": f"generation_error: no recorded response for case {item.case_id!r} trial {item.trial}"})
