"""The stage store: content-addressed files that pass work between Prefect tasks (Arrow IPC for the generation
records and trace envelopes, which only the next stages read; Parquet for the rows, which DuckDB reads too).

Tasks exchange :class:`StageRef` values (a path, a digest and a row count), never tables: Prefect pickles task results
and hashes task inputs, and a path plus a content digest hashes stably and cheaply (a pyarrow Table hashes stably but
slowly, and a DataFrame not stably). A stage file is named by the sha256 of its bytes, written to a temporary name and
renamed, so a file that exists is complete. Stage files live under ``<out>/.tooleval/stages/<stage>/`` and carry no
run id: a later run over the same inputs reuses them through Prefect's cache and publishes them under its own run id.

With ``--out s3://bucket/prefix`` the stage folder is ``s3://bucket/prefix/.tooleval/stages/<stage>``: a worker
writes the file to a local temporary file, hashes it, and uploads it in one PUT under its digest (an object store
shows an object whole or not at all, so the rename is not needed), and every reader opens the URL through its
fsspec filesystem. Stage files written by a worker that died before its PUT simply do not exist.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from tooleval.storage._fs import (ARROW_SUFFIX, RemoteTree, as_location, is_remote, iter_file_batches,
                                  location_exists, read_table_file)
from tooleval.storage._paths import _os_error, ensure_dir

__all__ = ["StageRef", "GENERATION_SCHEMA", "STAGE_ROW_GROUP", "STAGE_GROUP_TEXT", "write_stage_table", "write_stage_tables", "read_stage_table",
           "iter_stage_batches", "stage_dir"]

GENERATION_SCHEMA = pa.schema(
    [
        ("case_id", pa.string()),
        ("trial", pa.int32()),
        ("seed", pa.int64()),
        ("payload_json", pa.string()),
        ("error", pa.string()),
        ("line_digest", pa.string()),
    ]
)
"""Generation stage rows: the agent's raw response for one (case, trial) as JSON text, or its error; or, for a
replayed trace, no payload and ``line_digest`` (sha256, 32 hex, of its recorded line's bytes): the response is that
line of the traces file, which trace capture reads, so that a recorded trace is decoded once on its way to a row."""


class StageRef(BaseModel):
    """A stage file: where it is, what is in it (sha256 of its bytes) and how many rows it holds."""

    model_config = ConfigDict(frozen=True)

    stage: str
    path: str
    digest: str
    rows: int
    elapsed_s: float = 0.0
    """Seconds the task body took to make this file (kept with a cached ref; ``tooleval bench`` counts it only
    for tasks that ran)."""

    def exists(self) -> bool:
        """True when the file is still there (a cached ref whose file was deleted must be recomputed); ``path``
        may be a URL."""
        return location_exists(self.path)


def stage_dir(out: str | Path, stage: str) -> Path | str:
    """``<out>/.tooleval/stages/<stage>`` (created in a local folder, component by component; a URL prefix on
    object storage).

    Raises:
        tooleval.storage.OutFolderError: a link or a file stands on the way (:func:`tooleval.storage.ensure_dir`).
    """
    location = as_location(out) if isinstance(out, str) else Path(out)
    if isinstance(location, str):
        return f"{location}/.tooleval/stages/{stage}"
    return ensure_dir(location.resolve(), f".tooleval/stages/{stage}")


STAGE_ROW_GROUP = 4_096
"""Rows a stage body holds as Python objects at once, and the most rows of one Parquet row group of a stage file: a
stage reads the previous stage's file one row group at a time and writes its own the same way, so a worker holds
one batch of a shard, never the whole shard (an envelope or a row costs tens of KB as Python objects)."""

STAGE_GROUP_TEXT = 8 << 20
"""The text (characters of a row's JSON-text columns, :func:`_text_columns`: trace payloads, messages) at which a
row group of a stage file ends, if it has not reached :data:`STAGE_ROW_GROUP` rows first. bfcl rows (~1 KB) fill
4,096-row groups (4 MB); tau rows (~16 KB) get ~512-row groups, where 4,096 rows were ~65 MB of text before they
became Python objects (enough to take a tau worker to 1.2 GB). Where a group ends depends only on the rows, so a stage
file's bytes stay the same for the same rows."""


def write_stage_table(
    directory: str | Path, stage: str, rows: Iterable[dict[str, Any]], schema: pa.Schema, *,
    started: float | None = None, arrow: bool = False,
    build: Callable[[list[dict[str, Any]]], pa.Table] | None = None,
) -> StageRef:
    """Write ``rows`` with ``schema`` as one content-addressed file, one row group (or record batch) at a time
    (:func:`_row_groups`; ``rows`` may be a generator: it is consumed once, in order).

    Args:
        directory: Stage folder or URL prefix (see :func:`stage_dir`).
        stage: Stage name recorded in the ref.
        rows: Records whose keys are the schema's column names.
        schema: Explicit Arrow schema (never inferred).
        started: ``time.perf_counter()`` when the task body started; the ref's ``elapsed_s`` is measured from it.
        arrow: Write an Arrow IPC file with LZ4-compressed buffers (``.arrow``) instead of a zstd Parquet file
            (``.parquet``): for the stage files that only tooleval's next stages read (generation records, trace
            envelopes), where Parquet's zstd pages and their decoding cost more than the work around them (a tau
            envelope: ~40 us to write, ~80 us each time it is read, against ~20 and ~15; measured on 5,000 tau
            envelopes). The rows stay Parquet: DuckDB reads them where they lie.
        build: Turns one group of records into a table of ``schema`` (for columns better built column by column
            than record by record); ``None``: ``pa.Table.from_pylist``.

    Returns:
        The :class:`StageRef` of ``<directory>/<sha256>.parquet`` (or ``.arrow``).

    Raises:
        tooleval.storage.OutFolderError: the file cannot be written (no space left, a read-only folder).
    """
    return write_stage_tables(directory, stage, _tables(rows, schema, build), schema, started=started, arrow=arrow)


def write_stage_tables(
    directory: str | Path, stage: str, tables: Iterable[pa.Table], schema: pa.Schema, *,
    started: float | None = None, arrow: bool = False,
) -> StageRef:
    """:func:`write_stage_table` of rows that come as Arrow tables of ``schema`` (each one row group, or record
    batch, of the file; ``tables`` may be a generator, consumed once, in order): a stage that computes its rows
    as columns writes them without a dict per row."""
    suffix = ARROW_SUFFIX if arrow else ".parquet"
    if is_remote(str(directory)):
        return _put_stage_table(str(directory), stage, tables, schema, started, suffix)
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(dir=directory, suffix=".tmp")
        os.close(handle)
    except OSError as exc:  # a full disk or a read-only folder: the run stops with the cause, not a traceback
        raise _os_error(directory, exc) from None
    try:
        count = _write_tables(tmp_name, tables, schema, arrow)
        with open(tmp_name, "rb") as written:
            digest = hashlib.file_digest(written, "sha256").hexdigest()
        final = directory / f"{digest}{suffix}"
        os.replace(tmp_name, final)
    except BaseException as exc:
        Path(tmp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno is not None:
            raise _os_error(directory, exc) from None
        raise
    elapsed = 0.0 if started is None else time.perf_counter() - started
    return StageRef(stage=stage, path=str(final), digest=digest, rows=count, elapsed_s=elapsed)


def _tables(rows: Iterable[dict[str, Any]], schema: pa.Schema,
            build: Callable[[list[dict[str, Any]]], pa.Table] | None = None) -> Iterator[pa.Table]:
    """``rows`` (dicts) as tables of ``schema``, one per group of :func:`_row_groups`."""
    for chunk in _row_groups(rows, _text_columns(schema)):
        yield pa.Table.from_pylist(chunk, schema=schema) if build is None else build(chunk)


def _write_tables(path: str | Path, tables: Iterable[pa.Table], schema: pa.Schema, arrow: bool = False) -> int:
    """Write ``tables`` to a zstd Parquet file at ``path``, one row group each, or to an Arrow IPC file with LZ4
    buffers, one record batch each (``arrow``); the row count."""
    count = 0
    if arrow:
        import pyarrow.ipc as ipc

        options = ipc.IpcWriteOptions(compression="lz4")
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, schema, options=options) as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(table.cast(schema) if table.schema != schema else table)
                    count += table.num_rows
        return count
    # a generation payload is one trace's text, never repeated in a file: a dictionary of them is never used, yet
    # the reader decodes it (reading a 16 KB-a-row file took 6x longer with it); other columns keep theirs (a
    # case's messages recur across its trials, and short texts repeat)
    dictionary = [field.name for field in schema if field.name not in _UNIQUE_TEXT]
    with pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=dictionary) as writer:
        for table in tables:
            if table.num_rows:
                writer.write_table(table.cast(schema) if table.schema != schema else table,
                                   row_group_size=table.num_rows)
                count += table.num_rows
    return count


_UNIQUE_TEXT = frozenset({"payload_json", "line_digest"})
"""Stage columns whose every value is its own row's text (no dictionary encoding)."""


def _text_columns(schema: pa.Schema) -> tuple[str, ...]:
    """The JSON-text columns of a stage schema (``…_json`` strings: payloads, messages, metadata): what makes a
    row long. The other strings are names and ids, bounded by the row count of a group."""
    return tuple(field.name for field in schema if field.type == pa.string() and field.name.endswith("_json"))


def _row_groups(rows: Iterable[dict[str, Any]], text_columns: tuple[str, ...]) -> Iterator[list[dict[str, Any]]]:
    """``rows`` in consecutive lists, each closed as soon as it holds :data:`STAGE_ROW_GROUP` rows or at least
    :data:`STAGE_GROUP_TEXT` characters in ``text_columns`` (so never more than one group is pulled from a
    generator before it is written)."""
    chunk: list[dict[str, Any]] = []
    text = 0
    for row in rows:
        chunk.append(row)
        for name in text_columns:
            value = row.get(name)
            if value is not None:
                text += len(value)
        if len(chunk) >= STAGE_ROW_GROUP or text >= STAGE_GROUP_TEXT:
            yield chunk
            chunk, text = [], 0
    if chunk:
        yield chunk


def _put_stage_table(url: str, stage: str, tables: Iterable[pa.Table], schema: pa.Schema,
                     started: float | None, suffix: str) -> StageRef:
    """Write ``tables`` to a local temporary file, hash it, and upload it in one PUT as ``<url>/<sha256><suffix>``."""
    with tempfile.TemporaryDirectory(prefix="tooleval-stage-") as folder:
        local = Path(folder) / f"stage{suffix}"
        count = _write_tables(local, tables, schema, suffix == ARROW_SUFFIX)
        data = local.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    RemoteTree(url).write_bytes(f"{digest}{suffix}", data)
    elapsed = 0.0 if started is None else time.perf_counter() - started
    return StageRef(stage=stage, path=f"{url}/{digest}{suffix}", digest=digest, rows=count, elapsed_s=elapsed)


def iter_stage_batches(ref: StageRef, columns: list[str] | None = None) -> Iterator[list[dict[str, Any]]]:
    """The rows of a stage file (a local path or a URL) as lists of dicts, one row group (at most
    :data:`STAGE_ROW_GROUP` rows and about :data:`STAGE_GROUP_TEXT` of text) at a time, in file order.

    Raises:
        FileNotFoundError: the file is gone (the flow then recomputes the stage with ``refresh_cache``).
    """
    return iter_file_batches(ref.path, STAGE_ROW_GROUP, columns)


def read_stage_table(ref: StageRef, **options: Any) -> pa.Table:
    """Read a stage file back (a local path or a URL; Parquet or Arrow IPC).

    Args:
        **options: ``columns`` (names to read) and ``schema`` (read as this schema; a column the file lacks is
            null), as :func:`tooleval.storage._fs.read_table_file` takes them.

    Raises:
        FileNotFoundError: the file is gone (the flow then recomputes the stage with ``refresh_cache``).
    """
    return read_table_file(ref.path, **options)
