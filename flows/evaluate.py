"""The nightly evaluation flow: generation -> trace capture -> scoring -> aggregation, on shards.

Each stage is a separate cached task (``tasks/``); the flow plans the run (every file or usage error is raised
here, before anything is written), runs the stages shard by shard, then publishes the run's partitions and run
files together (:class:`tooleval.storage.Publication`: staged, then swapped into place).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow
from pydantic import BaseModel

from tasks import aggregate_rows, capture_shard, generate_shard, score_shard
from tooleval.plan import RunPlan, plan_run, revision_record_path
from tooleval.ragas_metric import ragas_version
from tooleval.stages import StageRef, stage_dir
from tooleval.storage import ENVELOPE_SCHEMA, ROW_SCHEMA, ROW_SCHEMA_VERSION, Publication, scan_parquet_sql
from tooleval.versions import scorer_version, tooleval_version

__all__ = ["evaluate", "RunResult", "DEFAULT_DATASET"]

DEFAULT_DATASET = str(Path(__file__).resolve().parents[1] / "datasets" / "tau-bench-airline")
STAGES = ("generation", "trace-capture", "scoring", "aggregation")


class RunResult(BaseModel):
    """What a run did: where, which stage states, the summary and the row-level errors."""

    run_id: str
    dataset_revision: str
    out: str
    rows_path: str
    traces_path: str
    run_path: str
    stage_states: dict[str, dict[str, int]]
    """Stage name -> count of shard task states by name (``Completed``, ``Cached``)."""
    summary: dict[str, Any]
    errors: list[dict]


def _run_stage(task: Any, states: Counter, *args: Any) -> StageRef:
    """Run one shard task; if a cached ref points at a deleted stage file, recompute with ``refresh_cache``."""
    state = task(*args, return_state=True)
    ref = state.result()
    if isinstance(ref, StageRef) and not ref.exists():
        state = task.with_options(refresh_cache=True)(*args, return_state=True)
        ref = state.result()
    states[state.name] += 1
    return ref


def _concat(refs: list[StageRef], schema: pa.Schema, run_id: str) -> pa.Table:
    tables = [pq.read_table(ref.path, schema=schema) for ref in refs]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    index = table.schema.get_field_index("run_id")
    return table.set_column(index, "run_id", pa.array([run_id] * table.num_rows, pa.string()))


def _shards(plan: RunPlan, size: int) -> list[list]:
    return [plan.items[i : i + size] for i in range(0, len(plan.items), size)]


@flow(name="tooleval-evaluate", validate_parameters=True)
def evaluate(
    dataset: str = DEFAULT_DATASET,
    traces: str | None = None,
    out: str = "results",
    run_id: str | None = None,
    shard_size: int = 50,
) -> RunResult:
    """Evaluate a dataset's recorded (or generated) trajectories and publish rows, envelopes and a summary.

    Args:
        dataset: Dataset folder (default: the bundled tau-bench airline dataset).
        traces: Recorded traces file for the replay agent; default: the dataset's own.
        out: Results folder (DESIGN.md "Output layout").
        run_id: Run id; default: a new one (UTC timestamp + random suffix).
        shard_size: Rows per shard task (tens to hundreds keep Prefect's per-task cost small: PREFECT.md).

    Returns:
        A :class:`RunResult`.

    Raises:
        tooleval.errors.InputFileError: a file or usage error; nothing is written.
    """
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    plan = plan_run(dataset, traces, out, run_id)
    code = scorer_version()
    ragas = ragas_version()
    dirs = {name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")}
    states: dict[str, Counter] = {name: Counter() for name in STAGES}
    envelope_refs: list[StageRef] = []
    row_refs: list[StageRef] = []
    for shard in _shards(plan, shard_size):
        generated = _run_stage(generate_shard, states["generation"], plan.agent, shard, dirs["generation"])
        captured = _run_stage(capture_shard, states["trace-capture"], generated, plan.dataset.revision, code,
                              dirs["capture"])
        scored = _run_stage(score_shard, states["scoring"], captured, plan.dataset, code, ragas, dirs["scoring"])
        envelope_refs.append(captured)
        row_refs.append(scored)
    revision = plan.dataset.revision
    out_path = Path(plan.out)
    with Publication(out_path) as publication:
        publication.add_table("traces", revision, plan.run_id, _concat(envelope_refs, ENVELOPE_SCHEMA, plan.run_id))
        publication.add_table("rows", revision, plan.run_id, _concat(row_refs, ROW_SCHEMA, plan.run_id))
        staged_rows = publication.staged_path("rows", revision, plan.run_id)
        source = scan_parquet_sql(str(staged_rows / "*.parquet"))
        figures_state = aggregate_rows(source, [ref.digest for ref in row_refs], code, return_state=True)
        states["aggregation"][figures_state.name] += 1
        figures = figures_state.result()
        row_errors = _row_errors(staged_rows)
        errors = plan.errors + row_errors
        summary = {
            "dataset_revision": revision,
            "run_id": plan.run_id,
            "dataset": {"name": plan.dataset.name, "path": plan.dataset.path,
                        "content_digest": plan.dataset.content_digest},
            "versions": {"tooleval": tooleval_version(), "scorer": code, "ragas": ragas,
                         "row_schema": ROW_SCHEMA_VERSION},
            **figures,
            "errors": len(errors),
            "completed_at": datetime.now(timezone.utc).isoformat(),
        }
        publication.add_json(f"runs/{plan.run_id}/summary.json", summary)
        publication.add_json(f"runs/{plan.run_id}/errors.json", errors)
        record = revision_record_path(out_path, revision)
        if not record.exists():
            publication.add_json(
                str(record.relative_to(out_path)),
                {"revision": revision, "dataset": plan.dataset.name, "content_digest": plan.dataset.content_digest},
            )
    return RunResult(
        run_id=plan.run_id,
        dataset_revision=revision,
        out=plan.out,
        rows_path=str(out_path / "rows" / f"dataset_revision={revision}" / f"run_id={plan.run_id}"),
        traces_path=str(out_path / "traces" / f"dataset_revision={revision}" / f"run_id={plan.run_id}"),
        run_path=str(out_path / "runs" / plan.run_id),
        stage_states={name: dict(counter) for name, counter in states.items()},
        summary=summary,
        errors=errors,
    )


def _row_errors(rows_dir: Path) -> list[dict]:
    table = pa.concat_tables(
        pq.read_table(part, columns=["case_id", "trial", "error"]) for part in sorted(rows_dir.glob("*.parquet"))
    )
    return [
        {"kind": (r["error"].split(":", 1)[0]), "case_id": r["case_id"], "trial": r["trial"], "message": r["error"],
         "path": None, "line": None}
        for r in table.to_pylist()
        if r["error"] is not None
    ]
