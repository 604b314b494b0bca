"""Where results live: a local folder or an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``file://…``).

``--out`` may name object storage, so that a run spread over several machines publishes to one place.
Everything that reads or writes the results tree — the readers of
published results (:func:`committed_files`, :func:`tooleval.storage.connect`), the publication and its commit
marker, the revision ledger, the writer lease — goes through a :class:`Tree` addressed by ``/``-separated
relative paths: a :class:`LocalTree` over :mod:`pathlib` for a folder (exactly the behaviour of a local
``--out``: folders checked component by component, files written to a temporary name, then ``os.replace``), a
:class:`RemoteTree` over an fsspec filesystem for a URL (each file one whole-object PUT: object stores have no
rename, and a PUT is atomic — a reader sees the old object or the new one). What a machine keeps for itself
(Prefect's home, copies of input URLs) is in :mod:`tooleval.storage._machine`. Credentials and endpoints come from
the filesystem's standard environment (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, as botocore reads them).
"""

from __future__ import annotations

import io
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Location", "is_remote", "as_location", "Tree", "LocalTree", "RemoteTree", "tree_of", "filesystem",
           "read_parquet", "read_parquet_schema", "open_parquet", "read_location_bytes", "location_digest", "location_exists", "join",
           "ARROW_SUFFIX", "is_arrow_file", "iter_arrow_batches", "iter_file_batches", "read_table_file", "read_file_schema"]

Location = Path | str
"""A local folder (:class:`~pathlib.Path`) or a remote URL (``str``, no trailing ``/``)."""

_URL = re.compile(r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)")


def write_partition_parquet(table: pa.Table, where: Any) -> None:
    """Write ``table`` as one zstd Parquet file to ``where`` (a path or a writable binary file), with min/max
    statistics for its flat columns only.

    A nested column's statistics are its leaves' (the call lists' names and argument texts, a violation's
    fields): nothing a reader prunes row groups by (DuckDB and pyarrow filter on flat columns), yet computing
    them was about a sixth of the encoding of a published rows file, which the flow pays for every row of a run
    (measured on 44,072 bfcl rows). The values written are the same.
    """
    flat = [field.name for field in table.schema if not pa.types.is_nested(field.type)]
    pq.write_table(table, where, compression="zstd", write_statistics=flat)


def is_remote(location: str | Path) -> bool:
    """True for a URL other than ``file://`` (``s3://…``, ``gs://…``, ``memory://…``)."""
    match = _URL.fullmatch(str(location)) if isinstance(location, str) else None
    return match is not None and match["protocol"].lower() != "file"


def as_location(value: str | Path) -> Location:
    """``value`` as a :data:`Location`: ``file:///x`` and plain paths become a ``Path``; other URLs stay text.

    Raises:
        ValueError: a URL without a bucket or path (``s3://``).
    """
    if isinstance(value, Path):
        return value
    match = _URL.fullmatch(value)
    if match is None:
        return Path(value)
    if match["protocol"].lower() == "file":
        return Path(match["rest"] or "/")
    if not match["rest"].strip("/"):
        raise ValueError(f"{value!r} names no bucket or folder; pass e.g. s3://bucket/results")
    return f"{match['protocol'].lower()}://{match['rest'].rstrip('/')}"


class Tree(Protocol):
    """Read-only view of a results tree by ``/``-separated relative paths."""

    def folders(self, pattern: str) -> list[str]:
        """Relative paths of the folders matching the glob ``pattern``, sorted."""
        ...

    def files(self, pattern: str) -> list[str]:
        """Relative paths of the files matching the glob ``pattern``, sorted."""
        ...

    def read_bytes(self, relpath: str) -> bytes:
        """The bytes at ``relpath``.

        Raises:
            FileNotFoundError: nothing there; OSError: unreadable.
        """
        ...

    def location(self, relpath: str) -> Location:
        """``relpath`` as a local path or a URL that a reader (pyarrow, DuckDB with the filesystem) opens."""
        ...

    def is_file(self, relpath: str) -> bool:
        """Whether a file is at ``relpath``."""
        ...

    def write_bytes(self, relpath: str, data: bytes) -> None:
        """Write ``relpath`` whole (a reader sees the old content or the new, never a part).

        Raises:
            OutFolderError: the tree cannot be written there (a link or a file where a folder belongs,
                read-only, no space; an object store refusing the PUT).
        """
        ...

    def write_parquet(self, relpath: str, table: pa.Table) -> None:
        """Write ``table`` as one zstd Parquet file at ``relpath``, whole (see :meth:`write_bytes`)."""
        ...

    def delete(self, relpath: str) -> None:
        """Delete the file at ``relpath`` if it is there."""
        ...

    def delete_tree(self, relpath: str) -> None:
        """Delete everything under ``relpath`` (a folder or a prefix), if anything."""
        ...

    def walk_files(self, relpath: str) -> list[str]:
        """Relative paths of every file under ``relpath``, at any depth, sorted."""
        ...

    def prepare(self, relpath: str) -> None:
        """Make ready to write a file at ``relpath``: on a local folder its folders are checked and created
        (links and files where folders belong refused: :func:`tooleval.storage._paths.safe_target`); an object
        store has no folders.

        Raises:
            OutFolderError: see :meth:`write_bytes`.
        """
        ...

    def prune(self, relpath: str) -> None:
        """Remove the folder ``relpath`` and its parent if they are empty (a local folder; no-op on a store)."""
        ...


class LocalTree:
    """A local results folder (:mod:`pathlib`)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _matches(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern))

    def folders(self, pattern: str) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self._matches(pattern) if p.is_dir()]

    def files(self, pattern: str) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self._matches(pattern) if p.is_file()]

    def read_bytes(self, relpath: str) -> bytes:
        return (self.root / relpath).read_bytes()

    def location(self, relpath: str) -> Path:
        return self.root / relpath

    def is_file(self, relpath: str) -> bool:
        return (self.root / relpath).is_file()

    def write_bytes(self, relpath: str, data: bytes) -> None:
        from tooleval.storage._paths import write_bytes

        write_bytes(self.root, relpath, data)

    def write_parquet(self, relpath: str, table: pa.Table) -> None:
        from tooleval.storage._paths import OutFolderError, _os_error, safe_target

        target = safe_target(self.root, relpath)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            write_partition_parquet(table, tmp)
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno is not None:  # a full disk or a read-only folder: said as everywhere else
                raise _os_error(target.parent, exc) from None
            raise OutFolderError(target.parent, None, f"cannot write the partition file ({exc.strerror or exc}).",
                                 "check free space and permissions of --out.") from None

    def delete(self, relpath: str) -> None:
        (self.root / relpath).unlink(missing_ok=True)

    def delete_tree(self, relpath: str) -> None:
        import shutil

        shutil.rmtree(self.root / relpath, ignore_errors=True)

    def walk_files(self, relpath: str) -> list[str]:
        folder = self.root / relpath
        if not folder.is_dir() or folder.is_symlink():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in folder.rglob("*") if p.is_file())

    def prepare(self, relpath: str) -> None:
        from tooleval.storage._paths import safe_target

        safe_target(self.root, relpath)

    def prune(self, relpath: str) -> None:
        folder = self.root / relpath
        for path in (folder, folder.parent):
            if path != self.root and path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                path.rmdir()

    def remove_empty_folders(self, relpath: str) -> None:
        """Remove every empty folder below ``relpath``, deepest first."""
        folder = self.root / relpath
        if not folder.is_dir() or folder.is_symlink():
            return
        for entry in sorted(folder.rglob("*"), reverse=True):
            if entry.is_dir() and not entry.is_symlink() and not any(entry.iterdir()):
                entry.rmdir()


class RemoteTree:
    """A results prefix on an fsspec filesystem (``s3://bucket/prefix``)."""

    def __init__(self, url: str, fs: Any = None) -> None:
        import fsspec

        self.url = url
        self.protocol = url.split("://", 1)[0]
        self.fs, self.root = fsspec.core.url_to_fs(url) if fs is None else (fs, fs._strip_protocol(url))
        self.root = self.root.rstrip("/")
        self.fs.invalidate_cache()  # listings cached by an earlier tree may predate other writers (processes)

    def _relative(self, path: str) -> str:
        return path[len(self.root) + 1:]

    def _glob(self, pattern: str, kind: str) -> list[str]:
        found = self.fs.glob(f"{self.root}/{pattern}", detail=True)
        return sorted(self._relative(path) for path, info in found.items() if info.get("type") == kind)

    def folders(self, pattern: str) -> list[str]:
        return self._glob(pattern, "directory")

    def files(self, pattern: str) -> list[str]:
        return self._glob(pattern, "file")

    def read_bytes(self, relpath: str) -> bytes:
        if self._one_get:
            # s3fs otherwise asks for the object's size first (a HEAD, and for a missing object a listing too, to
            # tell a folder from nothing) to split a download of more than 50 MB into parallel ranges; what a tree
            # reads whole is a marker, a lease, the catalog or a run's document, so one GET does, and a missing
            # object is its answer 404
            return self.fs.cat_file(f"{self.root}/{relpath}", max_concurrency=1)
        return self.fs.cat_file(f"{self.root}/{relpath}")

    @property
    def _one_get(self) -> bool:
        return type(self.fs).__name__ == "S3FileSystem"

    def location(self, relpath: str) -> str:
        return f"{self.protocol}://{self.root}/{relpath}"

    def _path(self, relpath: str) -> str:
        return f"{self.root}/{relpath}" if relpath else self.root

    def is_file(self, relpath: str) -> bool:
        return bool(self.fs.isfile(self._path(relpath)))

    def write_bytes(self, relpath: str, data: bytes) -> None:
        from tooleval.storage._paths import OutFolderError

        try:
            self.fs.pipe_file(self._path(relpath), data)  # one PUT: the object appears whole or not at all
        except OSError as exc:
            raise OutFolderError(self.location(relpath), None, f"the object store refused the write ({exc}).",
                                 "check the bucket, the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) "
                                 "and the endpoint (AWS_ENDPOINT_URL).") from None

    def write_parquet(self, relpath: str, table: pa.Table) -> None:
        buffer = io.BytesIO()
        write_partition_parquet(table, buffer)
        self.write_bytes(relpath, buffer.getvalue())

    def delete(self, relpath: str) -> None:
        try:
            self.fs.rm_file(self._path(relpath))
        except FileNotFoundError:
            pass

    def delete_tree(self, relpath: str) -> None:
        files = self.walk_files(relpath)
        if files:
            self.fs.rm([self._path(f) for f in files])

    def walk_files(self, relpath: str) -> list[str]:
        try:
            found = self.fs.find(self._path(relpath))
        except FileNotFoundError:
            return []
        return sorted(self._relative(path) for path in found)

    def prepare(self, relpath: str) -> None:
        return None

    def prune(self, relpath: str) -> None:
        return None

    def remove_empty_folders(self, relpath: str) -> None:
        return None


def tree_of(out: str | Path) -> Tree:
    """The :class:`Tree` of a results location (see :func:`as_location`)."""
    location = as_location(out)
    return RemoteTree(location) if isinstance(location, str) else LocalTree(location)


def join(location: Location, relpath: str) -> Location:
    """``location / relpath`` for a path, ``location + "/" + relpath`` for a URL."""
    return location / relpath if isinstance(location, Path) else f"{location}/{relpath}"


def filesystem(location: str | Path) -> tuple[Any, str]:
    """``(fsspec filesystem, path on it)`` of a URL; ``(None, path)`` for a local path or ``file://`` URL."""
    found = as_location(location) if isinstance(location, str) else location
    if isinstance(found, Path):
        return None, str(found)
    import fsspec

    return fsspec.core.url_to_fs(found)


def read_parquet(location: str | Path, **options: Any) -> pa.Table:
    """``pyarrow.parquet.read_table`` of a local path or a URL (read through its fsspec filesystem).

    Raises:
        FileNotFoundError: nothing there.
    """
    fs, path = filesystem(location)
    return pq.read_table(path, filesystem=fs, **options)


def iter_parquet_batches(location: str | Path, batch_size: int, columns: list[str] | None = None,
                         binary: tuple[str, ...] = ()) -> Iterator[list[dict[str, Any]]]:
    """The rows of the Parquet file at a local path or URL as lists of at most ``batch_size`` dicts, in file
    order, decoded one record batch at a time (never the whole file's rows at once). A batch never spans two row
    groups, so a writer that sizes its row groups (a stage file: :data:`tooleval.storage.stages.STAGE_GROUP_TEXT`)
    bounds what a reader holds too.

    Raises:
        FileNotFoundError: nothing there.
    """
    fs, path = filesystem(location)
    with (open(path, "rb") if fs is None else fs.open(path, "rb")) as handle:
        yield from iter_row_group_batches(pq.ParquetFile(handle), batch_size, columns, binary)


@contextmanager
def open_parquet(location: str | Path) -> Iterator[pq.ParquetFile]:
    """The Parquet file at a local path or URL, open for the block: its schema and the column chunks a reader
    asks for come through one handle, so that a file on object storage is fetched once (a footer read, then a
    table read through separate opens, fetches it twice), one file at a time.

    Raises:
        FileNotFoundError: nothing there.
    """
    fs, path = filesystem(location)
    with (open(path, "rb") if fs is None else fs.open(path, "rb")) as handle:
        yield pq.ParquetFile(handle)


def iter_row_group_batches(file: pq.ParquetFile, batch_size: int, columns: list[str] | None = None,
                           binary: tuple[str, ...] = ()) -> Iterator[list[dict[str, Any]]]:
    """The rows of an open Parquet file as lists of at most ``batch_size`` dicts, row group by row group (pyarrow's
    ``iter_batches`` alone fills a batch across row groups).

    ``binary``: string columns handed over as their UTF-8 bytes rather than as ``str`` (for JSON text that the
    reader decodes with orjson, which reads bytes: a 16 KB trace is then neither decoded from UTF-8 into a
    ``str`` nor encoded back)."""
    for group in range(file.num_row_groups):
        for batch in file.iter_batches(batch_size=batch_size, row_groups=[group], columns=columns):
            if binary:
                batch = pa.RecordBatch.from_arrays(
                    [column.cast(pa.binary()) if name in binary else column
                     for name, column in zip(batch.schema.names, batch.columns)], names=batch.schema.names)
            yield batch.to_pylist()


ARROW_SUFFIX = ".arrow"
"""The name ending of an Arrow IPC file (a stage file read once or twice by the next stages on this machine or
another: written and read at memory speed, where a Parquet file's compression and page decoding cost ~80 us a
16 KB trace per read)."""


def is_arrow_file(location: str | Path) -> bool:
    """Whether the file at ``location`` is an Arrow IPC file (by its name, :data:`ARROW_SUFFIX`), else Parquet."""
    return str(location).endswith(ARROW_SUFFIX)


def _selected(batch: pa.RecordBatch, columns: list[str] | None, binary: tuple[str, ...]) -> pa.RecordBatch:
    """``batch`` with only ``columns`` (in that order; all when ``None``) and ``binary`` string columns as bytes."""
    if columns is not None:
        batch = batch.select([name for name in columns if name in batch.schema.names])
    if binary:
        batch = pa.RecordBatch.from_arrays(
            [column.cast(pa.binary()) if name in binary else column
             for name, column in zip(batch.schema.names, batch.columns)], names=batch.schema.names)
    return batch


def iter_arrow_batches(source: Any, batch_size: int, columns: list[str] | None = None,
                       binary: tuple[str, ...] = ()) -> Iterator[list[dict[str, Any]]]:
    """The rows of an Arrow IPC file (``source``: anything ``pyarrow.ipc.open_file`` opens: a buffer, a memory
    map, a file object) as lists of at most ``batch_size`` dicts, record batch by record batch (a writer that
    sizes its batches bounds what a reader holds); ``columns`` and ``binary`` as :func:`iter_row_group_batches`."""
    import pyarrow.ipc as ipc

    reader = ipc.open_file(source)
    for index in range(reader.num_record_batches):
        batch = _selected(reader.get_batch(index), columns, binary)
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size).to_pylist()


def iter_file_batches(location: str | Path, batch_size: int, columns: list[str] | None = None,
                      binary: tuple[str, ...] = ()) -> Iterator[list[dict[str, Any]]]:
    """:func:`iter_parquet_batches`, or :func:`iter_arrow_batches` for an Arrow IPC file (:func:`is_arrow_file`).

    Raises:
        FileNotFoundError: nothing there.
    """
    if not is_arrow_file(location):
        yield from iter_parquet_batches(location, batch_size, columns, binary)
        return
    fs, path = filesystem(location)
    if fs is None:
        with pa.memory_map(path) as source:
            yield from iter_arrow_batches(source, batch_size, columns, binary)
        return
    with fs.open(path, "rb") as handle:
        yield from iter_arrow_batches(handle, batch_size, columns, binary)


def read_table_file(location: str | Path, columns: list[str] | None = None,
                    schema: pa.Schema | None = None) -> pa.Table:
    """The table in the Parquet or Arrow IPC file (:func:`is_arrow_file`) at a local path or URL: ``columns``
    only, when given; with ``schema``, its columns in its order and types (a column the file lacks is null).

    Raises:
        FileNotFoundError: nothing there.
    """
    if not is_arrow_file(location):
        options: dict[str, Any] = {}
        if columns is not None:
            options["columns"] = columns
        if schema is not None:
            options["schema"] = schema
        return read_parquet(location, **options)
    import pyarrow.ipc as ipc

    fs, path = filesystem(location)
    if fs is None:
        # the table's buffers are the map's pages (no copy); they keep the map alive as long as the table lives
        table = ipc.open_file(pa.memory_map(path)).read_all()
    else:
        with fs.open(path, "rb") as handle:
            table = ipc.open_file(handle).read_all()
    if schema is not None:
        table = pa.table({field.name: table[field.name].cast(field.type) if field.name in table.column_names
                          else pa.nulls(table.num_rows, field.type) for field in schema}, schema=schema)
    if columns is not None:
        table = table.select(columns)
    return table


def read_file_schema(location: str | Path) -> pa.Schema:
    """The Arrow schema of the Parquet or Arrow IPC file (:func:`is_arrow_file`) at a local path or URL."""
    if not is_arrow_file(location):
        return read_parquet_schema(location)
    import pyarrow.ipc as ipc

    fs, path = filesystem(location)
    if fs is None:
        with pa.memory_map(path) as source:
            return ipc.open_file(source).schema
    with fs.open(path, "rb") as handle:
        return ipc.open_file(handle).schema


def read_parquet_schema(location: str | Path) -> pa.Schema:
    """The Arrow schema of the Parquet file at a local path or URL."""
    fs, path = filesystem(location)
    if fs is None:
        return pq.read_schema(path)
    with fs.open(path, "rb") as handle:
        return pq.read_schema(handle)


def read_location_bytes(location: str | Path) -> bytes:
    """The bytes of the file at a local path or URL.

    Raises:
        FileNotFoundError / OSError: nothing there, or unreadable.
    """
    fs, path = filesystem(location)
    return Path(path).read_bytes() if fs is None else fs.cat_file(path)


def location_digest(location: str | Path) -> str:
    """sha256 (64 hex) of the bytes of the file at a local path or URL, read in 1 MiB blocks: a file on object
    storage is streamed through its fsspec filesystem, never held whole nor copied to disk.

    Raises:
        FileNotFoundError / OSError: nothing there, or unreadable.
    """
    import hashlib

    fs, path = filesystem(location)
    digest = hashlib.sha256()
    with (open(path, "rb") if fs is None else fs.open(path, "rb")) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def location_exists(location: str | Path) -> bool:
    """Whether a file is at a local path or URL."""
    fs, path = filesystem(location)
    return Path(path).is_file() if fs is None else bool(fs.isfile(path))

