"""Per-item generation cache on disk: resume a crashed run without paying for finished generations.

Prefect caches a generation *shard* only when the whole shard task finishes. A live shard can take minutes, so a
crash (SIGKILL, OOM, a lost node) in the middle would throw away every finished call of that shard. The
:class:`GenerationStore` keeps each finished item's generation record as its own file, written the moment the item
finishes, keyed by :func:`item_key` = (case content digest, agent digest, trial, seed). A rerun looks every item
up first and generates only what is missing.

Layout: ``<root>/<key[:2]>/<key>.json`` holding ``{"store_version": 1, "key", "record"}``. Each file is written to
a temporary name in the same folder, flushed, fsynced and renamed with :func:`os.replace`, so a file that exists
under its final name is complete; a temporary file left by a killed process is ignored. Only successful records
(``error`` null) are stored: a failed item is retried by the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tooleval.agents._replay import WorkItem
from tooleval.canonical import canonical_json

__all__ = ["GenerationStore", "item_key", "STORE_VERSION"]

STORE_VERSION = 1
"""Version of the file shape; a file of another version is treated as missing (regenerated), never misread."""


def item_key(item: WorkItem, agent_digest: str) -> str:
    """The cache key of one generation.

    Args:
        item: The work item (its ``case_digest``, ``trial`` and ``seed`` are used; ``case_id`` is not, because the
            content digest already identifies the case).
        agent_digest: What generates: :func:`tooleval.agents.generation_digest` for the live agent (agent config
            + offered tools + executor), or any stable 64-hex digest of another agent's configuration.

    Returns:
        64 hex characters: sha256 of the canonical JSON ``{"agent", "case", "seed", "trial"}``.
    """
    content = {"case": item.case_digest, "agent": agent_digest, "trial": item.trial, "seed": item.seed}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


class GenerationStore:
    """A folder of finished generation records, one JSON file per :func:`item_key`.

    Safe for concurrent writers (threads or processes): every write is an atomic rename, and two writers of the
    same key write the same finished record, so whichever rename lands last is as good as the first.

    Args:
        root: Folder of the store (created on first write), e.g. ``<out>/.tooleval/generations``.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """Where the record of ``key`` lives: ``<root>/<key[:2]>/<key>.json``.

        Raises:
            ValueError: ``key`` is not 64 lowercase hex characters (a key never names a path outside the store).
        """
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"a generation store key is 64 lowercase hex characters, got {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored generation record of ``key``, or ``None`` when there is none.

        A file that cannot be read as a record of this store version (which atomic writes should make
        impossible) also reads as ``None``, so the item is simply generated again and the file overwritten.

        Returns:
            ``{case_id, trial, seed, payload_json, error}`` with ``error`` ``None``.
        """
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict) or data.get("store_version") != STORE_VERSION or data.get("key") != key:
            return None
        record = data.get("record")
        return record if isinstance(record, dict) and record.get("error") is None else None

    def put(self, key: str, record: dict[str, Any]) -> Path:
        """Store one finished, successful generation record atomically.

        Args:
            key: :func:`item_key` of the record's work item.
            record: ``{case_id, trial, seed, payload_json, error}`` with ``error`` ``None``.

        Returns:
            The path of the written file.

        Raises:
            ValueError: the record carries an error or no payload (failed items are not cached, they are retried).
        """
        if record.get("error") is not None or record.get("payload_json") is None:
            raise ValueError("only successful generation records (error null, payload present) are stored")
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"store_version": STORE_VERSION, "key": key, "record": record}, ensure_ascii=False)
        handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as tmp:
                tmp.write(text)
                tmp.flush()
                os.fsync(tmp.fileno())
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return path

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        """Number of stored records (temporary files of interrupted writes are not counted)."""
        return sum(1 for p in self.root.glob("??/*.json") if not p.name.startswith(".")) if self.root.is_dir() else 0
