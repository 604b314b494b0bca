"""Helpers shared by the importers: reading a source, checking a revision, writing a dataset folder.

An importer turns a foreign format into a dataset folder (docs/design.md "Inputs"): ``dataset.json``,
``cases.jsonl``, an optional ``tools.json`` and recorded traces (``traces.jsonl[.gz]``). It builds every file
in memory as bytes and hands them to :func:`write_dataset`, which writes them atomically.

Every output is deterministic: JSON is written with a fixed layout, and gzip members carry ``mtime=0`` and no
file name, so importing the same source twice gives byte-identical files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError, UnsafeRevisionError
from tooleval.importers._stream import DatasetStage

__all__ = [
    "REVISION_PATTERN",
    "check_revision",
    "derive_revision",
    "find_source_file",
    "gzip_bytes",
    "json_bytes",
    "jsonl_bytes",
    "load_json",
    "write_dataset",
]

# 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit: a revision is a folder name in the results
# tree, so it must never read as a path (docs/design.md "Dataset folder").
REVISION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_revision(revision: str, *, path: str | Path | None = None) -> str:
    """Return ``revision`` if it is a safe dataset revision name.

    Args:
        revision: The revision name to check.
        path: The file or folder the revision is meant for, named in the error.

    Returns:
        ``revision`` unchanged.

    Raises:
        UnsafeRevisionError: The name is not 1-64 characters of ``[A-Za-z0-9._-]`` starting with a letter or
            digit (so ``/``, ``.``, ``..``, spaces and non-ASCII are refused: docs/design.md "Dataset folder").
    """
    if not isinstance(revision, str) or REVISION_PATTERN.fullmatch(revision) is None:
        raise UnsafeRevisionError(
            path,
            None,
            f"unsafe dataset revision {revision!r}.",
            "use 1-64 characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit.",
        )
    return revision


def derive_revision(source_bytes: bytes) -> str:
    """Return the default revision of a source: ``"src-"`` + the first 12 hex digits of its SHA-256."""
    return "src-" + hashlib.sha256(source_bytes).hexdigest()[:12]


def find_source_file(src: Path, *, subdir: str, pattern: str = "*.json") -> Path:
    """Resolve ``src`` to one source file.

    Args:
        src: A file (returned as is) or a folder. In a folder, the candidates are the files matching
            ``pattern`` directly in it and in ``src/subdir``; there must be exactly one.
        subdir: The sub-folder where the source format keeps its files (e.g. ``historical_trajectories``).
        pattern: Glob of candidate file names.

    Returns:
        The source file.

    Raises:
        InputFileError: ``src`` does not exist, or the folder holds no candidate or more than one.
    """
    src = Path(src)
    if src.is_file():
        return src
    if not src.is_dir():
        raise InputFileError(src, None, "source not found.", "pass an existing file or folder.")
    found = sorted(p for p in [*src.glob(pattern), *(src / subdir).glob(pattern)] if p.is_file())
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(src)) for p in found) or "none"
        raise InputFileError(
            src,
            None,
            f"expected exactly one {pattern} file in the folder or in {subdir}/, found {len(found)}: {listed}.",
            "pass the source file itself.",
        )
    return found[0]


def load_json(path: Path) -> tuple[Any, bytes]:
    """Read and parse a JSON file.

    Args:
        path: The file to read.

    Returns:
        ``(value, raw_bytes)``: the parsed JSON and the bytes it was parsed from (to derive a revision from
        exactly what was read).

    Raises:
        InputFileError: The file cannot be read, is larger than :func:`tooleval._bounded.max_document_bytes`,
            is not UTF-8, is not valid JSON (the error names the line and column) or nests deeper than
            :data:`tooleval.canonical.MAX_DEPTH`.
    """
    from tooleval._bounded import read_bounded

    try:
        raw = read_bounded(path)
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read the file ({exc.strerror}).", "check the path.") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            path, None, f"not UTF-8 text (byte {exc.start}).", "pass the JSON file as exported, in UTF-8."
        ) from exc
    from tooleval.canonical import MAX_DEPTH, nesting_within

    try:
        value = json.loads(text)
    except RecursionError:
        raise InputFileError(path, None, "nested too deeply to read (arrays/objects inside each other beyond "
                             "Python's recursion limit).", "check that it is the export itself.") from None
    except json.JSONDecodeError as exc:
        raise InputFileError(
            path,
            exc.lineno,
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.",
            "repair or re-download the file; it must be one complete JSON document.",
        ) from exc
    if not nesting_within(value, MAX_DEPTH):  # the importers walk the value recursively
        raise InputFileError(path, None, f"nested deeper than {MAX_DEPTH} levels (arrays/objects inside each other).",
                             "check that it is the export itself.")
    return value, raw


def json_bytes(value: Any) -> bytes:
    """Serialise one JSON document (indented, UTF-8, trailing newline)."""
    return (json.dumps(value, ensure_ascii=False, allow_nan=False, indent=2) + "\n").encode("utf-8")


def jsonl_bytes(rows: Iterable[Any]) -> bytes:
    """Serialise JSON lines (one compact document per line, UTF-8, each line ending in a newline)."""
    lines = (json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)
    return "".join(lines).encode("utf-8")


def gzip_bytes(data: bytes) -> bytes:
    """Gzip ``data`` reproducibly: ``mtime=0`` and no file name in the header."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def write_dataset(out: Path, files: Mapping[str, bytes]) -> Path:
    """Write a dataset folder atomically (:class:`~tooleval.importers._stream.DatasetStage`).

    If ``out`` does not exist or is empty, the files are written to a temporary sibling folder that is then
    renamed to ``out``. If ``out`` already holds files, only the files named in ``files`` are replaced, each
    moved into place with :func:`os.replace` once all are written; other files (a LICENSE, a README) are left
    alone.

    Args:
        out: The dataset folder.
        files: File name (``traces/<agent>.jsonl.gz`` may name a sub-folder) -> content.

    Returns:
        ``out``.

    Raises:
        InputFileError: ``out`` exists and is not a folder.
    """
    with DatasetStage(Path(out)) as stage:
        for name, data in files.items():
            stage.write_bytes(name, data)
        return stage.commit()
