"""Reading recorded traces files (DESIGN.md "Recorded traces"): JSON lines, optionally gzip-compressed.

A line that is not JSON makes the whole file unreadable (:class:`~tooleval.errors.InputFileError`, exit 2,
nothing written). A line that is JSON but not a valid recorded trace is a row-level problem: it is reported as a
:class:`~tooleval.errors.RowError` and the batch goes on.

A line that is JSON but holds something no row can keep (issue 11) is row-level too: nesting deeper than
:data:`tooleval.canonical.MAX_DEPTH` (even 100,000 deep: Python's ``json`` raises ``RecursionError`` on it, which
is caught here), ``Infinity``/``NaN``/``1e999`` anywhere (``metadata.reward`` included), a lone surrogate
(``\ud800``) in any text. Its (case, trial) is still planned when the line names them, and that row is written
with the typed error ``bad_trace`` (:func:`trace_line_problem`); every other row is scored.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from pydantic import ValidationError

from tooleval import settings
from tooleval.canonical import json_value_problem, text_holds_no_value_problem
from tooleval.errors import InputFileError, RowError
from tooleval.models import RecordedTrace

__all__ = [
    "TraceLine", "TraceIndex", "iter_json_lines", "iter_trace_lines", "index_traces", "file_digest",
    "trace_line_problem",
]


@dataclass(frozen=True)
class TraceLine:
    """One JSON line of a traces file, with its 1-based line number."""

    line: int
    data: dict
    problem: str | None = None
    """Why the line cannot become a row (then ``data`` holds only what could be read: its case id and trial)."""
    plain: bool = False
    """The line's text alone proves :func:`~tooleval.canonical.json_value_problem` finds nothing in ``data``
    (:func:`~tooleval.canonical.text_holds_no_value_problem`, on a line the strict first reading parsed, so it holds
    no non-finite number), so :func:`trace_line_problem` does not walk it."""


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (64 hex)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


MAX_LINE_ENV = settings.MAX_LINE_ENV
DEFAULT_MAX_LINE_BYTES = settings.DEFAULT_MAX_LINE_BYTES
max_line_bytes = settings.max_line_bytes


def _decode(path: Path, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, number, f"not UTF-8 text (byte {exc.start + 1} of the line: "
                             f"{raw[exc.start:exc.start + 1]!r}).", "save the file as UTF-8.") from None


def parse_json_line(path: Path, number: int, text: str) -> object:
    """One line parsed as JSON.

    Raises:
        InputFileError: not JSON, or nested deeper than the parser allows (file and line named).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(
            path, number, f"not valid JSON ({exc.msg}, column {exc.colno}).", "repair or remove that line."
        ) from None
    except RecursionError:
        raise InputFileError(path, number, "nested too deeply to read (JSON arrays/objects inside each other "
                             "beyond Python's recursion limit).", "flatten or remove that line.") from None


def _raw_lines(handle, cap: int, chunk: int = 1 << 20) -> Iterator[bytes | None]:
    """The lines of a binary stream read in ``chunk``-sized pieces; ``None`` for a line longer than ``cap`` bytes
    (then the caller stops). Memory stays within one line plus one chunk, whatever the input."""
    parts: list[bytes] = []
    size = 0
    while block := handle.read(chunk):
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            size += end + 1 - start
            if size > cap:
                yield None
                return
            parts.append(block[start:end + 1])
            yield b"".join(parts)
            parts, size, start = [], 0, end + 1
        size += len(block) - start
        if size > cap:
            yield None
            return
        parts.append(block[start:])
    if parts and size:
        yield b"".join(parts)


def iter_json_lines(path: Path, *, missing: str, fix: str,
                    parse_line: Callable[[int, str], TraceLine | None] | None = None) -> Iterator[TraceLine]:
    """Yield every non-blank line of a JSON-lines file (``.gz`` read as gzip) as parsed JSON, with its number.

    Args:
        path: The file.
        missing: Problem text when the file does not exist.
        fix: Fix text when the file does not exist.
        parse_line: Reads one line ``(number, text)`` instead of ``json.loads``; returning ``None`` falls back to
            ``json.loads`` (the traces reader uses it to keep row-level problems row-level).

    Raises:
        InputFileError: the file is missing or not gzip; a line is longer than :func:`max_line_bytes`, not
            UTF-8, not JSON or nested too deeply (file and line named).
    """
    cap = max_line_bytes()
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(_raw_lines(handle, cap), start=1):
                if raw is None:
                    raise InputFileError(path, number, f"line longer than {cap} bytes (the cap against runaway "
                                         "or decompression-bomb input).", f"split the line, or raise the cap "
                                         f"with {MAX_LINE_ENV}=<bytes>.")
                text = _decode(path, number, raw)
                if not text.strip():
                    continue
                special = parse_line(number, text) if parse_line is not None else None
                if special is not None:
                    yield special
                    continue
                yield TraceLine(number, parse_json_line(path, number, text.rstrip()))
    except FileNotFoundError:
        raise InputFileError(path, None, missing, fix) from None
    except IsADirectoryError:
        raise InputFileError(path, None, "is a folder, not a file.", "pass the JSON-lines file itself.") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputFileError(path, None, f"not a readable gzip file ({exc}).",
                             "pass an intact .jsonl.gz file, or an uncompressed .jsonl without the .gz suffix.") from None
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the file ({exc.strerror or exc}).",
                             "check that it exists and is readable.") from None


_CASE_ID = re.compile(r'"case_id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
_TRIAL = re.compile(r'"trial"\s*:\s*(-?\d+)\b')


class _NotFinite(ValueError):
    """A number the strict first reading refuses (the line is then read as Python's ``json`` reads it)."""


def _refuse_constant(token: str) -> float:
    raise _NotFinite(token)


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):  # float() of a JSON number is never NaN
        raise _NotFinite(text)
    return value


_FINITE_NUMBERS = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)
"""Reads a line exactly as ``json.loads`` does (``float(text)`` for each float) but raises on ``NaN``,
``Infinity`` and a float out of range, so that no scan of the text is needed to rule them out (issue 9: a regular
expression over each ~1 KB bfcl line cost ~60 µs, more than the parse)."""


def _read_trace_line(number: int, text: str) -> TraceLine | None:
    """Read one traces-file line; a line Python's ``json`` cannot read for its depth becomes a :class:`TraceLine`
    with a problem (its case id and trial recovered from the first ``"case_id"`` and ``"trial"`` members of the
    text). ``None`` for a line that is not JSON: the reader reports that as a file error."""
    try:
        try:
            return TraceLine(number, _FINITE_NUMBERS.decode(text), plain=text_holds_no_value_problem(text))
        except _NotFinite:  # read it as Python's json does; trace_line_problem then names the number
            return TraceLine(number, json.loads(text), plain=False)
    except RecursionError:
        data: dict = {}
        case_id, trial = _CASE_ID.search(text), _TRIAL.search(text)
        if case_id is not None:
            data["case_id"] = str(json.loads(case_id.group(1)))
        if trial is not None:
            data["trial"] = int(trial.group(1))
        return TraceLine(number, data, "nested too deep for a JSON reader (Python's recursion limit)")
    except ValueError:
        return None


def trace_line_problem(line: TraceLine) -> str | None:
    """Why a traces-file line cannot become a scored row (see the module docstring), or ``None``."""
    if line.problem is not None:
        return line.problem
    return None if line.plain else json_value_problem(line.data)


def iter_trace_lines(path: Path) -> Iterator[TraceLine]:
    """Yield every non-blank line of a traces file as a parsed JSON object.

    A line nested too deep for Python's ``json`` is yielded with :attr:`TraceLine.problem` set (a row-level
    problem), not raised.

    Raises:
        InputFileError: the file is missing, not gzip/UTF-8, or a line is not a JSON object.
    """
    for line in iter_json_lines(path, missing="traces file not found.", fix="check the --traces path.",
                                parse_line=_read_trace_line):
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


def read_trace_line(number: int, text: str) -> TraceLine | None:
    """Read one traces-file line as :func:`iter_trace_lines` does (public for readers that seek to a line by its
    byte offset: the replay agent); ``None`` when the text is not JSON."""
    return _read_trace_line(number, text)


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

    A line with a row-level problem (:func:`trace_line_problem`) keeps its key when it names one: its row is
    written with the error by the replay agent.

    Raises:
        InputFileError: see :func:`iter_trace_lines`.
    """
    index = TraceIndex(path=path, digest=file_digest(path))
    for line in iter_trace_lines(path):
        if line.problem is not None and isinstance(line.data.get("trial"), int) and "case_id" in line.data:
            trace = RecordedTrace.model_construct(case_id=line.data["case_id"], trial=line.data["trial"])
        else:
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
