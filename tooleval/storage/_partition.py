"""Partition paths and the publication of a run's outputs behind its commit marker.

Layout (docs/design.md "Output layout")::

    <out>/<kind>/dataset_revision=<rev>/run_id=<run>/part-<publication>.parquet   kind: traces, rows, legacy
    <out>/runs/<run>/commit.json                       the commit marker: which files are the run
    <out>/runs/<run>/.publications/<publication>/...   committed copies of the run's documents

A rerun of ``(revision, run)`` *replaces* exactly that partition, never appends to it (a rerun would otherwise count
its rows twice): the new file is written beside the old one under a new name and becomes the partition when the marker
names it; the old file is deleted after. Readers honour the marker (:mod:`tooleval.storage._commit`), so they see the
old run or the new one, never a mix, even when the writer is killed at any point; the next command finishes or
discards an interrupted publication.

``out`` may be an fsspec URL (``s3://bucket/prefix``): every file is then one whole-object PUT through the
location's :class:`~tooleval.storage._fs.Tree`, and the commit marker's PUT is the one step that publishes.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tooleval.errors import InputFileError
from tooleval.storage._commit import (PUBLICATIONS, commit_marker, marker_store, new_marker, read_marker,
                                      read_marker_version, run_partition_files, sweep)
from tooleval.storage._fs import Location, as_location, join, tree_of
from tooleval.storage._catalog import catalog_for, entry_from
from tooleval.storage._hold import hold_run
from tooleval.storage._lease import LeaseHeldError
from tooleval.storage._pause import pause_point
from tooleval.storage._paths import ensure_dir
from tooleval.storage._schema import SCHEMAS

__all__ = ["UnsafeNameError", "validate_partition_value", "partition_dir", "Publication", "PartWriter",
           "write_partition"]

logger = logging.getLogger(__name__)

PART_FILE = "part.parquet"
STAGING_DIR = ".staging"
NAME_RULE = "1-64 characters of [A-Za-z0-9._-] starting with a letter or digit"
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class UnsafeNameError(ValueError):
    """A revision or run id that cannot be a partition folder name (docs/design.md "Dataset folder").

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
    """Write several outputs of one run, then commit them all at once (or discard them all).

    Example::

        with Publication(out) as pub:
            pub.add_table("rows", "001", "run-7", rows_table)
            pub.add_json("runs/run-7/summary.json", summary)
        # clean exit: committed; exception: aborted, what readers see is unchanged

    A publication covers one run and holds the run's lease (:func:`tooleval.storage.hold_run`) from its first
    ``add_*`` to commit or abort, so a second writer of that run is refused. Every output is written under a
    new name (partition files ``<stem>-<publication id>.parquet``; documents under
    ``runs/<run>/.publications/<id>/``) and becomes visible when the run's commit marker names it
    (:mod:`tooleval.storage._commit`). Nothing is written outside ``out``: links and files where folders belong
    are refused. Other runs and revisions are never touched.
    """

    def __init__(self, out: str | Path) -> None:
        location = as_location(out) if isinstance(out, str) else Path(out)
        self.out: Location = location.absolute() if isinstance(location, Path) else location
        self.remote = isinstance(self.out, str)
        self.tree = tree_of(self.out)
        self.id = uuid.uuid4().hex
        self.run_id: str | None = None
        self.revision: str | None = None
        self._partitions: dict[str, list[str]] = {}
        self._tables: dict[tuple[str, str, str], Path] = {}
        self._documents: dict[str, str] = {}
        self._written: dict[str, bytes] = {}
        """On object storage, each document's bytes as written (by its committed copy's path): the sweep copies
        them to their usual names, and the run catalog takes the summary from them, without reading them back."""
        self._catalog: Any = None
        self._parts: list[str] = []
        self._lease: Any = None
        self._holder: Any = None
        self._closed = False

    def _open(self) -> None:
        if self._closed:
            raise RuntimeError("this Publication was already committed or aborted")

    def _bind(self, run_id: str, revision: str | None = None) -> None:
        validate_partition_value(run_id, what="run id")
        if self.run_id is None:
            self._lease = hold_run(self.out, run_id)
            self._holder = self._lease.__enter__()
            self.run_id = run_id
            if not self.remote:
                ensure_dir(self.out, f"runs/{run_id}/{PUBLICATIONS}/{self.id}")
        elif run_id != self.run_id:
            raise ValueError(f"a publication covers one run: it holds {self.run_id!r}, not {run_id!r}")
        if revision is not None:
            if self.revision is not None and revision != self.revision:
                raise ValueError(f"a run has one dataset revision: {self.revision!r}, not {revision!r}")
            self.revision = revision

    def add_table(
        self, kind: str, revision: str, run_id: str, table: pa.Table, *, filename: str = PART_FILE
    ) -> Location:
        """Write ``table`` as the whole content of one partition (visible at commit).

        Writes one zstd file ``<stem>-<publication id>.parquet`` (stem of ``filename``: ``part``; the legacy path
        uses ``scalar``) with the table's own (explicit) schema; a zero-row table still writes one file carrying
        every column. ``dataset_revision``/``run_id`` columns, when present, are filled with the partition values.

        Returns:
            The written file (see :meth:`staged_path`).

        Raises:
            UnsafeNameError / ValueError: bad names or kind (checked before anything is written); the partition
                was already added; the table's partition columns hold another value; another run.
            LeaseHeldError: another live writer holds the run.
            OutFolderError: a link or a file inside ``out`` where a folder belongs; ``out`` not writable.
        """
        self._open()
        relative = partition_dir(Path(), kind, revision, run_id)
        if (kind, revision, run_id) in self._tables:
            raise ValueError(f"partition {relative} is already staged in this publication")
        table = _stamp(_stamp(table, "dataset_revision", revision), "run_id", run_id)
        self._bind(run_id, revision if kind != "legacy" or self.revision is None else self.revision)
        folder = relative.as_posix()
        target = self._write_part(folder, f"{Path(filename).stem}-{self.id}.parquet", table)
        self._tables[(kind, revision, run_id)] = self.tree.location(target)
        self._partitions[folder] = [target]
        return self.tree.location(target)

    def add_parts(
        self, kind: str, revision: str, run_id: str, parts: Iterable[pa.Table], schema: pa.Schema
    ) -> tuple[list[Location], int]:
        """Write a partition streamed as several tables, one ``part-<i>-<publication id>.parquet`` per table (one
        per shard), so the whole partition is never in memory; visible at commit. No table at all writes one
        zero-row file with ``schema``, like :meth:`add_table`.

        Returns:
            ``(the files written, rows written)``.

        Raises:
            See :meth:`add_table`.
        """
        writer = self.part_writer(kind, revision, run_id, schema)
        for table in parts:
            writer.add(table)
        return writer.close()

    def part_writer(self, kind: str, revision: str, run_id: str, schema: pa.Schema) -> "PartWriter":
        """A partition written part by part as its tables become ready (a run publishes each shard's file while
        the other shards are still being scored); visible at commit, like :meth:`add_parts`.

        Raises:
            See :meth:`add_table` (names and the lease are checked here, before any part is written).
        """
        self._open()
        relative = partition_dir(Path(), kind, revision, run_id)
        if (kind, revision, run_id) in self._tables:
            raise ValueError(f"partition {relative} is already staged in this publication")
        self._bind(run_id, revision if kind != "legacy" or self.revision is None else self.revision)
        folder = relative.as_posix()
        self._tables[(kind, revision, run_id)] = self.tree.location(folder)
        self._partitions[folder] = []
        return PartWriter(self, folder, revision, run_id, schema)

    def _write_part(self, folder: str, name: str, table: pa.Table) -> str:
        """Write one partition file whole (a temporary file renamed in a folder; one PUT on a store)."""
        target = f"{folder}/{name}"
        self.tree.write_parquet(target, table)
        self._parts.append(target)
        return target

    def add_partition_json(self, kind: str, revision: str, run_id: str, name: str, obj: Any) -> Location:
        """Write a JSON document that lives in a partition folder (e.g. the legacy ``scalar.json``).

        Raises:
            KeyError: the partition was not added; ValueError: ``name`` is not a plain ``*.json`` file name.
        """
        self._open()
        if "/" in name or not name.endswith(".json") or name.startswith("."):
            raise ValueError(f"partition file name must be a plain *.json name, got {name!r}")
        self.staged_path(kind, revision, run_id)
        logical = (partition_dir(Path(), kind, revision, run_id) / name).as_posix()
        return self._document(logical, _json_bytes(obj))

    def _document(self, logical: str, data: bytes) -> Location:
        if self.run_id is None:
            raise ValueError(f"add a table or a runs/<run>/ file before {logical!r}: a publication covers one run")
        self.tree.prepare(logical)  # the usual path is checked now (links, files as folders), written later
        physical = f"runs/{self.run_id}/{PUBLICATIONS}/{self.id}/{logical}"
        self.tree.write_bytes(physical, data)
        self._documents[logical] = physical
        if self.remote:
            self._written[physical] = data
        return self.tree.location(physical)

    def add_text(self, relpath: str, text: str) -> Location:
        """Write a UTF-8 text document at ``out/relpath`` (e.g. ``"runs/<run>/junit.xml"``), visible at commit.

        Returns:
            The file written now (the committed copy; a local caller may rewrite it before commit; on object
            storage use :meth:`rewrite`).
        """
        self._open()
        relative = _check_relpath(relpath)
        if relative.parts[0] == "runs" and len(relative.parts) > 2:
            self._bind(relative.parts[1])
        return self._document(relative.as_posix(), text.encode("utf-8"))

    @contextmanager
    def document_file(self, relpath: str) -> Iterator[Path]:
        """A local file to write the document ``relpath`` into (e.g. a JUnit report a writer streams to a path);
        it becomes the document when the block ends without an error, visible at commit. In a local folder it is
        the committed copy itself; on object storage a temporary file, uploaded in one PUT.

        Raises:
            See :meth:`add_text`.
        """
        written = self.add_text(relpath, "")
        if not self.remote:
            yield Path(written)
            return
        with tempfile.TemporaryDirectory(prefix="tooleval-doc-") as folder:
            local = Path(folder) / Path(relpath).name
            local.touch()
            yield local
            self._document(_check_relpath(relpath).as_posix(), local.read_bytes())

    def add_json(self, relpath: str, obj: Any) -> Location:
        """Write ``obj`` as a JSON document at ``out/relpath`` (e.g. ``"runs/<run>/summary.json"``).

        Raises:
            ValueError: unsafe ``relpath`` (absolute, ``..``, table folders), or NaN/infinity in ``obj``.
            TypeError: ``obj`` is not JSON-serialisable.
        """
        return self.add_text(relpath, _json_bytes(obj).decode("utf-8"))

    def staged_path(self, kind: str, revision: str, run_id: str) -> Location:
        """The written (not yet committed) file of a partition added to this publication.

        Raises:
            KeyError: that partition was not added.
        """
        return self._tables[(kind, revision, run_id)]

    def commit(self) -> None:
        """Make everything written visible at once: write the run's commit marker, then copy the documents to
        their usual names and delete what no marker names. A failure before the marker discards everything."""
        self._open()
        self._closed = True
        if self.run_id is None:
            return
        noted = False
        try:
            pause_point("written")
            store = marker_store(self._holder)
            # the marker is read with its ETag before the lease is checked, so that the conditional commit below
            # fails if any other writer committed after this check (one that took the lease over meanwhile)
            previous, expected = (read_marker_version(store, self.run_id) if store is not None
                                  else (read_marker(self.out, self.run_id), None))
            self._check_still_held()
            # a first publication lists the run's partition files to adopt those published before commit markers;
            # the sweep after the commit deletes from the same listing what the marker does not name (the lease,
            # held since, kept any other writer from adding files of this run in between)
            listed = run_partition_files(self.out, self.run_id) if previous is None else None
            marker = new_marker(self.out, self.run_id, self.id, self.revision, previous, self._partitions,
                                self._documents, listed)
            catalog = self._catalog = catalog_for(self.tree)
            if catalog is not None:  # written ahead: a writer killed from here on leaves the run noted
                catalog.note_pending(self.run_id, self.id)
                noted = True
            etag = commit_marker(self.tree, self.run_id, marker, store, expected)
        except BaseException:
            logger.error("publication of run %r under %s failed before its commit; discarded", self.run_id, self.out)
            self._discard()
            if noted:
                self._settle()
            self._release()
            raise
        try:
            pause_point("committed")
            clean = sweep(self.out, self.run_id, marker, store, etag, listed, self._written)
            self._settle(dict(marker, state="clean") if clean else None)
        except (OSError, InputFileError) as exc:  # committed: the next command finishes it (recover)
            logger.warning("run %r is committed but not yet tidied (%s); the next command finishes it",
                           self.run_id, exc)
        finally:
            self._release()
        logger.debug("published run %r (%d partition(s), %d document(s)) under %s", self.run_id,
                     len(self._partitions), len(self._documents), self.out)

    def _settle(self, marker: dict | None = None) -> None:
        """On object storage, the run's entry in the run catalog from its marker as it now is (best effort: a run
        left noted is settled by the next reader or recovery). ``marker``: the run's marker as this publication
        left it, committed and tidied (None: read from the store)."""
        catalog = self._catalog if self.remote and self.run_id is not None else None
        if catalog is None:
            return
        entry = None
        logical = f"runs/{self.run_id}/summary.json"
        physical = None if marker is None else marker.get("documents", {}).get(logical)
        if physical in self._written:
            # the summary the marker names is the one this publication wrote: nothing to read back (any other,
            # an earlier publication's or one published before commit markers, is read by the catalog)
            entry = entry_from(marker, self._written[physical])
        try:
            catalog.settle(self.run_id, entry)
        except (OSError, InputFileError) as exc:
            logger.warning("run %r: the run catalog was not updated (%s); the next command settles it",
                           self.run_id, exc)

    def _check_still_held(self) -> None:
        """On object storage, refuse to commit when the lease was taken over meanwhile (this writer was presumed
        dead). With conditional writes the check renews the lease (a compare-and-swap) and the marker's own
        conditional write closes what is left of the race; without them it narrows, not closes, the race
        described in :mod:`tooleval.storage._remote_lease`."""
        if self.remote and self._holder is not None and not self._holder.held():
            raise LeaseHeldError(self._holder.path, None, f"the lease of run {self.run_id!r} was taken over by "
                                 "another writer while this one was publishing; nothing was committed.",
                                 "rerun with a fresh --run-id; keep TOOLEVAL_LOCK_TTL_S above the longest stall.")

    def abort(self) -> None:
        """Discard everything written; what readers see is unchanged. Idempotent."""
        if not self._closed and self.run_id is not None:
            self._discard()
        self._closed = True
        self._release()

    def _discard(self) -> None:
        for path in self._parts:
            self.tree.delete(path)
            self.tree.prune(path.rsplit("/", 1)[0])
        if self.run_id is not None:
            self.tree.delete_tree(f"runs/{self.run_id}/{PUBLICATIONS}/{self.id}")
            # a run that never published leaves no folder of its own behind (its name stays free of traces)
            self.tree.prune(f"runs/{self.run_id}/{PUBLICATIONS}")

    def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.__exit__(None, None, None)

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


class PartWriter:
    """The parts of one staged partition (:meth:`Publication.part_writer`): ``add`` writes one table as
    ``part-<i>-<publication id>.parquet`` (``i`` given, e.g. the shard index, or the next number), ``close``
    ends the partition (one zero-row file with the schema when no part was added)."""

    def __init__(self, publication: Publication, folder: str, revision: str, run_id: str, schema: pa.Schema) -> None:
        self.publication, self.folder, self.revision, self.run_id, self.schema = (
            publication, folder, revision, run_id, schema)
        self.files: dict[int, str] = {}
        self.rows = 0

    def add(self, table: pa.Table, index: int | None = None) -> Location:
        """Write ``table`` (partition columns stamped) as part ``index`` (default: the next free number).

        Raises:
            ValueError: part ``index`` was already written.
        """
        self.publication._open()
        index = len(self.files) if index is None else index
        if index in self.files:
            raise ValueError(f"part {index} of {self.folder} is already written")
        table = _stamp(_stamp(table, "dataset_revision", self.revision), "run_id", self.run_id)
        name = f"part-{index}-{self.publication.id}.parquet"
        self.files[index] = self.publication._write_part(self.folder, name, table)
        self.publication._partitions[self.folder] = [self.files[i] for i in sorted(self.files)]
        self.rows += table.num_rows
        return self.publication.tree.location(self.files[index])

    def close(self) -> tuple[list[Location], int]:
        """``(the files written, in part order; rows written)``."""
        if not self.files:
            self.add(self.schema.empty_table(), 0)
        files = [self.files[i] for i in sorted(self.files)]
        return [self.publication.tree.location(f) for f in files], self.rows


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_partition(out: str | Path, kind: str, revision: str, run_id: str, table: pa.Table) -> Location:
    """Replace one partition with ``table`` (a one-table :class:`Publication`); returns the partition folder
    (a path, or a URL for an fsspec ``out``).

    The run's other committed partitions and documents stay as they were."""
    with Publication(out) as publication:
        publication.add_table(kind, revision, run_id, table)
    if publication.remote:
        return join(publication.out, partition_dir(Path(), kind, revision, run_id).as_posix())
    return partition_dir(out, kind, revision, run_id)
