"""Stage 5, the legacy scalar path: mean ragas ToolCallF1 and row count from the immutable trace envelopes.

Cache key: the envelope files' content digests (not their paths), the dataset, the code version, the ragas
version and this task's source.
"""

from __future__ import annotations

import time
from typing import Iterator

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.dataset import load_dataset_trusted
from tooleval.storage import iter_file_batches, read_file_schema
from tooleval.runs.legacy import LegacyResult, legacy_score, merge_legacy
from tooleval.runs.plan import DatasetRef
from tooleval.capture.redaction import RedactionConfig
from tasks._shared import cached_redactor

_COLUMNS = ["case_id", "trial", "messages_json", "metadata_json", "error"]


BATCH_ROWS = 2_000
"""Envelopes (their messages) decoded and scored at once: a file is read record batch by record batch."""


def _batches(files: list[str]) -> Iterator[list[dict]]:
    """The envelopes of ``files``, at most :data:`BATCH_ROWS` at a time (never every envelope's messages at once,
    which would not fit a worker's memory on a large run); a column a file lacks reads as null."""
    for path in files:
        columns = [c for c in _COLUMNS if c in read_file_schema(path).names]
        for batch in iter_file_batches(path, BATCH_ROWS, columns):
            yield [dict(dict.fromkeys(_COLUMNS), **record) for record in batch]


def dataset_scope(dataset: DatasetRef) -> str:
    """A scope that keys on the whole dataset (path, revision, content, policy, tools): for callers that do not
    compose shards by content (``tooleval legacy``, rescore)."""
    import hashlib

    return hashlib.sha256(dataset.model_dump_json().encode()).hexdigest()


@task(name="legacy-scalar", cache_policy=(INPUTS - "envelope_files" - "dataset") + TASK_SOURCE, persist_result=True)
def legacy_scalar(
    envelope_files: list[str],
    envelope_digests: list[str],
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    code_version: str,
    ragas_version: str,
    out: str,
    scope: str = "",
) -> LegacyResult:
    """Compute the legacy scalar of one run.

    Args:
        envelope_files: Parquet files of trace envelopes (stage files or a published traces partition).
        envelope_digests: sha256 of each file (cache key).
        dataset: The dataset whose reference calls score the envelopes.
        redaction: The redaction the envelopes went through (references are redacted alike).
        code_version: Scorer/code version (cache key; recorded on the result).
        ragas_version: ragas version (cache key).
        out: Results folder (where the redaction key lives).
        scope: What of the dataset the values depend on (cache key; the dataset itself is not hashed): a shard's
            :func:`tooleval.runs.shards.scoring_key`, or :func:`dataset_scope` of the whole dataset.

    Returns:
        A :class:`tooleval.runs.legacy.LegacyResult`.
    """
    started = time.perf_counter()
    cases = load_dataset_trusted(dataset.path, dataset.content_digest).cases
    redactor = cached_redactor(out, redaction, dataset)
    parts = [legacy_score(batch, cases, code_version, redactor) for batch in _batches(envelope_files)]
    result = merge_legacy(parts) if parts else legacy_score([], cases, code_version, redactor)
    result.elapsed_s = time.perf_counter() - started
    return result
