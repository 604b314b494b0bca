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
from tooleval.capture.recorded import (TraceLine, iter_json_lines, iter_trace_lines, line_problem, read_trace_bytes,
                                       redaction_error, trace_key)

__all__ = ["ReplayAgentConfig", "WorkItem", "replay_generate", "replay_lines"]


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
            encode: Callable[[dict[str, Any]], str] | None) -> dict[str, Any]:
    """The generation record of one trace line (see :func:`replay_generate`): its payload as ``encode`` writes it
    (redaction; default :func:`tooleval.canonical.dumps_text`), or its row's error when the line is not a valid
    trace or its values cannot be written (text it cannot write as UTF-8, a number without canonical JSON, nesting
    beyond Python's recursion limit), instead of stopping the shard."""
    error, _ = line_problem(path, line, key)
    if error is None:
        try:
            payload = encode(line.data) if encode else dumps_text(line.data)
        except (ValueError, RecursionError) as exc:  # UnicodeError is a ValueError
            error = redaction_error(key, exc, f"line {line.line} of {path}", str(path), line.line)
        else:
            return {"case_id": key[0], "trial": key[1], "seed": seed, "payload_json": payload, "error": None}
    return {"case_id": key[0], "trial": key[1], "seed": seed, "payload_json": None, "error": error}


_READ_RUN = 8 << 20
"""Bytes read at once from a run of nearby lines (a shard's lines follow one another in the file: one read, then
split, instead of a seek and a read per line)."""
_READ_GAP = 1 << 16
"""Bytes between two wanted lines up to which both are read in one run (the bytes between are read and dropped)."""
_READ_LINES = 256
"""Work items whose lines are read at a time: a batch's bytes stay a few MB even for 16 KB lines."""


def _changed(path: Path, key: tuple[str, int], where: str) -> Exception:
    from tooleval.errors import InputFileError

    return InputFileError(path, None, f"the traces file changed after the run was planned (case {key[0]!r} trial "
                          f"{key[1]} is no longer {where} the plan found it).",
                          "keep the file unchanged during a run, and run again (the plan reads it anew).")


def _raw_at(handle, spots: list[int]) -> dict[int, bytes]:
    """Byte offset -> the bytes of the line that starts there (its line end included), for ``spots``: nearby offsets
    read in runs (:data:`_READ_GAP`, :data:`_READ_RUN`), each run with one read, then split."""
    found: dict[int, bytes] = {}
    ordered = sorted(set(spots))
    index = 0
    while index < len(ordered):
        first = last = index
        while last + 1 < len(ordered) and ordered[last + 1] - ordered[last] <= _READ_GAP \
                and ordered[last + 1] - ordered[first] <= _READ_RUN:
            last += 1
        start = ordered[first]
        handle.seek(start)
        data = handle.read(ordered[last] - start) + handle.readline()
        find = data.find
        for offset in ordered[first:last + 1]:
            begin = offset - start
            end = find(b"\n", begin)
            found[offset] = data[begin:] if end < 0 else data[begin:end + 1]
        index = last + 1
    return found


def _lines_at(path: Path, items: list[WorkItem], offsets: list[tuple[int, ...]]) -> Iterator[TraceLine]:
    """The line of each of ``items``, in their order, read at its ``(byte offset, line number)`` a few hundred
    lines at a time (:func:`_raw_at`) and decoded (:func:`tooleval.capture.recorded.read_trace_bytes`), its key
    checked: the plan read only its key.

    Raises:
        tooleval.errors.InputFileError: a planned line is no longer at its offset (the file changed).
    """
    with path.open("rb") as handle:
        for begin in range(0, len(items), _READ_LINES):
            wanted = offsets[begin:begin + _READ_LINES]
            raw = _raw_at(handle, [where[0] for where in wanted])
            for item, where in zip(items[begin:begin + _READ_LINES], wanted):
                line = read_trace_bytes(where[1], raw[where[0]])
                key = (item.case_id, item.trial)
                if line is None or trace_key(line.data) != key:
                    raise _changed(path, key, "where")
                yield line


def _lines_numbered(path: Path, items: list[WorkItem], offsets: list[tuple[int, ...]]) -> Iterator[TraceLine]:
    """The line of each of ``items``, in their order, from a file read from its start (a gzip file: no offsets to
    seek to) where the plan gave each item's line number: only those lines are decoded, each once, and the reading
    stops after the last of them (every other line is passed over as bytes).

    Raises:
        tooleval.errors.InputFileError: a planned line no longer holds its key (the file changed).
    """
    wanted: dict[int, tuple[str, int]] = {}
    for item, where in zip(items, offsets):
        wanted.setdefault(where[1], (item.case_id, item.trial))
    last = max(wanted)
    found: dict[tuple[str, int], TraceLine] = {}

    def parse(number: int, raw: bytes) -> Any:
        return read_trace_bytes(number, raw) if number in wanted else None

    for line in iter_json_lines(path, missing="traces file not found.", fix="check the --traces path.",
                                parse_line=parse):
        key = wanted[line.line]
        if trace_key(line.data) != key:
            break  # the file changed: named below
        found[key] = line
        if line.line == last:
            break
    for item in items:
        key = (item.case_id, item.trial)
        if key not in found:
            raise _changed(path, key, "on the line where")
        yield found[key]


def replay_lines(config: ReplayAgentConfig, items: list[WorkItem], offsets: list[tuple[int, int]] | None = None
                 ) -> tuple[Path, Iterator[TraceLine | None]]:
    """The traces file (this machine's copy) and the recorded line of each work item, in ``items`` order (a
    generator: a few hundred lines are held at a time), each decoded once and its key checked; ``None`` for an item
    the file does not answer (read from its start, without the plan's offsets).

    Args:
        config: Which traces file to replay.
        items: Work items; each must name a (case_id, trial) present in the file (the planner guarantees it).
        offsets: ``(byte offset, line number)`` of each item's line (from the plan's index); ``None`` or an offset
            of -1 (a gzip file) reads the file from the start until every item is found.

    Raises:
        tooleval.errors.InputFileError: (while iterating) the file became unreadable, or (read at the plan's
            offsets) no longer holds a planned line: the file changed after the plan (exit 2, nothing published).
    """
    path = Path(config.traces_path)
    if "://" in config.traces_path:  # --traces s3://…: this machine's copy of the object
        from tooleval.storage import local_copy

        path = local_copy(config.traces_path)
    if offsets is not None and all(where[0] >= 0 for where in offsets):
        return path, _lines_at(path, items, offsets)
    if offsets is not None and offsets and all(where[1] > 0 for where in offsets):
        return path, _lines_numbered(path, items, offsets)
    return path, _lines_scanned(path, items)


def _lines_scanned(path: Path, items: list[WorkItem]) -> Iterator[TraceLine | None]:
    """:func:`replay_lines` of a file read from its start until every item is found (a gzip file, or no offsets); a
    line naming no row is passed over, as planned."""
    wanted = {(item.case_id, item.trial) for item in items}
    found: dict[tuple[str, int], TraceLine] = {}
    for line in iter_trace_lines(path, keep_unreadable=True):
        key = trace_key(line.data)
        if key not in wanted or key in found:
            continue
        found[key] = line
        if len(found) == len(wanted):
            break
    for item in items:
        yield found.get((item.case_id, item.trial))


def replay_generate(
    config: ReplayAgentConfig,
    items: list[WorkItem],
    offsets: list[tuple[int, int]] | None = None,
    encode: Callable[[dict[str, Any]], str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Look up the recorded response of each work item, one at a time (a generator: a shard's records are made as
    the caller asks for them; :func:`replay_lines` reads the lines).

    Args:
        config: Which traces file to replay.
        items: Work items; each must name a (case_id, trial) present in the file (the planner guarantees it).
        offsets: ``(byte offset, line number)`` of each item's line (from the plan's index); ``None`` or an offset
            of -1 (a gzip file) reads the file from the start until every item is found.
        encode: Turns each parsed trace into its payload text (redaction:
            :meth:`tooleval.capture.redaction.Redactor.redact_trace_text`), so a line is decoded and encoded once;
            default :func:`tooleval.canonical.dumps_text`.

    Raises:
        tooleval.errors.InputFileError: the file became unreadable, or (read at the plan's offsets) no longer
            holds a planned line: the file changed after the plan (exit 2, nothing published).

    Yields:
        Generation records ``{case_id, trial, seed, payload_json, error}`` in ``items`` order; ``payload_json``
        is the recorded trace line (JSON text); ``error`` is set when the line is not a valid recorded trace, and
        ``payload_json`` is null as well when the line holds what no row can keep
        (:func:`tooleval.capture.recorded.trace_line_problem`).
    """
    path, lines = replay_lines(config, items, offsets)
    for item, line in zip(items, lines):
        key = (item.case_id, item.trial)
        if line is None:
            yield {"case_id": item.case_id, "trial": item.trial, "seed": item.seed, "payload_json": None,
                   "error": f"generation_error: no recorded response for case {item.case_id!r} trial {item.trial}"}
            continue
        yield _record(path, line, key, item.seed, encode)
