"""The filesystem a DuckDB connection reads an object store through: the store's own fsspec filesystem, with what
it knows of the files the connection's queries name read once, from one listing of each folder that holds them.

DuckDB asks a registered filesystem, for every file of every query, whether it exists, its size, its modification
time and (to open it) its details again: about six metadata requests (``HEAD``) per file per query on S3 or GCS.
The publication of one 20,000-row run sent 6,784 of them for its 32 row files; on a real bucket each is a round
trip of tens of milliseconds. Published Parquet parts are never rewritten (each has a name of its own), so what one
listing said of them holds for the connection's life: one ``LIST`` per folder replaces those requests.

A file the listing did not show (written after it) is asked of the store itself, as before.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from fsspec import AbstractFileSystem

__all__ = ["ListedFiles", "urls_in_sql"]

_QUOTED_URL = re.compile(r"'((?:[A-Za-z][A-Za-z0-9+.-]*)://(?:[^']|'')*)'")
_WILDCARD = re.compile(r"[*?\[]")


def urls_in_sql(sql: str) -> list[str]:
    """Every quoted URL (``'s3://…'``) of a SQL text, unquoted; ``''`` inside a literal is one quote."""
    return [match.replace("''", "'") for match in _QUOTED_URL.findall(sql)]


class ListedFiles(AbstractFileSystem):
    """``fs`` for the files at ``urls``: their details come from one listing of each folder that holds them.

    Args:
        fs: The store's fsspec filesystem (``s3fs``, ``gcsfs``, ...); every other call goes to it.
        urls: Files (URLs or paths on ``fs``) the connection will read, or patterns (``*``, ``?``, ``[``) in their
            last part (``…/run_id=a/*.parquet``), matched against the same listing; a pattern in a folder's name is
            left to ``fs``.

    Raises:
        Whatever ``fs.ls`` raises for a folder it cannot list (the connection would have failed on its files).
    """

    cachable = False  # one instance per connection: fsspec's instance cache would hand it to the next one

    def __init__(self, fs: Any, urls: Iterable[str]) -> None:
        super().__init__()
        self.fs = fs
        self.protocol = fs.protocol
        self._strip_protocol = fs._strip_protocol  # type: ignore[method-assign]
        self._known: dict[str, dict] = {}
        self._listed: set[str] = set()
        folders = {fs._parent(path) for path in map(fs._strip_protocol, urls)}
        for folder in sorted(f for f in folders if not _WILDCARD.search(f)):
            try:
                entries = fs.ls(folder, detail=True, refresh=True)
            except FileNotFoundError:
                continue  # a folder not there: its files are not either, which the store then says
            self._listed.add(folder)
            for entry in entries:
                if entry.get("type") == "file":
                    self._known[entry["name"]] = entry

    def _details(self, path: str) -> dict | None:
        return self._known.get(self.fs._strip_protocol(path))

    def info(self, path: str, **kwargs: Any) -> dict:
        return self._details(path) or self.fs.info(path, **kwargs)

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self._details(path) is not None or self.fs.exists(path, **kwargs)

    def isfile(self, path: str) -> bool:
        return self._details(path) is not None or self.fs.isfile(path)

    def size(self, path: str) -> int | None:
        details = self._details(path)
        return details["size"] if details is not None else self.fs.size(path)

    def modified(self, path: str) -> Any:
        details = self._details(path)
        stamp = None if details is None else details.get("LastModified")  # S3's listing has it; others ask
        return stamp if stamp is not None else self.fs.modified(path)

    def glob(self, path: str, **kwargs: Any) -> Any:
        stripped = self.fs._strip_protocol(path)
        folder = self.fs._parent(stripped)
        if kwargs.get("detail") or kwargs.get("maxdepth") is not None or folder not in self._listed:
            return self.fs.glob(path, **kwargs)
        if not _WILDCARD.search(stripped):
            return [stripped] if stripped in self._known else self.fs.glob(path, **kwargs)
        # a pattern in the last part only (the folder has no wildcard: it was listed); "**" is left to the store
        name = stripped[len(folder) + 1:]
        if "**" in name:
            return self.fs.glob(path, **kwargs)
        return sorted(known for known in self._known
                      if self.fs._parent(known) == folder and fnmatch.fnmatchcase(known[len(folder) + 1:], name))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        return self.fs.ls(path, detail=detail, **kwargs)

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        details = self._details(path)
        if mode == "rb" and details is not None and "size" not in kwargs:
            kwargs["size"] = details["size"]  # the file's size known: opening it asks the store nothing
        return self.fs.open(path, mode, **kwargs)
