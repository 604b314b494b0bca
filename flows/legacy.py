"""The legacy scalar flow: recompute and publish the old pipeline's one number for an existing run, from that
run's immutable trace envelopes (``traces/dataset_revision=<rev>/run_id=<run>/``)."""

from __future__ import annotations

from datetime import datetime

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from flows._tags import untagged_task_runs
from tasks import legacy_scalar
from tasks.legacy import dataset_scope
from tooleval.runs.catalog import resolve_run_id
from tooleval.runs.legacy import LegacyResult, LegacyTally, stage_legacy
from tooleval.runs.plan import dataset_ref
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.runs.published import open_run
from tooleval.storage import Publication
from tooleval.versions import scorer_version


@flow(name="tooleval-legacy-scalar", validate_parameters=True)
def legacy(run_id: str, out: str = "results", dataset: str | None = None) -> LegacyResult:
    """Publish ``legacy/dataset_revision=<rev>/run_id=<run>/scalar.{json,parquet}`` for a run.

    Args:
        run_id: An existing run under ``out``, or ``latest`` (the newest run with rows there, folder or URL).
        out: Results folder, or an fsspec URL (``s3://bucket/prefix``; each envelope file is read through it,
            record batch by record batch, and the scalar is published there behind the run's commit marker).
        dataset: Dataset folder; default: the one recorded in the run's summary.

    Returns:
        The legacy result (the scalar and the row count; its ``per_row`` is empty: ``tooleval drift`` compares
        per row).

    Raises:
        tooleval.errors.InputFileError: unknown run or missing dataset.
    """
    with untagged_task_runs():  # the holder tag stays on the flow run
        run_id = resolve_run_id(out, run_id)
        run = open_run(out, run_id, dataset)
        ref = dataset_ref(run.dataset)
        files, digests, scope = run.files("traces"), run.digests("traces"), dataset_scope(ref)
        # one task per part file (one per shard): the envelopes' messages are never all in memory at once, and each
        # file's per-row values are folded into the tally before the next, so memory stays that of one shard
        tally = LegacyTally()
        for f, d in zip(files, digests):
            tally.add(legacy_scalar([str(f)], [d], ref, run.redaction, scorer_version(), ragas_version(), str(run.out),
                                    scope=scope))
        result = tally.result(ragas_version(), scorer_version())
        completed = run.summary.get("completed_at")
        published_at = datetime.fromisoformat(completed) if completed else None  # keep the run's place in the series
        with Publication(run.out) as publication:
            stage_legacy(publication, result, run.revision, run_id, published_at=published_at)
        create_markdown_artifact(f"# legacy scalar of run `{run_id}`\n\n{result.metric} = {result.value} over "
                                 f"{result.rows} rows (ragas {result.ragas_version})", key="tooleval-legacy",
                                 description=f"run {run_id}")
        return result
