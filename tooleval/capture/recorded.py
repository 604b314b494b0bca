"""Reading recorded traces files (docs/design.md "Recorded traces"): JSON lines, optionally gzip-compressed.

One bad line never stops a run: every line is read on its own, and a line that cannot become a scored row is
reported with its file and line while every other line is scored. What a bad line becomes depends on what can
still be read of it:

* A line that is not a JSON object — not UTF-8, not JSON (truncated, say), or JSON of another type (an array, a
  string, a number, ``null``) — names no row: it is an ``errors.json`` entry of kind ``unreadable_trace``.
* An object whose key fields cannot be read — no usable ``case_id`` (a non-empty string, or an integer), or a
  ``trial`` that is not an integer in ``0..2**31 - 1`` (:data:`tooleval.models.TRIAL_MAX`: the trial is an int32
  column; ``true`` is not 1) — names no row either: an ``errors.json`` entry of kind ``bad_trace``
  (:func:`trace_key`).
* An object that repeats a key (``{"messages": [...], "messages": [...]}``: Python's ``json`` silently keeps
  the last) is a row with the error ``duplicate_key`` naming the key, or an ``errors.json`` entry when the repeated
  key is ``case_id`` or ``trial`` (then which row it answers is itself ambiguous).
* An object that holds something no row can keep, because the stored JSON text must be valid UTF-8 JSON that
  every later reader parses without hitting a recursion limit — nesting deeper than
  :data:`tooleval.canonical.MAX_DEPTH` (even 100,000 deep: Python's ``json`` raises ``RecursionError`` on it,
  which is caught here), ``Infinity``/``NaN``/``1e999`` anywhere (``metadata.reward`` included), a lone surrogate
  (``\ud800``) in any text — is a row with the error ``bad_trace`` (:func:`trace_line_problem`).
* Any other object that is not a valid recorded trace — its key readable, another field of the wrong type or out of
  its range (``"messages": 5``, ``"agent": 3``, a text ``metadata.reward``, an ``executions`` count past
  ``2**31 - 1``) — is a row with the error ``bad_trace`` naming the field, the file and the line
  (:func:`parse_trace`): the case is answered, by an error, and every other row is scored.

What stays a file error (:class:`~tooleval.errors.InputFileError`, exit 2, nothing written) is what concerns the
whole file: it is missing, not gzip, or a line is longer than :func:`max_line_bytes` (the cap against runaway
input, which stops reading).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import threading
import zlib
from array import array
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Iterator

import orjson
from pydantic import ValidationError

from tooleval import settings
from tooleval.canonical import (MAX_DEPTH, DuplicateKeyError, json_type_name, json_value_problem,
                                reject_duplicate_keys, repeated_key_at, repeated_keys, text_holds_no_value_problem)
from tooleval.errors import InputFileError, RowError, json_problem
from tooleval.models import TRIAL_MAX, RecordedTrace

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "TraceLine", "TraceIndex", "iter_json_lines", "iter_trace_lines", "index_traces", "file_digest",
    "trace_line_problem", "trace_key", "read_trace_line", "read_trace_bytes", "load_unique_json", "replay_keys",
    "decode_line", "fast_object", "plainly_recorded_trace", "plain_trace_shape", "line_problem", "redaction_error",
]


@dataclass(frozen=True)
class TraceLine:
    """One JSON line of a traces file, with its 1-based line number."""

    line: int
    data: dict
    problem: str | None = None
    """Why the line cannot become a scored row (then ``data`` holds what could be read: for a line too deep to
    parse, only its case id and trial; for a line that is not a JSON object, nothing)."""
    kind: str = "bad_trace"
    """The error kind of ``problem`` (:data:`tooleval.storage.ERROR_KINDS`): ``bad_trace``, ``duplicate_key`` or
    ``unreadable_trace`` (the line is not a JSON object)."""
    plain: bool = False
    """The reading proves :func:`~tooleval.canonical.json_value_problem` finds nothing in ``data``, so
    :func:`trace_line_problem` does not walk it: orjson read the line (it refuses non-finite numbers and lone
    surrogates) and its writing showed it nests at most :data:`~tooleval.canonical.MAX_DEPTH` levels
    (:func:`fast_object`), or the strict reading parsed it (no non-finite number) and
    :func:`~tooleval.canonical.text_holds_no_value_problem` holds."""
    written: bytes | None = field(default=None, repr=False, compare=False)
    """orjson's compact writing of ``data`` (inside a few list brackets) when orjson read the line
    (:func:`fast_object`): what was written to check the reading, kept so that the redaction's screen of the whole
    line (:meth:`tooleval.capture.redaction.Redactor.untouched_text`) need not write the values again."""


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


def decode_line(path: Path, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, number, f"not UTF-8 text (byte {exc.start + 1} of the line: "
                             f"{raw[exc.start:exc.start + 1]!r}).", "save the file as UTF-8.") from None


def parse_json_line(path: Path, number: int, text: str, *, unique_keys: bool = False) -> object:
    """One line parsed as JSON.

    Args:
        unique_keys: Refuse an object that repeats a key (:func:`load_unique_json`).

    Raises:
        InputFileError: not JSON, nested deeper than the parser allows, or (``unique_keys``) an object repeats a
            key (file and line named).
    """
    try:
        return load_unique_json(path, text, number) if unique_keys else json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(
            path, number, f"not valid JSON ({json_problem(exc)}).", "repair or remove that line."
        ) from None
    except RecursionError:
        raise InputFileError(path, number, "nested too deeply to read (JSON arrays/objects inside each other "
                             "beyond Python's recursion limit).", "flatten or remove that line.") from None


def load_unique_json(path: Path, text: str, line: int | None = None) -> object:
    """JSON ``text`` read from ``path`` as ``json.loads`` reads it, refusing an object that repeats a key: readers
    differ on which value counts (Python's ``json`` keeps the last one silently), so the file says two things at
    once.

    Args:
        path: The file, for messages.
        text: Its JSON text: one line of a JSON-lines file, or the whole file.
        line: The text's line number in the file; ``None`` when ``text`` is the whole file (lines are counted in it).

    Raises:
        json.JSONDecodeError: not JSON (the caller words it).
        RecursionError: nested deeper than Python's parser allows (the caller words it).
        InputFileError: an object repeats a key (naming the file, the line of the repeated key and the key).
    """
    try:
        return _UNIQUE_KEYS.decode(text)
    except DuplicateKeyError as exc:
        found = repeated_key_at(text)
        key, offset = found if found is not None else (exc.key, 0)
        number = line if line is not None else text.count("\n", 0, offset) + 1
        raise InputFileError(path, number, f"an object repeats the key {key!r} (JSON readers differ on which value "
                             "counts; Python's json keeps the last one silently).", "keep one of the two.") from None


_UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=reject_duplicate_keys)


def _raw_lines(handle, cap: int, chunk: int = 1 << 20, limit: int | None = None) -> Iterator[bytes | None]:
    """The lines of a binary stream read in ``chunk``-sized pieces; ``None`` for a line longer than ``cap`` bytes
    (then the caller stops). Memory stays within one line plus one chunk, whatever the input. ``limit``: read at
    most this many bytes from the stream's position (a byte range of a file that ends at a line's end)."""
    parts: list[bytes] = []
    size = 0
    remaining = -1 if limit is None else limit
    while remaining and (block := handle.read(chunk if remaining < 0 else min(chunk, remaining))):
        remaining = remaining - len(block) if remaining > 0 else remaining
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
                    parse_line: Callable[[int, bytes], TraceLine | None] | None = None,
                    unique_keys: bool = False, span: tuple[int, int] | None = None) -> Iterator[TraceLine]:
    """Yield every non-blank line of a JSON-lines file (``.gz`` read as gzip) as parsed JSON, with its number.

    Args:
        path: The file.
        missing: Problem text when the file does not exist.
        fix: Fix text when the file does not exist.
        parse_line: Reads one line ``(number, its bytes)`` instead of this reader (the traces reader uses it to
            keep every line's problem to that line); it returns ``None`` for a blank line.
        unique_keys: Refuse a line in which an object repeats a key (:func:`load_unique_json`).
        span: ``(start, end)`` byte offsets of an uncompressed file, both at a line's start (or the file's end):
            only the lines between are read, numbered from 1 at ``start``.

    Raises:
        InputFileError: the file is missing or not gzip; a line is longer than :func:`max_line_bytes`; without
            ``parse_line``, a line is not UTF-8, not JSON, nested too deeply, or (``unique_keys``) repeats a key
            (file and line named).
    """
    cap = max_line_bytes()
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            if span is not None:
                handle.seek(span[0])
            limit = None if span is None else span[1] - span[0]
            for number, raw in enumerate(_raw_lines(handle, cap, limit=limit), start=1):
                if raw is None:
                    raise InputFileError(path, number, f"line longer than {cap} bytes (the cap against runaway "
                                         "or decompression-bomb input).", f"split the line, or raise the cap "
                                         f"with {MAX_LINE_ENV}=<bytes>.")
                if parse_line is not None:
                    line = parse_line(number, raw)
                    if line is not None:
                        yield line
                    continue
                text = decode_line(path, number, raw)
                if not text.strip():
                    continue
                yield TraceLine(number, parse_json_line(path, number, text.rstrip(), unique_keys=unique_keys))
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


_SCALAR = r'("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)'
_CASE_ID = re.compile(r'"case_id"\s*:\s*' + _SCALAR)
_TRIAL = re.compile(r'"trial"\s*:\s*' + _SCALAR)
"""A line too deep to parse is read for its key by these (the first ``"case_id"`` and ``"trial"`` members of the
text); the value is then checked as any line's (:func:`trace_key`): ``1.5`` or ``true`` is no trial."""

UNREADABLE = "unreadable_trace"
"""Error kind of a line that is not a JSON object (not UTF-8, not JSON, or JSON of another type)."""
DUPLICATE_KEY = "duplicate_key"
"""Error kind of a trace object that repeats a key."""
KEY_FIELDS = ("case_id", "trial")
"""The fields that say which row a line answers."""


class _NotFinite(ValueError):
    """A number the strict first reading refuses (the line is then read as Python's ``json`` reads it)."""


def _refuse_constant(token: str) -> float:
    raise _NotFinite(token)


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):  # float() of a JSON number is never NaN
        raise _NotFinite(text)
    return value


_REPEATS = threading.local()
"""Whether the line this thread is reading repeats a key in some object (shard tasks may share a process)."""


def _note_repeats(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        _REPEATS.found = True
    return obj


_FINITE_NUMBERS = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite,
                                   object_pairs_hook=_note_repeats)
"""Reads a line exactly as ``json.loads`` does (``float(text)`` for each float) but raises on ``NaN``,
``Infinity`` and a float out of range, so that no scan of the text is needed to rule them out (a regular expression
over each ~1 KB bfcl line costs ~60 µs, more than the parse). It also notes an object that repeats a
key, which ``json.loads`` would hide (about 1.3 times the plain parse's CPU time on tau-bench and bfcl lines)."""


def fast_object(text: str) -> dict | None:
    """The object a line holds, read by orjson, when that reading provably equals the strict reading below and
    the line repeats no key; ``None`` when it cannot tell (the line is then read the strict way).

    orjson refuses what the strict reader refuses (``NaN``, ``Infinity``, a float out of range, a lone surrogate,
    nesting past its limit) and reads everything else to the same values, but for an integer beyond 64 bits
    (which it reads as a float: seen in its writing, :func:`_fast_object_bytes`) and a repeated key, whose
    earlier member it drops silently. A value nested deeper than :data:`~tooleval.canonical.MAX_DEPTH` is left to
    the strict way too. A dropped member is seen by counting colons: in the line, every member has
    one and every colon in a string is itself; in orjson's compact writing of what it read, likewise. With no
    repeated key both hold the same members and strings, so the counts are equal; a dropped member takes its own
    colon away (and any in its value), so the written count is lower. A colon spelled as an escape (``\\u003a``)
    would break the equality of strings: such a line is read the strict way."""
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate character: the strict way names it
        return None
    return _fast_object_bytes(data)


def _fast_object_bytes(data: bytes) -> dict | None:
    """:func:`fast_object` of a line's UTF-8 bytes (orjson refuses bytes that are not UTF-8: the strict way,
    which decodes them first, names the byte).

    One writing of what orjson read answers three questions at C speed, so that no Python walk of the values is
    needed: the colon count (no member dropped), whether the values nest more than
    :data:`~tooleval.canonical.MAX_DEPTH` levels (they are written inside :data:`_WRAPPING` lists, and orjson refuses
    to write more than :data:`_ORJSON_DEPTH` levels), and whether an integer beyond 64 bits was read as a float (orjson
    writes every float of magnitude 1e16 or more with an exponent, ``1.8446744073709552e+19``, and an integer it
    cannot hold is at least 2**63 in magnitude). ``None`` for a line nested deeper: the strict way names the path."""
    read = _fast_object_written(data)
    return None if read is None else read[0]


def _fast_object_written(data: bytes) -> tuple[dict, bytes] | None:
    """:func:`_fast_object_bytes` with the writing it checked: ``(the object, orjson's compact writing of it inside
    :data:`_WRAPPING` list brackets)``."""
    if b"\\u003" in data and _ESCAPED_COLON.search(data):
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    try:
        chain, innermost = _WRAPPINGS.chain
    except AttributeError:
        chain, innermost = _wrapping()
    innermost[0] = value
    try:
        written = orjson.dumps(chain)
    except (TypeError, orjson.JSONEncodeError):  # nested deeper than MAX_DEPTH: the strict way names it
        return None
    finally:
        innermost[0] = None
    if b"+" in written and _has_exponent(written):  # the search for a "+" inlined: it is rarely there
        return None
    if len(data) <= _LONG_LINE:  # both counts inlined (:func:`_colons`): a function call costs about as much
        return (value, written) if written.count(b":") == data.count(b":") else None
    return (value, written) if _colons(written) == _colons(data) else None


_LONG_LINE = 4096
"""Bytes from which a text's colons are counted with numpy: ``bytes.count`` of one byte reads about one byte a
nanosecond (~9 µs on a 16 KB tau trace), numpy's comparison about twice as fast, after a fixed ~2 µs that a short
line would not win back."""


def _colons(data: bytes) -> int:
    """``data.count(b":")``."""
    if len(data) <= _LONG_LINE:
        return data.count(b":")
    import numpy as np

    return int(np.count_nonzero(np.frombuffer(data, np.uint8) == 0x3A))


def _orjson_depth() -> int:
    """The deepest nesting of lists orjson writes (it refuses deeper with an error), found by trying once."""
    low, high = 1, 4096
    while low < high:  # the largest depth it writes, between low and high
        middle = (low + high + 1) // 2
        value: list = []
        for _ in range(middle - 1):
            value = [value]
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            high = middle - 1
        else:
            low = middle
    return low


_ORJSON_DEPTH = _orjson_depth()
"""Levels of nesting orjson writes (254 in orjson 3.x)."""
_WRAPPING = _ORJSON_DEPTH - MAX_DEPTH
"""Lists a line's value is written inside, so that orjson refuses exactly the values nested deeper than
:data:`~tooleval.canonical.MAX_DEPTH` (the top-level object is level 1, as :func:`~tooleval.canonical.nesting_within`
counts)."""
_DIGITS = range(ord("0"), ord("9") + 1)
_E = ord("e")


def _has_exponent(written: bytes) -> bool:
    """Whether ``written`` holds a positive exponent after a digit (``[0-9]e\\+[0-9]``): how orjson writes a float of
    magnitude 1e16 or more, such as an integer beyond 64 bits it read. Looked for from each ``+`` (a one-byte
    search, ~10x faster than a regular expression or a two-byte search over a 16 KB trace; ``+`` is otherwise rare
    in JSON: in texts such as phone numbers)."""
    plus = written.find(b"+")
    while plus != -1:
        if 2 <= plus < len(written) - 1 and written[plus - 1] == _E and written[plus - 2] in _DIGITS \
                and written[plus + 1] in _DIGITS:
            return True
        plus = written.find(b"+", plus + 1)
    return False


_WRAPPINGS = threading.local()


def _wrapping() -> tuple[list, list]:
    """This thread's chain of :data:`_WRAPPING` nested lists and its innermost one (built once per thread: shard
    tasks may share a process), whose only item is set to the value to write."""
    chain = getattr(_WRAPPINGS, "chain", None)
    if chain is None:
        innermost: list = [None]
        chain = innermost
        for _ in range(_WRAPPING - 1):
            chain = [chain]
        _WRAPPINGS.chain = chain = (chain, innermost)
    return chain


_ESCAPED_COLON = re.compile(rb"\\u003[aA]")


def _read_trace_line(number: int, text: str) -> TraceLine:
    """Read one (non-blank) traces-file line; whatever is wrong with it becomes the :class:`TraceLine`'s problem,
    never an exception (the module docstring lists what each problem becomes)."""
    data = fast_object(text)
    if data is not None:  # orjson refused non-finite numbers and lone surrogates, and the nesting was seen
        return TraceLine(number, data, plain=True)
    try:
        try:
            _REPEATS.found = False
            data = _FINITE_NUMBERS.decode(text)
            plain, repeats = text_holds_no_value_problem(text), _REPEATS.found
        except _NotFinite:  # read it as Python's json does; trace_line_problem then names the number
            data, plain, repeats = json.loads(text), False, True  # (repeats: not known, looked for below)
    except RecursionError:  # too deep for Python's json: what the text says of its key is all that is read
        data = {}
        for name, found in (("case_id", _CASE_ID.search(text)), ("trial", _TRIAL.search(text))):
            if found is not None:
                data[name] = json.loads(found.group(1))
        return TraceLine(number, data, "nested too deep for a JSON reader (Python's recursion limit)")
    except ValueError as exc:  # json.JSONDecodeError: truncated, or not JSON at all
        return TraceLine(number, {}, f"not valid JSON ({json_problem(exc)})", kind=UNREADABLE)
    if not isinstance(data, dict):
        return TraceLine(number, {}, f"a JSON {json_type_name(data)}, not an object", kind=UNREADABLE)
    anywhere, top = repeated_keys(text) if repeats else ([], [])
    if anywhere:
        named = ", ".join(repr(key) for key in anywhere)
        if any(key in KEY_FIELDS for key in top):  # which row the line answers is itself ambiguous
            data = {key: value for key, value in data.items() if key not in top}
        return TraceLine(number, data, f"an object repeats the key {named} (JSON readers differ on which value "
                         "counts: keep one)", kind=DUPLICATE_KEY)
    return TraceLine(number, data, plain=plain)


def _plain_line(number: int, data: dict, written: bytes) -> TraceLine:
    """``TraceLine(number, data, plain=True, written=written)``, its fields set at once: the frozen dataclass's
    ``__init__`` sets them one by one through ``object.__setattr__``, three times this on a slow machine, for
    every line read."""
    line = _NEW_OBJECT(TraceLine)
    line.__dict__.update({"line": number, "data": data, "problem": None, "kind": "bad_trace", "plain": True,
                          "written": written})
    return line


_NEW_OBJECT = object.__new__


_OBJECT_ENDS = (b"}\n", b"}")


def _read_trace_bytes(number: int, raw: bytes) -> TraceLine | None:
    """:func:`_read_trace_line` of a line's bytes; ``None`` for a blank line.

    The bytes are given to orjson first, without decoding them to text and encoding that again (a third of
    :func:`fast_object`'s time on a 16 KB line): when it reads them, they are UTF-8, and the ASCII white space
    stripped from their end is all that stripping the decoded text would take away (any other trailing character
    makes orjson refuse the line, which then takes the text's way). A line that ends with its object's ``}`` and
    its line end is given as it is: orjson skips the line end as JSON white space, and no copy of the line is
    made to strip it (its colons and escapes are the same with it or without)."""
    data = raw if raw.endswith(_OBJECT_ENDS) else raw.rstrip()
    read = _fast_object_written(data) if data else None
    if read is not None:
        return _plain_line(number, read[0], read[1])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return TraceLine(number, {}, f"not UTF-8 text (byte {exc.start + 1} of the line: "
                         f"{raw[exc.start:exc.start + 1]!r})", kind=UNREADABLE)
    text = text.rstrip()  # the line's end: a truncated line is then named for what it lacks
    return _read_trace_line(number, text) if text else None


def _shown(value: object) -> str:
    """A value as the JSON a user wrote, cut to 40 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def trace_key(data: dict) -> tuple[str, int] | str:
    """The ``(case_id, trial)`` a trace object answers, or why it names none.

    Args:
        data: A trace line's object.

    Returns:
        ``(case_id, trial)`` when ``case_id`` is a non-empty string (or an integer, read as its text) and ``trial``
        an integer in ``0..TRIAL_MAX`` (:data:`tooleval.models.TRIAL_MAX`; a boolean or a float is refused, not
        read as 1); otherwise the problem, in words (``"trial must be an integer in 0..2147483647, not true"``).
    """
    problems = []
    case_id = data.get("case_id")
    if type(case_id) is int:
        case_id = str(case_id)
    if "case_id" not in data:
        problems.append("case_id is missing")
    elif not isinstance(case_id, str) or not case_id:
        problems.append(f"case_id must be a non-empty string, not {_shown(case_id)}")
    trial = data.get("trial")
    if "trial" not in data:
        problems.append("trial is missing")
    elif type(trial) is not int or not 0 <= trial <= TRIAL_MAX:
        problems.append(f"trial must be an integer in 0..{TRIAL_MAX}, not {_shown(trial)}")
    return "; ".join(problems) if problems else (case_id, trial)


def _readable_case(data: dict) -> str | None:
    """The line's case id when it is usable, even though its trial is not (the case is then not also listed as
    lacking a trace)."""
    case_id = data.get("case_id")
    if type(case_id) is int:
        return str(case_id)
    return case_id if isinstance(case_id, str) and case_id else None


def line_problem(path: Path, line: TraceLine, key: tuple[str, int]) -> tuple[str | None, bool]:
    """Whether a replayed line can become a row: ``(its row's error text, None)`` when it cannot (the message names
    the file and line, as an errors.json entry would), else ``(None, plain)``; ``plain``: the reading and the
    shape alone proved it a valid :class:`~tooleval.models.RecordedTrace`
    (:func:`tooleval.capture.recorded.plainly_recorded_trace`), so its values are read without the model. The one
    place a replayed line is validated (the plan read only its key)."""
    if line.plain and line.problem is None and plain_trace_shape(line.data):
        return None, True  # nearly every line: nothing to find (what follows would find the same, with two calls)
    problem = trace_line_problem(line)
    kind = line.kind
    plain = problem is None and plainly_recorded_trace(line)
    if problem is None and not plain:  # the shape alone rarely leaves a doubt
        trace = parse_trace(path, line)
        if isinstance(trace, RowError):  # a field of the wrong type or range: the row carries the error
            problem, kind = trace.message, trace.kind
    if problem is not None:
        return str(RowError(kind, key[0], key[1], f"{problem} (line {line.line} of {path})", str(path),
                            line.line)), False
    return None, plain


def redaction_error(key: tuple[str, int], exc: BaseException, where: str, path: str | None = None,
                    line: int | None = None) -> str:
    """The row error of a trace whose values cannot be processed (text it cannot write as UTF-8, a number without
    canonical JSON, nesting beyond Python's recursion limit)."""
    return str(RowError("bad_trace", key[0], key[1], f"the trace cannot be redacted: {type(exc).__name__}: {exc} "
                        f"({where})", path, line))


def trace_line_problem(line: TraceLine) -> str | None:
    """Why a traces-file line cannot become a scored row (see the module docstring), or ``None``."""
    if line.problem is not None:
        return line.problem
    return None if line.plain else json_value_problem(line.data)


def iter_trace_lines(path: Path, *, keep_unreadable: bool = False,
                     on_raw: Callable[[int, bytes], None] | None = None,
                     span: tuple[int, int] | None = None) -> Iterator[TraceLine]:
    """Yield every non-blank line of a traces file, each read on its own (:func:`read_trace_line`).

    Args:
        path: A traces file (``.gz`` read as gzip).
        keep_unreadable: Yield a line that is not a JSON object too (:attr:`TraceLine.kind`
            ``unreadable_trace``, empty ``data``) instead of refusing the file: what a run does, so that one bad
            line never stops it.
        on_raw: Called with ``(line number, the line's bytes with its line end)`` for every line, blank ones
            included, before it is read (the plan digests the file and places each line in the same pass).
        span: Only the lines of this byte range of an uncompressed file (:func:`iter_json_lines`), numbered from 1.

    Raises:
        InputFileError: the file is missing, not gzip, or a line is longer than :func:`max_line_bytes`; unless
            ``keep_unreadable``, a line is not a JSON object (file and line named).
    """
    def read(number: int, raw: bytes) -> TraceLine | None:
        on_raw(number, raw)  # type: ignore[misc]
        return _read_trace_bytes(number, raw)

    for line in iter_json_lines(path, missing="traces file not found.", fix="check the --traces path.",
                                parse_line=_read_trace_bytes if on_raw is None else read, span=span):
        if line.kind == UNREADABLE and not keep_unreadable:
            raise InputFileError(path, line.line, f"{line.problem}: a trace line must be a JSON object.",
                                 "repair or remove that line (the README's 'Datasets' section has the recorded "
                                 "trace format).")
        yield line


@dataclass
class TraceIndex:
    """Which (case_id, trial) keys a traces file holds, and which lines were unusable."""

    path: Path
    digest: str
    key_table: "pa.Table | None" = None
    """The keys, first line of each only, in file order: ``case_id`` (string; binary for a file whose case ids
    hold a lone surrogate, which no dataset's case id does), ``trial`` and ``line`` (int64); ``None``: none."""
    errors: list[RowError] = field(default_factory=list)
    has_requests: bool = False
    """Whether any line that answers a key holds a ``request`` that is not null (its generation request)."""
    offsets: array = field(default_factory=lambda: array("q"))
    """Byte offset of each line (line ``n`` at position ``n - 1``), blank and unusable lines included, of an
    uncompressed file (a gzip file has no offsets to seek to: empty), found while it was read; 8 bytes a line."""
    line_digests: bytearray = field(default_factory=bytearray)
    """The first 16 bytes of the sha256 of each line's bytes without its line end, line after line as
    :attr:`offsets` (:meth:`line_digest` gives one as the 32 hex characters the plan keeps)."""
    trial_agents: dict[int, set] = field(default_factory=dict)
    """trial -> the agents its lines name, each ``(name, model)`` (``None`` for a line without an agent object):
    where trials are different agents, each is a pass over the dataset (:func:`replay_keys`)."""

    @property
    def keys(self) -> dict[tuple[str, int], int]:
        """(case_id, trial) -> the number of the line that holds it (the first such line), in file order."""
        if self.key_table is None:
            return {}
        return dict(zip(zip(_texts(self.key_table["case_id"]), self.key_table["trial"].to_pylist()),
                        self.key_table["line"].to_pylist()))

    def line_digest(self, number: int) -> str:
        """The digest of line ``number`` (1-based) as 32 hex characters (uncompressed files only)."""
        return self.line_digests[16 * (number - 1):16 * number].hex()


def _texts(column) -> list[str]:
    """A key table's case ids as Python text (a binary column holds UTF-8 with lone surrogates passed through)."""
    import pyarrow as pa

    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return [value.decode("utf-8", "surrogatepass") for value in column.to_pylist()]
    return column.to_pylist()


def read_trace_line(number: int, text: str) -> TraceLine:
    """Read one traces-file line as :func:`iter_trace_lines` does (public for readers that seek to a line by its
    byte offset: the replay agent). Never raises: a line that is not a JSON object comes back with the problem
    kind ``unreadable_trace`` and empty ``data``."""
    return _read_trace_line(number, text)


def read_trace_bytes(number: int, raw: bytes) -> TraceLine | None:
    """Read one traces-file line's bytes (its line end included or not) as :func:`iter_trace_lines` does, decoding
    them once (public for readers that seek to a line by its byte offset: the replay agent). ``None`` for a blank
    line; otherwise never raises: a line that is not a JSON object comes back with the problem kind
    ``unreadable_trace`` and empty ``data``."""
    return _read_trace_bytes(number, raw)


def parse_trace(path: Path, line: TraceLine) -> RecordedTrace | RowError:
    """Validate one line as a :class:`RecordedTrace`; a :class:`RowError` (``bad_trace``) when it is not one.

    The error's message names the first invalid field and what is wrong with it, never its value (which may be a
    secret redaction has not seen yet): ``"not a recorded trace: field messages: Input should be a valid list"``.
    """
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
            f"not a recorded trace: field {where}: {err['msg']}",
            str(path),
            line.line,
        )


@dataclass
class TracePart:
    """What the lines of one byte range of a traces file hold: :func:`index_traces`' reading of them, line numbers
    counted from 1 at the range's start, before the ranges are joined (:func:`join_trace_parts`)."""

    lines: int = 0
    """Lines in the range, blank ones included."""
    errors: list = field(default_factory=list)
    """In line order: a :class:`~tooleval.errors.RowError` of each unusable line."""
    case_ids: Any = field(default_factory=list)
    """The case id of each line that answers a key, in line order (whether an earlier line or range holds the
    same key is decided when the ranges are joined), with its :attr:`trials` and :attr:`key_lines`: a list while
    the range is read, then an Arrow array (:func:`_id_array`) once :func:`index_part` returns it. A worker hands
    the part to the flow, where a million lines' ids as Python strings were ~100 MB of objects the flow's
    allocator kept after the plan."""
    trials: array = field(default_factory=lambda: array("q"))
    key_lines: array = field(default_factory=lambda: array("q"))
    has_requests: bool = False
    offsets: array = field(default_factory=lambda: array("q"))
    """Absolute byte offset of each line of the range (uncompressed files only)."""
    line_digests: bytearray = field(default_factory=bytearray)
    """16 bytes of each line's sha256, as :attr:`TraceIndex.line_digests`."""
    trial_agents: dict[int, set] = field(default_factory=dict)
    """As :attr:`TraceIndex.trial_agents`, of the range's lines."""
    failure: InputFileError | None = None
    """The file error that stopped the reading (its line counted from the range's start)."""


def index_part(path: Path, span: tuple[int, int] | None = None, whole: "hashlib._Hash | None" = None) -> TracePart:
    """Read the lines of a traces file, or of one byte range of it, as :func:`index_traces` does.

    Only what the plan needs is read of each line: its key, agent and whether it records a request, by Arrow's JSON
    reader for thousands of lines at once (:mod:`tooleval.capture._bulk_keys`), and the strict way
    (:func:`read_trace_line`) for a line Arrow's reading might not equal; its place and digest are taken from its
    bytes. Nothing else of a line is validated here: trace capture decodes and validates it, once.

    Args:
        path: A traces file (``.gz`` read as gzip, line by line the strict way: no offsets, no line digests, no
            ``span``).
        span: ``(start, end)`` byte offsets at line starts (:func:`trace_spans`); ``None``: the whole file.
        whole: A sha256 object fed every byte read (the whole file's digest in the same pass).

    Returns:
        A :class:`TracePart`; a file error (a line longer than :func:`max_line_bytes`) is kept in its ``failure``
        rather than raised, so that a worker process hands it back with the range's other findings. A missing
        or unreadable file raises :class:`~tooleval.errors.InputFileError`.
    """
    part = TracePart()
    try:
        if path.name.endswith(".gz"):
            for line in iter_trace_lines(path, keep_unreadable=True, span=span):
                part.lines = max(part.lines, line.line)
                _add_event(part, _line_event(path, line, part))
        else:
            _index_plain(path, span, whole, part)
    except InputFileError as exc:
        if exc.line is None:
            raise
        part.failure = exc
    part.case_ids = _id_array(part.case_ids)
    return part


def _id_array(case_ids: list[str]) -> "pa.Array":
    """``case_ids`` as an Arrow string array; as a binary array of their UTF-8 bytes when one holds a lone
    surrogate (an id decoded from such an escape), which a string array cannot hold, passed through as it is."""
    import pyarrow as pa

    try:
        return pa.array(case_ids, pa.string())
    except (UnicodeEncodeError, pa.ArrowException):
        return pa.array([case_id.encode("utf-8", "surrogatepass") for case_id in case_ids], pa.binary())


_BLOCK = 8 << 20
"""Bytes read at a time from an uncompressed traces file: thousands of lines for one call of Arrow's reader."""

_SMALLEST_RUN = 4
"""A run of lines Arrow refuses is halved until it is this short; its lines are then read the strict way."""


def _index_plain(path: Path, span: tuple[int, int] | None, whole, part: TracePart) -> None:
    """:func:`index_part` of an uncompressed file: read in blocks of :data:`_BLOCK` bytes, each block's complete lines
    indexed at once (:func:`_index_block`), a line cut by a block's end carried to the next.

    Raises:
        InputFileError: the file cannot be read, or a line is longer than :func:`max_line_bytes` (numbered from 1 at
            the range's start).
    """
    cap = max_line_bytes()
    place = [0 if span is None else span[0], 0]  # the next line's byte offset and the lines read so far
    remaining = None if span is None else span[1] - span[0]
    carry: list[bytes] = []
    carried = 0
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputFileError(path, None, "traces file not found.", "check the --traces path.") from None
    except IsADirectoryError:
        raise InputFileError(path, None, "is a folder, not a file.", "pass the JSON-lines file itself.") from None
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the file ({exc.strerror or exc}).",
                             "check that it exists and is readable.") from None
    with handle:
        if span is not None:
            handle.seek(span[0])
        while True:
            size = _BLOCK if remaining is None else min(_BLOCK, remaining)
            chunk = handle.read(size) if size else b""
            if remaining is not None:
                remaining -= len(chunk)
            if whole is not None:
                whole.update(chunk)
            if not chunk:
                if carried:  # the last line, without a line end
                    _index_block(path, b"".join(carry), 0, carried, place, part, cap)
                return
            first = chunk.find(b"\n")
            if first < 0:  # a line longer than the block: kept until its end comes
                carry.append(chunk)
                carried += len(chunk)
                if carried > cap:
                    _too_long(path, place[1] + 1, cap)
                continue
            begin = 0
            if carried:
                head = b"".join(carry) + chunk[:first + 1]
                carry, carried = [], 0
                _index_block(path, head, 0, len(head), place, part, cap)
                begin = first + 1
            last = chunk.rfind(b"\n") + 1
            _index_block(path, chunk, begin, last, place, part, cap)
            if last < len(chunk):
                carry, carried = [chunk[last:]], len(chunk) - last
                if carried > cap:
                    _too_long(path, place[1] + 1, cap)


def _too_long(path: Path, number: int, cap: int) -> None:
    raise InputFileError(path, number, f"line longer than {cap} bytes (the cap against runaway or decompression-bomb "
                         "input).", f"split the line, or raise the cap with {MAX_LINE_ENV}=<bytes>.")


def _index_block(path: Path, block: bytes, begin: int, end: int, place: list[int], part: TracePart,
                 cap: int) -> None:
    """Index the lines of ``block[begin:end]`` (each ends with ``\\n``, but for the file's last line): their
    offsets and digests, then their keys, in line order (``place``: the first line's byte offset in the file and the
    number of lines before it, both advanced past the block).

    Raises:
        InputFileError: a line is longer than ``cap`` bytes (its line end included).
    """
    from tooleval.capture._bulk_keys import read_keys, usable_lines

    starts: list[int] = []
    ends: list[int] = []
    nexts: list[int] = []
    find, start = block.find, begin
    while start < end:
        stop = find(b"\n", start, end)
        following = end if stop < 0 else stop + 1
        if following - start > cap:
            _too_long(path, place[1] + len(starts) + 1, cap)
        stop = end if stop < 0 else stop
        while stop > start and block[stop - 1] == 13:  # the digest leaves out the line end, \r\n as \n
            stop -= 1
        starts.append(start)
        ends.append(stop)
        nexts.append(following)
        start = following
    offset, before = place
    part.offsets.extend(offset + start - begin for start in starts)
    view, sha256 = memoryview(block), hashlib.sha256
    part.line_digests += b"".join([sha256(view[a:b]).digest()[:16] for a, b in zip(starts, ends)])
    place[0], place[1] = offset + end - begin, before + len(starts)
    part.lines = place[1]
    usable = usable_lines(block, starts, ends)
    read: list = [None] * len(starts)  # each usable line's (case_id, trial), once Arrow read it
    index = 0
    while index < len(starts):
        if not usable[index]:
            index += 1
            continue
        run_end = index
        while run_end < len(starts) and usable[run_end]:
            run_end += 1
        pending = [(index, run_end)]
        while pending:
            first, last = pending.pop()
            keys = read_keys(block, starts[first], nexts[last - 1], last - first)
            if keys is None:
                if last - first > _SMALLEST_RUN:
                    middle = (first + last) // 2
                    pending += [(middle, last), (first, middle)]
                continue
            read[first:last] = zip(keys.case_ids, keys.trials)
            part.has_requests = part.has_requests or keys.has_requests
            for trial, agent in keys.agents:
                part.trial_agents.setdefault(trial, set()).add(agent)
        index = run_end
    case_ids, trials, key_lines = part.case_ids, part.trials, part.key_lines
    for position, key in enumerate(read):
        number = before + position + 1
        if key is not None and key[0] is not None:
            case_ids.append(key[0])
            trials.append(key[1])
            key_lines.append(number)
            continue
        line = _read_trace_bytes(number, block[starts[position]:nexts[position]])
        if line is not None:
            _add_event(part, _line_event(path, line, part))


def _add_event(part: TracePart, event: RowError | tuple[str, int, int]) -> None:
    if isinstance(event, RowError):
        part.errors.append(event)
    else:
        part.case_ids.append(event[0])
        part.trials.append(event[1])
        part.key_lines.append(event[2])


_DICT_ONLY = frozenset((dict,))
_ABSENT = object()
_TEXT_OR_NULL = ("request_id", "response_id", "prompt_version", "tool_schema_version")


def plainly_recorded_trace(line: TraceLine) -> bool:
    """True when :class:`RecordedTrace` validation would accept ``line.data``, seen from the types alone for the
    shape nearly every recorded line has (a tenth of the validation's time on a bfcl line, which trace capture would
    pay for every row); ``False`` means "ask the validation", never "invalid".

    Only a ``plain`` line (:attr:`TraceLine.plain`: orjson read it, so no string holds a lone surrogate and no
    number is non-finite) is judged: its values have the exact types JSON readers return. The shape, field by
    field as :class:`RecordedTrace` declares it: ``case_id`` a non-empty string or an integer (not a boolean),
    ``trial`` an integer in ``0..TRIAL_MAX``, ``agent`` absent or an object whose ``name`` is text and whose
    ``version`` and ``model`` are text or null, ``messages`` a list of objects, the ids and versions text or null,
    ``metadata`` null or an object whose ``reward`` is null or a number, ``request`` null or an object, the call
    lists null or lists of objects (each executor call's ``executions`` null or an integer in ``0..TRIAL_MAX``),
    and no generation timestamp (text there is parsed as a date: the validation decides).
    """
    if not line.plain or line.problem is not None:
        return False
    return plain_trace_shape(line.data)


def plain_trace_shape(data: dict) -> bool:
    """:func:`plainly_recorded_trace`'s test of the shape alone, for values known to be plain (read by orjson, or
    made of such values by redaction, which writes only text)."""
    case_id, trial = data.get("case_id"), data.get("trial")
    if not (type(case_id) is str and case_id or type(case_id) is int):
        return False
    if type(trial) is not int or not 0 <= trial <= TRIAL_MAX:
        return False
    agent = data.get("agent", _ABSENT)
    has_agent = agent is not _ABSENT
    if has_agent:
        if type(agent) is not dict or type(agent.get("name", "")) is not str:
            return False
        version, model = agent.get("version"), agent.get("model")
        if version is not None and type(version) is not str or model is not None and type(model) is not str:
            return False
    messages = data.get("messages")
    if type(messages) is not list or not _DICT_ONLY.issuperset(map(type, messages)):
        return False
    metadata = data.get("metadata", _ABSENT)
    has_metadata = metadata is not _ABSENT
    if metadata is not None and has_metadata:
        if type(metadata) is not dict:
            return False
        reward = metadata.get("reward")
        if reward is not None and type(reward) is not int and type(reward) is not float:
            return False
    if len(data) == 3 + has_agent + has_metadata:
        return True  # no other field: each of them is absent, which the shape allows
    for key in _TEXT_OR_NULL:
        value = data.get(key)
        if value is not None and type(value) is not str:
            return False
    if data.get("request") is not None and type(data["request"]) is not dict:
        return False
    for key in ("adapter_calls", "executor_calls"):
        calls = data.get(key)
        if calls is not None and (type(calls) is not list or any(type(call) is not dict for call in calls)):
            return False
    for call in data.get("executor_calls") or ():
        executions = call.get("executions")
        if executions is not None and (type(executions) is not int or not 0 <= executions <= TRIAL_MAX):
            return False
    return data.get("generation_started_at") is None and data.get("generation_finished_at") is None


def _line_event(path: Path, line: TraceLine, part: TracePart) -> RowError | tuple[str, int, int]:
    """What one line read the strict way tells the plan: a :class:`~tooleval.errors.RowError` for a line that names
    no row, else ``(case_id, trial, line)``, its agent and whether it records a request noted in ``part``. A line
    with a row-level problem, or a field that is not valid, still answers its key: trace capture writes its row with
    the error, so the case is not reported as lacking a trace."""
    if line.kind == UNREADABLE:
        return RowError(UNREADABLE, None, None, f"{line.problem}; a trace line must be one JSON object: repair or "
                        "remove it", str(path), line.line)
    key = trace_key(line.data)
    if isinstance(key, str):
        if line.kind == DUPLICATE_KEY:
            problem, kind = f"{line.problem}; so which row it answers is not known", DUPLICATE_KEY
        else:
            problem, kind = f"which row the line answers cannot be read: {key}", "bad_trace"
        return RowError(kind, _readable_case(line.data), None, problem, str(path), line.line)
    agent = line.data.get("agent")
    agents = part.trial_agents.get(key[1])
    if agents is None:
        agents = part.trial_agents[key[1]] = set()
    agents.add((str(agent.get("name")), str(agent.get("model"))) if isinstance(agent, dict) else None)
    part.has_requests = part.has_requests or line.data.get("request") is not None
    return (key[0], key[1], line.line)


def join_trace_parts(path: Path, digest: str, parts: Iterable[TracePart]) -> TraceIndex:
    """The :class:`TraceIndex` of a file from its consecutive ranges' parts, in file order (line numbers made
    absolute; a key held by an earlier line is reported on the later one, as one pass over the file would).

    The keys are joined as columns (Arrow and numpy): a million keys as Python tuples and a dict cost the plan
    ~1.5 s and ~300 MB of heap its process then kept.

    Raises:
        InputFileError: a range's ``failure``, with its line numbered in the whole file.
    """
    import numpy as np
    import pyarrow as pa

    index = TraceIndex(path=path, digest=digest)
    base = 0
    case_ids: list[pa.Array] = []
    trials: list[np.ndarray] = []
    lines: list[np.ndarray] = []
    for part in parts:
        if part.failure is not None:
            failure = part.failure
            raise InputFileError(failure.path, failure.line + base, failure.problem, failure.fix)
        for error in part.errors:
            index.errors.append(RowError(error.kind, error.case_id, error.trial, error.message, error.path,
                                         error.line + base))
        case_ids.append(part.case_ids)
        trials.append(np.frombuffer(part.trials, np.int64) if len(part.trials) else np.zeros(0, np.int64))
        lines.append((np.frombuffer(part.key_lines, np.int64) if len(part.key_lines) else np.zeros(0, np.int64))
                     + base)
        index.has_requests = index.has_requests or part.has_requests
        for trial, agents in part.trial_agents.items():
            index.trial_agents.setdefault(trial, set()).update(agents)
        index.offsets.extend(part.offsets)
        index.line_digests += part.line_digests
        base += part.lines
    if sum(len(ids) for ids in case_ids):
        if any(ids.type == pa.binary() for ids in case_ids):  # one part's ids hold a lone surrogate
            case_ids = [ids.cast(pa.binary()) for ids in case_ids]
        index.key_table, repeated = _first_keys(path, pa.concat_arrays(case_ids), np.concatenate(trials),
                                                np.concatenate(lines))
        if repeated:  # each error at its line, among the unusable lines' errors (both in line order)
            index.errors = sorted(index.errors + repeated, key=lambda error: error.line)
    return index


def _first_keys(path: Path, ids: "pa.Array", trials, lines) -> tuple["pa.Table", list[RowError]]:
    """The key table of the lines that answer a key (in line order; ``ids`` their case ids, as
    :func:`_id_array` gives them): each key's first line kept, and a ``bad_trace`` error for each later line with
    the same key."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = pc.dictionary_encode(ids).indices.to_numpy().astype(np.int64)
    order = np.lexsort((lines, trials, codes))  # each key's lines together, the first line first
    codes_sorted, trials_sorted = codes[order], trials[order]
    later = np.zeros(len(order), bool)
    later[1:] = (codes_sorted[1:] == codes_sorted[:-1]) & (trials_sorted[1:] == trials_sorted[:-1])
    repeated: list[RowError] = []
    if later.any():
        first_at = np.maximum.accumulate(np.where(later, 0, np.arange(len(order))))
        first_lines = lines[order][first_at][later]
        rows = order[later]
        names = _texts(ids.take(pa.array(rows)))
        for name, trial, line, first in zip(names, trials[rows].tolist(), lines[rows].tolist(),
                                            first_lines.tolist()):
            repeated.append(RowError("bad_trace", name, trial, f"duplicate (case_id, trial); the line {first} copy "
                                     "is used", str(path), line))
        keep = np.ones(len(order), bool)
        keep[rows] = False
        mask = pa.array(keep)
        ids, trials, lines = ids.filter(mask), trials[keep], lines[keep]
    table = pa.table({"case_id": ids, "trial": pa.array(trials, pa.int64()), "line": pa.array(lines, pa.int64())})
    return table, repeated


def trace_spans(path: Path, parts: int) -> list[tuple[int, int]]:
    """About ``parts`` consecutive byte ranges of an uncompressed file, each starting at a line's start and
    together covering the file (fewer when lines are long: a range never splits a line).

    Raises:
        OSError: the file cannot be read.
    """
    size = path.stat().st_size
    cuts = [0]
    with path.open("rb") as handle:
        for k in range(1, parts):
            wanted = max(size * k // parts, cuts[-1])
            if wanted <= 0:
                continue
            handle.seek(wanted - 1)  # the byte before: a range starts right after a line end
            rest = handle.readline(max_line_bytes() + 2)
            cut = wanted - 1 + len(rest)
            if rest.endswith(b"\n") and cuts[-1] < cut < size:
                cuts.append(cut)
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def index_traces(path: Path) -> TraceIndex:
    """Scan a traces file once: digest, keys and unusable lines, each with its file and line.

    A line that is not a JSON object, or whose key cannot be read (:func:`trace_key`), is listed in
    :attr:`TraceIndex.errors` (``unreadable_trace``, ``bad_trace``, or ``duplicate_key`` when the repeated key is
    ``case_id`` or ``trial``), as is a second line for the same key. A line with a row-level problem
    (:func:`trace_line_problem`, a repeated key) or that is not a valid recorded trace (:func:`parse_trace`) keeps
    its key: the replay agent, in trace capture, finds the problem when it decodes the line and writes its row with
    the error (only the key fields are read here, in bulk: :func:`index_part`). The same reading split over byte ranges
    (:func:`trace_spans`, :func:`index_part` in other processes, then :func:`join_trace_parts`) gives the same
    index.

    Raises:
        InputFileError: the file is missing, not gzip, or holds a line longer than :func:`max_line_bytes`.
    """
    if path.name.endswith(".gz"):
        return join_trace_parts(path, file_digest(path), [index_part(path)])
    whole = hashlib.sha256()
    part = index_part(path, whole=whole)
    return join_trace_parts(path, whole.hexdigest(), [part])


def replay_keys(index: TraceIndex, cases: Collection[str], cases_file: Path | str,
                skipped: Collection[str] | None = None
                ) -> tuple[list[tuple[str, int]], dict[int, tuple[str, int]], list[RowError]]:
    """What replaying a traces file answers for a dataset: the (case, trial) keys to score and the row-level
    problems, as a run plans them (``tooleval run`` and the pytest plugin alike).

    Args:
        index: :func:`index_traces` of the traces file.
        cases: The case ids in scope.
        cases_file: The dataset's ``cases.jsonl`` (named in the messages).
        skipped: Case ids of the dataset left out of scope (``--slices``): their traces are skipped silently
            instead of being reported as traces of unknown cases.

    Returns:
        ``(keys, lines, errors)``: the keys sorted by (case id, trial); their traces-file line numbers (line ->
        key); the index's unusable lines, then one ``unknown_case`` error per trace of a case not in the dataset,
        one ``missing_trace`` error per case in scope without a trace (unless an unusable line names it) and one
        per (case, trial) without a trace where another case has that trial (coverage is per (case, trial)).
        :func:`replay_columns` gives the keys and lines as columns.
    """
    table, errors = replay_columns(index, cases, cases_file, skipped)
    keys = list(zip(table["case_id"].to_pylist(), table["trial"].to_pylist()))
    return keys, dict(zip(table["line"].to_pylist(), keys)), errors


def replay_columns(index: TraceIndex, cases: Collection[str], cases_file: Path | str,
                   skipped: Collection[str] | None = None) -> tuple["pa.Table", list[RowError]]:
    """:func:`replay_keys` with the keys as an Arrow table sorted by (case id, trial): ``case_id`` (string),
    ``trial`` and ``line`` (int64), one row per key to score (what a run's plan reads)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    errors: list[RowError] = list(index.errors)
    empty = pa.table({"case_id": pa.array([], pa.string()), "trial": pa.array([], pa.int64()),
                      "line": pa.array([], pa.int64())})
    table = index.key_table
    if table is None or table.num_rows == 0:
        table = empty
    else:
        # Arrow orders text by its UTF-8 bytes, which is the order of code points that Python's sort uses
        table = table.sort_by([("case_id", "ascending"), ("trial", "ascending")])
        ids = table["case_id"]
        scope = pa.array(list(cases), pa.string())
        known = pc.is_in(ids, value_set=scope.cast(ids.type)) if len(scope) else pa.array([False] * len(table))
        if not pc.all(known).as_py():
            unknown = pc.invert(known)
            if skipped is not None:  # traces of cases left out of scope are dropped silently
                out_of_scope = pa.array(list(skipped), pa.string())
                dropped = pc.is_in(ids, value_set=out_of_scope.cast(ids.type))
                unknown = pc.and_(unknown, pc.invert(dropped))
            strays = table.filter(unknown)
            for case_id, trial, line in zip(_texts(strays["case_id"]), strays["trial"].to_pylist(),
                                            strays["line"].to_pylist()):
                errors.append(RowError("unknown_case", case_id, trial, f"trace names case {case_id!r}, which is not "
                                       f"in {cases_file}", str(index.path), line))
            table = table.filter(known)
        table = table.set_column(0, "case_id", table["case_id"].cast(pa.string()))  # scored ids are case ids
    traced = set(pc.unique(table["case_id"]).to_pylist()) if table.num_rows else set()
    named = {error.case_id for error in index.errors if error.case_id is not None}  # one error per bad line
    for case_id in cases:
        if case_id not in traced and case_id not in named:
            errors.append(RowError("missing_trace", case_id, None, f"no trace in {index.path} for this case",
                                   str(index.path)))
    errors.extend(_missing_trials(table, index, named))
    return table, errors


def _agents_named(agents: set) -> str:
    names = sorted("no agent" if a is None else (a[0] if a[1] in (a[0], "None") else f"{a[0]}, model {a[1]}")
                   for a in agents)
    return "agent " + " / ".join(names)


def _missing_trials(table: "pa.Table", index: TraceIndex, named: Collection[str]) -> list[RowError]:
    """One ``missing_trace`` error per (case, trial) without a trace where the trials are different agents (each
    trial one model's pass over the dataset, several models in one traces file) and another case has that
    trial: a case that one agent left out is unscored for that agent, not covered by the others' traces. Trials
    of one agent are repeats, which a case may have fewer of (an export numbers a case's traces as they came).
    ``table``: the keys sorted by (case, trial) (:func:`replay_columns`)."""
    import pyarrow.compute as pc

    trials = sorted(pc.unique(table["trial"]).to_pylist()) if table.num_rows else []
    named_agents = {frozenset(a for a in index.trial_agents.get(t, ()) if a is not None) for t in trials}
    if len(trials) < 2 or len(named_agents - {frozenset()}) < 2:  # a line without an agent names none
        return []
    keys = list(zip(table["case_id"].to_pylist(), table["trial"].to_pylist()))
    path = index.path
    errors = []
    for case_id, group in groupby(keys, key=itemgetter(0)):  # sorted: one case's keys are adjacent
        present = {trial for _, trial in group}
        if len(present) == len(trials) or case_id in named:
            continue
        for trial in trials:
            if trial not in present:
                errors.append(RowError("missing_trace", case_id, trial,
                                       f"no trace of trial {trial} ({_agents_named(index.trial_agents[trial])}) "
                                       f"in {path} for this case, though other cases have one: each trial is "
                                       "another agent's pass over the dataset", str(path)))
    return errors
