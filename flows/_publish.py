"""What every run-producing flow shares: running a stage task with its cache, and publishing a run's
partitions and run files together (:class:`tooleval.storage.Publication`: written under new names, then made
visible at once by the run's commit marker)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from prefect.states import Failed, State
from pydantic import BaseModel, ConfigDict

from flows._artifacts import publish_artifacts
from tasks import aggregate_rows, shared_results, with_refresh
from tooleval.runs.catalog import STAGES_FILE
from tooleval.runs.documents import (DRIFT_VERSION, ERRORS_VERSION, SUMMARY_VERSION, drift_document,
                                     errors_document, summary_document)
from tooleval.runs.drift import drift_partial_sql, drift_report
from tooleval.dataset import load_dataset_cached
from tooleval.runs.gate import (GATE_COLUMNS, GateJudge, gate_config_for, gate_config_source, gate_scope,
                                row_outcome_record, with_gate_verdicts, write_junit)
from tooleval.runs.legacy import LegacyResult, legacy_record, stage_legacy
from tooleval.runs.plan import DatasetRef, RunPlan, check_revision_content, revision_record_relpath
from tooleval.runs.spec import RunSpec
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.capture.redaction import RedactionConfig
from tooleval.storage import revision_commit
from tooleval.storage.stages import StageRef, read_stage_table
from tooleval.storage import join_error
from tooleval.storage import (ENVELOPE_SCHEMA, ROW_SCHEMA, ROW_SCHEMA_VERSION, Publication, as_location, join,
                              scan_rows_sql, source_connection, tree_of)
from tooleval.runs.variability import outcome_from_spec, variability_of_parquet
from tooleval.versions import scorer_version, tooleval_version

__all__ = ["RunResult", "RunPublisher", "PublicationTarget", "STAGES", "run_stage", "publish_run"]

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
        state = with_refresh(task)(*args, return_state=True, **kwargs)
        ref = state.result()
    states[state.name] += 1
    return ref


def _tables(refs: list[StageRef], schema: pa.Schema) -> Iterator[pa.Table]:
    """The stage files one at a time (a partition is streamed shard by shard, never concatenated)."""
    for ref in refs:
        yield read_stage_table(ref, schema=schema)


def _row_errors(rows: pa.Table) -> list[dict]:
    """``errors.json`` entries of the rows that carry an error (only those become Python objects), in row order."""
    failed = rows.select(["case_id", "trial", "error_kind", "error_message"]).filter(pc.is_valid(rows["error_kind"]))
    return [{"kind": r["error_kind"], "case_id": r["case_id"], "trial": r["trial"],
             "message": join_error(r["error_kind"], r["error_message"]), "path": None, "line": None}
            for r in failed.to_pylist()]


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


class PublicationTarget(BaseModel):
    """What a publication writes and how it judges it: the run it publishes under, the dataset its rows answer,
    the redaction the traces went through, and the options that decide which documents it writes.

    ``publish_legacy=False`` (a diagnostic subset, e.g. ``tooleval rescore --case``) and a ``--slices`` run keep
    their legacy scalar out of ``legacy/`` — the old dashboards would read a partial mean under the run's name —
    while the drift check still runs on what was scored (``drift.json`` names the slices).
    ``legacy_pass=False`` (``tooleval bench``'s row path alone) publishes no legacy scalar and runs no drift check.
    """

    model_config = ConfigDict(frozen=True)

    out: str
    run_id: str
    dataset: DatasetRef
    redaction: RedactionConfig | None
    slices: list[str] | None
    errors: list[dict]
    """The plan's (or the source run's) ``errors.json`` entries that stand for no row."""
    legacy_only: bool = False
    outcome: str = "gate"
    gate_config: str | None = None
    publish_legacy: bool = True
    legacy_pass: bool = True

    @classmethod
    def of_run(cls, plan: "RunPlan", spec: "RunSpec") -> "PublicationTarget":
        """The target of an evaluation run: its plan's run, dataset, redaction and errors, its spec's options."""
        return cls(out=plan.out, run_id=plan.run_id, dataset=plan.dataset, redaction=plan.redaction,
                   slices=plan.slices, errors=plan.errors, legacy_only=spec.legacy_only, outcome=spec.outcome,
                   gate_config=spec.gate_config, legacy_pass=spec.legacy_pass)


class RunPublisher:
    """One run's publication, in named steps: :meth:`add_shard` as each shard is done (its envelopes and rows
    are written into the staged partitions and its rows judged by the gate while the other shards are still being
    scored), then :meth:`aggregate`, :meth:`gate_and_drift`, :meth:`report` and :meth:`publish`, which commits
    everything at once (one marker; on an exception nothing becomes visible).

    What it publishes and how is its :class:`PublicationTarget`; ``states`` (stage -> counts of final state
    names) is filled in by the caller as the stages end. Use it as a context manager: leaving the ``with`` block by an exception aborts the publication.
    """

    def __init__(self, target: PublicationTarget, states: dict[str, Counter]) -> None:
        out, run_id, dataset, redaction, slices, errors = (target.out, target.run_id, target.dataset,
                                                           target.redaction, target.slices, target.errors)
        legacy_only, outcome, gate_config = target.legacy_only, target.outcome, target.gate_config
        publish_legacy, legacy_pass = target.publish_legacy, target.legacy_pass
        self.out, self.run_id, self.dataset, self.redaction, self.slices = (
            as_location(out), run_id, dataset, redaction, slices)
        self.revision = dataset.revision
        self.states, self.legacy_only, self.outcome, self.legacy_pass = states, legacy_only, outcome, legacy_pass
        self.code, self.ragas = scorer_version(), ragas_version()
        self.published_at: datetime | None = None  # the run's one time, taken at its end: see :meth:`report`
        # the gate's scope: the whole dataset or the --slices asked for; a diagnostic subset judges its own rows
        self.scope = gate_scope(load_dataset_cached(dataset.path).cases, slices) if publish_legacy else None
        self.publish_legacy = publish_legacy and slices is None and legacy_pass  # a --slices run is partial
        self.errors = list(errors)
        self.publication = Publication(self.out)
        self.traces = self.publication.part_writer("traces", self.revision, run_id, ENVELOPE_SCHEMA)
        self.rows = None if legacy_only else self.publication.part_writer("rows", self.revision, run_id, ROW_SCHEMA)
        own = load_dataset_cached(dataset.path).path
        self.gate_config = gate_config_for(own, gate_config)
        self.gate_source = gate_config_source(own, gate_config)  # None: the default, the dataset has no gate.toml
        self.judge = None if legacy_only else GateJudge(self.scope, errors, self.gate_config)
        self.row_refs: list[StageRef] = []
        self.refs: list[StageRef] = []
        self.summary: dict[str, Any] = {}
        self.drift: dict[str, Any] | None = None
        self.source: str | None = None
        self.verdict = None
        self.legacy: LegacyResult | None = None

    def __enter__(self) -> "RunPublisher":
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is not None:
            self.publication.abort()

    def add_shard(self, index: int, envelopes: StageRef, rows: StageRef | None,
                  generation: StageRef | None = None) -> None:
        """Publish one shard (call in shard order): its envelopes and rows become part ``index`` of the staged
        partitions, its rows are judged by the gate, and its row errors join ``errors.json``."""
        self.traces.add(read_stage_table(envelopes, schema=ENVELOPE_SCHEMA), index)
        self.refs += [ref for ref in (generation, envelopes, rows) if ref is not None]
        if rows is None or self.rows is None:
            return
        table = read_stage_table(rows, schema=ROW_SCHEMA)  # read once: the partition part, the errors, the gate
        # the gate's verdict is stored on the published rows, not computed by scoring: it depends on gate.toml
        # (waivers dated against the day of publication, quarantine, --gate-config), which must not change what
        # the scoring stage caches; every reader (compare, pass rates, the report, tooleval sql) then reads one
        # verdict from the rows instead of judging them again its own way
        verdicts = self.judge.add_table(table.select(GATE_COLUMNS))
        table = with_gate_verdicts(table, verdicts)
        self.rows.add(table, index)
        self.row_refs.append(rows)
        self.errors += _row_errors(table)

    def aggregate(self, extra_summary: dict[str, Any] | None, legacy: LegacyResult) -> dict[str, Any]:
        """The summary's figures: what the run is, then DuckDB over the staged rows (the aggregation task) and the
        variability across trials."""
        dataset = self.dataset
        self.summary = {
            "dataset_revision": self.revision,
            "run_id": self.run_id,
            "dataset": {"name": dataset.name, "path": dataset.path, "content_digest": dataset.content_digest},
            "versions": {"tooleval": tooleval_version(), "scorer": self.code, "ragas": self.ragas,
                         "row_schema": ROW_SCHEMA_VERSION, "summary": SUMMARY_VERSION, "errors": ERRORS_VERSION,
                         "drift": DRIFT_VERSION},
            "slices": self.slices,
            "redaction": None if self.redaction is None else self.redaction.model_dump(),
            "dataset_ref": dataset.model_dump(),
            "legacy": {k: v for k, v in legacy_record(legacy, self.revision, self.run_id).items()
                       if k in ("value", "rows")},
            **(extra_summary or {}),
        }
        self.traces.close()
        if self.rows is not None:
            files, _ = self.rows.close()
            self.source = scan_rows_sql(files)
            # pass@k follows the gate's row outcome, and the summary says which one judged the rows
            chosen = outcome_from_spec(self.outcome, self.gate_config.row_outcome, self.gate_config.accept_name_only)
            # the variability across trials is read on a thread of its own while the aggregation task runs: both
            # read the staged rows with DuckDB, which leaves the interpreter while it scans, and the workers are
            # gone by now, so the second core would otherwise wait (~1.5 s of a 1,000,000-row run's tail)
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="variability") as pool:
                variability = pool.submit(variability_of_parquet, self.source, chosen)
                aggregate = shared_results(aggregate_rows, str(self.out))  # on object storage: the bucket's records
                figures = run_stage(aggregate, self.states["aggregation"], self.source,
                                    [r.digest for r in self.row_refs], self.code)
                self.summary.update(figures)
                self.summary["variability"] = variability.result()
            self.summary["row_outcome"] = row_outcome_record(self.gate_config, self.gate_source, chosen.spec)
        return self.summary

    def gate_and_drift(self, legacy: LegacyResult, drift_partials: list[dict[str, Any]] | None) -> None:
        """The gate's verdict (``junit.xml``) and the drift check (``drift.json``), into the summary; the legacy
        scalar staged (by :meth:`report`) when this run publishes one."""
        self.legacy = legacy
        if self.rows is None:
            return
        self.verdict = self.judge.verdict()
        self.summary["gate"] = self.verdict.to_dict()
        self.summary.update({k: v for k, v in self.verdict.counts.items() if k not in self.summary})
        with self.publication.document_file(f"runs/{self.run_id}/junit.xml") as junit:
            write_junit(self.verdict, junit, suite_name=self.revision)
        if self.legacy_pass:
            drift = _drift(legacy, self.row_refs, drift_partials)
            drift["slices"] = self.slices
            self.drift = drift_document(drift)
            self.summary["drift"] = {"verdict": drift["verdict"], "attribution": drift["attribution"],
                                     "legacy_value": drift["legacy"]["value"], "new_value": drift["new"]["value"]}
            self.publication.add_json(f"runs/{self.run_id}/drift.json", self.drift)

    def report(self) -> None:
        """``report.html`` over the staged rows (none for a legacy-only run); the summary is final after it.

        The run's time (``completed_at``, the legacy scalar's ``computed_at``) is taken here, once every shard is
        scored, judged and checked for drift: the end of the run, not the start of its shards."""
        self.published_at = datetime.now(timezone.utc)
        if self.publish_legacy and self.legacy is not None:
            stage_legacy(self.publication, self.legacy, self.revision, self.run_id, published_at=self.published_at)
        self.summary["errors"] = len(self.errors)
        self.summary["completed_at"] = self.published_at.isoformat()
        self.summary = summary_document(self.summary)
        if self.source is not None:
            # imported here: the report's charts (Altair) are ~40 MB and ~1.4 s of import that every shard worker,
            # which imports this module for run_stage, would otherwise pay without ever drawing one
            from tooleval.runs.report import build_report

            self.publication.add_text(f"runs/{self.run_id}/report.html",
                                      build_report(self.source, self.summary, self.drift, self.out))

    def publish(self, stage_refs: list[StageRef] | None = None) -> RunResult | State:
        """Stage the run documents and commit the publication; then the Prefect artifacts.

        ``runs/<run>/stages.json`` lists the digests of the stage files the run used (``stage_refs``, or those of
        the shards added): ``tooleval gc`` keeps those for the runs it keeps.

        Returns:
            The :class:`RunResult`, or a ``Failed`` state carrying it when the drift check found drift.
        """
        run_id, publication = self.run_id, self.publication
        self.errors = errors_document(self.errors)
        publication.add_json(f"runs/{run_id}/summary.json", self.summary)
        publication.add_json(f"runs/{run_id}/errors.json", self.errors)
        used = self.refs if stage_refs is None else stage_refs
        publication.add_json(f"runs/{run_id}/{STAGES_FILE}", {"digests": sorted({r.digest for r in used})})
        record = revision_record_relpath(self.revision)
        with revision_commit(self.out, self.revision):
            # the plan checked the revision's ledger, but a run of the same revision started at the same time
            # passed that check too: checked again where no other run of it can commit meanwhile
            check_revision_content(self.out, Path(self.dataset.path), self.revision, self.dataset.content_digest)
            if not tree_of(self.out).is_file(record):
                publication.add_json(record, {"revision": self.revision, "dataset": self.dataset.name,
                                              "content_digest": self.dataset.content_digest})
            publication.commit()
        partition = f"dataset_revision={self.revision}/run_id={run_id}"
        published_rows = None if self.legacy_only else scan_rows_sql(str(join(self.out,
                                                                              f"rows/{partition}/*.parquet")))
        publish_artifacts(self.summary, join(self.out, f"runs/{run_id}"), published_rows)
        result = RunResult(
            run_id=run_id,
            dataset_revision=self.revision,
            out=str(self.out),
            rows_path=None if self.legacy_only else str(join(self.out, f"rows/{partition}")),
            traces_path=str(join(self.out, f"traces/{partition}")),
            run_path=str(join(self.out, f"runs/{run_id}")),
            stage_states={name: dict(counter) for name, counter in self.states.items() if counter},
            summary=self.summary,
            errors=self.errors,
            drift=self.drift,
        )
        if self.drift is not None and self.drift["verdict"] == "drift":
            return Failed(message="drift between the legacy scalar and the row-level path: "
                          + "; ".join(self.drift["reasons"]), data=result)
        return result


def publish_run(
    target: PublicationTarget,
    shards: list[tuple[StageRef, StageRef]],
    legacy: LegacyResult,
    states: dict[str, Counter],
    *,
    extra_summary: dict[str, Any] | None = None,
    drift_partials: list[dict[str, Any]] | None = None,
) -> RunResult | State:
    """Publish one run whose shards are all done: :class:`RunPublisher`'s steps in order (every shard, then
    aggregate, gate and drift, report, publish). ``shards``: each shard's ``(envelopes, rows)`` stage refs, which
    ``runs/<run>/stages.json`` lists.

    Returns:
        The :class:`RunResult`, or a ``Failed`` state carrying it when the drift check found drift.
    """
    with RunPublisher(target, states) as publisher:
        for index, (envelopes, shard_rows) in enumerate(shards):
            publisher.add_shard(index, envelopes, None if target.legacy_only else shard_rows)
        publisher.aggregate(extra_summary, legacy)
        publisher.gate_and_drift(legacy, drift_partials)
        publisher.report()
        return publisher.publish([*(ref for ref, _ in shards), *(ref for _, ref in shards)])

