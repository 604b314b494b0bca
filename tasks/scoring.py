"""Stage 3, scoring: one row per envelope, from the envelopes and the dataset only.

Cache key: the envelope stage file's digest (which covers every trace digest), the dataset (path, revision, content
digest, the digest of its gate.toml ``[policy]``), the redaction config, the scorer version (a digest of the whole
``tooleval`` package, not only this task's source: Prefect's TASK_SOURCE hashes only the task function's own text, so
a change in a helper module would not invalidate the cache), the ragas version, and this task's source.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.dataset import load_dataset_trusted
from tooleval.runs.plan import DatasetRef
from tooleval.capture.redaction import RedactionConfig
from tasks._shared import cached_case_inputs, cached_redactor
from tooleval.rules import ToolTable, load_policy
from tooleval.scoring import ScoringSources, ShardMemo, score_table
from tooleval.storage.stages import STAGE_ROW_GROUP, StageRef, iter_stage_batches, write_stage_tables
from tooleval.storage import ROW_SCHEMA, VIEW_FIELDS
from tooleval.storage import is_arrow_file, read_location_bytes


_ONLY_DIGESTED = frozenset({"captured_at"})
"""Envelope columns that scoring never reads when the digests are verified: the capture time (left out of the
digest as well). The messages of a verified file come as UTF-8 bytes, which orjson reads as they are."""
_VIEWED = frozenset({"messages_json", "metadata_json", "request_messages_json"})
"""The trace's JSON-text columns, which scoring does not read from a verified file that holds capture's view of
them (:data:`tooleval.storage.VIEW_FIELDS`): they are left compressed, never decoded (on a 16 KB tau trace,
decompressing them was most of the cost of reading the stage file)."""


def _read_checked(ref: StageRef) -> tuple[Iterator[pa.Table], bool]:
    """The envelope stage file's record batches (as capture wrote them: at most
    :data:`tooleval.storage.stages.STAGE_ROW_GROUP` rows each) as tables, and whether its bytes are the ones capture
    wrote (sha256 equal to the ref's digest, which names the file): then every stored trace digest is the one
    capture computed from that content, and scoring does not compute it a second time. A file that cannot be read
    locally as bytes is read as usual and its digests are recomputed. Only the file's (compressed) bytes and one
    batch are held at once, whatever the shard's size."""
    try:
        data = read_location_bytes(ref.path)
    except OSError:
        return (pa.Table.from_pylist(batch) for batch in iter_stage_batches(ref)), False
    intact = hashlib.sha256(data).hexdigest() == ref.digest
    if is_arrow_file(ref.path):
        reader = ipc.open_file(pa.BufferReader(data))
        names = reader.schema.names
        if intact and set(VIEW_FIELDS.names) <= set(names):
            names = [name for name in names if name not in _VIEWED]
            options = ipc.IpcReadOptions(included_fields=[reader.schema.get_field_index(name) for name in names])
            reader = ipc.open_file(pa.BufferReader(data), options=options)
        batches: Iterator[Any] = (reader.get_batch(i) for i in range(reader.num_record_batches))
    else:
        file = pq.ParquetFile(pa.BufferReader(data))
        names = file.schema_arrow.names
        batches = (batch for group in range(file.num_row_groups)
                   for batch in file.iter_batches(batch_size=STAGE_ROW_GROUP, row_groups=[group]))
    if not intact:
        return (pa.Table.from_batches([batch]) for batch in batches), False
    kept = [name for name in names if name not in _ONLY_DIGESTED]
    return (_as_bytes(pa.Table.from_batches([batch]).select(kept), "messages_json") for batch in batches), True


def _as_bytes(table: pa.Table, name: str) -> pa.Table:
    """``table`` with its string column ``name`` as binary: the messages then reach orjson as UTF-8 bytes, never
    decoded into a ``str`` first (a tau trace is ~16 KB)."""
    if name not in table.schema.names:
        return table
    index = table.schema.get_field_index(name)
    return table.set_column(index, name, table.column(name).cast(pa.binary()))


@task(name="scoring", cache_policy=INPUTS - "dataset" + TASK_SOURCE, persist_result=True)
def score_shard(
    envelopes: StageRef,
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    scorer_version: str,
    ragas_version: str,
    out: str,
    stage_dir: str,
    scope: str = "",
) -> StageRef:
    """Score one shard.

    Args:
        envelopes: Ref to the shard's envelope stage file.
        dataset: The dataset (its cases are read from ``dataset.path``).
        redaction: The redaction the traces went through (references are redacted alike); ``None``: off.
        scorer_version: :func:`tooleval.versions.scorer_version` (cache key; recorded on every row).
        ragas_version: Installed ragas version (cache key; recorded on every row).
        out: Results folder (where the redaction key lives).
        stage_dir: Folder for the rows stage file.
        scope: What of the dataset the rows depend on (cache key; the dataset itself is not hashed): a shard's
            :func:`tooleval.runs.shards.scoring_key`, or :func:`tasks.legacy.dataset_scope` of the whole dataset.

    Returns:
        Ref to an Arrow IPC file (LZ4 buffers) of :data:`tooleval.storage.ROW_SCHEMA` rows (``run_id`` null): read
        once, by publication, and about 7 µs a row cheaper to write than zstd Parquet on a bfcl corpus.

    Raises:
        tooleval.errors.InputFileError: the dataset changed on disk since the run was planned.
    """
    started = time.perf_counter()
    loaded = load_dataset_trusted(dataset.path, dataset.content_digest)  # raises when it changed since the plan
    batches, intact = _read_checked(envelopes)
    redactor = cached_redactor(out, redaction, dataset)
    tools = ToolTable(loaded.tools)
    policy = load_policy(loaded.path)
    memo = ShardMemo()  # what the shard's cases and calls share, and the confirmation verdicts, across batches

    def inputs() -> dict[str, list[str]]:  # the whole dataset's input map: only for a request not its case's own
        return cached_case_inputs(out, redaction, dataset)

    sources = ScoringSources(loaded.cases, redactor=redactor, inputs=inputs, tools=tools, policy=policy,
                             digests_verified=intact, memo=memo)
    return write_stage_tables(stage_dir, "scoring", _scored(batches, sources), ROW_SCHEMA, started=started,
                              arrow=True)


MEMO_ENTRIES = 16_384
"""Entries (case entries plus distinct calls) past which a shard's next batches start an empty memo: the memo grows
with a shard's distinct cases and calls (~2.3 KB a bfcl row), and a shard of 60,000 bfcl rows held ~140 MB of it
to the end. What the memo saves is work on values that recur, and they recur close together: the trials of a
case follow one another, and a tau shard's ~2,000 rows repeat a few hundred calls."""


def _scored(batches: Iterator[pa.Table], sources: ScoringSources) -> Iterator[pa.Table]:
    """Each batch's rows table, one batch at a time (a worker never holds a shard); after a batch, a memo holding
    more than :data:`MEMO_ENTRIES` entries is replaced by an empty one (the rows do not depend on what it held)."""
    for batch in batches:
        yield score_table(batch, sources)
        if sources.memo.size() > MEMO_ENTRIES:
            sources.memo = sources.memo.fresh()
