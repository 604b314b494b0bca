"""Partition paths and the staged, swap-into-place publication of a run's outputs.

Layout (DESIGN.md "Output layout")::

    <out>/<kind>/dataset_revision=<rev>/run_id=<run>/part-0.parquet     kind: "traces" or "rows"
    <out>/.staging/<uuid>/...                                           work area, outside the readers' globs

A rerun of ``(revision, run)`` *replaces* exactly that partition folder (H13): the new folder is fully written
under ``.staging`` on the same filesystem, then the old folder is renamed aside, the new one renamed into place
and the old one deleted. Readers never see a half-written file; between the two renames (microseconds) the
partition is absent, never mixed. A crash leaves at worst a ``.staging/<uuid>`` folder, which readers ignore.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tooleval.storage._schema import SCHEMAS

__all__ = ["UnsafeNameError", "validate_partition_value", "partition_dir", "Publication", "write_partition"]

logger = logging.getLogger(__name__)

PART_FILE = "part-0.parquet"
STAGING_DIR = ".staging"
NAME_RULE = "1-64 characters of [A-Za-z0-9._-] starting with a letter or digit"
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class UnsafeNameError(ValueError):
    """A revision or run id that cannot be a partition folder name (DESIGN.md "Dataset").

    Attributes:
        value: The refused value, as given (not necessarily a string).
        what: What the value names, e.g. ``"dataset revision"`` or ``"run id"``.
    """

    def __init__(self, value: Any, what: str) -> None:
        super().__init__(value, what)  # all inputs in args: the error pickles across processes
        self.value = value
        self.what = what

    def __str__(self) -> str:
        text = self.value if isinstance(self.value, str) else str(self.value)
        suggestion = re.sub(r"[^A-Za-z0-9._-]+", "-", text).lstrip("._-")[:64] or "r1"
        return (
            f"unsafe {self.what} {self.value!r}: it must be a string of {NAME_RULE} (no '/', '.', '..', "
            f"spaces or non-ASCII), because it becomes a folder name. Fix: rename it, e.g. {suggestion!r}."
        )


def validate_partition_value(value: str, *, what: str) -> str:
    """Return ``value`` if it is a safe partition value, else raise.

    Args:
        value: A dataset revision or run id, e.g. ``"001"``, ``"2024-01-01"``, ``"1e3"``.
        what: Name of the value for the error message (``"dataset revision"``, ``"run id"``).

    Raises:
        UnsafeNameError: unless ``value`` is a str matching ``^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$``.
    """
    if not isinstance(value, str) or _SAFE_NAME.fullmatch(value) is None:
        raise UnsafeNameError(value, what)
    return value


def _check_kind(kind: str) -> str:
    if kind not in SCHEMAS:
        raise ValueError(f"unknown partition kind {kind!r}; expected one of {sorted(SCHEMAS)}")
    return kind


def partition_dir(out: Path, kind: str, revision: str, run_id: str) -> Path:
    """``out/kind/dataset_revision=<revision>/run_id=<run_id>``, after validating every part.

    Raises:
        ValueError: ``kind`` is not ``"traces"`` or ``"rows"``.
        UnsafeNameError: ``revision`` or ``run_id`` is not a safe partition value.
    """
    _check_kind(kind)
    validate_partition_value(revision, what="dataset revision")
    validate_partition_value(run_id, what="run id")
    return Path(out) / kind / f"dataset_revision={revision}" / f"run_id={run_id}"


def _stamp(table: pa.Table, column: str, value: str) -> pa.Table:
    """Fill the partition ``column`` of ``table`` with ``value``; refuse a different non-null value."""
    if column not in table.column_names:
        return table
    found = set(pc.unique(table[column].drop_null()).to_pylist()) - {value}
    if found:
        raise ValueError(f"table column {column!r} holds {sorted(found)!r}, but the partition is {value!r}")
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pc.fill_null(table[column], value))


def _check_relpath(relpath: str) -> Path:
    parts = str(relpath).split("/")
    if (
        not str(relpath)
        or any(part in ("", ".", "..") for part in parts)
        or any(char in str(relpath) for char in "\\:\0")
        or parts[0] in SCHEMAS
        or parts[0] == STAGING_DIR
    ):
        raise ValueError(
            f"unsafe relative path {relpath!r}: use '/'-separated names under the results folder, without "
            f"'..', '.', a leading '/', or the table folders {sorted(SCHEMAS)} (use add_table for those)"
        )
    return Path(*parts)


class Publication:
    """Stage several outputs of one run, then swap them all into place (or discard them all).

    Example::

        with Publication(out) as pub:
            pub.add_table("rows", "001", "run-7", rows_table)
            pub.add_json("runs/run-7/summary.json", summary)
        # clean exit: committed; exception: aborted, nothing under out/ changed

    Partitions are swapped in the order added, then files (so ``summary.json`` lands last). Other partitions
    (other runs, other revisions) are never touched.
    """

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.root = self.out / STAGING_DIR / uuid.uuid4().hex
        self._tables: dict[tuple[str, str, str], Path] = {}
        self._files: dict[Path, Path] = {}
        self._closed = False

    def _open(self) -> None:
        if self._closed:
            raise RuntimeError("this Publication was already committed or aborted")

    def add_table(
        self, kind: str, revision: str, run_id: str, table: pa.Table, *, filename: str = PART_FILE
    ) -> Path:
        """Stage ``table`` as the whole content of one partition.

        Writes one zstd ``filename`` (``part-0.parquet``; the legacy path writes ``scalar.parquet``) with the table's own (explicit) schema; a zero-row table still
        writes one file carrying every column. ``dataset_revision``/``run_id`` columns, when present, are
        filled with the partition values.

        Returns:
            The staged partition folder (see :meth:`staged_path`).

        Raises:
            UnsafeNameError / ValueError: bad names or kind (checked before anything is written); the partition
                was already staged; the table's partition columns hold another value.
        """
        self._open()
        relative = partition_dir(Path(), kind, revision, run_id)
        if (kind, revision, run_id) in self._tables:
            raise ValueError(f"partition {relative} is already staged in this publication")
        table = _stamp(_stamp(table, "dataset_revision", revision), "run_id", run_id)
        staged = self.root / "tables" / relative
        staged.mkdir(parents=True)
        pq.write_table(table, staged / filename, compression="zstd")
        self._tables[(kind, revision, run_id)] = staged
        return staged

    def add_parts(
        self, kind: str, revision: str, run_id: str, parts: Iterable[pa.Table], schema: pa.Schema
    ) -> tuple[Path, int]:
        """Stage a partition streamed as several tables, one ``part-<i>.parquet`` per table (one per shard), so
        the whole partition is never in memory (issue 9). No table at all writes one zero-row ``part-0.parquet``
        with ``schema``, like :meth:`add_table`.

        Returns:
            ``(staged partition folder, rows written)``.

        Raises:
            See :meth:`add_table`.
        """
        self._open()
        relative = partition_dir(Path(), kind, revision, run_id)
        if (kind, revision, run_id) in self._tables:
            raise ValueError(f"partition {relative} is already staged in this publication")
        staged = self.root / "tables" / relative
        staged.mkdir(parents=True)
        self._tables[(kind, revision, run_id)] = staged
        count = rows = 0
        for table in parts:
            table = _stamp(_stamp(table, "dataset_revision", revision), "run_id", run_id)
            pq.write_table(table, staged / f"part-{count}.parquet", compression="zstd")
            count += 1
            rows += table.num_rows
        if count == 0:
            pq.write_table(schema.empty_table(), staged / PART_FILE, compression="zstd")
        return staged, rows

    def add_partition_json(self, kind: str, revision: str, run_id: str, name: str, obj: Any) -> Path:
        """Stage a JSON file inside an already staged partition folder (e.g. the legacy ``scalar.json``).

        Raises:
            KeyError: the partition was not added; ValueError: ``name`` is not a plain ``*.json`` file name.
        """
        self._open()
        if "/" in name or not name.endswith(".json") or name.startswith("."):
            raise ValueError(f"partition file name must be a plain *.json name, got {name!r}")
        path = self.staged_path(kind, revision, run_id) / name
        path.write_text(json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
        return path

    def add_text(self, relpath: str, text: str) -> Path:
        """Stage a UTF-8 text file at ``out/relpath`` (e.g. ``"runs/<run>/junit.xml"``); returns its staged path."""
        self._open()
        relative = _check_relpath(relpath)
        staged = self.root / "files" / relative
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(text, encoding="utf-8")
        self._files[relative] = staged
        return staged

    def add_json(self, relpath: str, obj: Any) -> Path:
        """Stage ``obj`` as JSON at ``out/relpath`` (e.g. ``"runs/<run>/summary.json"``).

        Raises:
            ValueError: unsafe ``relpath`` (absolute, ``..``, table folders), or NaN/infinity in ``obj``.
            TypeError: ``obj`` is not JSON-serialisable.
        """
        return self.add_text(relpath, json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n")

    def staged_path(self, kind: str, revision: str, run_id: str) -> Path:
        """The staged folder of a partition added to this publication (readable until commit/abort).

        Raises:
            KeyError: that partition was not added.
        """
        return self._tables[(kind, revision, run_id)]

    def commit(self) -> None:
        """Swap every staged partition and file into place; on failure, put back what was already swapped.

        A partition folder: the old folder is renamed aside, the staged one renamed into place, the old deleted.
        A file: ``os.replace`` over the old one (atomic), after copying the old one aside for the rollback.
        """
        self._open()
        self._closed = True
        moves = [(partition_dir(self.out, *key), staged) for key, staged in self._tables.items()]
        moves += [(self.out / relative, staged) for relative, staged in self._files.items()]
        done: list[tuple[Path, Path | None, Path]] = []  # (target, old content set aside, staged source)
        try:
            for index, (target, staged) in enumerate(moves):
                target.parent.mkdir(parents=True, exist_ok=True)
                aside = self.root / "old" / str(index) if target.exists() else None
                if aside is not None:
                    aside.parent.mkdir(parents=True, exist_ok=True)
                    (os.rename if target.is_dir() else shutil.copy2)(target, aside)
                done.append((target, aside, staged))
                os.replace(staged, target)  # a folder onto the freed name; a file atomically over the old one
        except BaseException:
            logger.error("publication under %s failed; restoring %d target(s)", self.out, len(done))
            for target, aside, staged in reversed(done):
                if not staged.exists() and target.is_dir():  # the new content is in place: drop it
                    shutil.rmtree(target)
                elif not staged.exists():
                    target.unlink()
                if aside is not None:
                    os.replace(aside, target)
            self._cleanup()
            raise
        logger.debug("published %d partition(s), %d file(s) under %s", len(self._tables), len(self._files), self.out)
        self._cleanup()

    def abort(self) -> None:
        """Discard everything staged; nothing outside ``.staging`` was touched. Idempotent."""
        self._closed = True
        self._cleanup()

    def _cleanup(self) -> None:
        # ``out/.staging`` itself stays: removing it could race with another publication creating its folder.
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Publication:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._closed:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def write_partition(out: Path, kind: str, revision: str, run_id: str, table: pa.Table) -> Path:
    """Replace one partition with ``table`` (a one-table :class:`Publication`); returns the partition folder."""
    with Publication(out) as publication:
        publication.add_table(kind, revision, run_id, table)
    return partition_dir(out, kind, revision, run_id)
