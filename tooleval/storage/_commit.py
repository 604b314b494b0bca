"""The commit marker of a run: ``runs/<run>/commit.json``, the one object that says what the run *is*.

A publication never moves or overwrites what readers use. It writes new, uniquely named objects — partition
files ``part-<publication>.parquet`` beside the old ones, and run documents (``summary.json``, ``junit.xml``,
the legacy ``scalar.json``, ...) under ``runs/<run>/.publications/<publication>/`` — then commits by writing
the marker in one whole-object write (a temporary file and ``os.replace`` here; one PUT on object storage, where
no rename is needed)::

    {"format": 1, "run_id", "dataset_revision", "publication", "committed_at", "state",
     "partitions": {"rows/dataset_revision=r1/run_id=x": ["rows/dataset_revision=r1/run_id=x/part-<p>.parquet"]},
     "documents": {"runs/x/summary.json": "runs/x/.publications/<p>/runs/x/summary.json"}}

Readers that honour the marker (:func:`committed_files`, :func:`document_path`, and through them
``tooleval.storage.connect``/``read_table`` and every command) see the old run or the new one, never a mix.
After the commit, the documents are copied to their usual names for people and other tools, and files no marker
names are deleted (:func:`sweep`). A publication killed before its marker is discarded, one killed after it is
finished, by :func:`recover` at the start of the next command.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.storage._lease import RunLease, holder_alive
from tooleval.storage._paths import OutFolderError, write_bytes
from tooleval.storage._schema import SCHEMAS

__all__ = ["MARKER", "PUBLICATIONS", "read_marker", "write_marker", "committed_files", "document_path",
           "run_partition_folders", "sweep", "recover", "unmarked_files"]

logger = logging.getLogger(__name__)

MARKER = "commit.json"
PUBLICATIONS = ".publications"
MARKER_FORMAT = 1
VERSIONED = re.compile(r".+-[0-9a-f]{32}\.parquet")
"""A partition file written under a publication id (``part-<32 hex>.parquet``): visible only once committed."""


def marker_path(out: Path, run_id: str) -> Path:
    return Path(out) / "runs" / run_id / MARKER


def read_marker(out: str | Path, run_id: str) -> dict | None:
    """The run's commit marker, or None when the run has none (not published, or published before markers).

    Raises:
        InputFileError: the marker exists but is not a marker this tooleval reads.
    """
    path = marker_path(Path(out), run_id)
    try:
        marker = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputFileError(path, None, f"the run's commit marker is unreadable ({exc}).",
                             "restore it from a backup, or rerun the run (tooleval run --run-id ...).") from None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        found = marker.get("format") if isinstance(marker, dict) else type(marker).__name__
        raise InputFileError(path, None, f"unknown commit marker format {found!r}; this tooleval reads "
                             f"{MARKER_FORMAT}.", "upgrade tooleval, or rerun the run.")
    return marker


def write_marker(out: Path, run_id: str, marker: dict) -> None:
    """Commit: write the whole marker in one write (readers see the previous marker or this one)."""
    write_bytes(out, f"runs/{run_id}/{MARKER}", (json.dumps(marker, indent=2) + "\n").encode())


def run_partition_folders(out: Path, run_id: str) -> list[Path]:
    """Every partition folder of ``run_id`` (any kind, any revision)."""
    return sorted(p for kind in SCHEMAS for p in (Path(out) / kind).glob(f"dataset_revision=*/run_id={run_id}"))


def unmarked_files(folder: Path) -> list[Path]:
    """Partition files a run without a marker shows: those written before markers existed (``part-0.parquet``);
    files of an uncommitted publication (``part-<id>.parquet``) are never shown."""
    return sorted(f for f in folder.glob("*.parquet") if not VERSIONED.fullmatch(f.name) and f.is_file())


def committed_files(out: str | Path, kind: str, revision: str | None = None, run_id: str | None = None) -> list[Path]:
    """The committed Parquet files of ``kind`` (optionally one revision and/or run), sorted by path.

    Raises:
        InputFileError: a run's commit marker is unreadable.
    """
    out = Path(out)
    revision_glob = "*" if revision is None else f"dataset_revision={revision}"
    run_glob = "*" if run_id is None else f"run_id={run_id}"
    files: list[Path] = []
    markers: dict[str, dict | None] = {}
    for folder in sorted((out / kind).glob(f"{revision_glob}/{run_glob}")):
        if not folder.name.startswith("run_id=") or not folder.is_dir():
            continue
        run = folder.name[len("run_id="):]
        if run not in markers:
            markers[run] = read_marker(out, run)
        marker = markers[run]
        if marker is None:
            files += unmarked_files(folder)
        else:
            key = folder.relative_to(out).as_posix()
            files += [out / name for name in marker.get("partitions", {}).get(key, [])]
    return sorted(files)


def _run_of(relpath: str) -> str | None:
    parts = relpath.split("/")
    if parts[0] == "runs" and len(parts) > 2:
        return parts[1]
    if parts[0] in SCHEMAS and len(parts) > 3 and parts[2].startswith("run_id="):
        return parts[2][len("run_id="):]
    return None


def document_path(out: str | Path, relpath: str) -> Path:
    """Where the committed content of document ``relpath`` (e.g. ``runs/x/summary.json``) is: the copy the
    run's marker names, else the usual path (runs published before markers, documents outside a run).

    Raises:
        InputFileError: the run's commit marker is unreadable.
    """
    out = Path(out)
    run = _run_of(relpath)
    marker = read_marker(out, run) if run is not None else None
    physical = (marker or {}).get("documents", {}).get(relpath)
    return out / (physical or relpath)


def _pause(point: str) -> None:
    from tooleval.storage._pause import pause_point

    pause_point(point)


def sweep(out: Path, run_id: str, marker: dict) -> None:
    """Finish a committed publication: copy each document to its usual name, delete the run's files that the
    marker does not name (older publications, an interrupted one), mark the marker clean. Idempotent; the
    caller holds the run's lease."""
    out = Path(out)
    first = True
    for logical, physical in sorted(marker.get("documents", {}).items()):
        source, target = out / physical, out / logical
        data = source.read_bytes()
        if not target.is_file() or target.is_symlink() or target.read_bytes() != data:
            write_bytes(out, logical, data)
            if first:
                _pause("rolling")
                first = False
    named = {name for files in marker.get("partitions", {}).values() for name in files}
    named |= set(marker.get("documents", {}).values())
    for folder in run_partition_folders(out, run_id):
        for entry in folder.iterdir():
            relative = entry.relative_to(out).as_posix()
            stale = (entry.suffix == ".parquet" and relative not in named) or entry.name.endswith(".tmp")
            if entry.is_file() and stale:
                entry.unlink(missing_ok=True)
        remove_empty(folder, stop=out)
    publications = out / "runs" / run_id / PUBLICATIONS
    if publications.is_dir():
        for entry in sorted(publications.rglob("*"), reverse=True):
            if entry.is_file() and entry.relative_to(out).as_posix() not in named:
                entry.unlink(missing_ok=True)
            elif entry.is_dir() and not any(entry.iterdir()):
                entry.rmdir()
    if marker.get("state") != "clean":
        write_marker(out, run_id, dict(marker, state="clean"))


def discard(out: Path, run_id: str) -> None:
    """Delete an uncommitted first publication of ``run_id`` (no marker): its versioned files and documents."""
    for folder in run_partition_folders(out, run_id):
        for entry in folder.iterdir():
            if VERSIONED.fullmatch(entry.name) or entry.name.endswith(".tmp"):
                entry.unlink(missing_ok=True)
        remove_empty(folder, stop=out)
    shutil.rmtree(out / "runs" / run_id / PUBLICATIONS, ignore_errors=True)


def remove_empty(folder: Path, stop: Path) -> None:
    for path in (folder, folder.parent):
        if path != stop and path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _needs_work(out: Path, run_dir: Path) -> dict | None | bool:
    try:
        marker = read_marker(out, run_dir.name)
    except InputFileError:
        return False  # reported by the command that reads this run
    publications = run_dir / PUBLICATIONS
    if marker is not None and marker.get("state") != "clean":
        return True
    if publications.is_dir():
        used = {physical.split("/")[3] for physical in (marker or {}).get("documents", {}).values()}
        return any(entry.name not in used for entry in publications.iterdir())
    return False


def recover(out: str | Path) -> list[str]:
    """Finish or discard interrupted publications under ``out`` and clean a stale ``.staging``; skip runs a
    live writer holds. Called at the start of every command that reads or writes results.

    Returns:
        The run ids recovered.
    """
    out = Path(out)
    runs = out / "runs"
    recovered: list[str] = []
    if runs.is_dir() and not runs.is_symlink():
        for run_dir in sorted(runs.iterdir()):
            if run_dir.is_symlink() or not run_dir.is_dir() or not _needs_work(out, run_dir):
                continue
            lease = RunLease(out, run_dir.name)
            try:
                if lease.try_acquire() is not None:
                    continue
                try:
                    marker = read_marker(out, run_dir.name)
                    if marker is None:
                        discard(out, run_dir.name)
                    else:
                        sweep(out, run_dir.name, marker)
                    recovered.append(run_dir.name)
                    logger.warning("recovered an interrupted publication of run %r under %s", run_dir.name, out)
                finally:
                    lease.release()
            except (OSError, OutFolderError) as exc:
                logger.warning("could not recover run %r under %s: %s", run_dir.name, out, exc)
    _clean_staging(out)
    return recovered


def _clean_staging(out: Path) -> None:
    """Remove ``.staging`` (left by tooleval versions before commit markers) when no writer is alive."""
    staging = out / ".staging"
    if not (staging.exists() or staging.is_symlink()):
        return
    locks = out / ".tooleval" / "locks"
    for lock in locks.glob("*.json") if locks.is_dir() else []:
        try:
            if holder_alive(json.loads(lock.read_text())):
                return
        except (OSError, ValueError):
            continue
    try:
        if staging.is_symlink() or staging.is_file():
            staging.unlink()
        else:
            shutil.rmtree(staging)
    except OSError as exc:
        logger.warning("could not remove stale %s: %s", staging, exc)


def new_marker(out: Path, run_id: str, publication: str, revision: str | None, previous: dict | None,
               partitions: dict[str, list[str]], documents: dict[str, str]) -> dict[str, Any]:
    """The marker committing ``publication``: the previous marker's entries overridden by this publication's
    (a run published before markers existed has its files adopted)."""
    if previous is None:
        previous = {"partitions": {f.relative_to(out).as_posix(): [p.relative_to(out).as_posix()
                                                                   for p in unmarked_files(f)]
                                   for f in run_partition_folders(out, run_id)},
                    "documents": {}}
    return {
        "format": MARKER_FORMAT,
        "run_id": run_id,
        "dataset_revision": revision or previous.get("dataset_revision"),
        "publication": publication,
        "committed_at": datetime.now(timezone.utc).isoformat(),
        "state": "committed",
        "partitions": {**previous.get("partitions", {}), **partitions},
        "documents": {**previous.get("documents", {}), **documents},
    }
