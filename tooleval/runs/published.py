"""Reading a published run back: its summary, its partitions and its dataset (for ``legacy``, ``drift`` and
the other commands that work on an existing ``--run-id``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tooleval.dataset import Dataset, check_name, load_dataset
from tooleval.errors import InputFileError
from tooleval.capture.recorded import file_digest
from tooleval.capture.redaction import RedactionConfig, Redactor, build_redactor
from tooleval.storage import committed_files, document_path

__all__ = ["PublishedRun", "open_run"]


@dataclass
class PublishedRun:
    """A run as published under ``out``."""

    out: Path
    run_id: str
    revision: str
    summary: dict
    dataset: Dataset

    def files(self, kind: str) -> list[Path]:
        """The committed Parquet files of this run's ``kind`` partition (``traces``, ``rows``, ``legacy``): those
        its commit marker names."""
        return committed_files(self.out, kind, self.revision, self.run_id)

    def digests(self, kind: str) -> list[str]:
        """sha256 of each file of :meth:`files`."""
        return [file_digest(path) for path in self.files(kind)]

    @property
    def redaction(self) -> RedactionConfig | None:
        """The redaction the run's traces went through (from ``summary.json``)."""
        config = self.summary.get("redaction")
        return None if config is None else RedactionConfig.model_validate(config)

    def redactor(self) -> Redactor | None:
        """A redactor equal to the run's (same fields, same key), or ``None`` when the run was not redacted."""
        return build_redactor(self.out, self.redaction, self.dataset.cases)


def open_run(out: str | Path, run_id: str, dataset: str | Path | None = None) -> PublishedRun:
    """Open a published run.

    Args:
        out: Results folder.
        run_id: The run.
        dataset: Dataset folder; default: the one recorded in the run's ``summary.json``.

    Raises:
        InputFileError: unknown run, missing summary, missing dataset, a dataset whose revision or content
            differs from the run's, or a missing or different redaction key.
    """
    out = Path(out).resolve()
    check_name(run_id, what="run id")
    summary_path = document_path(out, f"runs/{run_id}/summary.json")
    if not summary_path.is_file():
        raise InputFileError(summary_path, None, f"no run {run_id!r} under {out}.",
                             "check --run-id and --out (runs are listed under <out>/runs/).")
    summary = json.loads(summary_path.read_text())
    revision = summary["dataset_revision"]
    dataset_path = Path(dataset) if dataset is not None else Path(summary.get("dataset", {}).get("path", ""))
    if not (dataset_path / "dataset.json").is_file():
        raise InputFileError(dataset_path, None, "the run's dataset folder is not there.",
                             "pass --dataset with the dataset folder the run used.")
    loaded = load_dataset(dataset_path)
    recorded = summary.get("dataset", {}).get("content_digest")
    if recorded and loaded.content_digest != recorded:
        raise InputFileError(dataset_path, None,
                             f"this dataset's content is not what run {run_id!r} was scored with (revision {revision!r}).",
                             "a revision names one immutable content: restore it, or bump the revision and "
                             "`tooleval run` the new one (a changed case or tool rule needs a new revision).")
    if loaded.revision != revision:
        raise InputFileError(dataset_path / "dataset.json", None,
                             f"dataset revision {loaded.revision!r} is not the run's revision {revision!r}.",
                             "pass --dataset with the folder of that revision.")
    run = PublishedRun(out=out, run_id=run_id, revision=revision, summary=summary, dataset=loaded)
    run.redactor()  # a missing or different redaction key is refused here, before any command works
    return run


def select_envelopes(run: PublishedRun, case: str | None = None, trial: int | None = None) -> list[dict]:
    """The run's trace envelopes (older envelope versions migrated), optionally one case and/or one trial.

    Raises:
        InputFileError: a newer envelope version, or no envelope matches ``case``/``trial``.
    """
    import pyarrow as pa

    from tooleval.storage import read_versioned

    files = run.files("traces")
    tables = [read_versioned(path, "traces") for path in files]
    envelopes = pa.concat_tables(tables).to_pylist() if tables else []
    chosen = [e for e in envelopes if (case is None or e["case_id"] == case) and (trial is None or e["trial"] == trial)]
    if not chosen:
        wanted = " and ".join(part for part in (
            None if case is None else f"case {case!r}", None if trial is None else f"trial {trial}") if part)
        raise InputFileError(files[0] if files else run.out / "traces", None,
                             f"run {run.run_id!r} has no trace envelope for {wanted or 'any case'}.",
                             "check --case/--trial against the run's rows (tooleval sql).")
    return chosen
