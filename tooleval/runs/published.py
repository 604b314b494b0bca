"""Reading a published run back: its summary, its partitions and its dataset (for ``legacy``, ``drift`` and
the other commands that work on an existing ``--run-id``).

The results may be a local folder or an fsspec URL (``s3://bucket/prefix``, ``gs://…``): everything here reads
through the run's commit marker (:func:`tooleval.storage.committed_files`, :func:`tooleval.storage.read_document`),
one document or one Parquet file at a time, so a run on object storage is never downloaded whole."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tooleval.dataset import Dataset, check_name, load_dataset
from tooleval.errors import InputFileError
from tooleval.capture.redaction import RedactionConfig, Redactor, build_redactor
from tooleval.storage import (as_location, committed_files, document_path, join, local_copy, location_digest,
                              read_document)

__all__ = ["PublishedRun", "check_envelopes", "iter_envelopes", "matching", "open_run", "results_at"]

Location = Path | str
"""A results folder (an absolute :class:`~pathlib.Path`) or an fsspec URL (``str``, no trailing ``/``)."""


def results_at(out: str | Path) -> Location:
    """``out`` as the results location the readers take: an absolute path for a folder (``file://`` URLs too),
    the URL itself for object storage (``s3://bucket/prefix``).

    Raises:
        ValueError: a URL without a bucket or path (``s3://``).
    """
    location = as_location(out) if isinstance(out, str) else Path(out)
    return location.resolve() if isinstance(location, Path) else location


@dataclass
class PublishedRun:
    """A run as published under ``out``."""

    out: Location
    """The results: an absolute path, or an fsspec URL (:func:`results_at`)."""
    run_id: str
    revision: str
    summary: dict
    dataset: Dataset

    def files(self, kind: str) -> list[Location]:
        """The committed Parquet files of this run's ``kind`` partition (``traces``, ``rows``, ``legacy``): those
        its commit marker names, as paths in a folder or URLs on object storage."""
        return committed_files(self.out, kind, self.revision, self.run_id)

    def digests(self, kind: str) -> list[str]:
        """sha256 of each file of :meth:`files` (each streamed, never held whole)."""
        return [location_digest(path) for path in self.files(kind)]

    def location(self, relpath: str) -> Location:
        """``relpath`` (``runs/<run>/gate.json``) under the results, as a path or a URL, for messages."""
        return join(self.out, relpath)

    def errors(self) -> list[dict]:
        """The run's committed ``errors.json`` entries (``[]`` when it has none).

        Raises:
            InputFileError: the file is not JSON, or the run's commit marker is unreadable.
        """
        relpath = f"runs/{self.run_id}/errors.json"
        data = read_document(self.out, relpath)
        if data is None:
            return []
        try:
            return json.loads(data)
        except ValueError as exc:
            raise InputFileError(document_path(self.out, relpath), None, f"not JSON ({exc}).",
                                 "restore it from the run's publication, or rescore the run.") from None

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
        out: Results folder, or an fsspec URL (``s3://bucket/prefix``).
        run_id: The run.
        dataset: Dataset folder or fsspec URL; default: the one recorded in the run's ``summary.json``. A URL is
            read from this machine's copy (:func:`tooleval.storage.local_copy`).

    Raises:
        InputFileError: unknown run, missing summary, missing dataset, a dataset whose revision or content
            differs from the run's, or a missing or different redaction key.
    """
    out = results_at(out)
    check_name(run_id, what="run id")
    data = read_document(out, f"runs/{run_id}/summary.json")
    if data is None:
        raise InputFileError(document_path(out, f"runs/{run_id}/summary.json"), None, f"no run {run_id!r} under {out}.",
                             "check --run-id and --out (runs are listed under <out>/runs/).")
    summary = json.loads(data)
    revision = summary["dataset_revision"]
    given = dataset if dataset is not None else summary.get("dataset", {}).get("path", "")
    source = as_location(given) if isinstance(given, str) else Path(given)
    dataset_path = local_copy(source) if isinstance(source, str) else source
    if not (dataset_path / "dataset.json").is_file():
        raise InputFileError(source, None, "the run's dataset folder is not there.",
                             "pass --dataset with the dataset folder the run used.")
    loaded = load_dataset(dataset_path)
    recorded = summary.get("dataset", {}).get("content_digest")
    if recorded and loaded.content_digest != recorded:
        raise InputFileError(source, None,
                             f"this dataset's content is not what run {run_id!r} was scored with (revision {revision!r}).",
                             "a revision names one immutable content: restore it, or bump the revision and "
                             "`tooleval run` the new one (a changed case or tool rule needs a new revision).")
    if loaded.revision != revision:
        raise InputFileError(join(source, "dataset.json"), None,
                             f"dataset revision {loaded.revision!r} is not the run's revision {revision!r}.",
                             "pass --dataset with the folder of that revision.")
    run = PublishedRun(out=out, run_id=run_id, revision=revision, summary=summary, dataset=loaded)
    run.redactor()  # a missing or different redaction key is refused here, before any command works
    return run


def matching(table, case: str | None, trial: int | None):
    """The rows of ``table`` of ``case`` and/or ``trial`` (all rows when both are ``None``)."""
    import pyarrow.compute as pc

    mask = None
    for column, value in (("case_id", case), ("trial", trial)):
        if value is not None:
            test = pc.equal(table[column], value)
            mask = test if mask is None else pc.and_(mask, test)
    return table if mask is None else table.filter(mask)


def check_envelopes(run: PublishedRun, case: str | None = None, trial: int | None = None) -> int:
    """How many of the run's trace envelopes match ``case``/``trial`` (read from the key columns only).

    Raises:
        InputFileError: a newer envelope version, or no envelope matches ``case``/``trial``.
    """
    from tooleval.storage import read_versioned

    files = run.files("traces")
    found = sum(matching(read_versioned(path, "traces", ["case_id", "trial"]), case, trial).num_rows
                for path in files)
    if not found:
        wanted = " and ".join(part for part in (
            None if case is None else f"case {case!r}", None if trial is None else f"trial {trial}") if part)
        raise InputFileError(files[0] if files else run.location("traces"), None,
                             f"run {run.run_id!r} has no trace envelope for {wanted or 'any case'}.",
                             "check --case/--trial against the run's rows (tooleval sql).")
    return found


def iter_envelopes(run: PublishedRun, case: str | None = None, trial: int | None = None, *,
                   batch_rows: int = 1000) -> Iterator[list[dict]]:
    """The run's trace envelopes (older envelope versions migrated), optionally one case and/or one trial, in lists of
    at most ``batch_rows``, one published part file at a time: a run's envelopes (their messages) are never all in
    memory (a million rows' messages would not fit). Call :func:`check_envelopes` first for the error when nothing
    matches.

    Raises:
        InputFileError: a newer envelope version.
    """
    from tooleval.storage import read_versioned

    for path in run.files("traces"):
        table = matching(read_versioned(path, "traces"), case, trial)
        for batch in table.to_batches(max_chunksize=batch_rows):
            yield batch.to_pylist()
