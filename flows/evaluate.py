"""The nightly evaluation flow: generation -> trace capture -> scoring -> aggregation, on shards, with the
legacy scalar path and the drift check beside them.

Each stage is a separate cached task (``tasks/``); the flow plans the run (every file or usage error is raised
here, before anything is written), runs the stages shard by shard, then publishes the run's partitions and run
files together (:class:`tooleval.storage.Publication`: staged, then swapped into place). On drift between the
legacy scalar and the row-level path the flow run ends ``Failed`` (its data is still the :class:`RunResult`).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow
from prefect.states import Failed
from pydantic import BaseModel

from tasks import aggregate_rows, capture_shard, generate_shard, legacy_scalar, score_shard
from tooleval.drift import check_drift
from tooleval.legacy import legacy_record, stage_legacy
from tooleval.plan import RunPlan, plan_run, revision_record_path
from tooleval.ragas_metric import ragas_version
from tooleval.stages import StageRef, stage_dir
from tooleval.storage import ENVELOPE_SCHEMA, ROW_SCHEMA, ROW_SCHEMA_VERSION, Publication, scan_parquet_sql
from tooleval.versions import scorer_version, tooleval_version

__all__ = ["evaluate", "run_evaluate", "RunResult", "DEFAULT_DATASET", "STAGES"]

DEFAULT_DATASET = str(Path(__file__).resolve().parents[1] / "datasets" / "tau-bench-airline")
STAGES = ("generation", "trace-capture", "scoring", "aggregation", "legacy-scalar")


class RunResult(BaseModel):
    """What a run did: where, which stage states, the summary, the drift verdict and the row-level errors."""

    run_id: str
    dataset_revision: str
    out: str
    rows_path: str | None
    traces_path: str
    run_path: str
    stage_states: dict[str, dict[str, int]]
    """Stage name -> count of shard task states by name (``Completed``, ``Cached``)."""
    summary: dict[str, Any]
    errors: list[dict]
    drift: dict[str, Any] | None
    """``drift.json`` content; ``None`` for a legacy-only run."""


def _run_stage(task: Any, states: Counter, *args: Any) -> Any:
    """Run one task; if a cached ref points at a deleted stage file, recompute with ``refresh_cache``."""
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


def _row_errors(rows: pa.Table) -> list[dict]:
    return [
        {"kind": r["error"].split(":", 1)[0], "case_id": r["case_id"], "trial": r["trial"], "message": r["error"],
         "path": None, "line": None}
        for r in rows.select(["case_id", "trial", "error"]).to_pylist()
        if r["error"] is not None
    ]


@flow(name="tooleval-evaluate", validate_parameters=True)
def evaluate(
    dataset: str = DEFAULT_DATASET,
    traces: str | None = None,
    out: str = "results",
    run_id: str | None = None,
    shard_size: int = 50,
    slices: list[str] | None = None,
    legacy_only: bool = False,
    redact_fields: list[str] | None = None,
    redaction: bool = True,
) -> RunResult:
    """Evaluate a dataset's recorded (or generated) trajectories and publish envelopes, rows, the legacy scalar,
    a summary and the drift check.

    Args:
        dataset: Dataset folder (default: the bundled tau-bench airline dataset).
        traces: Recorded traces file for the replay agent; default: the dataset's own.
        out: Results folder (DESIGN.md "Output layout").
        run_id: Run id; default: a new one (UTC timestamp + random suffix).
        shard_size: Rows per shard task (tens to hundreds keep Prefect's per-task cost small: PREFECT.md).
        slices: Only cases of these slices (the migration switches the row-level writer on slice by slice).
        legacy_only: Publish only the trace envelopes and the legacy scalar (the old pipeline, before the
            row-level writer is switched on): no rows, no drift check.
        redact_fields: Field names redacted at capture (default: api_key, card_number, email, phone).
        redaction: ``False`` turns redaction off.

    Returns:
        A :class:`RunResult`; the flow run is ``Failed`` (with the result as its data) when drift was found.

    Raises:
        tooleval.errors.InputFileError: a file or usage error; nothing is written.
    """
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    plan = plan_run(dataset, traces, out, run_id, slices=slices, redact_fields=redact_fields,
                    redaction=redaction)
    code, ragas = scorer_version(), ragas_version()
    dirs = {name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")}
    states: dict[str, Counter] = {name: Counter() for name in STAGES}
    envelope_refs: list[StageRef] = []
    row_refs: list[StageRef] = []
    for shard in _shards(plan, shard_size):
        generated = _run_stage(generate_shard, states["generation"], plan.agent, shard, plan.dataset,
                               plan.redaction, plan.out, dirs["generation"])
        captured = _run_stage(capture_shard, states["trace-capture"], generated, plan.dataset.revision,
                              plan.dataset.tool_schema_version, code, dirs["capture"])
        envelope_refs.append(captured)
        if not legacy_only:
            row_refs.append(_run_stage(score_shard, states["scoring"], captured, plan.dataset, plan.redaction,
                                       code, ragas, plan.out, dirs["scoring"]))
    legacy = _run_stage(legacy_scalar, states["legacy-scalar"], [r.path for r in envelope_refs],
                        [r.digest for r in envelope_refs], plan.dataset, plan.redaction, code, ragas, plan.out)
    revision, out_path = plan.dataset.revision, Path(plan.out)
    summary: dict[str, Any] = {
        "dataset_revision": revision,
        "run_id": plan.run_id,
        "dataset": {"name": plan.dataset.name, "path": plan.dataset.path, "content_digest": plan.dataset.content_digest},
        "versions": {"tooleval": tooleval_version(), "scorer": code, "ragas": ragas, "row_schema": ROW_SCHEMA_VERSION},
        "slices": plan.slices,
        "redaction": None if plan.redaction is None else plan.redaction.model_dump(),
        "dataset_ref": plan.dataset.model_dump(),
        "legacy": {k: v for k, v in legacy_record(legacy, revision, plan.run_id).items() if k in ("value", "rows")},
    }
    drift = None
    errors = list(plan.errors)
    with Publication(out_path) as publication:
        publication.add_table("traces", revision, plan.run_id, _concat(envelope_refs, ENVELOPE_SCHEMA, plan.run_id))
        stage_legacy(publication, legacy, revision, plan.run_id)
        if not legacy_only:
            rows = _concat(row_refs, ROW_SCHEMA, plan.run_id)
            publication.add_table("rows", revision, plan.run_id, rows)
            source = scan_parquet_sql(str(publication.staged_path("rows", revision, plan.run_id) / "*.parquet"))
            figures = _run_stage(aggregate_rows, states["aggregation"], source, [r.digest for r in row_refs], code)
            errors += _row_errors(rows)
            drift = check_drift(legacy, rows.select(
                ["case_id", "trial", "ragas_tool_call_f1", "ragas_version", "scorer_version"]).to_pylist())
            summary.update(figures)
            summary["drift"] = {"verdict": drift["verdict"], "attribution": drift["attribution"],
                                "legacy_value": drift["legacy"]["value"], "new_value": drift["new"]["value"]}
            publication.add_json(f"runs/{plan.run_id}/drift.json", drift)
        summary["errors"] = len(errors)
        summary["completed_at"] = datetime.now(timezone.utc).isoformat()
        publication.add_json(f"runs/{plan.run_id}/summary.json", summary)
        publication.add_json(f"runs/{plan.run_id}/errors.json", errors)
        record = revision_record_path(out_path, revision)
        if not record.exists():
            publication.add_json(
                str(record.relative_to(out_path)),
                {"revision": revision, "dataset": plan.dataset.name, "content_digest": plan.dataset.content_digest},
            )
    partition = Path(f"dataset_revision={revision}") / f"run_id={plan.run_id}"
    result = RunResult(
        run_id=plan.run_id,
        dataset_revision=revision,
        out=plan.out,
        rows_path=None if legacy_only else str(out_path / "rows" / partition),
        traces_path=str(out_path / "traces" / partition),
        run_path=str(out_path / "runs" / plan.run_id),
        stage_states={name: dict(counter) for name, counter in states.items() if counter},
        summary=summary,
        errors=errors,
        drift=drift,
    )
    if drift is not None and drift["verdict"] == "drift":
        return Failed(message="drift between the legacy scalar and the row-level path: "
                      + "; ".join(drift["reasons"]), data=result)
    return result


def run_evaluate(**parameters: Any) -> tuple[RunResult, bool]:
    """Call :func:`evaluate` and return ``(result, drift_failed)`` instead of raising on a drift failure.

    Raises:
        tooleval.errors.InputFileError: a file or usage error (re-raised from the flow).
    """
    state = evaluate(**parameters, return_state=True)
    data = state.result(raise_on_failure=False)
    if isinstance(data, RunResult):
        return data, state.is_failed()
    state.result()  # re-raises the flow's exception
    raise RuntimeError(f"evaluate returned {data!r}")
