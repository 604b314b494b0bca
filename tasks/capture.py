"""Stage 2, trace capture: turn raw responses into immutable, versioned trace envelopes.

A replayed trace reaches this stage as a reference to its recorded line (the generation stage reads nothing of it):
capture reads the line, decodes and validates it once (the plan read only its key), redacts it and builds its
envelope, so the trace is not decoded, encoded and decoded again on its way from the traces file to the envelope. A
live agent's response arrives as the redacted text the generation stage wrote.

Cache key: the generation stage file's digest (which covers each replayed line's digest), the dataset's tool schema
version, the code version (a digest of the whole ``tooleval`` package, which holds the envelope builder), the
redaction config and the generation scope (the redactor's seeded values), and this task's source — not the dataset
revision: the envelopes leave ``dataset_revision`` null (publication stamps it, and the trace digest leaves it out),
so a corpus that grows under a new revision re-captures only the shards whose traces changed. Where the lines are
(byte offsets, which move when others are added) is not part of the key.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.agents import ReplayAgentConfig, WorkItem, replay_lines
from tooleval.capture import capture_tables
from tooleval.capture.redaction import RedactionConfig
from tooleval.dataset import load_dataset_trusted
from tooleval.runs.plan import DatasetRef
from tooleval.storage import CAPTURE_SCHEMA, iter_file_batches
from tooleval.storage.stages import STAGE_ROW_GROUP, StageRef, write_stage_tables
from tasks._shared import cached_redactor

__all__ = ["ReplayedLines", "capture_shard"]


class ReplayedLines:
    """Where a shard's replayed traces are: the traces file and each work item's line, as one opaque argument of
    :func:`capture_shard` (Prefect does not walk into it looking for futures, and it is not part of the cache key:
    the generation stage file holds each line's digest).

    Args:
        agent: The replay agent's config (the traces file).
        items: The shard's work items, in the order the generation stage wrote them.
        offsets: ``(byte offset, line number)`` of each item's line (see
            :meth:`tooleval.runs.plan.RunPlan.shard_items`); ``None``: the file is read from its start (gzip).
        dataset: The dataset, whose cases the redactor reads (a case's references name its secrets).
        out: The results folder, where the redaction key lives.
    """

    __slots__ = ("agent", "items", "offsets", "dataset", "out")

    def __init__(self, agent: ReplayAgentConfig, items: list[WorkItem], offsets: list[tuple[int, int]] | None,
                 dataset: DatasetRef, out: str) -> None:
        self.agent = agent
        self.items = items
        self.offsets = offsets
        self.dataset = dataset
        self.out = out


@task(name="trace-capture", cache_policy=INPUTS - "replay" + TASK_SOURCE, persist_result=True)
def capture_shard(
    generation: StageRef, tool_schema_version: str | None, code_version: str, stage_dir: str,
    redaction: RedactionConfig | None = None, scope: str = "", replay: ReplayedLines | None = None,
    kept_results: list[str] | None = None,
) -> StageRef:
    """Capture one shard of envelopes.

    Args:
        generation: Ref to the shard's generation stage file.
        tool_schema_version: Version of the dataset's tool schemas (recorded unless the trace names its own).
        code_version: Scorer/code version (cache key only).
        stage_dir: Folder for the envelope stage file.
        redaction: The run's redaction config (with its key's digest), applied to replayed lines here (a live
            response was redacted by the generation stage); ``None``: off.
        scope: :func:`tooleval.runs.shards.run_scopes`' generation scope (the redactor's seeded values; cache key).
        replay: Where the replayed lines are, when the generation stage file refers to recorded lines (not part of
            the cache key: the generation stage file holds each line's digest).
        kept_results: The tools that declare confidential fields (in tools.json or a case's own tools), sorted:
            the transcript view keeps the result texts of their calls, which the leak rule reads; ``None``: every
            tool's.

    Returns:
        Ref to an Arrow IPC file of :data:`tooleval.storage.CAPTURE_SCHEMA` rows (``run_id`` and
        ``dataset_revision`` null: the partition columns are stamped at publication). A generation
        record with an error, or a recorded line that is not a valid trace, becomes an envelope that carries the
        error, with whatever was captured.

    Raises:
        ValueError: the generation file refers to recorded lines and ``replay`` is ``None``, or its keys are not
            ``replay``'s items.
        tooleval.errors.InputFileError: the traces file changed after the run was planned.
    """
    started = time.perf_counter()
    captured_at = datetime.now(timezone.utc)
    # one batch at a time, so memory stays that of one batch; each payload as its UTF-8 bytes, which orjson reads
    # without a str between
    batches = iter_file_batches(generation.path, STAGE_ROW_GROUP, binary=("payload_json",))
    records = (record for batch in batches for record in batch)
    lines, redact, case_of, untouched = None, None, None, None
    if replay is not None:
        path, found = replay_lines(replay.agent, replay.items, replay.offsets)
        lines = (path, found, replay.items)
        redactor = cached_redactor(replay.out, redaction, replay.dataset)
        if redactor is not None:
            redact, untouched = redactor.redact_trace_values, redactor.untouched_text
            case_of = load_dataset_trusted(replay.dataset.path, replay.dataset.content_digest).cases.get
    kept = None if kept_results is None else frozenset(kept_results)
    tables = capture_tables(records, captured_at, tool_schema_version, kept, lines=lines, redact=redact,
                            case_of=case_of, untouched=untouched)
    return write_stage_tables(stage_dir, "capture", tables, CAPTURE_SCHEMA, started=started, arrow=True)
