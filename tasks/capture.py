"""Stage 2, trace capture: turn raw responses into immutable, versioned trace envelopes.

Cache key: the generation stage file's digest, the dataset's tool schema version, the code version (a digest of
the whole ``tooleval`` package, which holds the envelope builder) and this task's source — not the dataset
revision: the envelopes leave ``dataset_revision`` null (publication stamps it, and the trace digest leaves it
out), so a corpus that grows under a new revision re-captures only the shards whose traces changed.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.capture.envelope import generation_envelope
from tooleval.storage import iter_parquet_batches
from tooleval.storage.stages import STAGE_ROW_GROUP, StageRef, write_stage_table
from tooleval.storage import ENVELOPE_SCHEMA


@task(name="trace-capture", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def capture_shard(
    generation: StageRef, tool_schema_version: str | None, code_version: str, stage_dir: str
) -> StageRef:
    """Capture one shard of envelopes.

    Args:
        generation: Ref to the shard's generation stage file.
        tool_schema_version: Version of the dataset's tool schemas (recorded unless the trace names its own).
        code_version: Scorer/code version (cache key only).
        stage_dir: Folder for the envelope stage file.

    Returns:
        Ref to a Parquet file of :data:`tooleval.storage.ENVELOPE_SCHEMA` rows (``run_id`` and
        ``dataset_revision`` null: the partition columns are stamped at publication). A generation
        record with an error becomes an envelope that carries the error, with whatever was captured.
    """
    started = time.perf_counter()
    captured_at = datetime.now(timezone.utc)
    # one batch at a time, so memory stays that of one batch; each payload as its UTF-8 bytes, which orjson reads
    # without a str between
    batches = iter_parquet_batches(generation.path, STAGE_ROW_GROUP, binary=("payload_json",))
    envelopes = (generation_envelope(record, captured_at, tool_schema_version) for batch in batches for record in batch)
    return write_stage_table(stage_dir, "capture", envelopes, ENVELOPE_SCHEMA, started=started)
