"""Prefect tasks, one module per stage: thin adapters around the pure core in ``tooleval``.

Each task works on a shard of rows, receives and returns :class:`tooleval.storage.stages.StageRef` values (path, digest,
row count) and has an explicit cache policy whose key excludes the run id.
"""

from tasks._shared import cached_redactor, forget_run_state, offer_seed_state
from tasks.aggregation import aggregate_rows
from tasks.capture import ReplayedLines, capture_shard
from tasks.generation import generate_shard
from tasks.legacy import legacy_scalar
from tasks.scoring import score_shard
from tasks._results import shared_results, with_refresh

__all__ = ["ReplayedLines", "aggregate_rows", "capture_shard", "generate_shard", "legacy_scalar", "score_shard", "cached_redactor",
           "forget_run_state", "offer_seed_state", "shared_results", "with_refresh"]
