"""Streaming pieces shared by the importers: reading JSON lines, staging a dataset folder, counting what happened.

A large source is never loaded whole: :func:`iter_source_lines` reads one line at a time (hashing the raw bytes
for the default revision as it goes), and :class:`DatasetStage` writes ``cases.jsonl`` and the traces file line
by line into a temporary sibling folder that is moved into place only when the import succeeds. What was read,
converted and skipped (with the reason of each skip) is counted in an :class:`ImportReport`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tooleval.canonical import strict_json_loads
from tooleval.errors import InputFileError, json_problem

__all__ = [
    "DatasetStage",
    "ImportReport",
    "SkipLine",
    "SourceLine",
    "iter_source_lines",
    "source_files",
]

EXAMPLES_PER_REASON = 3
"""How many ``file:line`` examples the report keeps for each skip reason."""


class SkipLine(Exception):
    """Raised by a converter for a source record it cannot convert; the import counts it and goes on.

    Attributes:
        reason: Why, in a few words that group similar skips (``"no messages"``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class ImportReport:
    """What an import read, converted and skipped (printed by ``tooleval import``).

    Counts are of source records: JSON lines for the line formats, simulations for tau2, questions and result
    lines for BFCL.
    """

    read: int = 0
    """Source records read."""
    converted: int = 0
    """Records written as a case and/or a recorded trace."""
    skipped: Counter = field(default_factory=Counter)
    """Skip reason -> number of records skipped for it."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """Skip reason -> up to :data:`EXAMPLES_PER_REASON` ``file:line`` places where it happened."""
    calls: int = 0
    """Tool calls written into traces (the agent's, as the scorer will read them)."""
    malformed_calls: int = 0
    """Of :attr:`calls`, those whose argument text is not a JSON object (kept raw)."""
    datasets: list[Path] = field(default_factory=list)
    """Dataset folders written."""
    notes: list[str] = field(default_factory=list)
    """Facts about the conversion a user should know (e.g. tool names with differing docs)."""

    def skip(self, reason: str, where: str) -> None:
        """Count one skipped record and remember where it was."""
        self.skipped[reason] += 1
        places = self.examples.setdefault(reason, [])
        if len(places) < EXAMPLES_PER_REASON:
            places.append(where)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


@dataclass(frozen=True)
class SourceLine:
    """One non-blank line of a JSON-lines source: its place, and its JSON value or why it could not be read."""

    path: Path
    line: int
    value: Any = None
    error: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def source_files(src: Path, patterns: Iterable[str] = ("*.jsonl", "*.jsonl.gz", "*.json")) -> list[Path]:
    """Resolve ``src`` to the files to read: the file itself, or the matching files of a folder (sorted by name).

    Raises:
        InputFileError: ``src`` does not exist, or the folder holds no matching file.
    """
    src = Path(src)
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise InputFileError(src, None, "source not found.", "pass an existing file or folder.")
    found = sorted({p for pattern in patterns for p in src.glob(pattern) if p.is_file()})
    if not found:
        raise InputFileError(src, None, f"no {', '.join(patterns)} file in the folder.", "pass the source file.")
    return found


def iter_source_lines(paths: list[Path], digest: Any = None) -> Iterator[SourceLine]:
    """Stream the non-blank lines of JSON-lines files (``.gz`` read as gzip), one at a time.

    A line that is not UTF-8 or not JSON is yielded with ``error`` set (the caller skips it and counts why);
    JSON follows RFC 8259 (``NaN`` is refused, :func:`tooleval.canonical.strict_json_loads`).

    Args:
        paths: The files, read in this order.
        digest: A ``hashlib`` object updated with every byte read (the default revision is derived from it).

    Raises:
        InputFileError: a file cannot be opened or is not valid gzip.
    """
    for path in paths:
        try:
            raw = open(path, "rb")
        except OSError as exc:
            raise InputFileError(path, None, f"cannot read the file ({exc.strerror}).", "check the path.") from exc
        with raw:
            if digest is not None:
                digest.update(path.name.encode() + b"\0")
            handle: IO[bytes] = gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw
            try:
                for number, data in enumerate(handle, start=1):
                    if digest is not None:
                        digest.update(data)
                    yield _parse_line(path, number, data)
            except (OSError, EOFError) as exc:
                raise InputFileError(path, None, f"cannot read the file ({exc}).", "pass a .jsonl or .jsonl.gz file.")


def _parse_line(path: Path, number: int, data: bytes) -> SourceLine:
    if not data.strip():
        return SourceLine(path, number, error="blank")
    try:
        text = data.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        return SourceLine(path, number, error=f"not UTF-8 (byte {exc.start})")
    try:
        return SourceLine(path, number, strict_json_loads(text))
    except (ValueError, RecursionError) as exc:
        return SourceLine(path, number, error=f"not valid JSON ({json_problem(exc, column=False)})")


def new_digest() -> Any:
    """A SHA-256 object for :func:`iter_source_lines` (its first 12 hex digits make the default revision)."""
    return hashlib.sha256()


class _JsonLinesWriter:
    """Writes one compact JSON document per line (gzip, reproducibly, when the name ends in ``.gz``)."""

    def __init__(self, path: Path) -> None:
        self._raw = open(path, "wb")
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0) if path.name.endswith(".gz") else None
        self._text = io.TextIOWrapper(self._gz or self._raw, encoding="utf-8", newline="\n")
        self.lines = 0

    def write(self, value: Any) -> None:
        self._text.write(json.dumps(value, ensure_ascii=False, allow_nan=False) + "\n")
        self.lines += 1

    def close(self) -> None:
        self._text.close()  # closes the gzip member and the file beneath it
        if not self._raw.closed:
            self._raw.close()


class DatasetStage:
    """A dataset folder being written: files go to a temporary sibling folder, then into place at once.

    Use as a context manager: on an exception the staging folder is removed and ``out`` is untouched.
    :meth:`commit` renames the staging folder to ``out`` when ``out`` is absent or empty; otherwise it moves
    each written file into ``out`` with :func:`os.replace` (files it did not write, a LICENSE or README, stay).
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        if self.out.exists() and not self.out.is_dir():
            raise InputFileError(self.out, None, "the output exists and is not a folder.", "choose another --out.")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".tooleval-{self.out.name}-", dir=self.out.parent))
        self._writers: list[_JsonLinesWriter] = []

    def __enter__(self) -> "DatasetStage":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        for writer in self._writers:
            writer.close()
        if kind is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _target(self, name: str) -> Path:
        target = self.tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def jsonl(self, name: str) -> _JsonLinesWriter:
        """Open ``name`` (``traces/agent.jsonl.gz`` may name a sub-folder) for writing JSON lines."""
        writer = _JsonLinesWriter(self._target(name))
        self._writers.append(writer)
        return writer

    def write_bytes(self, name: str, data: bytes) -> None:
        self._target(name).write_bytes(data)

    def commit(self) -> Path:
        """Close every writer and move the staged files into ``out``; return ``out``."""
        for writer in self._writers:
            writer.close()
        staged = sorted(p for p in self.tmp.rglob("*") if p.is_file())
        for path in staged:
            os.chmod(path, 0o644)
        for folder in [self.tmp, *(p for p in self.tmp.rglob("*") if p.is_dir())]:
            os.chmod(folder, 0o755)
        if not self.out.exists() or not any(self.out.iterdir()):
            if self.out.exists():
                self.out.rmdir()
            os.rename(self.tmp, self.out)
            return self.out
        try:
            for path in staged:
                target = self.out / path.relative_to(self.tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return self.out
