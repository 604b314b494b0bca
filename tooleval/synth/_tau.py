"""The ``tau`` synthetic profile: long multi-turn airline traces with tool results, resampled from the bundled
tau-bench airline dataset (``datasets/tau-bench-airline``: 50 tasks x 4 trials of gpt-4o, MIT licensed).

Case ``k`` is a copy of bundled task ``k mod 50`` under a new id; each of its trials replays a trial of that task
drawn by the seed, so the corpus keeps the bundled data's shape (``../shared/data/README.md``: 3.16 expected and
5.82 observed calls per row, system policy plus multi-turn messages and tool results, about 16 KB per line).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["TAU_TRIALS", "TauSource"]

TAU_TRIALS = 4
"""Trials per case, as in the bundled data."""


class TauSource:
    """The bundled airline cases and their recorded trials, read once."""

    def __init__(self, dataset: Path) -> None:
        self.dataset = dataset
        with (dataset / "cases.jsonl").open(encoding="utf-8") as handle:
            self.cases = [json.loads(line) for line in handle if line.strip()]
        self.trials: dict[str, list[dict[str, Any]]] = defaultdict(list)
        with gzip.open(dataset / "traces.jsonl.gz", "rt", encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    trace = json.loads(line)
                    self.trials[trace["case_id"]].append(trace)

    def case(self, index: int, case_id: str) -> dict[str, Any]:
        """A copy of bundled case ``index mod 50`` named ``case_id``."""
        source = self.cases[index % len(self.cases)]
        return dict(source, case_id=case_id, metadata=dict(source.get("metadata") or {},
                                                             synth_source_case=source["case_id"]))

    def trace(self, rng: random.Random, index: int, case_id: str, trial: int) -> dict[str, Any]:
        """A recorded trial of bundled case ``index mod 50`` (drawn by ``rng``), answering ``case_id``."""
        source = self.cases[index % len(self.cases)]
        return dict(rng.choice(self.trials[source["case_id"]]), case_id=case_id, trial=trial)
