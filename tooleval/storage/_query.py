"""Readers of the results folder: DuckDB views and a pyarrow table reader.

Both readers keep partition values as strings (``001``, ``2024-01-01`` and ``1e3`` are revision names, not numbers or
dates; apache/arrow 39660, duckdb 11636/12588) and union columns by name, so partitions written before a column was
added read it as null whatever the file order (without union by name, the first file's columns decide; duckdb
16859/15600).

List columns: DuckDB's ``UNNEST`` drops rows whose list is empty or NULL, and ``len(NULL)`` is NULL. Count
calls per row with ``coalesce(len(observed_calls), 0)`` so zero-call rows still count.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from tooleval.storage._commit import committed_files
from tooleval.storage._listed import ListedFiles, urls_in_sql
from tooleval.storage._fs import RemoteTree, is_remote, read_parquet_schema, tree_of
from functools import lru_cache

if TYPE_CHECKING:  # DuckDB is imported where a query runs: a shard worker, which writes files, never does
    import duckdb

from tooleval.storage._partition import _check_kind, validate_partition_value
from tooleval.storage._row import ERROR_KINDS, ROW_SCHEMA
from tooleval.storage._schema import SCHEMAS, VIEW_NAMES

__all__ = ["PARTITION_TYPES", "PARTITIONING", "connect", "source_connection", "scan_parquet_sql", "scan_rows_sql",
           "read_table"]

PARTITION_TYPES = {"dataset_revision": "VARCHAR", "run_id": "VARCHAR"}
"""DuckDB ``hive_types``: without it DuckDB autocasts path values (``run_id=7`` becomes BIGINT)."""



@lru_cache(maxsize=1)
def _partitioning() -> Any:
    import pyarrow.dataset as ds  # imported when first read: it brings pandas (~1 s of every command's start-up)

    return ds.partitioning(pa.schema([(name, pa.string()) for name in PARTITION_TYPES]), flavor="hive")


def __getattr__(name: str) -> Any:
    if name == "PARTITIONING":  # pyarrow hive partitioning with string fields (an inferred one types 001 as int32)
        return _partitioning()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def scan_parquet_sql(paths_or_glob: str | Path | Sequence[str | Path]) -> str:
    """The ``read_parquet(...)`` expression the views use, for any hive-laid-out files.

    Args:
        paths_or_glob: One path or glob, or a list of them. Every file must sit in a
            ``.../dataset_revision=<rev>/run_id=<run>/`` folder (a staged partition does): DuckDB refuses
            ``hive_types`` for a file outside such folders ("Unknown hive_type").

    Returns:
        SQL text such as ``read_parquet(['/r/rows/*/*/*.parquet'], hive_partitioning=true, ...)``, usable after
        ``FROM``. Paths are made absolute so the SQL does not depend on the working directory; URLs
        (``s3://…``) stay as they are (read through the filesystem :func:`connect` registers).
    """
    items = [paths_or_glob] if isinstance(paths_or_glob, (str, Path)) else list(paths_or_glob)
    if not items:
        raise ValueError("scan_parquet_sql needs at least one path or glob")
    files = ", ".join(_quote(item if is_remote(item) else str(Path(item).absolute())) for item in items)
    types = ", ".join(f"{_quote(name)}: {_quote(type_)}" for name, type_ in PARTITION_TYPES.items())
    return f"read_parquet([{files}], hive_partitioning=true, union_by_name=true, hive_types={{{types}}})"


_URL_IN_SQL = re.compile(r"'([A-Za-z][A-Za-z0-9+.-]*)://")


def source_connection(source: str) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that can read ``source`` (a :func:`scan_parquet_sql` expression): the
    fsspec filesystem of every URL protocol in it (``s3``, ``gs``, ...) is registered, as :func:`connect` does;
    a source of local paths gets a plain connection."""
    import duckdb

    con = duckdb.connect()
    protocols = sorted({match.lower() for match in _URL_IN_SQL.findall(source)} - {"file"})
    if protocols:
        import fsspec

        urls = urls_in_sql(source)
        for protocol in protocols:
            fs = fsspec.filesystem(protocol)
            con.register_filesystem(ListedFiles(fs, [url for url in urls if url.lower().startswith(f"{protocol}://")]))
    return con


def _empty_select_sql(con: duckdb.DuckDBPyConnection, schema: pa.Schema) -> str:
    """``SELECT CAST(NULL AS <type>) AS <col>, ... WHERE false``: zero rows, every column of ``schema``."""
    types = con.from_arrow(schema.empty_table()).types  # DuckDB's own mapping of the Arrow types
    columns = ", ".join(
        f'CAST(NULL AS {type_}) AS "{name}"' for name, type_ in zip(schema.names, types, strict=True)
    )
    return f"SELECT {columns} WHERE false"


_KNOWN_KIND = ("split_part(error, ':', 1) IN (" + ", ".join(f"'{k}'" for k in ERROR_KINDS if k != "other")
               + ") AND contains(error, ':')")
_AFTER_COLON = "substr(error, strpos(error, ':') + 1)"
_ERROR_COLUMNS = (
    f"coalesce(error_kind, CASE WHEN error IS NULL THEN NULL WHEN {_KNOWN_KIND} THEN split_part(error, ':', 1) "
    f"ELSE 'other' END) AS error_kind, "
    f"coalesce(error_message, CASE WHEN error IS NULL THEN NULL WHEN {_KNOWN_KIND} THEN (CASE WHEN "
    f"starts_with({_AFTER_COLON}, ' ') THEN substr({_AFTER_COLON}, 2) ELSE {_AFTER_COLON} END) ELSE error END) "
    f"AS error_message"
)
"""Rows before version 4 kept one ``error`` text ``"<kind>: <message>"``; these read it as ``error_kind`` and
``error_message`` exactly as :func:`tooleval.storage._row.split_error` does."""

_MATCH_COLUMNS = (
    "CASE WHEN row_schema_version < 5 THEN 'unordered' ELSE match_mode END AS match_mode, "
    "CASE WHEN row_schema_version < 5 THEN exact_match ELSE calls_match END AS calls_match, "
    "CASE WHEN row_schema_version < 6 THEN (CASE WHEN f1 IS NULL THEN NULL ELSE false END) ELSE name_only END "
    "AS name_only"
)
"""Rows before version 5 were scored under the one rule there was, the unordered multiset: their ``match_mode``
reads as ``unordered`` and their ``calls_match`` as their ``exact_match``; rows before version 6 never matched a
call by name only: a scored one's ``name_only`` reads as false (:mod:`tooleval.storage._versions`)."""


@lru_cache(maxsize=1)
def _rows_frame_sql() -> str:
    """Zero rows with every current row column, plus the ``error`` text of older rows (null in new ones)."""
    import duckdb

    con = duckdb.connect()
    try:
        return _empty_select_sql(con, ROW_SCHEMA).replace(" WHERE false", ", CAST(NULL AS VARCHAR) AS \"error\" WHERE false")
    finally:
        con.close()


def _conformed_rows_sql(scan: str | None) -> str:
    """``SELECT`` of rows with exactly the current row columns first (older rows' ``error`` split in two)."""
    union = _rows_frame_sql() + ("" if scan is None else f" UNION ALL BY NAME SELECT * FROM {scan}")
    return f"SELECT * EXCLUDE (error) REPLACE ({_ERROR_COLUMNS}, {_MATCH_COLUMNS}) FROM ({union})"


def scan_rows_sql(paths_or_glob: str | Path | Sequence[str | Path]) -> str:
    """A DuckDB table expression over row files of any row schema version, read as the current one.

    Like :func:`scan_parquet_sql` (same arguments, same hive partition columns), but every current column exists
    even when the files predate it (as null), the ``error`` text of rows before version 4 reads as
    ``error_kind`` and ``error_message``, and rows before version 5 read as ``match_mode`` ``unordered`` with
    ``calls_match`` = ``exact_match``. Returns SQL usable after ``FROM`` (a parenthesised subquery).
    """
    return f"({_conformed_rows_sql(scan_parquet_sql(paths_or_glob))})"


def connect(out: str | Path, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """Open DuckDB with the views ``rows``, ``traces`` and ``legacy_scalars`` over ``out``.

    Each view is the current schema's columns (zero rows, in schema order) ``UNION ALL BY NAME`` the committed
    files of every run (those its ``runs/<run>/commit.json`` names: never a half-published run): every current
    column exists even when no file (or only older files) has it, and a column only older files have is kept.
    Filters on the partition columns still prune files.

    Args:
        out: The results folder (``--out``), or an fsspec URL such as ``s3://bucket/prefix``. It need not exist.
        database: DuckDB database path; ``":memory:"`` by default.

    Returns:
        A connection whose views list the files committed at connect time: connect after writing.

    Raises:
        InputFileError: a run's commit marker is unreadable.
    """
    import duckdb

    con = duckdb.connect(database)
    tree = tree_of(out)
    files_of = {kind: committed_files(out, kind) for kind in SCHEMAS}
    if isinstance(tree, RemoteTree):
        # DuckDB's own s3/gcs support is the httpfs extension, which it downloads from a server these machines
        # cannot reach; an fsspec filesystem registered with DuckDB serves the URLs instead.
        con.register_filesystem(ListedFiles(tree.fs, [str(f) for files in files_of.values() for f in files]))
    for kind, schema in SCHEMAS.items():
        files = files_of[kind]
        if kind == "rows":
            sql = _conformed_rows_sql(scan_parquet_sql(files) if files else None)
        else:
            sql = _empty_select_sql(con, schema)
            if files:
                sql += f" UNION ALL BY NAME SELECT * FROM {scan_parquet_sql(files)}"
        con.execute(f'CREATE OR REPLACE VIEW "{VIEW_NAMES[kind]}" AS {sql}')
    return con


def read_table(out: Path | str, kind: str, *, revision: str | None = None, run_id: str | None = None) -> pa.Table:
    """Read the partitions of one kind with pyarrow.dataset, optionally only one revision and/or run.

    Args:
        out: The results folder, or an fsspec URL (read through its filesystem).
        kind: ``"rows"`` or ``"traces"``.
        revision: Only this dataset revision, when given.
        run_id: Only this run, when given.

    Returns:
        A table whose schema is the current schema of ``kind`` followed by any extra columns older files
        hold; missing columns read as null; partition columns are strings. Zero rows when nothing matches.
        Row order follows the sorted file paths. Only committed files are read (the runs' commit markers).

    Raises:
        ValueError: unknown ``kind``; UnsafeNameError: unsafe ``revision`` or ``run_id``.
        pyarrow.ArrowTypeError / ArrowInvalid: a file stores a column with an incompatible type.
    """
    _check_kind(kind)
    if revision is not None:
        validate_partition_value(revision, what="dataset revision")
    if run_id is not None:
        validate_partition_value(run_id, what="run id")
    files = committed_files(out, kind, revision, run_id)
    schema = pa.unify_schemas([SCHEMAS[kind], *(read_parquet_schema(path) for path in files)]).remove_metadata()
    if not files:
        return schema.empty_table()
    tree = tree_of(out)
    fs = tree.fs if isinstance(tree, RemoteTree) else None
    base = f"{tree.root}/{kind}" if fs is not None else str(Path(out) / kind)
    import pyarrow.dataset as ds

    dataset = ds.dataset(
        [str(path) if fs is None else fs._strip_protocol(path) for path in files],
        schema=schema,
        format="parquet",
        partitioning=_partitioning(),
        partition_base_dir=base,
        filesystem=fs,
    )
    return dataset.to_table()
