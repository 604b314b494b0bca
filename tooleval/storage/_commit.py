"""The commit marker of a run: ``runs/<run>/commit.json``, the one object that says what the run *is*.

A publication never moves or overwrites what readers use. It writes new, uniquely named objects — partition
files ``part-<publication>.parquet`` beside the old ones, and run documents (``summary.json``, ``junit.xml``,
the legacy ``scalar.json``, ...) under ``runs/<run>/.publications/<publication>/`` — then commits by writing
the marker in one whole-object write (a temporary file and ``os.replace`` here; one PUT on object storage, where
no rename is needed: a PUT is atomic, so the marker's one PUT is the single step that commits)::

    {"format": 1, "run_id", "dataset_revision", "publication", "committed_at", "state",
     "partitions": {"rows/dataset_revision=r1/run_id=x": ["rows/dataset_revision=r1/run_id=x/part-<p>.parquet"]},
     "documents": {"runs/x/summary.json": "runs/x/.publications/<p>/runs/x/summary.json"}}

Readers that honour the marker (:func:`committed_files`, :func:`document_path`, and through them
``tooleval.storage.connect``/``read_table`` and every command) see the old run or the new one, never a mix.
After the commit, the documents are copied to their usual names for people and other tools, and files no marker
names are deleted (:func:`sweep`). A publication killed before its marker is discarded, one killed after it is
finished, by :func:`recover` at the start of the next command.

Every function here works on a results :class:`~tooleval.storage._fs.Tree` by relative paths, so the same
protocol serves a local folder and an fsspec URL (``s3://bucket/prefix``).
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.storage._fs import Location, Tree, is_remote, tree_of
from tooleval.storage._hold import lease_for
from tooleval.storage._lease import holder_alive
from tooleval.storage._paths import OutFolderError
from tooleval.storage._schema import SCHEMAS

__all__ = ["MARKER", "PUBLICATIONS", "read_marker", "write_marker", "commit_marker", "read_marker_version",
           "MarkerChangedError", "committed_files", "document_path",
           "read_document", "run_partition_folders", "run_partition_files", "sweep", "recover", "unmarked_files"]

logger = logging.getLogger(__name__)

MARKER = "commit.json"
PUBLICATIONS = ".publications"
MARKER_FORMAT = 1
VERSIONED = re.compile(r".+-[0-9a-f]{32}\.parquet")
"""A partition file written under a publication id (``part-<32 hex>.parquet``): visible only once committed."""


def _tree(out: str | Path | Tree) -> Tree:
    return out if hasattr(out, "write_bytes") and hasattr(out, "walk_files") else tree_of(out)


def read_marker(out: str | Path | Tree, run_id: str) -> dict | None:
    """The run's commit marker, or None when the run has none (not published, or published before markers).

    Args:
        out: The results folder, an fsspec URL, or its :class:`~tooleval.storage._fs.Tree`.

    Raises:
        InputFileError: the marker exists but is not a marker this tooleval reads.
    """
    tree = _tree(out)
    path = tree.location(f"runs/{run_id}/{MARKER}")
    try:
        marker = json.loads(tree.read_bytes(f"runs/{run_id}/{MARKER}"))
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


def write_marker(out: str | Path | Tree, run_id: str, marker: dict) -> None:
    """Commit: write the whole marker in one write (readers see the previous marker or this one): a temporary
    file and ``os.replace`` in a folder, one PUT on object storage."""
    _tree(out).write_bytes(f"runs/{run_id}/{MARKER}", _marker_bytes(marker))


def _marker_bytes(marker: dict) -> bytes:
    return (json.dumps(marker, indent=2) + "\n").encode()


class MarkerChangedError(InputFileError):
    """Another writer committed the run between this writer's read of the marker and its commit (exit 2)."""


def read_marker_version(store: Any, run_id: str) -> tuple[dict | None, str | None]:
    """The run's commit marker and its ETag through a
    :class:`~tooleval.storage._conditional.ConditionalStore`: ``(None, None)`` when there is none.

    Raises:
        InputFileError: the marker is not one this tooleval reads (as :func:`read_marker`).
        OSError: the store cannot be read.
    """
    found = store.get(f"runs/{run_id}/{MARKER}")
    if found is None:
        return None, None
    return read_marker(_Fixed(store.tree, f"runs/{run_id}/{MARKER}", found[0]), run_id), found[1]


class _Fixed:
    """A tree whose one file is bytes already read (so the marker and its ETag are the same version)."""

    def __init__(self, tree: Tree, relpath: str, data: bytes) -> None:
        self.tree, self.relpath, self.data = tree, relpath, data

    def location(self, relpath: str) -> Any:
        return self.tree.location(relpath)

    def read_bytes(self, relpath: str) -> bytes:
        return self.data

    # the view only hands the marker's bytes to the marker reader: nothing writes or lists through it
    def write_bytes(self, relpath: str, data: bytes) -> None:
        raise TypeError(f"{relpath}: a one-file read-only view of the commit marker is never written")

    def walk_files(self, relpath: str) -> list[str]:
        raise TypeError(f"{relpath}: a one-file read-only view of the commit marker lists no files")


def commit_marker(tree: Tree, run_id: str, marker: dict, store: Any = None, expected: str | None = None) -> str | None:
    """Commit ``marker``: without ``store``, as :func:`write_marker`; with a
    :class:`~tooleval.storage._conditional.ConditionalStore`, one PUT that succeeds only if the marker is still
    the version read (``If-Match: expected``), or still absent when ``expected`` is None (``If-None-Match: *``).

    Returns:
        The new marker's ETag (None without ``store``, or where the store turned out not to honour conditions).

    Raises:
        MarkerChangedError: another writer committed the run since ``expected`` was read; nothing was written.
        OSError / OutFolderError: the store refused the write.
    """
    if store is None:
        write_marker(tree, run_id, marker)
        return None
    from tooleval.storage._conditional import ConditionsUnsupported, PreconditionFailed, mark_unsupported

    relpath = f"runs/{run_id}/{MARKER}"
    try:
        return store.put(relpath, _marker_bytes(marker), if_match=expected, create=expected is None)
    except PreconditionFailed:
        raise MarkerChangedError(tree.location(relpath), None, f"run {run_id!r} was committed by another writer "
                                 "while this one was publishing; nothing of this publication was committed.",
                                 "rerun with a fresh --run-id, or rerun once the other writer is done.") from None
    except ConditionsUnsupported as exc:
        mark_unsupported(store, str(exc))
        write_marker(tree, run_id, marker)
        return None


def run_partition_folders(out: str | Path | Tree, run_id: str) -> list[str]:
    """Every partition folder of ``run_id`` (any kind, any revision), relative to ``out``."""
    tree = _tree(out)
    return sorted(p for kind in SCHEMAS for p in tree.folders(f"{kind}/dataset_revision=*/run_id={run_id}"))


def run_partition_files(out: str | Path | Tree, run_id: str) -> dict[str, list[str]]:
    """Every partition folder of ``run_id`` (as :func:`run_partition_folders`) with the files in it, relative to
    ``out``: one listing a folder."""
    tree = _tree(out)
    return {folder: tree.files(f"{folder}/*") for folder in run_partition_folders(tree, run_id)}


def _name(relpath: str) -> str:
    return relpath.rsplit("/", 1)[-1]


def unmarked_files(out: str | Path | Tree, folder: str) -> list[str]:
    """Partition files a run without a marker shows: those written before markers existed (``part-0.parquet``);
    files of an uncommitted publication (``part-<id>.parquet``) are never shown. Relative to ``out``."""
    return _unmarked(_tree(out).files(f"{folder}/*.parquet"))


def _unmarked(files: list[str]) -> list[str]:
    """The Parquet files of ``files`` that no publication id names (written before commit markers existed)."""
    return [f for f in files if f.endswith(".parquet") and not VERSIONED.fullmatch(_name(f))]


def committed_files(out: str | Path, kind: str, revision: str | None = None,
                    run_id: str | None = None) -> list[Location]:
    """The committed Parquet files of ``kind`` (optionally one revision and/or run), sorted by path.

    Args:
        out: The results folder, or an fsspec URL (``s3://bucket/prefix``: :mod:`tooleval.storage._fs`).

    Returns:
        Local paths for a folder, URLs for a remote ``out``.

    Raises:
        InputFileError: a run's commit marker is unreadable.
    """
    tree = tree_of(out)
    revision_glob = "*" if revision is None else f"dataset_revision={revision}"
    run_glob = "*" if run_id is None else f"run_id={run_id}"
    files: list[str] = []
    markers: dict[str, dict | None] = {}
    for folder in tree.folders(f"{kind}/{revision_glob}/{run_glob}"):
        name = _name(folder)
        if not name.startswith("run_id="):
            continue
        run = name[len("run_id="):]
        if run not in markers:
            markers[run] = read_marker(tree, run)
        marker = markers[run]
        if marker is None:
            files += unmarked_files(tree, folder)
        else:
            files += marker.get("partitions", {}).get(folder, [])
    return sorted(tree.location(name) for name in files)


def _run_of(relpath: str) -> str | None:
    parts = relpath.split("/")
    if parts[0] == "runs" and len(parts) > 2:
        return parts[1]
    if parts[0] in SCHEMAS and len(parts) > 3 and parts[2].startswith("run_id="):
        return parts[2][len("run_id="):]
    return None


def _physical(tree: Tree, relpath: str) -> str:
    run = _run_of(relpath)
    marker = read_marker(tree, run) if run is not None else None
    return (marker or {}).get("documents", {}).get(relpath) or relpath


def document_path(out: str | Path, relpath: str) -> Location:
    """Where the committed content of document ``relpath`` (e.g. ``runs/x/summary.json``) is: the copy the
    run's marker names, else the usual path (runs published before markers, documents outside a run).

    Returns:
        A local path for a folder, a URL for a remote ``out``.

    Raises:
        InputFileError: the run's commit marker is unreadable.
    """
    tree = tree_of(out)
    return tree.location(_physical(tree, relpath))


def read_document(out: str | Path, relpath: str) -> bytes | None:
    """The committed content of document ``relpath`` (see :func:`document_path`), or None when there is none.

    Raises:
        InputFileError: the run's commit marker is unreadable.
        OSError: the document exists but cannot be read.
    """
    tree = tree_of(out)
    try:
        return tree.read_bytes(_physical(tree, relpath))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _pause(point: str) -> None:
    from tooleval.storage._pause import pause_point

    pause_point(point)


def sweep(out: str | Path | Tree, run_id: str, marker: dict, store: Any = None, etag: str | None = None,
          listed: dict[str, list[str]] | None = None, written: dict[str, bytes] | None = None) -> bool:
    """Finish a committed publication: copy each document to its usual name, delete the run's files that the
    marker does not name (older publications, an interrupted one), mark the marker clean. Idempotent; the
    caller holds the run's lease.

    With ``store`` (a :class:`~tooleval.storage._conditional.ConditionalStore`) and ``etag`` (the marker's, as
    committed or read), the marker is marked clean only if it is still that version: a sweep never rewrites a
    marker that another writer committed meanwhile.

    Args:
        listed: The run's partition files as :func:`run_partition_files` listed them while the caller held the
            lease (a publication lists them before its commit to build the marker); None: listed here.
        written: Documents' committed copies whose bytes the caller has (path -> bytes, as it wrote them);
            the others are read.

    Returns:
        Whether ``marker`` is the run's marker, clean, at the end (False: another writer committed meanwhile).
    """
    tree = _tree(out)
    first = True
    for logical, physical in sorted(marker.get("documents", {}).items()):
        data = written[physical] if written and physical in written else tree.read_bytes(physical)
        location = tree.location(logical)
        if isinstance(location, Path) and (location.is_symlink() or not location.is_file()):
            current = None
        else:
            try:
                current = tree.read_bytes(logical)
            except (FileNotFoundError, IsADirectoryError):
                current = None
        if current != data:
            tree.write_bytes(logical, data)
            if first:
                _pause("rolling")
                first = False
    named = {name for files in marker.get("partitions", {}).values() for name in files}
    named |= set(marker.get("documents", {}).values())
    for folder, entries in (run_partition_files(tree, run_id) if listed is None else listed).items():
        for entry in entries:
            name = _name(entry)
            if (name.endswith(".parquet") and entry not in named) or name.endswith(".tmp"):
                tree.delete(entry)
        tree.prune(folder)
    publications = f"runs/{run_id}/{PUBLICATIONS}"
    for entry in tree.walk_files(publications):
        if entry not in named:
            tree.delete(entry)
    tree.remove_empty_folders(publications)
    if marker.get("state") != "clean":
        if store is None or etag is None:
            write_marker(tree, run_id, dict(marker, state="clean"))
            return True
        try:
            commit_marker(tree, run_id, dict(marker, state="clean"), store, etag)
        except MarkerChangedError:
            logger.warning("run %r was committed again while its previous publication was being tidied; the "
                           "newer publication tidies it", run_id)
            return False
    return True


def discard(out: str | Path | Tree, run_id: str) -> None:
    """Delete an uncommitted first publication of ``run_id`` (no marker): its versioned files and documents."""
    tree = _tree(out)
    for folder in run_partition_folders(tree, run_id):
        for entry in tree.files(f"{folder}/*"):
            if VERSIONED.fullmatch(_name(entry)) or entry.endswith(".tmp"):
                tree.delete(entry)
        tree.prune(folder)
    tree.delete_tree(f"runs/{run_id}/{PUBLICATIONS}")


def _needs_work(tree: Tree, run_id: str) -> bool:
    try:
        marker = read_marker(tree, run_id)
    except InputFileError:
        return False  # reported by the command that reads this run
    if marker is not None and marker.get("state") != "clean":
        return True
    used = {physical.split("/")[3] for physical in (marker or {}).get("documents", {}).values()}
    publications = f"runs/{run_id}/{PUBLICATIONS}"
    return any(entry.split("/")[3] not in used for entry in tree.folders(f"{publications}/*"))


def _runs(tree: Tree) -> list[str]:
    """Run ids with a ``runs/<run>/`` folder (a local link there is skipped: never followed)."""
    found = []
    for folder in tree.folders("runs/*"):
        location = tree.location(folder)
        if isinstance(location, Path) and location.is_symlink():
            continue
        found.append(_name(folder))
    return found


def marker_store(lease: Any) -> Any:
    """The :class:`~tooleval.storage._conditional.ConditionalStore` through which the holder of ``lease`` writes
    the run's marker: the lease's own when it was taken with conditional writes, else None (a folder, or a
    store without them)."""
    return getattr(lease, "_store", None) if getattr(lease, "conditional", False) else None


def recover(out: str | Path, runs: list[str] | None = None) -> list[str]:
    """Finish or discard interrupted publications under ``out`` and clean a stale ``.staging``; skip runs a
    live writer holds. Called at the start of every command that reads or writes results (through
    :func:`tooleval.storage._catalog.recover_results`, which names the runs to look at on object storage).

    Args:
        out: The results folder, or an fsspec URL.
        runs: The runs to look at; None: every run with a ``runs/<run>/`` folder.

    Returns:
        The run ids recovered.
    """
    tree = tree_of(out)
    location = tree.location("runs")
    recovered: list[str] = []
    if isinstance(location, Path) and location.is_symlink():
        return recovered
    for run_id in _runs(tree) if runs is None else runs:
        if not _needs_work(tree, run_id):
            continue
        lease = lease_for(out, run_id)
        try:
            if lease.try_acquire() is not None:
                continue
            try:
                store = marker_store(lease)
                marker, etag = read_marker_version(store, run_id) if store else (read_marker(tree, run_id), None)
                if marker is None:
                    discard(tree, run_id)
                else:
                    sweep(tree, run_id, marker, store, etag)
                recovered.append(run_id)
                logger.warning("recovered an interrupted publication of run %r under %s", run_id, out)
            finally:
                lease.release()
        except (OSError, OutFolderError) as exc:
            logger.warning("could not recover run %r under %s: %s", run_id, out, exc)
    if not is_remote(str(out)):
        _clean_staging(Path(tree.location("")))
    return recovered


def _clean_staging(out: Path) -> None:
    """Remove ``.staging`` (left by tooleval versions before commit markers) when no writer is alive."""
    import shutil

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


def new_marker(out: str | Path | Tree, run_id: str, publication: str, revision: str | None, previous: dict | None,
               partitions: dict[str, list[str]], documents: dict[str, str],
               listed: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The marker committing ``publication``: the previous marker's entries overridden by this publication's
    (a run published before markers existed has its files adopted, from ``listed``, the run's partition files
    as :func:`run_partition_files` lists them, listed here when None)."""
    if previous is None:
        listed = run_partition_files(out, run_id) if listed is None else listed
        previous = {"partitions": {folder: _unmarked(files) for folder, files in listed.items()}, "documents": {}}
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
