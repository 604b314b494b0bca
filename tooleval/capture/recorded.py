"""Reading recorded traces files (DESIGN.md "Recorded traces"): JSON lines, optionally gzip-compressed.

A line that is not JSON makes the whole file unreadable (:class:`~tooleval.errors.InputFileError`, exit 2,
nothing written). A line that is JSON but not a valid recorded trace is a row-level problem: it is reported as a
:class:`~tooleval.errors.RowError` and the batch goes on.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from pydantic import ValidationError

from tooleval.errors import InputFileError, RowError
from tooleval.models import RecordedTrace

__all__ = ["TraceLine", "TraceIndex", "iter_json_lines", "iter_trace_lines", "index_traces", "file_digest"]


@dataclass(frozen=True)
class TraceLine:
    """One JSON line of a traces file, with its 1-based line number."""

    line: int
    data: dict


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (64 hex)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def iter_json_lines(path: Path, *, missing: str, fix: str) -> Iterator[TraceLine]:
    """Yield every non-blank line of a JSON-lines file (``.gz`` read as gzip) as parsed JSON, with its number.

    Args:
        path: The file.
        missing: Problem text when the file does not exist.
        fix: Fix text when the file does not exist.

    Raises:
        InputFileError: the file is missing, not gzip/UTF-8, or a line is not JSON (file, line and column named).
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    data = json.loads(text.rstrip())
                except json.JSONDecodeError as exc:
                    raise InputFileError(
                        path, number, f"not valid JSON ({exc.msg}, column {exc.colno}).", "repair or remove that line."
                    )
                yield TraceLine(number, data)
    except FileNotFoundError:
        raise InputFileError(path, None, missing, fix)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputFileError(path, None, f"cannot read the file ({exc}).", "pass a .jsonl or .jsonl.gz file.")


def iter_trace_lines(path: Path) -> Iterator[TraceLine]:
    """Yield every non-blank line of a traces file as a parsed JSON object.

    Raises:
        InputFileError: the file is missing, not gzip/UTF-8, or a line is not a JSON object.
    """
    for line in iter_json_lines(path, missing="traces file not found.", fix="check the --traces path."):
        if not isinstance(line.data, dict):
            raise InputFileError(path, line.line, "a trace line must be a JSON object.",
                                 "see the README's 'Datasets' section for the recorded trace format.")
        yield line


@dataclass
class TraceIndex:
    """Which (case_id, trial) keys a traces file holds, and which lines were unusable."""

    path: Path
    digest: str
    keys: dict[tuple[str, int], int] = field(default_factory=dict)
    """(case_id, trial) -> line number of the line that holds it."""
    errors: list[RowError] = field(default_factory=list)
    has_requests: bool = False
    """Whether any valid line records its generation request (``request``)."""


def parse_trace(path: Path, line: TraceLine) -> RecordedTrace | RowError:
    """Validate one line as a :class:`RecordedTrace`; a :class:`RowError` (``bad_trace``) when it is not one."""
    try:
        return RecordedTrace.model_validate(line.data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        case_id = line.data.get("case_id")
        trial = line.data.get("trial")
        return RowError(
            "bad_trace",
            None if case_id is None else str(case_id),
            trial if isinstance(trial, int) else None,
            f"not a recorded trace: {where}: {err['msg']}",
            str(path),
            line.line,
        )


def index_traces(path: Path) -> TraceIndex:
    """Scan a traces file once: digest, keys and unusable lines (duplicate keys, invalid traces).

    Raises:
        InputFileError: see :func:`iter_trace_lines`.
    """
    index = TraceIndex(path=path, digest=file_digest(path))
    for line in iter_trace_lines(path):
        trace = parse_trace(path, line)
        if isinstance(trace, RowError):
            index.errors.append(trace)
            continue
        key = (trace.case_id, trace.trial)
        index.has_requests = index.has_requests or trace.request is not None
        if key in index.keys:
            index.errors.append(
                RowError(
                    "bad_trace",
                    trace.case_id,
                    trace.trial,
                    f"duplicate (case_id, trial); the line {index.keys[key]} copy is used",
                    str(path),
                    line.line,
                )
            )
            continue
        index.keys[key] = line.line
    return index
