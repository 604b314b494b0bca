"""Canonical argument values (docs/design.md "Canonical argument values").

Rules, each tested in ``tests/core/test_canonical.py``:

* Argument text is parsed as JSON (RFC 8259: ``NaN``/``Infinity`` and numbers that overflow a float are not
  JSON and make the call malformed).
* Object key order never matters (keys are sorted in the canonical text).
* Numbers compare by value: an integral float becomes an int (``250.0 -> 250``; tau-bench airline task 0 passes
  ``amount: 250`` where models write ``250.0`` and still earn reward 1). A boolean is not a number
  (``true != 1``) and a string is not a number (``"10" != 10``).
* Strings compare exactly; list order matters; ``null`` differs from an absent key.
* Empty (or whitespace-only) argument text and the JSON text ``null`` mean ``{}``. Text that parses to anything but
  an object (a list, a number, a string) or does not parse at all is *malformed*: the caller keeps the raw text and
  the parse error, it is never turned into ``{}``.
* An object that repeats a key (``{"amount": 1, "amount": 49.99}``) is ambiguous: RFC 8259 leaves its meaning to the
  reader, and Python's ``json`` silently keeps the last value. Argument text with a repeated key is malformed
  (choosing either value could score a call the agent never made), never guessed (:func:`reject_duplicate_keys`).
* A value that cannot be stored as UTF-8 JSON (a lone surrogate such as ``\ud800``), a non-finite number, or
  nesting deeper than :data:`MAX_DEPTH` is found by :func:`json_value_problem` without recursion, so callers can
  turn it into a typed error instead of a crash.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = [
    "canonical_value", "canonical_json", "canonical_loads", "canonical_dumps", "canonical_text", "may_hold_float", "compact_arguments", "loads_canonical_text", "parse_arguments", "diff_paths", "value_at", "strict_json_loads", "reject_duplicate_keys",
    "DuplicateKeyError", "repeated_keys", "repeated_key_at", "json_type_name",
    "json_value_problem", "text_holds_no_value_problem", "MAX_DEPTH", "MISSING", "dumps_text", "loads_text",
    "may_hold_wide_integer", "nesting_within", "kept_bytes", "holds_no_float", "ORJSON_CANONICAL", "orjson_canonical",
    "key_path", "same_scalar", "writable_text", "canonical_text_written",
]

MAX_DEPTH = 200
"""Deepest nesting of objects and lists accepted in a trace or in arguments (a real tool call nests a few levels;
Python's own recursion limit is about 1,000, and every recursive reader downstream must stay below it)."""


class _Missing:
    """Marker for an absent key in :func:`diff_paths` (distinct from JSON ``null``)."""

    def __repr__(self) -> str:
        return "<absent>"


MISSING = _Missing()


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} does not fit a float")
    return value


def _canonical_float(text: str) -> float | int:
    """``parse_float`` hook that reads a number as :func:`canonical_value` would leave it: finite, and an integral
    float as an int (``250.0 -> 250``, ``-0.0 -> 0``, ``1E2 -> 100``)."""
    value = _finite_float(text)
    return int(value) if value.is_integer() else value


def canonical_loads(text: str | bytes) -> Any:
    """``canonical_value(json.loads(text))`` (of JSON text or its UTF-8 bytes) in one pass: the parser itself turns
    integral floats into ints, so no Python walk over the value follows (the envelope digest reads every message
    this way, so a second walk would double its cost).

    Object keys are JSON strings, so the only values :func:`canonical_value` changes are floats. A repeated key keeps
    its last value, as ``json.loads`` does (use it on text this package serialised, not on argument text).

    Raises:
        ValueError: invalid JSON, ``NaN``/``Infinity`` or a number that overflows a float.
    """
    data = text.encode() if isinstance(text, str) else text
    if data[:1] in (b"{", b"[") and not _may_hold_float_spaced(data) and not may_hold_wide_integer(data):
        try:  # no float to make an int of, no integer orjson would read as a float: orjson reads the same value
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library names the error (or reads what orjson refuses, as before)
    return _CANONICAL_DECODER.decode(text if isinstance(text, str) else text.decode())


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads_canonical_text(text: str) -> Any:
    """The value of canonical JSON text this package wrote (:func:`canonical_dumps`): :func:`canonical_loads` of
    it. Canonical text holds no integral float (it is written as an int) and its floats are spelled as ``repr``
    spells them, which orjson reads back to the same float; so orjson reads it unless an integer beyond 64 bits
    may be in it (:func:`may_hold_wide_integer`), which orjson would read as a float."""
    data = text.encode()
    if may_hold_wide_integer(data):
        return _CANONICAL_DECODER.decode(text)
    return orjson.loads(data)


def text_holds_no_value_problem(text: str) -> bool:
    """True when parsed JSON ``text`` cannot hold what :func:`json_value_problem` looks for, read from the text alone:
    fewer ``{``/``[`` than :data:`MAX_DEPTH` (nesting cannot be deeper than the brackets opened), no escape of a
    surrogate, and no lone surrogate character (the text encodes as UTF-8). Non-finite numbers are refused by the
    parser itself (the argument decoder here, the traces reader's strict first reading). Anywhere in the text,
    strings included: ``False`` only means the parsed value is walked."""
    if text.count("{") + text.count("[") >= MAX_DEPTH:
        return False
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        return False
    return text.isascii() or _is_lone_surrogate_free(text)


class DuplicateKeyError(ValueError):
    """An object repeats a key (raised by :func:`reject_duplicate_keys`); ``key`` is the first repeated one."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key

    def __reduce__(self):  # pickles with its key, not its message
        return (type(self), (self.key,))


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` that refuses an object repeating a key (about 1.3 times the
    parse time of plain ``json.loads``, measured on tau-bench and bfcl trace lines).

    Raises:
        DuplicateKeyError: ``duplicate key 'amount'`` (the first repeated key; a ``ValueError``).
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


def json_type_name(value: Any) -> str:
    """The JSON name of a parsed value's type: ``object``, ``array``, ``string``, ``number``, ``boolean`` or ``null``
    (for messages: a user wrote JSON, not Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {dict: "object", list: "array", str: "string"}.get(type(value), type(value).__name__)


def repeated_keys(text: str) -> tuple[list[str], list[str]]:
    """The keys that some object of the JSON ``text`` repeats (RFC 8259 leaves their meaning to the reader, and
    Python's ``json`` silently keeps the last value). For naming them once a reading with
    :func:`reject_duplicate_keys` (or another hook) has found that some object does.

    Args:
        text: JSON text that parses (``NaN``/``Infinity`` allowed, as Python's ``json`` reads them).

    Returns:
        ``(anywhere, top_level)``: each repeated key once, in the order the objects close (inner objects first),
        and those repeated by the top-level object itself (empty unless the text is an object). ``([], [])`` when
        no object repeats a key.
    """
    anywhere: list[str] = []
    last: list[list[str]] = [[]]

    def collect(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        repeated: list[str] = []
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen and key not in repeated:
                    repeated.append(key)
                seen.add(key)
            anywhere.extend(key for key in repeated if key not in anywhere)
        last[0] = repeated  # the outermost object closes last
        return obj

    top = json.JSONDecoder(object_pairs_hook=collect).decode(text)
    return anywhere, (last[0] if isinstance(top, dict) else [])


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def repeated_key_at(text: str) -> tuple[str, int] | None:
    """Where JSON ``text`` (text that parses) first repeats a key within one object: ``(key, character offset of
    the repeated key)``, or ``None``. A scan over the text's strings and brackets (slower than
    :func:`repeated_keys`: for naming the line once a repetition is known)."""
    stack: list[set[str] | None] = []  # one set of keys per open object, None per open array
    pending: re.Match[str] | None = None  # the last string seen: a key when a colon follows it
    for token in _TOKENS.finditer(text):
        char = token.group()[0]
        if char == '"':
            pending = token
            continue
        if char == ":" and pending is not None and stack and stack[-1] is not None:
            key = json.loads(pending.group())
            if key in stack[-1]:
                return key, pending.start()
            stack[-1].add(key)
        elif char in "{[":
            stack.append(set() if char == "{" else None)
        elif char in "}]" and stack:
            stack.pop()
        pending = None
    return None


_CANONICAL_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_canonical_float)
_ARGUMENTS_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_canonical_float,
                                      object_pairs_hook=reject_duplicate_keys)
"""Decoders built once (``json.loads`` with keyword arguments builds a new one per call)."""
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_STRICT_UNIQUE_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                                          object_pairs_hook=reject_duplicate_keys)
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def strict_json_loads(text: str, *, unique_keys: bool = False) -> Any:
    """``json.loads`` that follows RFC 8259: ``NaN``/``Infinity`` and numbers overflowing a float raise.

    Args:
        text: JSON text.
        unique_keys: Also refuse an object that repeats a key (:func:`reject_duplicate_keys`).

    Raises:
        ValueError: invalid JSON (``json.JSONDecodeError`` is a ``ValueError``), a non-finite number, or a
            repeated key when ``unique_keys``.
        RecursionError: nesting deeper than Python's recursion limit.
    """
    if isinstance(text, str) and not text.startswith("\ufeff"):
        # a decoder built once: ``json.loads`` with keyword arguments builds a new one per call, which cost more
        # than the decoding itself on short argument texts (the legacy pass reads one per call)
        return (_STRICT_UNIQUE_DECODER if unique_keys else _STRICT_DECODER).decode(text)
    hook = reject_duplicate_keys if unique_keys else None  # bytes, or a BOM json.loads reports: its own path
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=hook)


def writable_text(text: str) -> str:
    """``text`` as UTF-8 can hold it: unchanged, unless it holds a lone surrogate (decoded from a ``\\udXXX``
    escape), which is written as that escape instead (``"A\\udbff"``, six characters for the one). For text
    that is recorded about a line rather than scored from it (an error's case id, a redacted field's path): a
    Parquet or JSON file cannot hold the lone surrogate itself.

    Args:
        text: Any ``str``.

    Returns:
        Text that ``str.encode("utf-8")`` accepts.
    """
    if text.isascii() or _is_lone_surrogate_free(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_lone_surrogate_free(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def nesting_within(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests at most ``max_depth`` objects/lists (the top-level one is depth 1), found
    by walking its objects and lists only (without recursion), never looking into a string: the one check of
    :func:`json_value_problem` left for a value orjson read, since orjson refuses non-finite numbers and lone
    surrogates itself."""
    level: list[Any] = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return False
        below: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            below += [child for child in children if isinstance(child, (dict, list))]
        level = below
    return True


def json_value_problem(value: Any, *, max_depth: int = MAX_DEPTH, where: str = "") -> str | None:
    """The first reason a parsed JSON value cannot be kept as it is, or ``None`` when it can.

    Checked without recursion (a value nested 100,000 deep is answered, not a ``RecursionError``): nesting deeper
    than ``max_depth`` objects/lists, a non-finite float (``NaN``, ``Infinity``, ``1e999`` as Python's ``json``
    reads them), a string or key holding a lone surrogate (not encodable as UTF-8, so no Parquet or JSON file can
    hold it).

    Args:
        value: A parsed JSON value.
        max_depth: Deepest nesting accepted (the top-level object is depth 1).
        where: Path prefix for the message (``"metadata"``).

    Returns:
        ``"<path>: <problem>"`` (paths as :func:`diff_paths` writes them) or ``None``.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        label = path or "(top level)"
        if isinstance(item, (dict, list)):
            if depth + 1 > max_depth:
                return f"{label}: nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and not _is_lone_surrogate_free(key):
                        return f"{label}: a key holds a lone surrogate (not valid UTF-8)"
                    stack.append((child, key_path(path, str(key)), depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{label}: {item!r} is not a JSON number (NaN, Infinity or out of a float's range)"
        elif isinstance(item, str) and not _is_lone_surrogate_free(item):
            return f"{label}: text holds a lone surrogate (not valid UTF-8)"
    return None


def canonical_value(value: Any) -> Any:
    """Return ``value`` with every integral float replaced by an int, recursively.

    Args:
        value: A JSON-compatible Python value (dict with str keys, list/tuple, str, int, float, bool, None).

    Returns:
        The same structure; dicts keep their keys (ordering is fixed later by :func:`canonical_json`), tuples
        become lists, ``-0.0`` becomes ``0``.

    Raises:
        ValueError: on a non-finite float or a value JSON cannot hold (a set, bytes, an object).
    """
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r} is not JSON")
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    raise ValueError(f"{type(value).__name__} value {value!r} is not JSON")


def kept_bytes(data: bytes) -> bytes:
    """A right-sized copy of ``data``, for bytes that a cache or a long-lived table keeps.

    ``orjson.dumps`` returns a bytes object holding the whole buffer it wrote into (at least 4 KB, measured with
    orjson 3.13 and ``tracemalloc``: 4,097 bytes for a 97-byte text), so a memo keyed by orjson's output held
    4 KB an entry whatever the text's length: ~270 MB in each worker for 65,536 argument objects. The copy costs
    one ``memcpy`` of the text.
    """
    return bytes(memoryview(data))


def dumps_text(value: Any, *, sort_keys: bool = False) -> str:
    """JSON text of a JSON value, compact (orjson: a tenth of the standard library's time on a long trace).

    The text parses back to an equal value; its spelling is orjson's (compact separators, its own float
    spelling), so it is for values this package reads back, never for digested bytes (those use
    :func:`canonical_dumps`). What orjson cannot write — an integer beyond 64 bits, a lone surrogate, a key that
    is not a string — is written by the standard library as ``json.dumps(value, ensure_ascii=False)`` does.

    Args:
        value: A JSON-compatible value (finite numbers: a NaN would be written as ``null``; callers pass values
            read from JSON text, which holds none).
        sort_keys: Sort object keys (as ``json.dumps(sort_keys=True)``).
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)


def loads_text(text: str | bytes) -> Any:
    """The value of JSON text (orjson; the standard library reads what orjson refuses, ``NaN``, or reads to another
    value: orjson reads an integer beyond 64 bits as a float, so text that may hold one,
    :func:`may_hold_wide_integer`, is read by the standard library). Equal to ``json.loads(text)`` for any text
    ``json.loads`` reads, except that a repeated key keeps its last value in both.

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``).
    """
    data = text.encode() if isinstance(text, str) else text
    if may_hold_wide_integer(data):
        return json.loads(text)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(text)


_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_WIDE_RUN = b"0" * 19


def may_hold_wide_integer(data: bytes) -> bool:
    """Whether JSON text (UTF-8 bytes) may hold an integer outside 64 bits, which orjson reads as a float instead
    of refusing it: ``True`` when 19 digits follow one another anywhere (an integer below -2**63 or above 2**64 - 1
    has at least 19; a long fraction or a digit run inside a string also answers ``True``, harmlessly). About
    1.6 µs per KB (a translation and one substring search, both in C)."""
    return data.translate(_DIGITS_AS_ZEROS).find(_WIDE_RUN) >= 0


_FLOAT_TOKEN = re.compile(rb"[:\[,]-?[0-9]+(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)(?=[,\]}])")
"""A float token in compact JSON: a number with a fraction or an exponent after ``:``, ``[`` or ``,`` and before
``,``, ``]`` or ``}``, as every number inside a value is. Text inside strings that looks like one matches too
(``"a:1.5]"``), which only sends a value the slow way; a redaction token's hex digits after its colon
(``redacted:11e5b8``) do not."""
_SEPARATORS_AND_MARKS = bytes.maketrans(b"[,eE", b"::..")
ORJSON_CANONICAL = (orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
                     | orjson.OPT_PASSTHROUGH_SUBCLASS)
"""orjson with sorted keys, refusing what canonical JSON does not write as orjson would (a datetime, a dataclass, a
subclass of str, int, dict or list), so that such a value takes the standard library's way and fails or is written
there as it always was."""


def may_hold_float(data: bytes) -> bool:
    """Whether compact JSON ``data`` may hold a float token (:data:`_FLOAT_TOKEN`). With the digits deleted and
    ``[``/``,`` written as ``:``, ``e``/``E`` as ``.``, and ``-`` deleted too, every float token becomes ``:.``:
    one substring search in C rules most texts out (a tenth of a 16 KB trace's texts hold a float, or text that
    looks like one: a redaction token's hex digits after its colon); the expression decides the rest."""
    if data.translate(_SEPARATORS_AND_MARKS, b"0123456789-").find(b":.") < 0:
        return False
    return _FLOAT_TOKEN.search(data) is not None


_SPACES = b" \t\n\r"
_FLOAT_TOKEN_SPACED = re.compile(rb"[:\[,][ \t\n\r]*-?[0-9]+[.eE]")


def _may_hold_float_spaced(data: bytes) -> bool:
    """:func:`may_hold_float` for JSON text that may have whitespace between the tokens (text from outside)."""
    if data.translate(_SEPARATORS_AND_MARKS, b"0123456789-" + _SPACES).find(b":.") < 0:
        return False
    return _FLOAT_TOKEN_SPACED.search(data) is not None


def orjson_canonical(value: Any) -> str | None:
    """The canonical text of a finite JSON value written by orjson (a tenth of the standard library's time on a
    16 KB trace), or ``None`` when it may differ from :data:`_CANONICAL_ENCODER`'s: a float (orjson spells some
    otherwise and keeps integral ones; checking each costs what the standard library's writing does), or a value
    orjson refuses (an integer beyond 64 bits, a lone surrogate, a key that is not a string). Everything else — strings, escapes, non-ASCII text, key order — orjson's sorted compact
    output writes as the standard library does, byte for byte (property tests in ``test_canonical_fast_paths``).
    A non-finite float is not a canonical value: orjson would write it as ``null``, so callers never pass one."""
    try:
        data = orjson.dumps(value, option=ORJSON_CANONICAL)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return _canonical_if_no_float(value, data)


def _canonical_if_no_float(value: Any, data: bytes) -> str | None:
    """:func:`orjson_canonical` of ``value`` given ``data``, its writing with :data:`ORJSON_CANONICAL`."""
    if data[:1] not in (b"{", b"[", b'"') and (b"." in data or b"e" in data or b"E" in data):
        return None  # a number on its own (no separator before it for the screen to see), true, false
    walked = len(data) >= _WALK_FROM
    if walked and holds_no_float(value):
        return data.decode()
    if may_hold_float(data) and (walked or not holds_no_float(value)):
        return None  # orjson spells some floats otherwise (1e-7, 0.00001) and keeps integral ones (250.0)
    return data.decode()


def canonical_text_written(value: Any, data: bytes) -> str:
    """:func:`canonical_text` of ``value`` given ``data``, its writing by ``orjson.dumps(value,
    option=ORJSON_CANONICAL)`` (a caller that also keeps that sorted writing, as the envelope does a trace's
    metadata, need not write the value twice): the same text."""
    text = _canonical_if_no_float(value, data)
    return canonical_text(value) if text is None else text


_WALK_FROM = 4096
"""Bytes of orjson's text from which the value is walked for floats (:func:`holds_no_float`) before its text is
screened: on a long trace the walk over its containers costs half the screen over its text (18 against 40 µs on
a 16 KB tau trace's messages), on a short one twice as much (5 against 2 µs on a bfcl trace's)."""


_NOT_FLOAT = frozenset((str, int, bool, type(None)))


def holds_no_float(value: Any) -> bool:
    """True when ``value`` is made of dicts, lists, strings, integers, booleans and ``None`` only (exact types, as
    JSON readers return them): then orjson's sorted compact writing is the canonical text, whatever its strings
    hold. Decides what the text screen (:func:`may_hold_float`) cannot: a float token inside a string (an
    argument text in a message, ``"{\"amount\":1.5}"``) is no float, and a walk over the value's containers
    (without recursion; a few µs on a bfcl trace) costs less than the standard library's writing it saves."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            children = item.values()
        elif kind is list:
            children = item
        else:
            if kind not in _NOT_FLOAT:
                return False
            continue
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append(child)
            elif kind not in _NOT_FLOAT:
                return False
    return True


def canonical_dumps(value: Any) -> str:
    """Canonical JSON text of a value that is already canonical (as :func:`parse_arguments` and
    :func:`canonical_loads` return it; finite): :func:`canonical_json` without its walk. Same bytes for such
    values; written by orjson when that gives them (:func:`orjson_canonical`)."""
    text = orjson_canonical(value)
    if text is None:
        text = _fragments_text(value)
    if text is not None:
        return text
    return _CANONICAL_ENCODER.encode(value)  # json.dumps(value, sort_keys=True, separators=(",", ":"),
    #                                          ensure_ascii=False), without building an encoder per call


def canonical_text(value: Any) -> str:
    """``canonical_json(value)`` of a finite JSON value (as read from JSON text, whose parser refuses ``NaN``):
    orjson's text when it holds no float, without :func:`canonical_value`'s walk; else the walk, then orjson's text
    again when no float is left (integral floats became ints: a recorded reward of ``0.0``), else the standard
    library's writing."""
    text = orjson_canonical(value)
    if text is None:
        text = _fragments_text(value)
    if text is not None:
        return text
    value = canonical_value(value)  # raises what it always raised, for what the fragments' writing refused
    text = orjson_canonical(value)
    return text if text is not None else _CANONICAL_ENCODER.encode(value)


def _with_float_fragments(value: Any) -> Any:
    """``canonical_value(value)`` with each remaining (non-integral, finite) float as an ``orjson.Fragment`` of
    ``float.__repr__``: the spelling the standard library's JSON encoder gives it. Values of other types are kept
    as they are, for orjson to write or refuse.

    Raises:
        ValueError: a non-finite float (as :func:`canonical_value`)."""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r} is not JSON")
        return int(value) if value.is_integer() else orjson.Fragment(float.__repr__(value))
    if kind is dict:
        return {k if type(k) is str else str(k): _with_float_fragments(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_with_float_fragments(v) for v in value]
    return value


def _fragments_text(value: Any) -> str | None:
    """The canonical text of a value holding floats, written by orjson (a third of the standard library's time on
    a bfcl case): integral floats become ints and the others are written as the standard library spells them
    (:func:`_with_float_fragments`), the rest as orjson's sorted compact writing, which is the standard library's
    byte for byte for strings, integers within 64 bits, booleans, null and key order. ``None`` for what orjson
    refuses or would write otherwise (an integer beyond 64 bits, a lone surrogate, a subclass, a non-finite
    float): the caller takes the standard library's way, which raises or writes it as it always did."""
    try:
        return orjson.dumps(_with_float_fragments(value), option=ORJSON_CANONICAL).decode()
    except (TypeError, ValueError, orjson.JSONEncodeError, RecursionError):
        return None


def canonical_json(value: Any) -> str:
    """Serialise ``value`` as canonical JSON text: sorted keys, compact separators, integral floats as ints.

    Two argument objects are equal under the scoring rules (docs/design.md "Canonical argument values") exactly
    when their canonical texts are equal.

    Raises:
        ValueError: see :func:`canonical_value`.
    """
    return canonical_dumps(canonical_value(value))


def compact_arguments(raw: str) -> tuple[dict, str] | None:
    """``(arguments, canonical text)`` of argument text that is exactly orjson's compact writing of a JSON object
    without floats (:func:`_compact_object`; what :func:`parse_arguments` and :func:`canonical_dumps` give for
    it), or ``None`` for any other text. Without a float, orjson's sorted writing is the canonical text."""
    parsed = _compact_object(raw)
    if parsed is None:
        return None
    return parsed, orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS).decode()


def float_arguments(raw: str) -> tuple[dict, str] | None:
    """``(arguments, canonical text)`` of argument text holding an object with floats, read by orjson where that
    reading provably equals the strict one (:func:`parse_arguments`) — what :meth:`tooleval.models.Call.from_raw`
    gives for it, at a fifth of its time; ``None`` when it cannot tell (the text is then read the strict way).

    The guards are :func:`_spaced_object`'s but for the floats: fewer brackets than :data:`MAX_DEPTH`, no ``\\u``
    escape, no integer beyond 64 bits, and no repeated key (the colons of the text and of orjson's writing counted
    alike). orjson reads a float to the same double as the standard library (both round correctly) and refuses
    what overflows; :func:`canonical_value` then turns integral floats into ints, as the strict reading's
    ``parse_float`` does, and the canonical text spells the other floats as the standard library does
    (:func:`_fragments_text`)."""
    if not raw.startswith("{") or len(raw) >= MAX_DEPTH and raw.count("{") + raw.count("[") >= MAX_DEPTH:
        return None  # (a text shorter than MAX_DEPTH has fewer brackets: they are not counted)
    try:
        data = raw.encode()
    except UnicodeEncodeError:
        return None
    if b"\\u" in data or may_hold_wide_integer(data):
        return None
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if data.count(b":") != orjson.dumps(parsed).count(b":"):
        return None
    args = canonical_value(parsed)
    text = _fragments_text(args)
    return None if text is None else (args, text)


def _compact_object(raw: str) -> dict | None:
    """The arguments of text that is exactly orjson's compact writing of a JSON object without floats (nine in ten
    model-written argument texts), read by orjson; ``None`` for any other text, which the strict reader reads.

    orjson alone would accept what the strict reading refuses: it keeps the last of a repeated key, reads an
    integral float as a float and an integer beyond 64 bits as a float, and nests deeper than :data:`MAX_DEPTH`.
    Text equal, byte for byte, to orjson's writing of what it read holds no repeated key (the writing of a dict
    names each key once) and no integer beyond 64 bits (it would be written back as a float); without a float
    token there is no float to make an int of; and with fewer brackets than :data:`MAX_DEPTH` the nesting is
    within bounds. Lone surrogates do not encode (or orjson refuses their escapes)."""
    if not raw.startswith("{") or len(raw) >= MAX_DEPTH and raw.count("{") + raw.count("[") >= MAX_DEPTH:
        return None  # (a text shorter than MAX_DEPTH has fewer brackets: they are not counted)
    try:
        data = raw.encode()
        parsed = orjson.loads(data)
    except (UnicodeEncodeError, orjson.JSONDecodeError):
        return None
    written = orjson.dumps(parsed)  # text opening with { that orjson reads is an object
    if written == data:
        return None if may_hold_float(data) else parsed
    return _spaced_object(data, parsed, written)


def _spaced_object(data: bytes, parsed: dict, written: bytes) -> dict | None:
    """``parsed`` (orjson's reading of argument text ``data``, which it writes back as ``written``) when that
    reading provably equals the strict one although the text is spelled otherwise (the standard library's ``", "``
    and ``": "`` separators: every bfcl argument text); else ``None``.

    The same guards as the compact reading, each made explicit: no integer beyond 64 bits
    (:func:`may_hold_wide_integer`), no float token even with spaces before it, and no repeated key — seen by
    counting colons, as :func:`tooleval.capture.recorded.fast_object` does: each member has one colon in both
    texts and a colon inside a string is itself in both, so a member orjson dropped takes its colon away; a
    ``\\u`` escape (a colon or a surrogate spelled so) sends the text the strict way."""
    if b"\\u" in data or may_hold_wide_integer(data) or _may_hold_float_spaced(data):
        return None
    return parsed if data.count(b":") == written.count(b":") else None


def parse_arguments(raw: str | dict | None) -> tuple[dict | None, str | None]:
    """Parse a tool call's argument text.

    Args:
        raw: JSON text as emitted by the model (OpenAI ``function.arguments``), an already-parsed object
            (LangChain, tau2) or ``None``.

    Returns:
        ``(args, None)`` on success, where ``args`` is a dict (``{}`` for empty text or ``null``), or
        ``(None, error)`` for a malformed call, ``error`` saying why (e.g. ``"not a JSON object: list"``).
    """
    if raw is None:
        return {}, None
    if isinstance(raw, dict):
        problem = json_value_problem(raw)
        if problem is not None:
            return None, f"not representable: {problem}"
        try:
            return canonical_value(raw), None
        except ValueError as exc:
            return None, str(exc)
    if not isinstance(raw, str):
        return None, f"arguments must be JSON text or an object, got {type(raw).__name__}"
    compact = _compact_object(raw)
    if compact is not None:
        return compact, None
    if raw.strip() == "":
        return {}, None
    try:  # the strict reading of strict_json_loads(unique_keys=True), integral floats read as ints on the way
        if raw.startswith("\ufeff"):  # json.loads names a leading BOM in its error; the decoder alone does not
            json.loads(raw)
        parsed = _ARGUMENTS_DECODER.decode(raw)
    except RecursionError:
        return None, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    if parsed is None:
        return {}, None
    if not isinstance(parsed, dict):
        return None, f"not a JSON object: {type(parsed).__name__}"
    problem = None if text_holds_no_value_problem(raw) else json_value_problem(parsed)
    if problem is not None:
        return None, f"not representable: {problem}"
    return parsed, None  # already canonical: string keys, integral floats read as ints


def key_path(prefix: str, key: str) -> str:
    simple = key.isidentifier() or key.replace("-", "_").isidentifier()
    part = key if simple else json.dumps(key, ensure_ascii=False)
    if not prefix:
        return part if simple else f"[{part}]"
    return f"{prefix}.{part}" if simple else f"{prefix}[{part}]"


def same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def diff_paths(expected: Any, observed: Any, prefix: str = "") -> list[str]:
    """List the argument paths at which two canonical values differ.

    Paths use dots for object keys and ``[i]`` for list positions (``flights[0].date``); a key that is an
    identifier, possibly with hyphens (``first-name``), is written bare, any other key is quoted (``["a.b"]``).
    A key present on one side only, a type change, or a list index past the other list's end is reported at that
    path; equal values contribute nothing.

    Args:
        expected: Canonical reference value (usually the argument dict).
        observed: Canonical observed value.
        prefix: Path of ``expected``/``observed`` inside the enclosing value ("" at the top).

    Returns:
        Sorted-by-position list of differing paths; empty when the values are equal.
    """
    if isinstance(expected, dict) and isinstance(observed, dict):
        paths: list[str] = []
        for key in sorted(set(expected) | set(observed)):
            paths += diff_paths(expected.get(key, MISSING), observed.get(key, MISSING), key_path(prefix, key))
        return paths
    if isinstance(expected, list) and isinstance(observed, list):
        paths = []
        for i in range(max(len(expected), len(observed))):
            left = expected[i] if i < len(expected) else MISSING
            right = observed[i] if i < len(observed) else MISSING
            paths += diff_paths(left, right, f"{prefix}[{i}]")
        return paths
    if expected is MISSING or observed is MISSING:
        return [] if expected is observed else [prefix]
    if isinstance(expected, (dict, list)) or isinstance(observed, (dict, list)):
        return [prefix]
    return [] if same_scalar(expected, observed) else [prefix]


_PATH_PART = re.compile(r'\.?([\w-]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]|\[\]')


def value_at(value: Any, path: str) -> Any:
    """The value at an argument path written as :func:`diff_paths` writes it (``amount``, ``flights[0].date``,
    ``["a.b"]``; ``items[]``, a rule path for a whole unordered list, names the list itself).

    Args:
        value: A canonical value (usually an argument object).
        path: The path; ``""`` is ``value`` itself.

    Returns:
        The value there, or :data:`MISSING` when a key or index along the path is absent (or the path cannot be
        read).
    """
    position = 0
    while position < len(path):
        part = _PATH_PART.match(path, position)
        if part is None:
            return MISSING
        position = part.end()
        key, index, quoted = part.group(1), part.group(2), part.group(3)
        if key is not None or quoted is not None:
            name = key if key is not None else json.loads(quoted)
            if not isinstance(value, dict) or name not in value:
                return MISSING
            value = value[name]
        elif index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return MISSING
            value = value[int(index)]
    return value
