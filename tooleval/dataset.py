"""Loading and validating a dataset folder (docs/design.md "Dataset folder").

A dataset folder holds ``dataset.json``, ``cases.jsonl``, an optional ``tools.json`` and recorded traces. Every
problem with these files is an :class:`~tooleval.errors.InputFileError` naming the file, the line and the fix,
raised before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, Callable

import orjson
from pydantic import ValidationError

from tooleval.canonical import (MAX_DEPTH, canonical_text, canonical_value, json_value_problem,
                                may_hold_wide_integer, nesting_within)
from tooleval.errors import InputFileError, UnsafeRevisionError, json_problem
from tooleval.models import PLAIN_VALUES, REVISION_PATTERN, Case, DatasetManifest, ToolSpec
from tooleval.capture.recorded import (TraceLine, decode_line, fast_object, iter_json_lines, load_unique_json,
                                      parse_json_line)

__all__ = ["Dataset", "Cases", "CasePart", "CaseReferences", "load_case_range", "join_case_parts", "is_loaded",
           "stream_cases", "stream_case_references", "load_dataset", "load_dataset_cached", "load_dataset_trusted",
           "check_name", "case_digest", "case_digests", "case_slices", "content_digest_of", "plain_case_digest",
           "find_traces_file", "traces_in_dataset", "tool_schema_version"]

SCHEMA_VERSIONS = (1,)
DATASET_DOCS = "see the README's 'Datasets' section for the dataset folder format."


def check_name(value: object, *, what: str, path: str | Path | None = None) -> str:
    """Refuse a revision or run id that is not a safe partition value.

    Args:
        value: The proposed name.
        what: ``"revision"`` or ``"run id"`` (used in the message).
        path: File the value came from, if any.

    Returns:
        ``value`` unchanged.

    Raises:
        UnsafeRevisionError: unless ``value`` is 1–64 characters of ``[A-Za-z0-9._-]`` starting with a letter or
            digit (so ``..``, ``a/b``, spaces, non-ASCII and the empty string are refused).
    """
    if not isinstance(value, str) or not REVISION_PATTERN.fullmatch(value):
        raise UnsafeRevisionError(
            path,
            None,
            f"unsafe {what} {value!r}: it becomes a folder name, so it must be 1-64 characters of "
            "[A-Za-z0-9._-] starting with a letter or digit.",
            f"choose a {what} such as 'v1', '2024-01-01' or 'rev_003'.",
        )
    return value


def case_digest(case: Case) -> str:
    """sha256 of a case's canonical JSON content (cache key part for generation). ``pairing`` at its default is
    left out, so that cases written before it existed keep their digests (and their cached generations)."""
    content = case.model_dump(mode="json")
    if content.get("pairing") == "maximum":
        del content["pairing"]
    # canonical_text gives canonical_json's bytes for a finite JSON value (what a JSON dump of a validated case
    # is), written by orjson without a walk when the case holds no float
    return hashlib.sha256(canonical_text(content).encode()).hexdigest()


@dataclass
class Dataset:
    """A loaded dataset: manifest, cases by id (in file order), tool specs and a content digest."""

    path: Path
    manifest: DatasetManifest
    cases: Mapping[str, Case]
    """By ``case_id`` in file order: a :class:`Cases` read on demand (or a dict, when a caller narrows it)."""
    tools: list[ToolSpec] = field(default_factory=list)
    content_digest: str = ""
    """sha256 over dataset.json, cases.jsonl and tools.json bytes: a revision's identity."""

    @property
    def revision(self) -> str:
        return self.manifest.revision


def _deep_line(text: str, limit: int = 500) -> int | None:
    """The 1-based line where brackets outside strings first nest deeper than ``limit``, else None."""
    depth, line, in_string, escaped = 0, 1, False, False
    for char in text:
        if char == "\n":
            line += 1
        elif in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}":
            depth -= 1
    return None


def _key_line(text: str, key: str) -> int:
    """1-based line of the first ``"key":`` in JSON text; 1 (where the object starts) when absent."""
    import re

    found = re.search(r'"' + re.escape(key) + r'"\s*:', text) if key else None
    return text.count("\n", 0, found.start()) + 1 if found else 1


def _element_lines(text: str) -> list[int]:
    """1-based start line of each element of the top-level JSON array in ``text`` (already known to parse)."""
    decoder, lines, index = json.JSONDecoder(), [], text.index("[") + 1
    while True:
        while index < len(text) and text[index] in " \t\r\n,":
            index += 1
        if index >= len(text) or text[index] == "]":
            return lines
        lines.append(text.count("\n", 0, index) + 1)
        index = decoder.raw_decode(text, index)[1]


def _read_json(path: Path) -> object:
    return _read_json_text(path)[0]


def _read_json_text(path: Path) -> tuple[object, str]:
    """A whole-file JSON document of a dataset (``dataset.json``, ``tools.json``) and its text, read at most
    :func:`tooleval._bounded.max_document_bytes` bytes and nested at most :data:`MAX_DEPTH` levels.

    Raises:
        InputFileError: missing, unreadable, too large, not UTF-8, not JSON, repeating a key, or nested too deep
            (naming the file, the line where known, and the fix).
    """
    from tooleval._bounded import read_bounded

    try:
        raw = read_bounded(path, what=f"{path.name}")
    except FileNotFoundError:
        raise InputFileError(path, None, "file not found.", "create it or point --dataset at a dataset folder.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputFileError(path, line, f"not UTF-8 text ({exc.reason}).", "save the file as UTF-8.") from None
    del raw
    try:
        value = load_unique_json(path, text)
    except json.JSONDecodeError as exc:
        raise InputFileError(path, exc.lineno, f"not valid JSON ({json_problem(exc)}).",
                             "repair the JSON.") from None
    except RecursionError:
        raise InputFileError(path, _deep_line(text), "nested too deeply to read (arrays/objects inside each "
                             "other beyond Python's recursion limit).", "flatten that part of the file.") from None
    if not nesting_within(value, MAX_DEPTH):  # every reader after this one (models, schemas) recurses into it
        raise InputFileError(path, _deep_line(text, MAX_DEPTH), f"nested deeper than {MAX_DEPTH} levels "
                             "(arrays/objects inside each other).", "flatten that part of the file.")
    return value, text


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"{where}: {err['msg']}"


CASE_CACHE = 2_048
"""Parsed cases a :class:`Cases` mapping keeps (most recently used first out last): a shard asks for each of its
cases a few times in a row, never for every case of a large dataset at once."""


def _parse_case(path: Path, number: int, data: object, checked: bool = False, plain: bool = False) -> Case:
    """One ``cases.jsonl`` line's JSON as a :class:`Case` (an integer ``case_id`` is read as its text).

    Args:
        checked: The line was checked when the dataset was loaded: only the model is built again.
        plain: The reading proved the values free of non-finite numbers, lone surrogates and deep nesting
            (:data:`tooleval.models.PLAIN_VALUES`).

    Raises:
        InputFileError: a non-finite number, an invalid case or one nested too deeply (file and line named).
    """
    if checked and isinstance(data, dict):
        if isinstance(data.get("case_id"), int):
            data["case_id"] = str(data["case_id"])
        return Case.model_validate(data, context=_PLAIN if plain else None)
    return _parse_new_case(path, number, data, plain)[0]


_PLAIN = {PLAIN_VALUES: True}


def _read_line_value(raw: bytes) -> tuple[object, bool]:
    """``(value, plain)`` of a line of ``cases.jsonl`` that the dataset's load read strictly: orjson's reading when
    it reads the line to the same value (not when it may hold an integer beyond 64 bits), which then is plain if
    the line has fewer than :data:`MAX_DEPTH` brackets; else ``json.loads``' (not plain).

    Raises:
        ValueError: not JSON.
    """
    if not may_hold_wide_integer(raw):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        else:
            return value, raw.count(b"{") + raw.count(b"[") < MAX_DEPTH
    return json.loads(raw), False


def _parse_new_case(path: Path, number: int, data: object, plain: bool = False) -> tuple[Case, str]:
    """A line read for the first time: checked whole, as :func:`_parse_case` says; returns the case and its
    :func:`case_digest` (computing it is part of the check: it walks every value). ``plain``: the line's reading
    proved that no value is a non-finite number or holds a lone surrogate (:func:`_case_line`), so the values are
    not walked for them."""
    problem = None if plain else json_value_problem(data, max_depth=10**9)  # depth: the line reader's concern
    if problem is not None:
        # the fix names the kind of value the problem is about: a number, or text with a lone surrogate
        fix = ("write the character itself there, or a whole surrogate pair (\\ud83d\\ude00); a lone "
               "\\udXXX escape is not text" if "lone surrogate" in problem else
               "write a finite JSON number (or a string) there; NaN, Infinity and 1e999 are not JSON numbers")
        raise InputFileError(path, number, f"a case cannot hold this value: {problem}.", fix + ".")
    if isinstance(data, dict) and isinstance(data.get("case_id"), int):
        data["case_id"] = str(data["case_id"])
    try:
        case = Case.model_validate(data, context=_PLAIN if plain else None)
        digest = case_digest(case)
    except ValidationError as exc:
        raise InputFileError(path, number, f"not a valid case: {_first_error(exc)}.", "fix that field.") from None
    except RecursionError:
        raise InputFileError(path, number, "a case nested too deeply to read.", "flatten that case.") from None
    except ValueError as exc:  # pydantic's writer gives up at ~255 levels of nesting, before Python's reader does
        if "depth" not in str(exc):
            raise
        raise InputFileError(path, number, "a case nested too deeply to read.", "flatten that case.") from None
    return case, digest


_PLAIN_TEXT_FIELDS = ("slice", "risk", "owner", "last_reviewed")
"""Fields of a case that are text or null (a value of another type is the model's to refuse or coerce)."""

_PLAIN_FIELDS = frozenset(("case_id", "input", "expected_calls", "expected_outputs", "metadata", "provenance")
                          + _PLAIN_TEXT_FIELDS)
"""The fields of the cases nearly every dataset holds (the bundled and example datasets, the importers' and the
synthetic corpora's): a case with no other field is checked and digested by :func:`plain_case_digest` without a
model."""

_CALL_FIELDS = frozenset(("name", "args"))


@lru_cache(maxsize=1)
def _default_dump() -> dict:
    """The fields :meth:`Case.model_dump` writes for a case that gives none but the required ones, as written (its
    defaults: taken from the model, so that a field added with a default is written here too)."""
    dump = Case.model_validate({"case_id": "c", "input": "", "expected_calls": []}).model_dump(mode="json")
    for name in ("case_id", "input", "expected_calls", "pairing"):  # the required ones, and what case_digest drops
        del dump[name]
    return dump


def plain_case_digest(data: object, *, digest: bool = True) -> str | None:
    """:func:`case_digest` of the case a line holds, when it is a valid case of the common shape, computed from the
    line's values without building the model (a fifth of the time of :meth:`Case.model_validate` plus the digest
    on a bfcl case); ``None`` when the line is of another shape, or not a valid case: the model then checks it and
    words the problem.

    Args:
        data: A line's value as read by orjson (no non-finite number, no lone surrogate, no nesting
            :data:`~tooleval.canonical.MAX_DEPTH` deep: :data:`tooleval.models.PLAIN_VALUES`).

    The common shape, each field as the model would accept it unchanged: only the fields of
    :data:`_PLAIN_FIELDS`; ``case_id`` non-empty text; ``input`` text, or a list of chat messages (objects with a
    non-empty text ``role``); ``expected_calls`` a list of ``{"name": text, "args": object or null}`` (no rules of
    their own); ``expected_outputs`` a list of text or null; ``metadata`` an object or null; the text fields text
    or null. Its digest is that of the model's dump: the defaults of every other field, each expected call as the
    model writes it. ``digest=False`` only checks the shape (``""`` for a case of it)."""
    if type(data) is not dict or not _PLAIN_FIELDS.issuperset(data):
        return None
    case_id, given, calls = data.get("case_id"), data.get("input", _ABSENT), data.get("expected_calls")
    if type(case_id) is not str or not case_id or type(calls) is not list:
        return None
    if type(given) is list:
        for message in given:
            if type(message) is not dict:
                return None
            role = message.get("role")
            if type(role) is not str or not role:
                return None
    elif type(given) is not str:
        return None
    for name in _PLAIN_TEXT_FIELDS:
        value = data.get(name)
        if value is not None and type(value) is not str:
            return None
    outputs, metadata = data.get("expected_outputs"), data.get("metadata")
    if outputs is not None and (type(outputs) is not list or any(type(text) is not str for text in outputs)):
        return None
    if metadata is not None and type(metadata) is not dict:
        return None
    written = []
    for call in calls:
        if type(call) is not dict or not _CALL_FIELDS.issuperset(call) or type(call.get("name")) is not str:
            return None
        args = call.get("args")
        if args is None:
            args = {}
        elif type(args) is not dict:
            return None
        # the model keeps canonical arguments; their canonical text is that of the arguments as given
        written.append({"name": call["name"], "args": args, "args_raw": None, "parse_error": None,
                        "argument_rules": None})
    if not digest:
        return ""
    content = {**_default_dump(), **data, "expected_calls": written}
    return hashlib.sha256(canonical_text(content).encode()).hexdigest()


_ABSENT = object()


class Cases(Mapping[str, Case]):
    """A dataset's cases by ``case_id``, in file order, read from ``cases.jsonl`` when asked for, because every
    case of a large dataset held as a pydantic model in every process of a run costs ~0.5 GB at 142,858 cases. Holds
    only each case's ``(byte offset, line number)`` and the :data:`CASE_CACHE` most recently used cases; every
    line was validated when the dataset was loaded. Read-only, like the dict it stands for.

    A full load also keeps each case's :func:`case_digest` and ``slice`` (what a run's plan and gate need of
    every case: asking the cases for them would read the whole file again, ~7 s per pass at 142,858 cases); a
    trusted load (:func:`load_dataset_trusted`, in a run's workers) keeps neither, and :meth:`digests` /
    :meth:`slices` then read them in one pass."""

    def __init__(self, path: Path, index: dict[str, tuple[int, int]], digests: dict[str, str] | None = None,
                 slices: dict[str, str | None] | None = None, confidential: frozenset[str] | None = None):
        self._path = path
        self._index = index
        self._recent: dict[str, Case] = {}
        self._digests = digests
        self._slices = slices
        self._confidential = confidential

    def confidential_tools(self) -> frozenset[str]:
        """Names of the tools that some case's own tool specs declare ``confidential_fields`` for (kept by a full
        load; a trusted load reads every case for them)."""
        if self._confidential is None:
            self._confidential = frozenset(tool.name for case in self.values() for tool in case.tools or ()
                                           if tool.confidential_fields)
        return self._confidential

    def digests(self) -> dict[str, str]:
        """``case_id -> case_digest`` of every case, in file order (the caller must not change it)."""
        if self._digests is None:
            self._digests = {case_id: case_digest(case) for case_id, case in self.items()}
        return self._digests

    def slices(self) -> dict[str, str | None]:
        """``case_id -> slice`` of every case, in file order (the caller must not change it)."""
        if self._slices is None:
            self._slices = {case_id: case.slice for case_id, case in self.items()}
        return self._slices

    def __getitem__(self, case_id: str) -> Case:
        case = self._recent.pop(case_id, None)
        if case is None:
            offset, number = self._index[case_id]  # KeyError for a case the dataset does not hold
            case = self._read(case_id, offset, number)
        self._keep(case_id, case)
        return case

    def _keep(self, case_id: str, case: Case) -> None:
        """Keep ``case`` as the most recently used, dropping the least recently used beyond :data:`CASE_CACHE`."""
        if case_id not in self._recent and len(self._recent) >= CASE_CACHE:
            self._recent.pop(next(iter(self._recent), None), None)
        self._recent[case_id] = case

    def read_ahead(self, case_ids: Iterable[str]) -> None:
        """Read the cases of ``case_ids`` not kept yet, in file order through one open file, and keep them (up to
        :data:`CASE_CACHE`), so that asking for them one by one next reads nothing: a batch of rows asks for its
        few hundred cases at once, and opening the file and seeking for each cost more than parsing it.

        Raises:
            KeyError: an id the dataset does not hold (before anything is read).
            InputFileError: a line changed since the dataset was loaded.
        """
        wanted = sorted((self._index[case_id], case_id) for case_id in dict.fromkeys(case_ids)
                        if case_id not in self._recent)[:CASE_CACHE]
        if not wanted:
            return
        with open(self._path, "rb", buffering=1 << 16) as handle:
            for (offset, number), case_id in wanted:
                self._keep(case_id, self._read(case_id, offset, number, handle))

    def _read(self, case_id: str, offset: int, number: int, handle: BinaryIO | None = None) -> Case:
        if handle is None:
            with open(self._path, "rb") as own:
                return self._read(case_id, offset, number, own)
        if handle.tell() != offset:
            handle.seek(offset)
        raw = handle.readline()
        try:  # the line was read strictly when the dataset was loaded: orjson reads it to the same value now
            value, plain = _read_line_value(raw)
            case = _parse_case(self._path, number, value, checked=True, plain=plain)
        except (ValueError, InputFileError, RecursionError):  # ValidationError is a ValueError
            case = None
        if case is None or case.case_id != case_id:
            raise InputFileError(self._path, number, f"changed after it was read (case {case_id!r} is no longer "
                                 "on this line).", "keep the dataset unchanged during a run, and run again.")
        return case

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def items(self) -> ItemsView[str, Case]:
        """Every ``(case_id, case)`` in file order, read in one pass over the file (the recent cases are kept)."""
        return _StreamedItems(self)

    def values(self) -> ValuesView[Case]:
        """Every case in file order, read in one pass over the file."""
        return _StreamedValues(self)

    def _stream(self) -> Iterator[tuple[str, Case]]:
        with open(self._path, "rb") as handle:
            for case_id, (offset, number) in self._index.items():
                yield case_id, self._read(case_id, offset, number, handle)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, case_id: object) -> bool:
        return case_id in self._index


class _StreamedItems(ItemsView):
    def __iter__(self) -> Iterator[tuple[str, Case]]:
        return self._mapping._stream()


class _StreamedValues(ValuesView):
    def __iter__(self) -> Iterator[Case]:
        return (case for _, case in self._mapping._stream())


@dataclass
class CasePart:
    """What the lines of one byte range of ``cases.jsonl`` hold (:func:`load_case_range`), before the ranges are
    joined (:func:`join_case_parts`): each valid case's id, place, digest and slice, in line order, up to the first
    line that is not a valid case. Line numbers count from 1 at the range's start."""

    lines: int = 0
    """Lines read in the range, blank ones included."""
    ids: list[str] = field(default_factory=list)
    places: list[tuple[int, int]] = field(default_factory=list)
    """``(byte offset in the file, line number in the range)`` of each case."""
    digests: list[str] = field(default_factory=list)
    slices: list[str | None] = field(default_factory=list)
    confidential: set[str] = field(default_factory=set)
    """Names of the tools that a case's own tool specs declare ``confidential_fields`` for."""
    failure: InputFileError | None = None
    """The first line that stopped the reading (not a case, not JSON, too long), its line counted in the range."""


def load_case_range(path: Path, span: tuple[int, int] | None = None) -> CasePart:
    """Read and check the cases of ``cases.jsonl``, or of one byte range of it, each line as :func:`load_dataset`
    does (the same reader, the same validation and :func:`case_digest`); whether a case id repeats one of another
    line is decided when the ranges are joined.

    Args:
        path: The dataset's ``cases.jsonl``.
        span: ``(start, end)`` byte offsets at line starts (:func:`tooleval.capture.recorded.trace_spans`);
            ``None``: the whole file.

    Returns:
        A :class:`CasePart`; a problem tied to a line is kept in its ``failure`` (the cases before it are kept), so
        that a worker process hands it back with the range's other cases.

    Raises:
        InputFileError: the file is missing or cannot be read.
    """
    part = CasePart()
    start = 0 if span is None else span[0]
    ends = [start]  # where each line read so far ends, blank lines included: line n starts at ends[n - 1]

    def read_line(number: int, raw: bytes) -> TraceLine | None:
        ends.append(ends[-1] + len(raw))
        part.lines = number
        return _case_line(path, number, raw)

    try:
        for line in iter_json_lines(path, missing="file not found.", fix="every dataset folder needs a cases.jsonl.",
                                    parse_line=read_line, span=span):
            known = plain_case_digest(line.data) if line.plain else None
            if known is not None:  # a valid case of the common shape: no model needed for its digest
                part.ids.append(line.data["case_id"])
                part.places.append((ends[line.line - 1], line.line))
                part.digests.append(known)
                part.slices.append(line.data.get("slice"))
                continue
            case, digest = _parse_new_case(path, line.line, line.data, plain=line.plain)
            part.ids.append(case.case_id)
            part.places.append((ends[line.line - 1], line.line))
            part.digests.append(digest)
            part.slices.append(case.slice)
            if case.tools:
                part.confidential.update(tool.name for tool in case.tools if tool.confidential_fields)
    except InputFileError as exc:
        if exc.line is None:
            raise
        part.failure = exc
    return part


def join_case_parts(path: Path, parts: Iterable[CasePart]) -> "Cases":
    """The :class:`Cases` of ``cases.jsonl`` from its consecutive ranges' parts, in file order, raising what one
    pass over the whole file raises first: a case id already given on an earlier line, or a range's failure (line
    numbers made absolute).

    Raises:
        InputFileError: a duplicate ``case_id``, a line that is not a valid case, or a file without a case.
    """
    index: dict[str, tuple[int, int]] = {}
    digests: dict[str, str] = {}
    slices: dict[str, str | None] = {}
    confidential: set[str] = set()
    base = 0
    for part in parts:
        for case_id, (offset, number), digest, slice_ in zip(part.ids, part.places, part.digests, part.slices):
            number += base
            if case_id in index:
                raise InputFileError(
                    path,
                    number,
                    f"duplicate case_id {case_id!r} (first on line {index[case_id][1]}).",
                    "give every case a unique case_id.",
                )
            index[case_id] = (offset, number)
            digests[case_id] = digest
            slices[case_id] = slice_
        if part.failure is not None:
            failure = part.failure
            raise type(failure)(failure.path, failure.line + base, failure.problem, failure.fix)
        confidential |= part.confidential
        base += part.lines
    if not index:
        raise InputFileError(path, None, "holds no case: there is nothing to evaluate, and an empty run would pass "
                             "its gate.", "add at least one case (one JSON object per line).")
    return Cases(path, index, digests, slices, frozenset(confidential))


def _load_cases(path: Path) -> Cases:
    return join_case_parts(path, [load_case_range(path)])


def _case_line(path: Path, number: int, raw: bytes) -> TraceLine | None:
    """One ``cases.jsonl`` line read as the strict reader reads it (``json.loads`` refusing a repeated key:
    :func:`tooleval.capture.recorded.parse_json_line`, whose errors it raises), by orjson when that provably gives
    the same value (:func:`tooleval.capture.recorded.fast_object`, a fifth of the strict reader's time on a bfcl
    case); ``None`` for a blank line.

    An object orjson read is ``plain``: orjson refuses ``NaN``, ``Infinity``, a number out of a float's range and a
    lone surrogate, so :func:`json_value_problem` would find nothing in it. A line with :data:`MAX_DEPTH` brackets
    or more is read the strict way, which names a nesting too deep for Python's reader as it always did.

    Raises:
        InputFileError: not UTF-8, not JSON, nested too deeply, or an object repeats a key (file and line named).
    """
    text = decode_line(path, number, raw)
    if not text.strip():
        return None
    text = text.rstrip()
    if text.count("{") + text.count("[") < MAX_DEPTH:
        data = fast_object(text)
        if data is not None:
            return TraceLine(number, data, plain=True)
    return TraceLine(number, parse_json_line(path, number, text, unique_keys=True))


def _local(path: str | Path) -> Path:
    """``path``, or for an fsspec URL (``--dataset s3://…``) this machine's copy of it
    (:func:`tooleval.storage._machine.local_copy`; imported lazily: only a URL needs the storage layer)."""
    if isinstance(path, str) and "://" in path:
        from tooleval.storage import local_copy

        return local_copy(path)
    return Path(path)


def load_dataset(path: str | Path, *, case_parts: Callable[[], list[CasePart]] | None = None) -> Dataset:
    """Read and validate a dataset folder.

    Args:
        path: Folder with ``dataset.json`` and ``cases.jsonl`` (``tools.json`` optional), or an fsspec URL of
            one (read from this machine's copy).
        case_parts: Gives the parts of ``cases.jsonl`` read in consecutive byte ranges elsewhere
            (:func:`load_case_range`), called once the manifest is checked; ``None``: the file is read here.
            Either way the dataset, and any error, is the same.

    Returns:
        A :class:`Dataset`.

    Raises:
        InputFileError: missing or unreadable files, invalid JSON (with its line), an object that repeats a key
            (in ``dataset.json``, a case or ``tools.json``), an unknown ``schema_version``, an invalid case (a
            chat message without a ``role`` included), a duplicate ``case_id``, two tools of one name.
        UnsafeRevisionError: the manifest's revision is not a safe partition value.
    """
    root = _local(path)
    if not root.is_dir():
        raise InputFileError(root, None, "not a dataset folder.", "pass a folder holding dataset.json and cases.jsonl.")
    manifest_path = root / "dataset.json"
    raw, text = _read_json_text(manifest_path)
    if not isinstance(raw, dict):
        raise InputFileError(manifest_path, 1, "must be a JSON object.", DATASET_DOCS)
    if raw.get("schema_version") not in SCHEMA_VERSIONS:
        raise InputFileError(
            manifest_path,
            _key_line(text, "schema_version"),
            f"unknown schema_version {raw.get('schema_version')!r}; this tooleval reads {list(SCHEMA_VERSIONS)}.",
            "upgrade tooleval or write schema_version 1.",
        )
    try:
        check_name(raw.get("revision"), what="revision", path=manifest_path)
    except UnsafeRevisionError as exc:
        raise UnsafeRevisionError(manifest_path, _key_line(text, "revision"), exc.problem, exc.fix) from None
    try:
        manifest = DatasetManifest.model_validate(raw)
    except ValidationError as exc:
        line = _key_line(text, str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else "")
        raise InputFileError(manifest_path, line, f"invalid manifest: {_first_error(exc)}.", "fix that field.") from None
    except RecursionError:
        raise InputFileError(manifest_path, 1, "nested too deeply to read.", "flatten the manifest.") from None
    cases = _load_cases(root / "cases.jsonl") if case_parts is None else \
        join_case_parts(root / "cases.jsonl", case_parts())
    tools: list[ToolSpec] = []
    tools_path = root / "tools.json"
    if tools_path.exists():
        raw_tools, tools_text = _read_json_text(tools_path)
        if not isinstance(raw_tools, list):
            raise InputFileError(tools_path, 1, "must be a JSON list of tool specs.", DATASET_DOCS)
        starts = _element_lines(tools_text)
        del tools_text
        named: dict[str, int | None] = {}
        for i, item in enumerate(raw_tools):
            line = starts[i] if i < len(starts) else None
            try:
                tool = ToolSpec.model_validate(item)
            except ValidationError as exc:
                raise InputFileError(tools_path, line, f"tool #{i}: {_first_error(exc)}.", "fix that tool spec.") from None
            except RecursionError:
                raise InputFileError(tools_path, line, f"tool #{i} is nested too deeply to read.",
                                     "flatten that tool spec.") from None
            if tool.name in named:  # a call names its tool: two specs of one name would be a guess between them
                raise InputFileError(tools_path, line, f"tool #{i}: the name {tool.name!r} is already the name of the "
                                     f"tool on line {named[tool.name]}.", "give every tool its own name (merge the "
                                     "two specs, or rename one).")
            named[tool.name] = line
            tools.append(tool)
    return Dataset(root, manifest, cases, tools, content_digest_of(root))


def tool_schema_version(root: Path) -> str | None:
    """The version of a dataset folder's tool schemas, recorded on envelopes whose trace names none:
    ``tools-<first 12 hex of the sha256 of tools.json>``; ``None`` without a tools.json."""
    from tooleval.capture.recorded import file_digest

    tools_path = Path(root) / "tools.json"
    return f"tools-{file_digest(tools_path)[:12]}" if tools_path.is_file() else None


def find_traces_file(dataset_path: Path, agent: str | None = None) -> Path:
    """Locate a dataset's recorded traces: ``traces.jsonl[.gz]`` or ``traces/<agent>.jsonl[.gz]``.

    Raises:
        InputFileError: when there is none, or several agents and ``agent`` is not given.
    """
    for name in ("traces.jsonl", "traces.jsonl.gz"):
        if (dataset_path / name).is_file() and agent is None:
            return dataset_path / name
    folder = dataset_path / "traces"
    candidates = sorted(folder.glob("*.jsonl")) + sorted(folder.glob("*.jsonl.gz")) if folder.is_dir() else []
    if agent is not None:
        candidates = [c for c in candidates if c.name.split(".jsonl")[0] == agent]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise InputFileError(
            dataset_path, None, "no recorded traces found.", "add traces.jsonl[.gz] or pass --traces FILE."
        )
    names = ", ".join(c.name for c in candidates)
    raise InputFileError(folder, None, f"several agents' traces ({names}).",
                         f"pick one with --traces NAME (one of these names, e.g. --traces {candidates[0].name}), "
                         "or --traces PATH.")


def traces_in_dataset(dataset_path: Path, name: str) -> Path | None:
    """The file a bare ``--traces NAME`` means inside a dataset's ``traces/`` folder: ``NAME`` itself, else
    ``NAME.jsonl`` or ``NAME.jsonl.gz`` (the agent's name, as :func:`find_traces_file` lists the choices);
    ``None`` when ``name`` holds a folder part or no such file exists there."""
    if Path(name).name != name or name in ("", ".", ".."):
        return None
    folder = Path(dataset_path) / "traces"
    for candidate in (name, f"{name}.jsonl", f"{name}.jsonl.gz"):
        if (folder / candidate).is_file():
            return folder / candidate
    return None


_FULL_LOADS: dict[tuple[str, tuple], Dataset] = {}
"""The last 8 full loads of this process by ``(folder, stamps)``: :func:`load_dataset_cached`'s memo, which
:func:`load_dataset_trusted` reuses too."""


def _load_stamped(path: str, stamps: tuple, case_parts: Callable[[], list[CasePart]] | None = None) -> Dataset:
    loaded = _FULL_LOADS.get((path, stamps))
    if loaded is None:
        loaded = load_dataset(path, case_parts=case_parts)
        if len(_FULL_LOADS) >= 8:
            _FULL_LOADS.pop(next(iter(_FULL_LOADS)))  # the oldest load
        _FULL_LOADS[(path, stamps)] = loaded
    return loaded


def _stamps(root: Path) -> tuple:
    return tuple(
        (name, stat.st_size, stat.st_mtime_ns) if (stat := _stat(root / name)) else (name, None, None)
        for name in ("dataset.json", "cases.jsonl", "tools.json", "gate.toml")
    )


def load_dataset_cached(path: str | Path, *, case_parts: Callable[[], list[CasePart]] | None = None) -> Dataset:
    """:func:`load_dataset`, memoised per process while the dataset's files are unchanged (size and mtime of
    ``dataset.json``, ``cases.jsonl``, ``tools.json``): each shard task of a run needs the cases, and parsing
    ``cases.jsonl`` once per shard is repeated work. Callers must not mutate the returned dataset.
    ``case_parts``: as :func:`load_dataset` (not called when the memo holds the dataset).
    """
    root = _local(path).resolve()
    return _load_stamped(str(root), _stamps(root), case_parts)


def is_loaded(path: str | Path) -> bool:
    """Whether :func:`load_dataset_cached` holds the dataset folder ``path`` as its files are now."""
    root = _local(path).resolve()
    return (str(root), _stamps(root)) in _FULL_LOADS


def stream_cases(path: Path) -> Iterator[Case]:
    """The cases of a ``cases.jsonl`` in file order, each line read and built as :class:`Cases` builds a case it
    reads again, without the file's checks (for work that can start before the dataset is loaded and is thrown
    away when the load then fails: a line this reading refuses raises ``ValueError`` or
    :class:`~tooleval.errors.InputFileError`)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                value, plain = _read_line_value(raw)
                yield _parse_case(path, number, value, checked=True, plain=plain)


@dataclass(frozen=True)
class ReferenceCall:
    """A reference call's canonical arguments, as :class:`~tooleval.models.Call` holds them (``args``)."""

    args: dict


@dataclass(frozen=True)
class CaseReferences:
    """What a case gives the run's redactor to seed from (:func:`tooleval.capture.redaction.case_reference_values`
    reads these three attributes of a case): its reference plans' calls, expected outputs and input, read from a
    line without building the case's model."""

    plans: list[list[ReferenceCall]]
    expected_outputs: list[str] | None
    input: object


def stream_case_references(cases: Mapping[str, Case] | Path,
                           skip: Callable[[bytes], bool] | None = None) -> Iterator[Case | CaseReferences]:
    """Every case of ``cases`` (a loaded dataset's :class:`Cases`, a mapping of cases, or a ``cases.jsonl``) in file
    order, as the run's redactor seeds from it: a line of the common shape (:func:`plain_case_digest`) as its
    :class:`CaseReferences` (arguments made canonical, as the model makes them), any other line as its case
    (:func:`stream_cases`); a mapping that is not a :class:`Cases` gives its own cases. Seeding from these gives
    the seed the cases give, without a model per case.

    Args:
        cases: The cases, or the ``cases.jsonl`` that holds them.
        skip: Read from a file, a line (its bytes, line end included) for which ``skip`` is true is left out
            unread: the redactor's screen of a line it would find nothing in
            (:meth:`tooleval.capture.redaction.Redactor.seeds_nothing`). Not applied to a mapping's own cases.

    Raises:
        ValueError, InputFileError: a line this reading refuses (as :func:`stream_cases`; a skipped line is not
            checked).
    """
    if not isinstance(cases, Path):
        if not isinstance(cases, Cases):
            yield from cases.values()
            return
        cases = cases._path
    with open(cases, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip() or skip is not None and skip(raw):
                continue
            value, plain = _read_line_value(raw)
            if plain and plain_case_digest(value, digest=False) is not None:
                calls = [ReferenceCall(canonical_value(call.get("args") or {})) for call in value["expected_calls"]]
                yield CaseReferences([calls], value.get("expected_outputs"), value["input"])
            else:
                yield _parse_case(cases, number, value, checked=True, plain=plain)


def content_digest_of(root: Path) -> str:
    """The content digest of the dataset folder ``root``: sha256 over the names and bytes of ``dataset.json``,
    ``cases.jsonl`` and ``tools.json`` (absent: empty), as :attr:`Dataset.content_digest` records it."""
    digest = hashlib.sha256()
    for name in ("dataset.json", "cases.jsonl", "tools.json"):
        part = root / name
        digest.update(name.encode() + b"\0")
        if part.exists():  # streamed: a large cases.jsonl is never held whole
            with part.open("rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def load_dataset_trusted(path: str | Path, content_digest: str) -> Dataset:
    """The dataset a run's plan validated, for the run's shard tasks: when its files still have
    ``content_digest``, every case line was already checked whole (by :func:`load_dataset` in the plan), so the
    cases are only indexed (each line's JSON read for its ``case_id``: ~1 s instead of ~17 s per process at
    142,858 bfcl cases) and parsed on demand as usual. Memoised per process like :func:`load_dataset_cached`,
    whose full load is reused when this process holds one.

    Args:
        path: The dataset folder (or an fsspec URL: this machine's copy).
        content_digest: :attr:`Dataset.content_digest` recorded by the plan.

    Returns:
        A :class:`Dataset` (its :class:`Cases` compute digests and slices on demand, in one pass).

    Raises:
        InputFileError: the files no longer have ``content_digest`` ("the dataset changed while the run was going
            on"), or cannot be read.
    """
    root = _local(path).resolve()
    stamps = _stamps(root)
    full = _FULL_LOADS.get((str(root), stamps))
    if full is not None and full.content_digest == content_digest:
        return full
    return _load_trusted(str(root), stamps, content_digest)


@lru_cache(maxsize=8)
def _load_trusted(path: str, stamps: tuple, content_digest: str) -> Dataset:
    root = Path(path)
    if content_digest_of(root) != content_digest:
        raise InputFileError(root, None, "the dataset changed while the run was going on.", "rerun.")
    manifest = DatasetManifest.model_validate(_read_json(root / "dataset.json"))
    tools_path = root / "tools.json"
    tools = [ToolSpec.model_validate(item) for item in _read_json(tools_path)] if tools_path.exists() else []
    cases_path = root / "cases.jsonl"
    index: dict[str, tuple[int, int]] = {}
    position = 0
    with open(cases_path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):  # numbered as iter_json_lines numbers them
            if raw.strip():
                case_id = _trusted_case_id(raw)
                index[str(case_id) if isinstance(case_id, int) else case_id] = (position, number)
            position += len(raw)
    return Dataset(root, manifest, Cases(cases_path, index), tools, content_digest)


def _trusted_case_id(raw: bytes) -> object:
    """The ``case_id`` of a case line the plan already validated: read by orjson (a third of the standard library's
    time) when it is text, or else by the standard library as before (orjson reads an integer beyond 64 bits as a
    float, and refuses some lines the plan's reader accepted), so that the id is the one the plan read."""
    try:
        case_id = orjson.loads(raw)["case_id"]
    except orjson.JSONDecodeError:
        case_id = None
    return case_id if type(case_id) is str else json.loads(raw)["case_id"]


def case_digests(cases: Mapping[str, Case]) -> dict[str, str]:
    """``case_id -> case_digest`` of every case (a loaded :class:`Cases` gives those it computed at load)."""
    if isinstance(cases, Cases):
        return cases.digests()
    return {case_id: case_digest(case) for case_id, case in cases.items()}


def case_slices(cases: Mapping[str, Case]) -> dict[str, str | None]:
    """``case_id -> slice`` of every case (a loaded :class:`Cases` gives those it read at load)."""
    if isinstance(cases, Cases):
        return cases.slices()
    return {case_id: case.slice for case_id, case in cases.items()}


def _stat(path: Path):
    try:
        return path.stat()
    except FileNotFoundError:
        return None
