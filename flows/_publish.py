"""What every run-producing flow shares: running a stage task with its cache, and publishing a run's
partitions and run files together (:class:`tooleval.storage.Publication`: written under new names, then made
visible at once by the run's commit marker)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any, Iterator

import pyarrow as pa
from prefect.states import Failed, State
from pydantic import BaseModel

from flows._artifacts import publish_artifacts
from tasks import aggregate_rows
from tooleval.runs.catalog import STAGES_FILE
from tooleval.runs.documents import (DRIFT_VERSION, ERRORS_VERSION, SUMMARY_VERSION, drift_document,
                                     errors_document, summary_document)
from tooleval.runs.drift import drift_partial_sql, drift_report
from tooleval.dataset import load_dataset_cached
from tooleval.runs.gate import gate_batches, gate_config_for, gate_scope, judge_rows, write_junit
from tooleval.runs.legacy import LegacyResult, legacy_record, stage_legacy
from tooleval.runs.plan import DatasetRef, revision_record_relpath
from tooleval.runs.report import build_report
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.capture.redaction import RedactionConfig
from tooleval.storage.stages import StageRef, read_stage_table
from tooleval.storage import join_error
from tooleval.storage import (ENVELOPE_SCHEMA, ROW_SCHEMA, ROW_SCHEMA_VERSION, Publication, as_location, join,
                              scan_rows_sql, source_connection, tree_of)
from tooleval.runs.variability import outcome_from_spec, variability_of_parquet
from tooleval.versions import scorer_version, tooleval_version

__all__ = ["RunResult", "STAGES", "run_stage", "publish_run"]

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


def _has_errors(ref: StageRef) -> bool:
    table = read_stage_table(ref, columns=["error"])
    return table.num_rows > table.column("error").null_count


def run_stage(task: Any, states: Counter, *args: Any, retry_errors: bool = False, **kwargs: Any) -> Any:
    """Run one task and return its result.

    A cached ref whose stage file was deleted is recomputed with ``refresh_cache``; so is a cached stage file
    holding error records when ``retry_errors`` (a live generation shard: its failed items are asked again, the
    finished ones come from the generation store at no cost).
    """
    state = task(*args, return_state=True, **kwargs)
    ref = state.result()
    stale = isinstance(ref, StageRef) and not ref.exists()
    failed = retry_errors and state.name == "Cached" and isinstance(ref, StageRef) and not stale and _has_errors(ref)
    if stale or failed:
        state = task.with_options(refresh_cache=True)(*args, return_state=True, **kwargs)
        ref = state.result()
    states[state.name] += 1
    return ref


def _tables(refs: list[StageRef], schema: pa.Schema) -> Iterator[pa.Table]:
    """The stage files one at a time (a partition is streamed shard by shard, never concatenated)."""
    for ref in refs:
        yield read_stage_table(ref, schema=schema)


def _row_errors(refs: list[StageRef]) -> list[dict]:
    errors = []
    for ref in refs:
        table = read_stage_table(ref, columns=["case_id", "trial", "error_kind", "error_message"])
        if table.column("error_kind").null_count == table.num_rows:
            continue
        errors += [
            {"kind": r["error_kind"], "case_id": r["case_id"], "trial": r["trial"],
             "message": join_error(r["error_kind"], r["error_message"]), "path": None, "line": None}
            for r in table.to_pylist() if r["error_kind"] is not None
        ]
    return errors


def _drift(legacy: LegacyResult, row_refs: list[StageRef], partials: list[dict] | None) -> dict[str, Any]:
    """The drift report from the shards' partials; without them, ``legacy.per_row`` compared with the rows by
    DuckDB (:func:`tooleval.runs.drift.drift_partial_sql`: the rows never become Python objects)."""
    if partials is not None:
        return drift_report(partials, legacy)
    values = pa.table({"case_id": pa.array([r.case_id for r in legacy.per_row], pa.string()),
                       "trial": pa.array([r.trial for r in legacy.per_row], pa.int64()),
                       "value": pa.array([r.value for r in legacy.per_row], pa.float64())})
    source = scan_rows_sql([ref.path for ref in row_refs])
    return drift_report([drift_partial_sql(source_connection(source), values, source)], legacy)


def publish_run(
    *,
    out: str,
    run_id: str,
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    slices: list[str] | None,
    errors: list[dict],
    envelope_refs: list[StageRef],
    row_refs: list[StageRef],
    legacy: LegacyResult,
    states: dict[str, Counter],
    legacy_only: bool = False,
    extra_summary: dict[str, Any] | None = None,
    outcome: str = "gate",
    gate_config: str | None = None,
    publish_legacy: bool = True,
    drift_partials: list[dict[str, Any]] | None = None,
    legacy_pass: bool = True,
    generation_refs: list[StageRef] | None = None,
) -> RunResult | State:
    """Aggregate, check drift, run the gate and publish one run: ``traces``, ``rows`` and ``legacy`` partitions,
    and ``runs/<run>/{summary.json, errors.json, drift.json, junit.xml, report.html}``, all committed together (one marker).

    ``publish_legacy=False`` (a diagnostic subset, e.g. ``tooleval rescore --case``) and a ``--slices`` run keep
    their legacy scalar out of ``legacy/`` — the old dashboards would read a partial mean under the run's name —
    while the drift check still runs on what was scored (``drift.json`` names the slices).

    The ``traces`` and ``rows`` partitions are written one Parquet file per shard, read one stage file at a
    time. ``drift_partials`` (one :func:`tooleval.runs.drift.drift_partial` per shard, computed in the workers)
    spare the flow the legacy per-row values; without them ``legacy.per_row`` is compared with the rows.
    ``legacy_pass=False`` (``tooleval bench``'s row path alone) publishes no legacy scalar and runs no drift check.

    ``runs/<run>/stages.json`` lists the digests of the stage files the run used (``generation_refs``,
    ``envelope_refs``, ``row_refs``): ``tooleval gc`` keeps those for the runs it keeps.

    Returns:
        The :class:`RunResult`, or a ``Failed`` state carrying it when the drift check found drift.
    """
    code, ragas = scorer_version(), ragas_version()
    revision, out_path = dataset.revision, as_location(out)  # a folder, or a URL (s3://…)
    published_at = datetime.now(timezone.utc)  # the run's one time: legacy computed_at and completed_at
    # the gate's scope: the whole dataset or the --slices asked for; a diagnostic subset judges its own rows
    scope = gate_scope(load_dataset_cached(dataset.path).cases, slices) if publish_legacy else None
    publish_legacy = publish_legacy and slices is None and legacy_pass  # a --slices run is partial: no scalar
    summary: dict[str, Any] = {
        "dataset_revision": revision,
        "run_id": run_id,
        "dataset": {"name": dataset.name, "path": dataset.path, "content_digest": dataset.content_digest},
        "versions": {"tooleval": tooleval_version(), "scorer": code, "ragas": ragas, "row_schema": ROW_SCHEMA_VERSION,
                     "summary": SUMMARY_VERSION, "errors": ERRORS_VERSION, "drift": DRIFT_VERSION},
        "slices": slices,
        "redaction": None if redaction is None else redaction.model_dump(),
        "dataset_ref": dataset.model_dump(),
        "legacy": {k: v for k, v in legacy_record(legacy, revision, run_id).items() if k in ("value", "rows")},
        **(extra_summary or {}),
    }
    drift = None
    errors = list(errors)
    with Publication(out_path) as publication:
        publication.add_parts("traces", revision, run_id, _tables(envelope_refs, ENVELOPE_SCHEMA), ENVELOPE_SCHEMA)
        if publish_legacy:
            stage_legacy(publication, legacy, revision, run_id, published_at=published_at)
        if not legacy_only:
            files, _ = publication.add_parts("rows", revision, run_id, _tables(row_refs, ROW_SCHEMA), ROW_SCHEMA)
            source = scan_rows_sql(files)
            figures = run_stage(aggregate_rows, states["aggregation"], source, [r.digest for r in row_refs], code)
            errors += _row_errors(row_refs)
            drift = _drift(legacy, row_refs, drift_partials) if legacy_pass else None
            summary.update(figures)
            summary["variability"] = variability_of_parquet(source, outcome_from_spec(outcome))
            verdict = judge_rows(gate_batches([r.path for r in row_refs]), scope, errors,
                                 gate_config_for(load_dataset_cached(dataset.path).path, gate_config))
            summary["gate"] = verdict.to_dict()
            summary.update({k: v for k, v in verdict.counts.items() if k not in summary})
            with publication.document_file(f"runs/{run_id}/junit.xml") as junit:
                write_junit(verdict, junit, suite_name=revision)
            if drift is not None:
                drift["slices"] = slices
                drift = drift_document(drift)
                summary["drift"] = {"verdict": drift["verdict"], "attribution": drift["attribution"],
                                    "legacy_value": drift["legacy"]["value"], "new_value": drift["new"]["value"]}
                publication.add_json(f"runs/{run_id}/drift.json", drift)
        summary["errors"] = len(errors)
        summary["completed_at"] = published_at.isoformat()
        if not legacy_only:
            publication.add_text(f"runs/{run_id}/report.html", build_report(source, summary, drift, out_path))
        summary = summary_document(summary)
        errors = errors_document(errors)
        publication.add_json(f"runs/{run_id}/summary.json", summary)
        publication.add_json(f"runs/{run_id}/errors.json", errors)
        used = [*(generation_refs or []), *envelope_refs, *row_refs]
        publication.add_json(f"runs/{run_id}/{STAGES_FILE}", {"digests": sorted({r.digest for r in used})})
        record = revision_record_relpath(revision)
        if not tree_of(out_path).is_file(record):
            publication.add_json(
                record, {"revision": revision, "dataset": dataset.name, "content_digest": dataset.content_digest},
            )
    partition = f"dataset_revision={revision}/run_id={run_id}"
    published_rows = None if legacy_only else scan_rows_sql(str(join(out_path, f"rows/{partition}/*.parquet")))
    publish_artifacts(summary, join(out_path, f"runs/{run_id}"), published_rows)
    result = RunResult(
        run_id=run_id,
        dataset_revision=revision,
        out=str(out_path),
        rows_path=None if legacy_only else str(join(out_path, f"rows/{partition}")),
        traces_path=str(join(out_path, f"traces/{partition}")),
        run_path=str(join(out_path, f"runs/{run_id}")),
        stage_states={name: dict(counter) for name, counter in states.items() if counter},
        summary=summary,
        errors=errors,
        drift=drift,
    )
    if drift is not None and drift["verdict"] == "drift":
        return Failed(message="drift between the legacy scalar and the row-level path: "
                      + "; ".join(drift["reasons"]), data=result)
    return result
