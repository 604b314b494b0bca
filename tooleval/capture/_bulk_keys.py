"""The plan's bulk reading of a traces file: which row each line answers, read by Arrow's JSON reader for many lines
at once, with nothing of a line decoded but its key fields.

The plan needs of each line only its ``(case_id, trial)``, its agent's name and model and whether it records a
generation request; trace capture decodes and validates the whole line later, once. Arrow's reader (RapidJSON) parses
every byte of a line but builds values for these four fields only, about a fifth of orjson's cost on a 16 KB
multi-turn line. It is not the strict reader, though: its answer is taken only where it provably equals what
:func:`tooleval.capture.recorded.read_trace_line` would read of the key, and every other line is read that strict way
(:func:`usable_lines` says which lines Arrow may read, :func:`read_keys` refuses a run it cannot read whole). Where the
two readers differ, measured on pyarrow 26:

* Arrow builds a row of each object on a line, skips blank lines, and crashes on a line that is ``null``: only lines
  that start with ``{`` and end with ``}`` are given to it (then an object cannot span two lines, so one row per line
  is checked by counting).
* It accepts ``Inf``, ``-Inf`` and ``-NaN``, which Python's ``json`` refuses: lines holding ``Inf`` or ``-NaN``
  anywhere are read the strict way.
* It does not check that text it skips is UTF-8: the lines are checked as UTF-8 first (by Arrow, in bulk).
* Python's reader gives up on nesting deeper than its recursion limit and then reads the key from the text: lines
  with half that many brackets are read the strict way.

What Arrow refuses (a repeated key field, a case id that is a number, a trial that is not an integer, a lone
surrogate, anything that is not JSON) makes its run of lines fail; the run is then split until the lines it refuses
are found, and those are read the strict way.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from tooleval.models import TRIAL_MAX

__all__ = ["KEY_SCHEMA", "Keys", "read_keys", "usable_lines"]

KEY_SCHEMA = pa.schema([
    ("case_id", pa.string()),
    ("trial", pa.int64()),
    ("agent", pa.struct([("name", pa.string()), ("model", pa.string())])),
    ("request", pa.struct([])),
])
"""The fields the plan reads of a trace line; any other field is skipped. A value of another type (a case id that is
a number, an agent's name that is not text, a ``request`` that is not an object) fails the run, so that the line is
read the strict way."""

_PARSE = pj.ParseOptions(explicit_schema=KEY_SCHEMA, unexpected_field_behavior="ignore")

_OPEN, _CLOSE = ord("{"), ord("}")

_LENIENT_TOKENS = (b"Inf", b"-NaN")
"""Number spellings Arrow's reader accepts and Python's ``json`` refuses (``Infinity`` holds ``Inf`` too: such a
line is read the strict way as well, which costs only time)."""


@dataclass
class Keys:
    """What Arrow read of a run of lines, one entry per line in order.

    ``case_ids`` and ``trials`` hold each line's key, or ``None`` where the line's key is not usable as it stands
    (missing, empty, or a trial out of range): such a line is read the strict way, which words the problem.
    """

    case_ids: list[str | None]
    trials: list[int | None]
    agents: set
    """The ``(trial, (name, model))`` pairs of the run's lines with a usable key, ``(trial, None)`` for a line without
    an agent object; a name or model that is absent or null is ``"None"``, as ``str(None)`` writes it."""
    has_requests: bool
    """Whether a line with a usable key holds a ``request`` that is not null."""


def usable_lines(block: bytes, starts: list[int], ends: list[int]) -> list[bool]:
    """Which lines of ``block`` Arrow's reader may read (see the module docstring).

    Args:
        block: Bytes holding the lines.
        starts: Each line's first byte in ``block``.
        ends: Each line's end in ``block``: the index of its ``\\n`` (or of the ``\\r`` before it), or where the last
            line stops.

    Returns:
        One flag per line: it starts with ``{``, ends with ``}``, holds no ``Inf`` or ``-NaN``, has fewer brackets
        than :func:`_deep_brackets` and is UTF-8.
    """
    count = len(starts)
    if not count:
        return []
    usable = [end > start and block[start] == _OPEN and block[end - 1] == _CLOSE for start, end in zip(starts, ends)]
    first, last = starts[0], ends[-1]
    view = np.frombuffer(block, np.uint8, last - first, first)
    found = np.concatenate([_token_at(view, token) for token in _LENIENT_TOKENS])
    if len(found):
        lines = np.searchsorted(np.array(starts, np.int64) - first, found, side="right") - 1
        for line in np.unique(lines).tolist():
            usable[line] = False
    # "[" (0x5b) and "{" (0x7b) are the only bytes that read 0x7b with bit 0x20 set: one comparison finds both
    brackets = np.flatnonzero(np.bitwise_or(view, 0x20) == _OPEN)
    if len(brackets) >= _deep_brackets():  # counted per line only when the block holds that many at all
        relative = np.array(starts, np.int64) - first
        counts = np.diff(np.searchsorted(brackets, relative), append=len(brackets))
        for line in np.flatnonzero(counts >= _deep_brackets()).tolist():
            usable[line] = False
    if not _utf8(block, first, last):
        for line, (start, end) in enumerate(zip(starts, ends)):
            if usable[line] and not _utf8(block, start, end):
                usable[line] = False
    return usable


def _deep_brackets() -> int:
    """Brackets a line may hold and still be read by Python's ``json`` without reaching the recursion limit (half
    the limit: the reader's own call stack takes the rest)."""
    return sys.getrecursionlimit() // 2


def _token_at(view: np.ndarray, token: bytes) -> np.ndarray:
    """Where ``token`` starts in ``view`` (bytes as uint8): the places of its rarest byte, then the others compared
    there, all in numpy (a third of the time of ``bytes.find`` for each token on text with few capitals)."""
    anchor = 1 if token[0] == ord("-") else 0  # the capital letter: rarer in text than a minus sign
    places = np.flatnonzero(view == token[anchor]) - anchor
    places = places[(places >= 0) & (places <= len(view) - len(token))]
    for offset, byte in enumerate(token):
        if offset != anchor and len(places):
            places = places[view[places + offset] == byte]
    return places


def _utf8(block: bytes, start: int, end: int) -> bool:
    """Whether ``block[start:end]`` is UTF-8, checked by Arrow's validator (several GB/s) without a copy."""
    data = pa.py_buffer(block)
    offsets = pa.py_buffer(np.array([start, end], np.int64).tobytes())
    text = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, data])
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _key_table(block: bytes, start: int, end: int, lines: int) -> pa.Table | None:
    """:data:`KEY_SCHEMA`'s columns of the lines in ``block[start:end]``, one chunk; ``None`` when Arrow refuses
    them or does not read exactly ``lines`` objects."""
    data = pa.py_buffer(memoryview(block)[start:end])
    try:
        table = pj.read_json(pa.BufferReader(data), parse_options=_PARSE,
                             read_options=pj.ReadOptions(use_threads=False, block_size=max(end - start, 1 << 16)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table.combine_chunks() if table.num_rows == lines else None


def read_keys(block: bytes, start: int, end: int, lines: int) -> Keys | None:
    """The key fields of ``lines`` consecutive usable lines (:func:`usable_lines`) held by ``block[start:end]``, or
    ``None`` when Arrow refuses them or does not read exactly one object per line (the caller then splits the run).

    Args:
        block: Bytes holding the lines.
        start: The first line's first byte.
        end: The end of the last line (its ``\\n`` included or not).
        lines: How many lines the range holds.
    """
    table = _key_table(block, start, end, lines) if lines else None
    if table is None:
        return None
    case_ids, trials = table["case_id"].chunk(0), table["trial"].chunk(0)
    usable = pc.and_(pc.and_(pc.is_valid(case_ids), pc.greater(pc.utf8_length(case_ids), 0)),
                     pc.and_(pc.is_valid(trials), pc.and_(pc.greater_equal(trials, 0),
                                                          pc.less_equal(trials, TRIAL_MAX))))
    usable = usable.fill_null(False)
    agent = table["agent"].chunk(0)
    kept = pc.filter(pa.table({
        "trial": trials,
        "named": pc.is_valid(agent),
        "name": pc.fill_null(pc.struct_field(agent, "name"), "None"),
        "model": pc.fill_null(pc.struct_field(agent, "model"), "None"),
    }), usable)
    agents = set()
    for row in kept.group_by(["trial", "named", "name", "model"]).aggregate([]).to_pylist():
        agents.add((row["trial"], (row["name"], row["model"]) if row["named"] else None))
    requests = pc.and_(pc.is_valid(table["request"].chunk(0)), usable)
    has_requests = bool(pc.any(requests).as_py())
    if pc.all(usable).as_py():
        return Keys(case_ids.to_pylist(), trials.to_pylist(), agents, has_requests)
    keep = usable.to_pylist()
    return Keys([c if k else None for c, k in zip(case_ids.to_pylist(), keep)],
                [t if k else None for t, k in zip(trials.to_pylist(), keep)], agents, has_requests)


