"""The drift check as a flow of its own (for its nightly deployment): recompute the legacy scalar from a run's
immutable trace envelopes with ragas, compare it with the run's rows, and publish ``runs/<run>/drift.json``.
The flow run ends ``Failed`` on drift."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed

from flows._tags import untagged_task_runs
from tooleval.runs.catalog import LATEST, resolve_run_id
from tooleval.runs.drift import recheck_run
from tooleval.runs.documents import drift_document
from tooleval.runs.published import open_run
from tooleval.storage import Publication


@flow(name="tooleval-drift", validate_parameters=True)
def drift_check(run_id: str = LATEST, out: str = "results", dataset: str | None = None) -> dict[str, Any]:
    """Re-run the drift check of a published run.

    Args:
        run_id: The run, or ``latest`` (the newest run with rows under ``out``).
        out: Results folder, or an fsspec URL (``s3://bucket/prefix``).
        dataset: Dataset folder (default: the one the run recorded).

    Returns:
        The ``drift.json`` content (a ``Failed`` state carrying it when drift was found).

    Raises:
        tooleval.errors.InputFileError: unknown run, a legacy-only run, a changed dataset.
    """
    with untagged_task_runs():  # the holder tag stays on the flow run
        run = open_run(out, resolve_run_id(out, run_id), dataset)
        report = recheck_run(run)
        with Publication(run.out) as publication:
            publication.add_json(f"runs/{run.run_id}/drift.json", drift_document(report))
        create_markdown_artifact(
            f"# drift check of run `{run.run_id}`: **{report['verdict']}**\n\nlegacy scalar "
            f"{report['legacy']['value']} over {report['legacy']['rows']} rows; row-level mean "
            f"{report['new']['value']} over {report['new']['rows']} rows\n\n"
            + "\n".join(f"- {reason}" for reason in report["reasons"]),
            key="tooleval-drift", description=f"run {run.run_id}")
        if report["verdict"] == "drift":
            return Failed(message="; ".join(report["reasons"]), data=report)
        return report
