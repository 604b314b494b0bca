"""The runs under a results folder: list them, delete one, and collect the stage files and Prefect stored
results that no kept run needs (``tooleval runs``, ``tooleval runs --delete R``, ``tooleval gc``).

Which stage files a run needs is recorded at publication in ``runs/<run>/stages.json`` (the digests of its
generation, capture and scoring stage files). ``gc`` keeps those, and the Prefect result records that point at
them, so a cached rerun of a kept run stays cached; a kept run published before that file existed makes ``gc``
keep every stage file (it cannot know which ones the run needs).

On object storage (``out`` an ``s3://`` URL) the same functions work on the bucket: the runs come from its run
catalog (:mod:`tooleval.storage._catalog`, one read), a run is deleted behind its marker with its catalog entry
noted first, and ``gc`` collects the stage files and the shared stage records of ``<out>/.tooleval/prefect/storage``
while no run of any machine holds them in use.
"""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooleval.dataset import check_name
from tooleval.errors import InputFileError

__all__ = ["RunInfo", "GcReport", "STAGES_FILE", "LATEST", "list_runs", "delete_run", "collect_garbage", "prefect_home",
           "resolve_run_id"]

STAGES_FILE = "stages.json"
_KINDS = ("traces", "rows", "legacy")


@dataclass(frozen=True)
class RunInfo:
    """One published run, as ``tooleval runs`` lists it."""

    run_id: str
    dataset_revision: str
    completed_at: str | None
    rows: int | None
    mean_f1: float | None
    gate: str | None
    """``PASS`` | ``FAIL`` | ``None`` (a legacy-only run has no gate)."""
    drift: str | None
    """The drift check's verdict (``ok`` | ``drift``) or ``None``."""


@dataclass
class GcReport:
    """What ``gc`` removed: runs, stage files, Prefect result records, and the bytes freed."""

    deleted_runs: list[str] = field(default_factory=list)
    stage_files: int = 0
    result_records: int = 0
    bytes_freed: int = 0
    kept_all_stage_files: bool = False
    """True when no stage file was collected: a kept run has no ``stages.json`` (published before it existed), or
    a run is in progress (``run_in_progress``)."""
    run_in_progress: bool = False
    """True when a run or a rescore held the stage files in use: every stage file was kept."""


def prefect_home(out: Path) -> Path:
    """The folder whose ``storage`` holds the Prefect task results and cache records of runs into ``out``:
    ``$TOOLEVAL_PREFECT_HOME``, or ``<out>/.tooleval/prefect`` (as the CLI sets them)."""
    from tooleval.settings import prefect_home as configured

    return configured() or Path(out).resolve() / ".tooleval" / "prefect"


def _summary(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _run_summary(out: Path, run_id: str) -> dict[str, Any] | None:
    """A run's committed ``summary.json`` (through its commit marker), or None."""
    from tooleval.storage import document_path

    try:
        return _summary(document_path(out, f"runs/{run_id}/summary.json"))
    except InputFileError:
        return None


def _url(out: str | Path) -> str | None:
    """``out`` as a results URL, or None for a folder."""
    from tooleval.storage import as_location

    location = as_location(out) if isinstance(out, str) else out
    return location if isinstance(location, str) else None


def list_runs(out: str | Path) -> list[RunInfo]:
    """Every run under ``out/runs/`` with a readable ``summary.json``, newest first (by ``completed_at``).

    On object storage (``out`` a URL) the runs come from the run catalog, ``<out>/.tooleval/catalog.json``
    (:mod:`tooleval.storage._catalog`): one read, whatever the number of runs; it is rebuilt from the commit markers
    when missing.

    Raises:
        OSError: the store cannot be read.
    """
    url = _url(out)
    if url is not None:
        from tooleval.storage import catalog_for

        entries = catalog_for(url).runs()
        infos = [RunInfo(run_id=run_id, dataset_revision=e.get("dataset_revision") or "",
                         completed_at=e.get("completed_at"), rows=e.get("rows"), mean_f1=e.get("mean_f1"),
                         gate=e.get("gate"), drift=e.get("drift"))
                 for run_id, e in entries.items() if e.get("summary")]
        return sorted(infos, key=lambda r: (r.completed_at or "", r.run_id), reverse=True)
    infos = []
    runs = Path(out) / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        s = _run_summary(Path(out), run_dir.name) if run_dir.is_dir() else None
        if s is None:
            continue
        gate = s.get("gate")
        infos.append(RunInfo(
            run_id=run_dir.name, dataset_revision=s.get("dataset_revision", ""),
            completed_at=s.get("completed_at"), rows=s.get("rows"), mean_f1=s.get("mean_f1"),
            gate=None if not gate else ("PASS" if gate.get("passed") else "FAIL"),
            drift=(s.get("drift") or {}).get("verdict")))
    return sorted(infos, key=lambda r: (r.completed_at or "", r.run_id), reverse=True)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def delete_run(out: str | Path, run_id: str) -> int:
    """Remove one run: its ``traces``, ``rows`` and ``legacy`` partitions and ``runs/<run>/``; nothing else.

    The run's lease is held meanwhile (a run being written is refused) and its commit marker goes first, so
    readers see the whole run or none of it.

    Returns:
        Bytes freed.

    Raises:
        InputFileError: no such run (or an unsafe run id); LeaseHeldError: the run is being written.
    """
    from tooleval.storage import MARKER, hold_run

    check_name(run_id, what="run id")
    if _url(out) is not None:
        return _delete_remote_run(_url(out), run_id)
    out = Path(out)
    run_dir = out / "runs" / run_id
    s = _run_summary(out, run_id)
    if s is None:
        raise InputFileError(run_dir, None, f"no run {run_id!r} under {out}.", "tooleval runs lists the runs.")
    targets = [out / kind / f"dataset_revision={s['dataset_revision']}" / f"run_id={run_id}" for kind in _KINDS]
    freed = 0
    with hold_run(out, run_id):
        (run_dir / MARKER).unlink(missing_ok=True)
        for target in [*targets, run_dir]:
            if target.exists():
                freed += _size(target)
                shutil.rmtree(target)
    return freed


def _remote_size(tree: Any, relpath: str) -> int:
    """Bytes of the objects under ``relpath`` of a results URL's tree (one listing of that prefix)."""
    try:
        found = tree.fs.find(f"{tree.root}/{relpath}", detail=True)
    except FileNotFoundError:
        return 0
    return sum(int(info.get("size") or 0) for info in found.values())


def _delete_remote_run(url: str, run_id: str) -> int:
    """:func:`delete_run` on object storage: the run is noted pending in the run catalog, its marker goes first
    (readers see the whole run or none of it), then its objects, then its catalog entry."""
    from tooleval.storage import MARKER, PENDING_DELETE, catalog_for, hold_run, read_document, tree_of

    tree = tree_of(url)
    try:
        summary = json.loads(read_document(url, f"runs/{run_id}/summary.json") or b"null")
    except (InputFileError, ValueError):
        summary = None
    if not isinstance(summary, dict):
        raise InputFileError(tree.location(f"runs/{run_id}"), None, f"no run {run_id!r} under {url}.",
                             "tooleval runs lists the runs.")
    catalog = catalog_for(url)
    targets = [f"{kind}/dataset_revision={summary['dataset_revision']}/run_id={run_id}" for kind in _KINDS]
    freed = 0
    with hold_run(url, run_id):
        catalog.note_pending(run_id, PENDING_DELETE)
        tree.delete(f"runs/{run_id}/{MARKER}")
        for target in [*targets, f"runs/{run_id}"]:
            freed += _remote_size(tree, target)
            tree.delete_tree(target)
        catalog.settle(run_id)
    return freed


def _record_mentions(record: Path, paths: set[str]) -> bool:
    """True when a Prefect result record points at one of ``paths`` (its pickled StageRef holds the file's
    absolute path, so a record of another results folder holding the same content is not touched)."""
    try:
        data = json.loads(record.read_text())
        payload = base64.b64decode(data.get("result") or "")
    except (OSError, ValueError):
        return False
    return any(path.encode() in payload for path in paths)


def collect_garbage(out: str | Path, keep: int | None = None) -> GcReport:
    """Delete the runs past the ``keep`` newest (all kept when ``None``), then the stage files no kept run
    needs and the Prefect result records that point at them — unless a run or a rescore is in progress
    (:func:`tooleval.storage.stages_unused`): it may read any stage file, so all are kept
    (``run_in_progress``), and the next gc collects them.

    Raises:
        ValueError: ``keep`` < 0.
        tooleval.storage.OutFolderError: a symbolic link under ``<out>/.tooleval`` (deleting through it would
            delete files outside ``--out``).
    """
    from tooleval.storage import ARROW_SUFFIX, check_state_folder, stages_unused

    if keep is not None and keep < 0:
        raise ValueError("--keep must be >= 0")
    if _url(out) is not None:
        return _collect_remote_garbage(_url(out), keep)
    out = Path(out)
    check_state_folder(out)
    report = GcReport()
    needed = _kept_stage_digests(out, keep, report)
    if needed is None:
        return report
    with stages_unused(out) as free:
        if not free:  # a run in progress may read any stage file, a cached one of an earlier run included
            report.kept_all_stage_files = report.run_in_progress = True
            return report
        removed: set[str] = set()
        stages = out / ".tooleval" / "stages"
        for path in sorted([*stages.glob("*/*.parquet"), *stages.glob(f"*/*{ARROW_SUFFIX}")]):
            if path.stem not in needed:
                report.bytes_freed += path.stat().st_size
                removed.add(str(path.resolve()))
                path.unlink()
                report.stage_files += 1
        storage = prefect_home(out) / "storage"
        if removed and storage.is_dir():
            for record in sorted(p for p in storage.iterdir() if p.is_file()):
                if _record_mentions(record, removed):
                    report.bytes_freed += record.stat().st_size
                    record.unlink()
                    report.result_records += 1
    return report


def _kept_stage_digests(out: str | Path, keep: int | None, report: GcReport) -> set[str] | None:
    """Delete the runs past the ``keep`` newest (into ``report``) and return the digests of the stage files the
    kept runs name in their ``stages.json``; ``None`` (and ``report.kept_all_stage_files``) when a kept run has no
    such manifest, whose stage files are then unknown."""
    from tooleval.storage import read_document

    runs = list_runs(out)
    kept = runs if keep is None else runs[:keep]
    for run in ([] if keep is None else runs[keep:]):
        report.bytes_freed += delete_run(out, run.run_id)
        report.deleted_runs.append(run.run_id)
    needed: set[str] = set()
    for run in kept:
        manifest = read_document(out, f"runs/{run.run_id}/{STAGES_FILE}")
        if manifest is None:
            report.kept_all_stage_files = True
            return None
        needed.update(json.loads(manifest)["digests"])
    return needed


def _collect_remote_garbage(url: str, keep: int | None) -> GcReport:
    """:func:`collect_garbage` on object storage: runs from the run catalog, stage files and the stage records of
    ``<out>/.tooleval/prefect/storage`` (which every machine's runs share) in the bucket; a run of any machine in
    progress keeps every stage file (:func:`tooleval.storage.stages_unused`)."""
    from tooleval.storage import ARROW_SUFFIX, stages_unused, tree_of

    tree = tree_of(url)
    report = GcReport()
    needed = _kept_stage_digests(url, keep, report)
    if needed is None:
        return report
    with stages_unused(url) as free:
        if not free:
            report.kept_all_stage_files = report.run_in_progress = True
            return report
        removed: set[str] = set()
        found = tree.fs.find(f"{tree.root}/.tooleval/stages", detail=True)
        for path, info in sorted(found.items()):
            name = path.rsplit("/", 1)[-1]
            if not (name.endswith(".parquet") or name.endswith(ARROW_SUFFIX)):
                continue
            if name.split(".", 1)[0] not in needed:
                relpath = path[len(tree.root) + 1:]
                report.bytes_freed += int(info.get("size") or 0)
                removed.add(tree.location(relpath))
                tree.delete(relpath)
                report.stage_files += 1
        if removed:
            for relpath in tree.walk_files(".tooleval/prefect/storage"):
                data = tree.read_bytes(relpath)
                if any(path.encode() in data for path in removed):
                    report.bytes_freed += len(data)
                    tree.delete(relpath)
                    report.result_records += 1
    return report


LATEST = "latest"
"""A run id that names the newest run with rows (for scheduled deployments: drift and rescore)."""


def resolve_run_id(out: str | Path, run_id: str) -> str:
    """``run_id`` itself, or for :data:`LATEST` the newest run under ``out`` that has rows.

    Args:
        out: The results folder, or an fsspec URL (``s3://bucket/prefix``): both are ordered as :func:`list_runs`
            orders them (by ``completed_at``, then run id), the URL's runs read from its run catalog, so
            ``latest`` names the same run on a bucket as on a folder copy of it.
        run_id: A run id, or ``latest``.

    Returns:
        The run id (not checked to exist unless it was ``latest``).

    Raises:
        InputFileError: ``latest`` with no run that has rows.
        OSError: the store cannot be read.
    """
    if run_id != LATEST:
        return run_id
    for run in list_runs(out):
        if run.rows:
            return run.run_id
    from tooleval.storage import as_location, join

    where = as_location(out) if isinstance(out, str) else out
    raise InputFileError(join(where, "runs"), None, "no run with rows to take as 'latest'.",
                         "run `tooleval run` first, or pass a run id.")
