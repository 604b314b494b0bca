"""Storage: the Arrow schemas of trace envelopes and rows, partitioned Parquet writing, and readers.

Pure: imports pyarrow, duckdb and the standard library only (no Prefect). Layout and column contracts are in
docs/design.md "Output layout", "Row columns" and "Trace envelope columns".
"""

from tooleval.storage._partition import (
    Publication,
    UnsafeNameError,
    partition_dir,
    validate_partition_value,
    write_partition,
)
from tooleval.storage._commit import MARKER, MarkerChangedError, committed_files, document_path, read_document, read_marker
from tooleval.storage._catalog import CATALOG, DELETE as PENDING_DELETE, catalog_for, recover_results as recover
from tooleval.storage._fs import (ARROW_SUFFIX, as_location, is_arrow_file, is_remote, iter_arrow_batches,
                                  iter_file_batches, iter_parquet_batches, iter_row_group_batches, join,
                                  read_file_schema, read_table_file,
                                  location_digest, location_exists, read_location_bytes, read_parquet,
                                  read_parquet_schema, tree_of)
from tooleval.storage._machine import cache_root, check_remote, local_copy, local_state_dir
from tooleval.storage._folder_locks import revision_commit, stages_in_use, stages_unused
from tooleval.storage._hold import hold_run
from tooleval.storage._lease import LeaseHeldError, RunLease, process_alive, process_start
from tooleval.storage._paths import (OutFolderError, check_out_folder, check_state_folder, create_bytes, encode_name,
                                     ensure_dir, write_bytes)
from tooleval.storage._query import (PARTITION_TYPES, connect, read_table, scan_parquet_sql,
                                     scan_rows_sql, source_connection)
from tooleval.storage._versions import CURRENT_VERSIONS, VERSION_COLUMNS, conform, read_versioned
from tooleval.storage._row import (ERROR_KINDS, GATE_PASSES, GATE_VERDICTS, ROW_COLUMNS, ErrorKind, Row, join_error,
                                   split_error)
from tooleval.storage._schema import (
    CALL_TYPE,
    ENVELOPE_SCHEMA,
    CAPTURE_SCHEMA,
    VIEW_FIELDS,
    ENVELOPE_VERSION,
    EXECUTOR_CALL_TYPE,
    KEY_COLUMNS,
    ROW_SCHEMA,
    ROW_SCHEMA_VERSION,
    LEGACY_SCHEMA,
    SCHEMAS,
    VIEW_NAMES,
    WRONG_ARGS_TYPE,
    SCHEMA_FINDING_TYPE,
    table_from_rows,
)

__all__ = [
    "Row",
    "ROW_COLUMNS",
    "ERROR_KINDS",
    "ErrorKind",
    "GATE_VERDICTS",
    "GATE_PASSES",
    "split_error",
    "join_error",
    "MARKER",
    "MarkerChangedError",
    "committed_files",
    "document_path",
    "read_document",
    "read_marker",
    "recover",
    "CATALOG",
    "catalog_for",
    "PENDING_DELETE",
    "LeaseHeldError",
    "RunLease",
    "hold_run",
    "revision_commit",
    "stages_in_use",
    "stages_unused",
    "OutFolderError",
    "encode_name",
    "check_out_folder",
    "check_state_folder",
    "ensure_dir",
    "write_bytes",
    "CURRENT_VERSIONS",
    "VERSION_COLUMNS",
    "conform",
    "read_versioned",
    "CALL_TYPE",
    "WRONG_ARGS_TYPE",
    "SCHEMA_FINDING_TYPE",
    "ROW_SCHEMA_VERSION",
    "ENVELOPE_VERSION",
    "EXECUTOR_CALL_TYPE",
    "ROW_SCHEMA",
    "ENVELOPE_SCHEMA",
    "CAPTURE_SCHEMA",
    "VIEW_FIELDS",
    "SCHEMAS",
    "LEGACY_SCHEMA",
    "VIEW_NAMES",
    "KEY_COLUMNS",
    "table_from_rows",
    "UnsafeNameError",
    "validate_partition_value",
    "partition_dir",
    "Publication",
    "write_partition",
    "PARTITION_TYPES",
    "PARTITIONING",
    "connect",
    "source_connection",
    "scan_parquet_sql",
    "scan_rows_sql",
    "read_table",
    "as_location",
    "is_remote",
    "join",
    "tree_of",
    "iter_parquet_batches",
    "iter_file_batches",
    "iter_arrow_batches",
    "is_arrow_file",
    "ARROW_SUFFIX",
    "read_file_schema",
    "read_table_file",
    "iter_row_group_batches",
    "location_exists",
    "location_digest",
    "read_location_bytes",
    "read_parquet",
    "read_parquet_schema",
    "cache_root",
    "check_remote",
    "local_copy",
    "local_state_dir",
    "process_alive",
    "process_start",
    "create_bytes",
]


def __getattr__(name: str):
    if name == "PARTITIONING":  # built on first use: pyarrow.dataset brings pandas, ~1 s of every command's start-up
        from tooleval.storage import _query

        return _query.PARTITIONING
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
