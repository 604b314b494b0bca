"""Shards composed from content, and the plan's compact index of work, so that a run of a million rows
neither lists every work item in memory nor re-runs unchanged shards when the corpus grows.

Shards are cut by *content-defined chunking* over the keys sorted by (case_id, trial): a new shard starts at
every case whose ``sha256(case_id)`` falls in a ``1/K`` slice of the hash space, where ``K`` (cases per shard on
average) is a power of two derived from the shard size and the trials per case. All trials of a case stay in one
shard, and where a shard ends depends only on the case ids around it, never on positions: adding or removing
cases changes only the shards that hold them (new ids that sort together — dated or numbered cases — land in
one or two shards), and every other shard keeps its cache key. Positional shards shifted every later shard; hash
buckets (``hash(key) mod B``) scatter even ten new cases over most of the shards. A run of cases longer than
four shard sizes without a boundary is cut at that length (rare: probability ``e**-4`` per shard).

The plan does not hold work items: :class:`ShardIndex` is a compact Arrow table — case id, trial, seed, the
trace line's byte offset and content digest, shard — from which one shard's work items are built when that shard
is submitted. Memory is bounded by the shard size, not the corpus.
"""

from __future__ import annotations

import gc
import hashlib
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ShardIndex", "is_boundary", "cases_per_shard", "default_shard_size", "scan_lines", "run_scopes",
           "scoring_key", "scoring_key_of_cases", "cyclic_gc_paused", "release_free_memory", "MIN_SHARD", "MAX_SHARD",
           "MAX_SHARD_BYTES"]

MIN_SHARD = 100
"""Smallest default shard (rows): the bundled 200-row run still shows progress over 4 shards (its K is 32), and
pays for no more Prefect task runs than before shards were content-defined (4 x 50 rows)."""
MAX_SHARD = 20_000
"""Largest default shard (rows): bounds a worker's memory (a bfcl row is ~1 KB of trace, ~10 KB in Python)."""
MAX_SHARD_BYTES = 32 << 20
"""Largest default shard in trace bytes (the traces file's mean line length times the rows): a shard's envelopes
are read whole by the flow when it publishes the shard and by a worker when it scores it, so long lines need
fewer rows a shard. 20,000 bfcl lines (~1 KB) are ~19 MB and keep the row bound; 12,500 tau lines (~16 KB, the
row bound's share of a 200,000-row corpus) were ~200 MB, and a content-defined shard may hold twice its size.
Measured on 200,000 tau rows (``bench/bench_memory.py``): 64 MB shards (~4,000 rows) peaked at 2,084 MB for the
run's process tree, 32 MB (~2,000 rows) at 1,933 MB, in the same time (206 s against 211 s)."""
_TASKS_PER_WORKER = 8
"""Default shards per worker: enough for load balance and progress, few enough that Prefect's per-task cost
(tens of ms per task run; ``tooleval bench`` reports the share) stays small."""
_MAX_RUN = 2
"""A shard is cut after ``2 K`` cases even without a content boundary (``K`` is stable as the corpus grows, so
this cut does not move when cases are added elsewhere)."""


def is_boundary(case_id: str, cases_per: int) -> bool:
    """Whether a shard starts at ``case_id``: its sha256 falls in the first ``1/cases_per`` of the hash space."""
    if cases_per <= 1:
        return True
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % cases_per == 0


def cases_per_shard(rows: int, cases: int, shard_size: int) -> int:
    """``K``: cases per shard on average, ``shard_size / (rows / cases)`` rounded to a power of two (so that a
    corpus growing by a few per cent keeps its boundaries)."""
    if rows == 0 or cases == 0:
        return 1
    wanted = shard_size * cases / rows
    return 1 << max(0, round(math.log2(max(wanted, 1))))


def default_shard_size(rows: int, workers: int, line_bytes: float | None = None) -> int:
    """Rows per shard when ``--shard-size`` is not given: about 8 shards per worker, within
    [:data:`MIN_SHARD`, :data:`MAX_SHARD`] (measured trade-off; docs/benchmark.md, "Scale"), and at most
    :data:`MAX_SHARD_BYTES` of trace lines of ``line_bytes`` (mean bytes a line; ``None``: unknown) a shard."""
    size = max(MIN_SHARD, min(MAX_SHARD, math.ceil(rows / (workers * _TASKS_PER_WORKER))))
    if line_bytes:
        size = max(MIN_SHARD, min(size, int(MAX_SHARD_BYTES // line_bytes)))
    return size


def scan_lines(path: Path, wanted: dict[int, tuple[str, int]]) -> tuple[dict, dict]:
    """Byte offset and content digest of the trace lines that hold the planned keys.

    Args:
        path: A traces file (a ``.gz`` file has no random access: offsets are then -1 and the replay agent reads
            the file sequentially).
        wanted: Line number (1-based, blank lines counted, as :func:`tooleval.capture.recorded.iter_json_lines`
            numbers them) -> the key that line holds.

    Returns:
        ``(offsets, digests)``: key -> ``(byte offset, line number)`` of its line, key -> sha256 (32 hex) of the
        line's bytes.
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
                offsets[key] = (-1 if compressed else position, number)
                digests[key] = hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()[:32]
            position += len(line)
    return offsets, digests


@dataclass(frozen=True)
class ShardIndex:
    """The run's work as a compact Arrow table sorted by (case_id, trial), with each row's shard number.

    Columns: ``case_id`` (string), ``trial`` (int32), ``seed`` (int64), ``offset`` (int64, -1 when unknown),
    ``line`` (int64, the trace line's number, 0 when unknown),
    ``line_digest`` (string, null for a live agent), ``shard`` (int32, ascending).
    """

    table: pa.Table
    cases_per_shard: int

    @classmethod
    def build(cls, keys: list[tuple[str, int]], shard_size: int, offsets: dict | None = None,
              digests: dict | None = None) -> "ShardIndex":
        """Index ``keys`` (unique (case_id, trial) pairs) into content-defined shards of about ``shard_size``."""
        keys = sorted(keys)
        offsets, digests = offsets or {}, digests or {}
        return cls.from_sorted(keys, shard_size, [offsets.get(k, (-1, 0))[0] for k in keys],
                               [offsets.get(k, (-1, 0))[1] for k in keys], [digests.get(k) for k in keys])

    @classmethod
    def from_sorted(cls, keys: list[tuple[str, int]], shard_size: int, offsets: list[int] | pa.Array,
                    lines: list[int], digests: list[str | None] | pa.Array) -> "ShardIndex":
        """:meth:`build` from ``keys`` already sorted (unique (case_id, trial) pairs) and, in the same order, each
        key's byte offset (-1: unknown), line number (0: unknown) and line digest (``None``: none) — columns (lists,
        or Arrow arrays of the table's types) rather than dicts by key, which at a million keys cost the plan half a
        gigabyte."""
        return cls.from_columns(pa.array([k[0] for k in keys], pa.string()),
                                pa.array([k[1] for k in keys], pa.int64()), shard_size, offsets, lines, digests)

    @classmethod
    def from_columns(cls, case_ids: pa.Array | pa.ChunkedArray, trials: pa.Array | pa.ChunkedArray, shard_size: int,
                     offsets: list[int] | pa.Array, lines: list[int] | pa.Array,
                     digests: list[str | None] | pa.Array) -> "ShardIndex":
        """:meth:`from_sorted` of keys given as two columns (case ids as text, trials as integers), sorted."""
        case_ids = case_ids.combine_chunks() if isinstance(case_ids, pa.ChunkedArray) else case_ids
        trials = trials.combine_chunks() if isinstance(trials, pa.ChunkedArray) else trials
        # the keys are sorted, so each case is one run of equal ids: its shard is decided once, at its first key
        runs = pc.run_end_encode(case_ids) if len(case_ids) else None
        cases = runs.values.to_pylist() if runs is not None else []
        per = cases_per_shard(len(case_ids), len(cases), shard_size)
        shard_of_case: list[int] = []
        shard, cases_in_shard = -1, 0
        for case_id in cases:
            if shard < 0 or is_boundary(case_id, per) or cases_in_shard >= _MAX_RUN * per:
                shard, cases_in_shard = shard + 1, 0
            cases_in_shard += 1
            shard_of_case.append(shard)
        if runs is not None:
            ends = runs.run_ends.to_numpy()
            shards = pa.array(np.repeat(np.array(shard_of_case, np.int32), np.diff(ends, prepend=0)), pa.int32())
        else:
            shards = pa.array([], pa.int32())
        trials = trials.cast(pa.int32())
        table = pa.table({
            "case_id": case_ids,
            "trial": trials,
            "seed": trials.cast(pa.int64()),
            "offset": offsets if isinstance(offsets, pa.Array) else pa.array(offsets, pa.int64()),
            "line": lines.cast(pa.int64()) if isinstance(lines, pa.Array) else pa.array(lines, pa.int64()),
            "line_digest": digests if isinstance(digests, pa.Array) else pa.array(digests, pa.string()),
            "shard": shards,
        })
        return cls(table=table, cases_per_shard=per)

    @property
    def rows(self) -> int:
        """Number of work items."""
        return self.table.num_rows

    def shards(self) -> Iterator[pa.Table]:
        """The shards in order, each a zero-copy slice of :attr:`table`."""
        if self.rows == 0:
            return
        counts = pc.value_counts(self.table["shard"]).to_pylist()
        start = 0
        for entry in sorted(counts, key=lambda e: e["values"]):
            yield self.table.slice(start, entry["counts"])
            start += entry["counts"]


def _digest(value: object) -> str:
    from tooleval.canonical import canonical_json

    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def run_scopes(plan, redactor=None) -> tuple[str, str]:
    """The dataset-wide parts of the generation and scoring cache keys of a run.

    A shard's key names its own work (case digests, trace line digests, the envelopes' digest) plus only what
    the whole dataset contributes to *every* row of that stage — so a corpus that grows by a few cases keeps the
    other shards' keys:

    * generation: the agent (replay: nothing beyond each line's digest; live: its config), the tool schemas and
      the values the redactor was seeded with (free text is redacted wherever a case's redacted value appears);
    * scoring: the tool schemas, the dataset's ``[policy]``, the redactor's seeded values and — only when some
      trace records its generation request, since only then does the join check look — every case's input.

    Args:
        plan: A :class:`tooleval.runs.plan.RunPlan`.
        redactor: The run's redactor when the caller built it already (seeding reads every case); ``None``:
            built here when the plan redacts.

    Returns:
        ``(generation_scope, scoring_scope)``, two sha256 hex digests.
    """
    from tooleval.capture.redaction import build_redactor
    from tooleval.dataset import load_dataset_cached

    cases = load_dataset_cached(plan.dataset.path).cases
    if redactor is None and plan.redaction:
        redactor = build_redactor(plan.out, plan.redaction, cases)
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
    return scoring_key_of_cases(scope, {item.case_id: item.case_digest for item in items})


def scoring_key_of_cases(scope: str, digests: dict[str, str]) -> str:
    """:func:`scoring_key` of a shard whose cases' digests are given (``case_id -> case digest``)."""
    return _digest([scope, sorted(digests.items())])


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one bounded step of a run (a shard, the plan, the publication);
    reference counting still frees every acyclic value at once.

    Such a step allocates millions of small dicts and lists while much of it stays alive, so the collector's full
    passes re-scan the whole heap again and again: 2.0 of 12.6 s of a 20,000-row bfcl run went to them (measured
    with ``gc.callbacks``), mostly in the plan and the publication. What cycles a step makes (Prefect's state
    objects, tracebacks) are collected when the collector runs again after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def release_free_memory() -> None:
    """Give the memory this process has freed, but its allocators still keep, back to the operating system: Arrow's
    pool (mimalloc, Arrow's default, keeps the pages of freed buffers for reuse; see also
    :func:`tooleval.runs.memory.return_freed_memory`) and glibc's heap (``malloc_trim``).

    Call it after a bounded step that read large tables (a shard's stages in a worker, a shard's publication in
    the flow). Reading and rewriting a 93 MB table of 5,664 tau envelopes left a process ~135 MB larger each time
    without it (measured: 300 MB against 165 MB after three rounds); the next step reuses nothing of that, and
    every process of a run held it at once."""
    import pyarrow as pa

    from tooleval.runs.memory import glibc_function

    pa.default_memory_pool().release_unused()
    trim = glibc_function("malloc_trim")
    if trim is not None:
        trim(0)
