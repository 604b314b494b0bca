"""A dataset's recorded traces replayed, scored and judged in-process: what the pytest plugin reports.

:func:`judge_dataset` runs a ``tooleval run`` of the replay agent without the orchestrator, through the run's own
functions, stage by stage: the plan's keys and row-level problems (:func:`tooleval.capture.recorded.replay_keys`),
the replay agent (:func:`tooleval.agents.replay_generate`), capture
(:func:`tooleval.capture.envelope.generation_envelope`), scoring (:func:`tooleval.scoring.rows.score_rows`) and
the release gate (:class:`tooleval.rules.GateTally`, with the placeholders of :func:`tooleval.runs.gate.unscored_rows`
for what made no row). No Prefect, nothing written, no redaction (it never changes a score or a verdict). The
rows are held in memory: this is for the datasets a test suite runs, not for a nightly corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from tooleval.agents import ReplayAgentConfig, WorkItem, replay_generate
from tooleval.capture.envelope import generation_envelope
from tooleval.capture.recorded import index_traces, replay_keys
from tooleval.dataset import Dataset, find_traces_file, load_dataset, tool_schema_version
from tooleval.rules import GateConfig, GateTally, GateVerdict, RowOutcome, ToolTable, load_policy
from tooleval.runs.gate import gate_config_for, gate_scope, unscored_rows
from tooleval.scoring.rows import score_rows
from tooleval.storage import Row

__all__ = ["DatasetJudgement", "judge_dataset"]


@dataclass
class DatasetJudgement:
    """Every row of a dataset's recorded traces with the gate's outcome, and the gate's verdict of them all."""

    dataset: Dataset
    traces: Path
    config: GateConfig
    rows: list[Row]
    """One per (case, trial) the traces answer, sorted by case id and trial (as a run plans them), each with the
    gate's verdict in ``gate_verdict`` and ``gate_rules``, as ``tooleval run`` publishes it."""
    outcomes: list[RowOutcome]
    """The gate's outcome of each row, in :attr:`rows` order."""
    unscored: list[RowOutcome] = field(default_factory=list)
    """The gate's outcome of each placeholder: a case without a row, a trace that made none."""
    verdict: GateVerdict | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    """The run's ``errors.json`` entries (unknown cases, cases without a trace, unusable lines)."""

    def dataset_failures(self) -> list[str]:
        """Why the gate fails beyond its failing rows: the verdict's other reasons (no scored row, slice and
        family floors, ``min_rows``, expired waivers) and each unscored case or trace that is neither waived nor
        quarantined. Empty when the rows alone decide the verdict."""
        reasons = [r for r in self.verdict.reasons if not r.endswith("blocking row(s)")]
        for outcome in self.unscored:
            if outcome.rules and outcome.quarantine is None:
                detail = "; ".join(v["detail"] for v in outcome.violations if v["rule"] in outcome.rules)
                trial = "" if outcome.no_trial else f" trial {outcome.trial}"
                reasons.append(f"case {outcome.case_id!r}{trial} has no scored row ({detail})")
        return reasons


def judge_dataset(dataset: str | Path, traces: str | Path | None = None, gate: str | Path | None = None, *,
                  today: date | None = None) -> DatasetJudgement:
    """Replay, score and judge a dataset's recorded traces as ``tooleval run`` and ``tooleval gate`` would.

    Args:
        dataset: The dataset folder.
        traces: The recorded traces file; default the dataset's own (``traces.jsonl[.gz]``).
        gate: A gate.toml; default the dataset's own, else the default gate.
        today: The date waivers are checked against; default today (UTC), as ``tooleval gate``.

    Returns:
        A :class:`DatasetJudgement`.

    Raises:
        tooleval.errors.InputFileError: a file or usage error (the message names the file, the line and the fix).
    """
    loaded = load_dataset(dataset)
    traces_path = Path(traces) if traces is not None else find_traces_file(loaded.path)
    config = gate_config_for(loaded.path, gate)
    index = index_traces(traces_path)
    keys, _, problems = replay_keys(index, loaded.cases, loaded.path / "cases.jsonl")
    errors = [problem.to_dict() for problem in problems]
    agent = ReplayAgentConfig(traces_path=str(traces_path), traces_digest=index.digest)
    items = [WorkItem(case_id=case_id, case_digest="", trial=trial, seed=trial) for case_id, trial in keys]
    captured_at = datetime.now(timezone.utc)
    tools_version = tool_schema_version(loaded.path)
    envelopes = [generation_envelope(record, captured_at, tools_version) for record in replay_generate(agent, items)]
    rows = score_rows(loaded.cases, envelopes, tools=ToolTable(loaded.tools), policy=load_policy(loaded.path))
    tally = GateTally(config, today=today or datetime.now(timezone.utc).date())
    records = []
    for row in rows:
        row.dataset_revision = loaded.revision
        records.append(row.record())
    outcomes = [tally.add(record) for record in records]
    for row, outcome in zip(rows, outcomes):  # the verdict a run publishes on the row (row column gate_verdict)
        row.gate_verdict, row.gate_rules = outcome.gate_verdict, outcome.gate_rules
    unscored = [tally.add(placeholder) for placeholder in unscored_rows(records, gate_scope(loaded.cases), errors)]
    return DatasetJudgement(loaded, traces_path, config, rows, outcomes, unscored, tally.verdict(), errors)
