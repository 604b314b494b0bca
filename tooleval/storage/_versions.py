"""Reading persisted envelopes and rows across schema versions.

A reader refuses a file written by a *newer* tooleval (its ``envelope_version`` / ``row_schema_version`` is above
the version this code knows) with an error naming the version, the file and the fix, instead of silently
dropping the columns it does not know. Older versions are read through explicit migrations to the current
schema; golden fixtures of every version (``tests/golden/*_v<N>.parquet``) are tests.

Migrations:

* envelopes 1 -> 2: the request, adapter and executor calls, prompt/tool schema versions, generation timestamps
  and redacted field names were not recorded: they read as null (never invented).
* envelopes 2 -> 3: no column changes; a version-2 ``trace_digest`` covers ``dataset_revision`` and is checked
  with that formula (:func:`tooleval.capture.envelope.envelope_digest` picks the formula by version).
* rows 1 -> 2: provenance and policy columns read as null; ``provenance_status`` is null, not ``missing``,
  because version-1 rows never looked.
* rows 2 -> 3: ``schema_findings`` reads as null (never checked), not ``[]`` (checked and clean); their
  ``mismatch_categories`` and ``violations`` stay as written (no ``schema`` / ``tool_schema`` entries).
* rows 3 -> 4: the one ``error`` text ``"<kind>: <message>"`` reads as ``error_kind`` and ``error_message``
  (:func:`tooleval.storage._row.split_error`; a kind outside the closed set reads as ``other`` with the whole
  text as its message); version-1 rows, which had no ``error`` column, read both as null.
* rows 4 -> 5: every older row was scored under the one rule there was, the unordered multiset, so
  ``match_mode`` reads as ``unordered`` and ``calls_match`` as the row's ``exact_match`` (fp = 0 and fn = 0: what
  that mode's verdict is, not a guess); an error row's ``exact_match``, hence its ``calls_match``, stays null.
* rows 5 -> 6: no scorer before version 6 matched a call by name only (a call without arguments was read as
  ``{}``), so a scored row's ``name_only`` reads as false; an error row's (``f1`` null) stays null.
* rows 6 -> 7: ``gate_verdict`` and ``gate_rules`` read as null: the gate's verdict of an older run's rows was
  never stored (its waivers and quarantine are in its ``summary.json`` only), and a verdict rebuilt from the row's
  own columns would miss them, so readers that need a verdict judge such rows as they did before (compare,
  variability: ``blocking`` and the row outcome; ``tooleval gate --run-id`` judges them again).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tooleval.errors import InputFileError
from tooleval.storage._fs import open_parquet
from tooleval.storage._row import split_error
from tooleval.storage._schema import ENVELOPE_VERSION, ROW_SCHEMA_VERSION, SCHEMAS

__all__ = ["VERSION_COLUMNS", "CURRENT_VERSIONS", "conform", "read_versioned"]

VERSION_COLUMNS = {"traces": "envelope_version", "rows": "row_schema_version"}
CURRENT_VERSIONS = {"traces": ENVELOPE_VERSION, "rows": ROW_SCHEMA_VERSION}


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Return ``table`` with exactly ``schema``'s columns, in order: absent columns as nulls, others cast; a row
    table's older ``error`` text becomes ``error_kind`` and ``error_message`` (rows 3 -> 4), and rows before the
    match modes read as ``unordered`` with ``calls_match`` = ``exact_match`` (rows 4 -> 5)."""
    wants_error = "error_kind" in schema.names or "error_message" in schema.names
    split = _split_errors(table) if wants_error and "error_kind" not in table.column_names else {}
    split.update(_unordered_verdicts(table, schema))
    split.update(_argument_level(table, schema))
    columns = []
    for field in schema:
        if field.name in split:
            columns.append(split[field.name])
        elif field.name in table.column_names:
            columns.append(table[field.name].cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _split_errors(table: pa.Table) -> dict[str, pa.Array]:
    """``{"error_kind": ..., "error_message": ...}`` from an older row table's ``error`` column (empty without one)."""
    if "error" not in table.column_names:
        return {}
    pairs = [split_error(text) for text in table.column("error").to_pylist()]
    return {"error_kind": pa.array([kind for kind, _ in pairs], pa.string()),
            "error_message": pa.array([message for _, message in pairs], pa.string())}


def _unordered_verdicts(table: pa.Table, schema: pa.Schema) -> dict[str, pa.Array]:
    """``match_mode`` and ``calls_match`` of a row table written before the match modes (empty when the table has
    them, or when ``schema`` asks for neither)."""
    out: dict[str, pa.Array] = {}
    if "match_mode" in schema.names and "match_mode" not in table.column_names:
        out["match_mode"] = pa.array(["unordered"] * table.num_rows, pa.string())
    if "calls_match" in schema.names and "calls_match" not in table.column_names:
        exact = table.column("exact_match") if "exact_match" in table.column_names else None
        out["calls_match"] = (pa.nulls(table.num_rows, pa.bool_()) if exact is None
                              else exact.cast(pa.bool_()).combine_chunks())
    return out


def _argument_level(table: pa.Table, schema: pa.Schema) -> dict[str, pa.Array]:
    """``name_only`` of a row table written before it existed: false for a scored row, null for an error row
    (``f1`` null; null throughout when the table lacks ``f1``)."""
    if "name_only" not in schema.names or "name_only" in table.column_names:
        return {}
    if "f1" not in table.column_names:
        return {"name_only": pa.nulls(table.num_rows, pa.bool_())}
    scored = pc.is_valid(table.column("f1")).combine_chunks()
    return {"name_only": pc.if_else(scored, False, pa.scalar(None, pa.bool_()))}


def read_versioned(path: str | Path, kind: str, columns: list[str] | None = None) -> pa.Table:
    """Read one Parquet file of envelopes (``kind="traces"``) or rows (``"rows"``) as the current schema.

    Args:
        path: The Parquet file: a local path, or a URL (``s3://…``) read through its fsspec filesystem, one open
            handle for its footer and the column chunks of ``columns``.
        kind: ``traces`` or ``rows``.
        columns: Only these columns of the current schema (in this order; absent ones as nulls); ``None``: all.
            Readers that need a few columns of every row of a run read only those, since a
            million rows' call lists and messages do not fit a worker's memory.

    Raises:
        InputFileError: the file holds a version newer than this reader's (fix: upgrade tooleval), no version
            column at all, or cannot be read as Parquet (damaged).
    """
    try:
        return _read_versioned(path, kind, columns)
    except (pa.ArrowException, OSError) as exc:  # a truncated or overwritten part: named, not a traceback
        if isinstance(exc, FileNotFoundError):
            raise
        raise InputFileError(path, None, f"this Parquet file cannot be read ({exc}).",
                             "it is damaged or was changed by another program: restore it from a backup, or publish "
                             "the run again (tooleval rescore, or tooleval run).") from None


def _read_columns(file: pq.ParquetFile, kind: str, columns: list[str] | None) -> pa.Table:
    """``columns`` of an open Parquet file of ``kind`` (all when ``None``), with the version column and what the
    migrations of :func:`conform` need to derive a requested column the file predates."""
    if columns is None:
        return file.read()
    present = set(file.schema_arrow.names)
    wanted = [c for c in dict.fromkeys([*columns, VERSION_COLUMNS[kind]]) if c in present]
    if kind == "rows" and "error" in present and {"error_kind", "error_message"} & set(columns):
        wanted.append("error")  # an older file's error text, split by conform()
    if "calls_match" in columns and "calls_match" not in present and "exact_match" in present - set(wanted):
        wanted.append("exact_match")  # an older file's verdict under the unordered rule, read by conform()
    if "name_only" in columns and "name_only" not in present and "f1" in present - set(wanted):
        wanted.append("f1")  # whether an older file's row was scored, read by conform()
    return file.read(columns=wanted)


def _read_versioned(path: str | Path, kind: str, columns: list[str] | None) -> pa.Table:
    column = VERSION_COLUMNS[kind]
    current = CURRENT_VERSIONS[kind]
    schema = SCHEMAS[kind]
    with open_parquet(path) as file:  # one handle: a file on object storage is fetched once
        table = _read_columns(file, kind, columns)
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    if column not in table.column_names:
        raise InputFileError(path, None, f"no {column} column: not a tooleval {kind} file.",
                             "point tooleval at a results folder it wrote.")
    found = pc.max(table[column]).as_py()
    if found is not None and found > current:
        raise InputFileError(
            path, None,
            f"{column} {found} is newer than this tooleval reads (up to {current}).",
            "upgrade tooleval (pip install -U tooleval) to read it; nothing was changed.",
        )
    return conform(table, schema)
