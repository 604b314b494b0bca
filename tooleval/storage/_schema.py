"""Arrow schemas of the persisted shapes: trace envelopes (``traces/``) and rows (``rows/``).

Columns are written from these explicit schemas, never inferred (docs/design.md "Output layout"). Tool-call
arguments are canonical JSON *text* (``args_json``): an inferred struct would invent absent keys and could not
hold ``{}`` (Parquet cannot write a struct with no fields; apache/arrow 9886).

Partition columns in the file *and* in the path. ``dataset_revision`` and ``run_id`` are kept inside every
file, so a file copied out of its folder still says what it is. Verified with pyarrow 26.0.1 and DuckDB 2.0.1
(``tests/storage/test_query.py``):

* DuckDB ``read_parquet(..., hive_partitioning=true, hive_types={...: 'VARCHAR'})`` returns one column of
  each name, typed VARCHAR; where file and path disagree the *path* value wins. Without ``hive_types`` DuckDB
  autocasts a path-only value such as ``run_id=7`` to BIGINT, hence :data:`PARTITION_TYPES`.
* pyarrow.dataset with an explicit string hive partitioning returns one string column; the path value wins
  too. With an *inferred* ``partitioning="hive"`` it fails ("Field run_id has incompatible types: string vs
  int32") as soon as a value looks like a number, so readers must pass the explicit partitioning.

Both readers therefore agree, and the writer (:class:`tooleval.storage.Publication`) stamps the partition
values into the file columns so that file and path never disagree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from tooleval.storage._row import ROW_SCHEMA, ROW_SCHEMA_VERSION
from tooleval.storage._types import (CALL_TYPE, COERCION_TYPE, EXECUTOR_CALL_TYPE, SCHEMA_FINDING_TYPE,
                                     VIOLATION_TYPE, WRONG_ARGS_TYPE)

__all__ = [
    "CALL_TYPE",
    "WRONG_ARGS_TYPE",
    "SCHEMA_FINDING_TYPE",
    "EXECUTOR_CALL_TYPE",
    "ROW_SCHEMA_VERSION",
    "ENVELOPE_VERSION",
    "ROW_SCHEMA",
    "ENVELOPE_SCHEMA",
    "CAPTURE_SCHEMA",
    "VIEW_FIELDS",
    "SCHEMAS",
    "LEGACY_SCHEMA",
    "VIEW_NAMES",
    "KEY_COLUMNS",
    "table_from_rows",
]

ENVELOPE_VERSION = 3
"""Version of :data:`ENVELOPE_SCHEMA`; a reader refuses envelopes newer than the version it knows.

History: 1 — model calls only; 2 — the request as sent, adapter and executor calls, prompt and tool schema
versions, generation timestamps, redacted field names; 3 — the same columns, but ``trace_digest`` leaves out
``dataset_revision`` as it leaves out ``run_id``: both are partition columns, stamped when a run publishes, so an
envelope captured once serves every later revision whose case it answers (so a growing corpus re-captures and
rescores only the shards it changed)."""

_CALLS = pa.list_(CALL_TYPE)

ENVELOPE_SCHEMA = pa.schema(
    [
        ("envelope_version", pa.int32()),
        ("dataset_revision", pa.string()),
        ("run_id", pa.string()),
        ("case_id", pa.string()),
        ("trial", pa.int32()),
        ("agent_name", pa.string()),
        ("agent_version", pa.string()),
        ("agent_model", pa.string()),
        ("request_id", pa.string()),
        ("response_id", pa.string()),
        ("messages_json", pa.string()),
        ("model_calls", _CALLS),
        ("metadata_json", pa.string()),
        ("captured_at", pa.timestamp("us", tz="UTC")),
        ("trace_digest", pa.string()),
        ("error", pa.string()),  # null unless the trace could not be read (tooleval.capture.envelope sets it)
        ("request_messages_json", pa.string()),  # the generation request as sent, when recorded
        ("adapter_calls", _CALLS),  # after parsing, validation and defaults; null when unknown
        ("executor_calls", pa.list_(EXECUTOR_CALL_TYPE)),  # payloads the tools received; null when unknown
        ("prompt_version", pa.string()),
        ("tool_schema_version", pa.string()),
        ("generation_started_at", pa.timestamp("us", tz="UTC")),
        ("generation_finished_at", pa.timestamp("us", tz="UTC")),
        ("redacted_fields", pa.list_(pa.string())),
    ]
)
"""One immutable trace envelope per (case, trial) under ``traces/`` (docs/design.md "Trace envelope columns")."""

_FLAG = pa.struct([("message_index", pa.int32()), ("key", pa.string()), ("value", pa.bool_()),
                   ("in_metadata", pa.bool_())])
_STEP = pa.struct([("message_index", pa.int32()), ("result_index", pa.int32()), ("failed", pa.bool_())])
VIEW_FIELDS = pa.schema(
    [
        ("message_roles", pa.string()),
        ("message_texts", pa.list_(pa.string())),
        ("error_messages", pa.list_(pa.int32())),
        ("user_flags", pa.list_(_FLAG)),
        ("steps", pa.list_(_STEP)),
        ("steps_error", pa.string()),
        ("result_texts", pa.list_(pa.string())),
        ("written_arguments", pa.list_(pa.string())),
        ("request_key", pa.string()),
        ("recorded_reward", pa.float64()),
        ("reference_secrets_json", pa.string()),
    ]
)
"""What trace capture writes beside each envelope in its stage file (:data:`CAPTURE_SCHEMA`), so that the scoring
stage reads a trace's content as columns and never decodes its messages, metadata or request again: the fields of a
:class:`tooleval.capture.Transcript`, the request's join key (:func:`tooleval.capture.input_key`), the reward the
trace records, and the redaction's ``reference_secrets`` markers as JSON text. The transcript columns are null for
an envelope without messages. Not published: ``traces/`` keeps :data:`ENVELOPE_SCHEMA`."""


CAPTURE_SCHEMA = pa.schema([*ENVELOPE_SCHEMA, *VIEW_FIELDS])
"""The capture stage file: :data:`ENVELOPE_SCHEMA` then :data:`VIEW_FIELDS`."""

LEGACY_SCHEMA = pa.schema(
    [
        ("dataset_revision", pa.string()),
        ("run_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("rows", pa.int64()),
        ("ragas_version", pa.string()),
        ("scorer_version", pa.string()),
        ("computed_at", pa.timestamp("us", tz="UTC")),
    ]
)
"""The legacy scalar path's one-row table (``legacy/.../scalar.parquet``): what the old dashboards read."""

SCHEMAS: dict[str, pa.Schema] = {"rows": ROW_SCHEMA, "traces": ENVELOPE_SCHEMA, "legacy": LEGACY_SCHEMA}
"""Current schema of each partitioned kind, by its top-level folder name."""

VIEW_NAMES: dict[str, str] = {"rows": "rows", "traces": "traces", "legacy": "legacy_scalars"}
"""DuckDB view name of each kind (the old dashboards query ``legacy_scalars``)."""

KEY_COLUMNS = ("case_id", "trial")
"""Columns every record must carry, non-null. The partition columns are not among them: the writer stamps
``dataset_revision`` and ``run_id`` from the partition path, so records may leave them ``None``."""


def _holds_struct(type_: pa.DataType) -> bool:
    return pa.types.is_struct(type_) or (pa.types.is_list(type_) and _holds_struct(type_.value_type))


def _shape(type_: pa.DataType) -> tuple:
    """A plain-Python outline of a struct-holding type: ``("list", item)`` or ``("struct", names, children)``.

    Checking values against this outline is ~9x faster than consulting the Arrow type per value (100k rows).
    """
    if pa.types.is_list(type_):
        return ("list", _shape(type_.value_type))
    fields = [type_.field(i) for i in range(type_.num_fields)]
    children = tuple((f.name, _shape(f.type)) for f in fields if _holds_struct(f.type))
    return ("struct", frozenset(f.name for f in fields), children)


def _unknown_key(value: Any, shape: tuple) -> str | None:
    """Where a struct value (possibly inside lists) has a key its type lacks, e.g. ``"[0]: unknown key(s) ..."``."""
    if shape[0] == "list" and isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if item is not None and (found := _unknown_key(item, shape[1])) is not None:
                return f"[{index}]{found}"
    elif shape[0] == "struct" and isinstance(value, dict):
        names, children = shape[1], shape[2]
        if not names.issuperset(value):
            return f": unknown key(s) {sorted(set(value) - names)}; the struct has {sorted(names)}"
        for key, child in children:
            item = value.get(key)
            if item is not None and (found := _unknown_key(item, child)) is not None:
                return f".{key}{found}"
    return None


def table_from_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Build a table from record dicts with an explicit schema (``pa.Table.from_pylist(rows, schema=...)``).

    Args:
        rows: One dict per record, keyed by column name. Nested calls are dicts shaped like :data:`CALL_TYPE`.
        schema: The schema to write, usually :data:`ROW_SCHEMA` or :data:`ENVELOPE_SCHEMA`.

    Returns:
        A table with exactly ``schema`` (also when ``rows`` is empty: zero rows, every column).

    Raises:
        ValueError: naming the row index and column when a record (or a nested struct) has a key the schema
            lacks, misses a :data:`KEY_COLUMNS` value, holds a naive datetime for a UTC timestamp column, or
            holds a value of the wrong type. Other missing keys are read as null.
    """
    types = {field.name: field.type for field in schema}
    known = frozenset(types)
    required = [name for name in KEY_COLUMNS if name in types]
    zoned = [f.name for f in schema if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    nested = [(f.name, _shape(f.type)) for f in schema if _holds_struct(f.type)]
    for index, row in enumerate(rows):
        if not known.issuperset(row):
            extra = sorted(set(row) - known)
            raise ValueError(f"row {index}: column(s) {extra} are not in the schema; known: {schema.names}")
        for name in required:
            if row.get(name) is None:
                raise ValueError(f"row {index}: key column {name!r} is missing or null")
        for name in zoned:
            value = row.get(name)
            if isinstance(value, datetime) and value.tzinfo is None:
                raise ValueError(f"row {index}: column {name!r} needs a timezone-aware datetime, got {value!r}")
        for name, shape in nested:
            value = row.get(name)
            if value is not None and (found := _unknown_key(value, shape)) is not None:
                raise ValueError(f"row {index}: column {name!r}{found}")
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        for name, type_ in types.items():  # find the column to name in the error
            try:
                pa.array([row.get(name) for row in rows], type=type_)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as column_exc:
                raise ValueError(f"column {name!r} ({type_}): {column_exc}") from exc
        raise ValueError(f"cannot build a table with the given schema: {exc}") from exc
