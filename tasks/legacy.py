"""Stage 5, the legacy scalar path: mean ragas ToolCallF1 and row count from the immutable trace envelopes.

Cache key: the envelope files' content digests (not their paths), the dataset, the code version, the ragas
version and this task's source.
"""

from __future__ import annotations

import time

import pyarrow as pa
from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.dataset import load_dataset_cached
from tooleval.storage._fs import read_parquet, read_parquet_schema
from tooleval.runs.legacy import LegacyResult, legacy_score
from tooleval.runs.plan import DatasetRef
from tooleval.capture.redaction import RedactionConfig
from tasks._shared import cached_redactor

_COLUMNS = ["case_id", "trial", "messages_json", "metadata_json", "error"]


def _read(files: list[str]) -> list[dict]:
    tables = []
    for path in files:
        schema = read_parquet_schema(path)
        tables.append(read_parquet(path, columns=[c for c in _COLUMNS if c in schema.names]))
    if not tables:
        return []
    return pa.concat_tables(tables, promote_options="default").to_pylist()


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
    cases = load_dataset_cached(dataset.path).cases
    result = legacy_score(_read(envelope_files), cases, code_version, cached_redactor(out, redaction, dataset))
    result.elapsed_s = time.perf_counter() - started
    return result
