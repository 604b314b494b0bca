"""The run catalog of results on object storage: one small object, ``<out>/.tooleval/catalog.json``, that lists
every committed run with what ``tooleval runs`` shows of it, so that listing the runs of a bucket with thousands of
them is one GET instead of a listing and two reads per run::

    {"format": 1, "runs": {"<run>": {"publication", "committed_at", "dataset_revision", "completed_at", "rows",
                                     "mean_f1", "gate": "PASS" | "FAIL" | null, "drift", "summary": bool,
                                     "pending"?: "<publication>" | "delete"}}}

(``summary``: whether the run has a committed ``summary.json``; ``tooleval runs`` lists only those, as in a folder.)

It is a cache of the commit markers, which stay the truth: a missing, unreadable or older-format catalog is rebuilt
from them (one listing of ``runs/`` and two reads per run, once). Every change is a read and a whole-object write
conditional on the ETag read (``If-Match``; ``If-None-Match: *`` to create it), retried when another writer changed
it in between, so concurrent commits never lose each other's entries; on a store without conditional writes the
change is a plain write (two commits at the same moment may then lose one entry until the catalog is rebuilt).

A change of a run is written ahead: a publication notes ``pending: <publication>`` before its marker and records the
run once it has committed and tidied (a deletion notes ``pending: "delete"``). A writer killed in between leaves the
note, which readers resolve from the run's marker (:meth:`RunCatalog.runs`) and the next command's recovery settles
(:func:`recover_results`); recovery on object storage looks only at such runs and at runs whose
lease is still there, never at every run. A folder ``--out`` has no catalog: listing a folder is cheap.
"""

from __future__ import annotations

import json
import logging
import random
import time
from typing import Any, Callable

from tooleval.storage._fs import RemoteTree, Tree

__all__ = ["CATALOG", "CATALOG_FORMAT", "RunCatalog", "catalog_for", "catalog_entry", "entry_from", "recover_results",
           "lease_runs"]

logger = logging.getLogger(__name__)

CATALOG = ".tooleval/catalog.json"
CATALOG_FORMAT = 1
DELETE = "delete"
"""The ``pending`` note of a run being deleted (no publication id is this word: they are 32 hex digits)."""
_ATTEMPTS = 20
"""Times a change is retried when another writer changed the catalog between its read and its write."""


def catalog_entry(marker: dict, summary: dict | None) -> dict[str, Any]:
    """A run's catalog entry from its commit marker and its committed ``summary.json`` (``None``: it has none)."""
    s = summary or {}
    gate = s.get("gate")
    return {"publication": marker.get("publication"), "committed_at": marker.get("committed_at"),
            "dataset_revision": s.get("dataset_revision", marker.get("dataset_revision") or ""),
            "completed_at": s.get("completed_at"), "rows": s.get("rows"), "mean_f1": s.get("mean_f1"),
            "gate": None if not gate else ("PASS" if gate.get("passed") else "FAIL"),
            "drift": (s.get("drift") or {}).get("verdict"), "summary": summary is not None}


def entry_from(marker: dict, summary: bytes | None) -> dict[str, Any]:
    """:func:`catalog_entry` of a marker and the bytes of its committed ``summary.json`` (None: it has none; bytes
    that are no JSON object count as none)."""
    try:
        parsed = None if summary is None else json.loads(summary)
    except ValueError:
        parsed = None
    return catalog_entry(marker, parsed if isinstance(parsed, dict) else None)


def _kept(entry: dict) -> dict:
    """What the catalog keeps of an entry read from a marker (not whether the marker was tidied then)."""
    return {k: v for k, v in entry.items() if k != "tidy"}


class RunCatalog:
    """The catalog of one results URL (see the module docstring).

    Args:
        tree: The results tree on object storage.
    """

    def __init__(self, tree: RemoteTree) -> None:
        from tooleval.storage._conditional import conditional_store

        self.tree = tree
        self.store = conditional_store(tree) if tree.protocol in ("s3", "s3a") else None
        self._written: tuple[dict, str] | None = None
        """The runs this object last wrote and their ETag (conditional writes only): the next change starts from
        them, its write conditional on that version, and reads the catalog only when another writer changed it."""

    # reading and writing the object

    def _get(self) -> tuple[dict | None, str | None]:
        """``(runs, etag)``; runs None when the catalog is absent, unreadable or of another format."""
        if self.store is not None:
            found = self.store.get(CATALOG)
            data, etag = (None, None) if found is None else found
        else:
            try:
                data, etag = self.tree.read_bytes(CATALOG), None
            except FileNotFoundError:
                data, etag = None, None
        if data is None:
            return None, None
        try:
            document = json.loads(data)
        except ValueError:
            return None, etag or "*"
        if not isinstance(document, dict) or document.get("format") != CATALOG_FORMAT \
                or not isinstance(document.get("runs"), dict):
            return None, etag or "*"  # rebuilt and written over (an older or newer format, or damaged)
        return document["runs"], etag or "*"

    def _put(self, runs: dict, etag: str | None) -> bool:
        """Write ``runs`` if the catalog is still the version read (``etag``; None: absent). False when another
        writer changed it first."""
        from tooleval.storage._conditional import ConditionsUnsupported, PreconditionFailed, mark_unsupported

        data = (json.dumps({"format": CATALOG_FORMAT, "runs": runs}, sort_keys=True, separators=(",", ":"))
                + "\n").encode()
        if self.store is not None:
            try:
                written = self.store.put(CATALOG, data, if_match=None if etag in (None, "*") else etag,
                                         create=etag is None)
            except PreconditionFailed:
                self._written = None
                return False
            except ConditionsUnsupported as exc:
                mark_unsupported(self.store, str(exc))
                self.store = None
            else:
                self._written = (runs, written)
                return True
        self._written = None
        self.tree.write_bytes(CATALOG, data)
        return True

    def update(self, change: Callable[[dict], dict]) -> dict:
        """Apply ``change`` (runs -> runs) to the catalog, rebuilt first when it is missing, as one conditional
        write, retried while other writers change it in between. Returns the runs written.

        Raises:
            OSError / OutFolderError: the store cannot be read or written.
        """
        if self._written is not None:
            runs, etag = self._written
            changed = change(dict(runs))
            if self._put(changed, etag):
                return changed
        for attempt in range(_ATTEMPTS):
            runs, etag = self._get()
            if runs is None:
                runs = self._rebuilt()
            changed = change(dict(runs))
            if self._put(changed, etag):
                return changed
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # another writer's change landed first
        raise OSError(f"{self.tree.location(CATALOG)}: changed by other writers {_ATTEMPTS} times in a row")

    # what a run is, from its marker

    def _entry(self, run_id: str) -> dict | None:
        """The run's entry from its marker and summary (None: no marker, the run is not committed); its
        ``tidy`` says whether the marker's publication is finished (``state: clean``)."""
        from tooleval.storage._commit import read_marker

        marker = read_marker(self.tree, run_id)
        if marker is None:
            return None
        logical = f"runs/{run_id}/summary.json"
        try:
            summary = self.tree.read_bytes(marker.get("documents", {}).get(logical) or logical)
        except FileNotFoundError:
            summary = None
        return {**entry_from(marker, summary), "tidy": marker.get("state") == "clean"}

    def _rebuilt(self) -> dict:
        """Every committed run's entry, from the markers (a listing of ``runs/`` and two reads per run)."""
        from tooleval.errors import InputFileError

        runs: dict = {}
        for folder in self.tree.folders("runs/*"):
            run_id = folder.rsplit("/", 1)[-1]
            try:
                entry = self._entry(run_id)
            except InputFileError:  # an unreadable marker: the commands that read the run say so
                continue
            if entry is not None:
                runs[run_id] = _kept(entry)
        logger.info("rebuilt the run catalog of %s from %d commit marker(s)", self.tree.url, len(runs))
        return runs

    # the steps of a publication or a deletion

    def note_pending(self, run_id: str, publication: str) -> None:
        """Before a commit (``publication``) or a deletion (:data:`DELETE`) of ``run_id``: note it pending."""
        self.update(lambda runs: {**runs, run_id: {**runs.get(run_id, {}), "pending": publication}})

    def settle(self, run_id: str, entry: dict | None = None) -> None:
        """After a commit, a deletion or a recovery of ``run_id``: its entry from its marker, no note pending
        (removed when it has no marker).

        Args:
            entry: The run's entry (:func:`entry_from`) when the caller knows its marker as it now is and its
                summary (a publication that has just committed and tidied them); None: read from the store.
        """
        entry = self._entry(run_id) if entry is None else entry
        entry = None if entry is None else _kept(entry)

        def change(runs: dict) -> dict:
            runs.pop(run_id, None)
            return runs if entry is None else {**runs, run_id: entry}

        self.update(change)

    def pending(self) -> list[str]:
        """The runs noted pending (a change in progress, or left by a killed writer); [] without a catalog."""
        runs, _ = self._get()
        return sorted(run for run, entry in (runs or {}).items() if entry.get("pending"))

    def exists(self) -> bool:
        """Whether a readable catalog of this format is there."""
        return self._get()[0] is not None

    def runs(self) -> dict[str, dict]:
        """Every committed run's entry (run id -> entry, without notes): the catalog, rebuilt and written when
        missing; a run noted pending is read from its marker (what is committed now), and settled in the catalog
        when its writer is gone and the marker is tidied.

        Raises:
            OSError: the store cannot be read.
        """
        from tooleval.storage._lease import holder_alive, read_lease

        runs, etag = self._get()
        if runs is None:
            runs = self._rebuilt()
            if not self._put(runs, etag):
                logger.info("another writer wrote the run catalog of %s first; its listing is read next time",
                            self.tree.url)
        listed: dict[str, dict] = {}
        for run_id, entry in runs.items():
            note = entry.get("pending")
            if not note:
                listed[run_id] = entry
                continue
            current = self._entry(run_id)
            if current is not None:
                listed[run_id] = current
            lease = read_lease(self.tree.url, run_id)
            # a publication not yet tidied stays noted: the next command's recovery finishes it, then settles it
            if (lease is None or not holder_alive(lease)) and (current is None or current["tidy"]):
                try:
                    self.settle(run_id)
                except OSError as exc:
                    logger.warning("could not settle run %r in the run catalog of %s: %s", run_id, self.tree.url,
                                   exc)
        return {run: {k: v for k, v in entry.items() if k not in ("pending", "tidy")} for run, entry in listed.items()}


def catalog_for(out: Any) -> RunCatalog | None:
    """The :class:`RunCatalog` of a results URL (or its tree); None for a folder."""
    from tooleval.storage._fs import tree_of

    tree: Tree = out if isinstance(out, RemoteTree) else (None if hasattr(out, "write_bytes") else tree_of(out))
    return RunCatalog(tree) if isinstance(tree, RemoteTree) else None


def lease_runs(tree: RemoteTree) -> list[str]:
    """The runs whose lease object is under ``.tooleval/locks/`` (held now, or left by a writer that was killed):
    one listing of the leases, not of the runs."""
    names = (path.rsplit("/", 1)[-1] for path in tree.files(".tooleval/locks/*.json"))
    return sorted(name[:-len(".json")] for name in names if not name.startswith("."))


def recover_results(out: Any) -> list[str]:
    """:func:`tooleval.storage._commit.recover` of ``out``: every run of a folder; on object storage with a run
    catalog only the runs noted pending in it and those whose lease object is left (what a killed writer leaves),
    each settled in the catalog once recovered; without a catalog, every run (once: the next ``tooleval runs``
    writes the catalog).

    Returns:
        The run ids recovered.
    """
    from tooleval.errors import InputFileError
    from tooleval.storage._commit import recover

    catalog = catalog_for(out)
    if catalog is None or not catalog.exists():
        return recover(out)
    recovered = recover(out, sorted(set(catalog.pending()) | set(lease_runs(catalog.tree))))
    for run_id in recovered:
        try:
            catalog.settle(run_id)
        except (OSError, InputFileError) as exc:
            logger.warning("run %r: the run catalog was not updated after recovery (%s)", run_id, exc)
    return recovered
