"""Shards composed from content, and the plan's compact index of work (issue 9 items 1 and 6).

A shard is a *bucket* of (case_id, trial) keys: ``bucket = top k bits of sha256(case_id NUL trial)`` with
``2**k`` buckets, the smallest power of two that keeps shards at or below the requested size. Because a key's
bucket depends only on the key, adding or removing 1 % of the cases changes only the buckets that hold them, and
every other shard keeps its cache key (positional shards shifted every later shard). When the corpus grows past
a power of two the bucket count doubles and every shard is new once (each old bucket splits in two).

The plan does not hold work items: :class:`ShardIndex` is a compact Arrow table — case id, trial, seed, the
trace line's byte offset and content digest, bucket — sorted by (bucket, case_id, trial), from which one shard's
work items are built when that shard is submitted. Memory is bounded by the shard size, not the corpus.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ShardIndex", "bucket_of", "bucket_count", "default_shard_size", "scan_lines", "MIN_SHARD", "MAX_SHARD"]

MIN_SHARD = 25
"""Smallest default shard (rows): a 200-row run still shows progress over 8 shards."""
MAX_SHARD = 20_000
"""Largest default shard (rows): bounds a worker's memory (a bfcl row is ~1 KB of trace, ~10 KB in Python)."""
_TASKS_PER_WORKER = 8
"""Default shards per worker: enough for load balance and progress, few enough that Prefect's per-task cost
(tens of ms, PREFECT.md; ``tooleval bench`` reports the share) stays small."""


def bucket_of(case_id: str, trial: int, buckets: int) -> int:
    """The bucket (shard number) of a key: the top ``log2(buckets)`` bits of ``sha256(case_id NUL trial)``.

    Args:
        case_id: Case id (any string).
        trial: Trial index.
        buckets: A power of two.

    Returns:
        An int in ``[0, buckets)``; with twice the buckets a key lands in ``2b`` or ``2b + 1``.
    """
    digest = hashlib.sha256(f"{case_id}\x00{trial}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - int(math.log2(buckets))) if buckets > 1 else 0


def bucket_count(rows: int, shard_size: int) -> int:
    """The smallest power of two ``B`` with ``rows / B <= shard_size`` (1 for an empty corpus)."""
    return 1 << max(0, math.ceil(math.log2(max(1, rows) / shard_size))) if rows > shard_size else 1


def default_shard_size(rows: int, workers: int) -> int:
    """Rows per shard when ``--shard-size`` is not given: about 8 shards per worker, within
    [:data:`MIN_SHARD`, :data:`MAX_SHARD`] (measured trade-off; README "Scale")."""
    return max(MIN_SHARD, min(MAX_SHARD, math.ceil(rows / (workers * _TASKS_PER_WORKER))))


def scan_lines(path: Path, wanted: dict[int, tuple[str, int]]) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], str]]:
    """Byte offset and content digest of the trace lines that hold the planned keys.

    Args:
        path: A traces file (a ``.gz`` file has no random access: offsets are then -1 and the replay agent reads
            the file sequentially).
        wanted: Line number (1-based, blank lines counted, as :func:`tooleval.capture.recorded.iter_json_lines`
            numbers them) -> the key that line holds.

    Returns:
        ``(offsets, digests)``: key -> byte offset of its line, key -> sha256 (32 hex) of the line's bytes.
    """
    import gzip

    offsets: dict[tuple[str, int], int] = {}
    digests: dict[tuple[str, int], str] = {}
    compressed = path.name.endswith(".gz")
    opener = gzip.open if compressed else open
    with opener(path, "rb") as handle:
        position = 0
        for number, line in enumerate(handle, start=1):
            key = wanted.get(number)
            if key is not None:
                offsets[key] = -1 if compressed else position
                digests[key] = hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()[:32]
            position += len(line)
    return offsets, digests


@dataclass(frozen=True)
class ShardIndex:
    """The run's work as a compact Arrow table sorted by (bucket, case_id, trial).

    Columns: ``case_id`` (string), ``trial`` (int32), ``seed`` (int64), ``offset`` (int64, -1 when unknown),
    ``line_digest`` (string, null for a live agent), ``bucket`` (int32).
    """

    table: pa.Table
    buckets: int

    @classmethod
    def build(cls, keys: list[tuple[str, int]], shard_size: int, offsets: dict | None = None,
              digests: dict | None = None) -> "ShardIndex":
        """Index ``keys`` into buckets of at most ``shard_size`` rows on average (see :func:`bucket_count`)."""
        buckets = bucket_count(len(keys), shard_size)
        offsets, digests = offsets or {}, digests or {}
        table = pa.table({
            "case_id": pa.array([k[0] for k in keys], pa.string()),
            "trial": pa.array([k[1] for k in keys], pa.int32()),
            "seed": pa.array([k[1] for k in keys], pa.int64()),
            "offset": pa.array([offsets.get(k, -1) for k in keys], pa.int64()),
            "line_digest": pa.array([digests.get(k) for k in keys], pa.string()),
            "bucket": pa.array([bucket_of(k[0], k[1], buckets) for k in keys], pa.int32()),
        })
        table = table.sort_by([("bucket", "ascending"), ("case_id", "ascending"), ("trial", "ascending")])
        return cls(table=table, buckets=buckets)

    @property
    def rows(self) -> int:
        """Number of work items."""
        return self.table.num_rows

    def shards(self) -> Iterator[pa.Table]:
        """The non-empty shards in bucket order, each a slice of :attr:`table` (zero-copy)."""
        if self.rows == 0:
            return
        counts = pc.value_counts(self.table["bucket"]).to_pylist()
        start = 0
        for entry in sorted(counts, key=lambda e: e["values"]):
            yield self.table.slice(start, entry["counts"])
            start += entry["counts"]


def _digest(value: object) -> str:
    from tooleval.canonical import canonical_json

    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def run_scopes(plan) -> tuple[str, str]:
    """The dataset-wide parts of the generation and scoring cache keys of a run (issue 9 item 6).

    A shard's key names its own work (case digests, trace line digests, the envelopes' digest) plus only what
    the whole dataset contributes to *every* row of that stage — so a corpus that grows by a few cases keeps the
    other shards' keys:

    * generation: the agent (replay: nothing beyond each line's digest; live: its config), the tool schemas and
      the values the redactor was seeded with (free text is redacted wherever a case's redacted value appears);
    * scoring: the tool schemas, the dataset's ``[policy]``, the redactor's seeded values and — only when some
      trace records its generation request, since only then does the join check look — every case's input.

    Args:
        plan: A :class:`tooleval.runs.plan.RunPlan`.

    Returns:
        ``(generation_scope, scoring_scope)``, two sha256 hex digests.
    """
    from tooleval.capture.redaction import build_redactor
    from tooleval.dataset import load_dataset_cached

    cases = load_dataset_cached(plan.dataset.path).cases
    redactor = build_redactor(plan.out, plan.redaction, cases) if plan.redaction else None
    seeded = redactor.seed_digest() if redactor else None
    agent = "replay" if plan.agent.kind == "replay" else _digest(plan.agent.model_dump(mode="json"))
    generation = _digest({"agent": agent, "tools": plan.dataset.tool_schema_version, "redaction_seed": seeded})
    inputs = None
    if plan.has_requests:
        from tooleval.scoring.rows import case_inputs

        inputs = _digest(sorted(case_inputs(cases, redactor).items()))
    scoring = _digest({"tools": plan.dataset.tool_schema_version, "policy": plan.dataset.policy_digest,
                       "redaction_seed": seeded, "inputs": inputs})
    return generation, scoring


def scoring_key(scope: str, items) -> str:
    """The scoring stage's per-shard scope: ``scope`` plus the digest of every case the shard's rows answer
    (a case's expected calls and rules decide its rows)."""
    return _digest([scope, sorted({(item.case_id, item.case_digest) for item in items})])
