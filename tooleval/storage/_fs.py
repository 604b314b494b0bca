"""Where results live: a local folder or an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``file://…``).

``--out`` may name object storage (issue 10). The readers of published results (:func:`committed_files`,
:func:`tooleval.storage.connect`) go through a :class:`Tree`: a :class:`LocalTree` over :mod:`pathlib` for a
folder (exactly the behaviour of a local ``--out``), a :class:`RemoteTree` over an fsspec filesystem for a URL.
Credentials and endpoints come from the filesystem's standard environment (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``, as botocore reads them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

__all__ = ["Location", "is_remote", "as_location", "Tree", "LocalTree", "RemoteTree", "tree_of"]

Location = Path | str
"""A local folder (:class:`~pathlib.Path`) or a remote URL (``str``, no trailing ``/``)."""

_URL = re.compile(r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)")


def is_remote(location: str | Path) -> bool:
    """True for a URL other than ``file://`` (``s3://…``, ``gs://…``, ``memory://…``)."""
    match = _URL.fullmatch(str(location)) if isinstance(location, str) else None
    return match is not None and match["protocol"].lower() != "file"


def as_location(value: str | Path) -> Location:
    """``value`` as a :data:`Location`: ``file:///x`` and plain paths become a ``Path``; other URLs stay text.

    Raises:
        ValueError: a URL without a bucket or path (``s3://``).
    """
    if isinstance(value, Path):
        return value
    match = _URL.fullmatch(value)
    if match is None:
        return Path(value)
    if match["protocol"].lower() == "file":
        return Path(match["rest"] or "/")
    if not match["rest"].strip("/"):
        raise ValueError(f"{value!r} names no bucket or folder; pass e.g. s3://bucket/results")
    return f"{match['protocol'].lower()}://{match['rest'].rstrip('/')}"


class Tree(Protocol):
    """Read-only view of a results tree by ``/``-separated relative paths."""

    def folders(self, pattern: str) -> list[str]:
        """Relative paths of the folders matching the glob ``pattern``, sorted."""
        ...

    def files(self, pattern: str) -> list[str]:
        """Relative paths of the files matching the glob ``pattern``, sorted."""
        ...

    def read_bytes(self, relpath: str) -> bytes:
        """The bytes at ``relpath``.

        Raises:
            FileNotFoundError: nothing there; OSError: unreadable.
        """
        ...

    def location(self, relpath: str) -> Location:
        """``relpath`` as a local path or a URL that a reader (pyarrow, DuckDB with the filesystem) opens."""
        ...


class LocalTree:
    """A local results folder (:mod:`pathlib`)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _matches(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern))

    def folders(self, pattern: str) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self._matches(pattern) if p.is_dir()]

    def files(self, pattern: str) -> list[str]:
        return [p.relative_to(self.root).as_posix() for p in self._matches(pattern) if p.is_file()]

    def read_bytes(self, relpath: str) -> bytes:
        return (self.root / relpath).read_bytes()

    def location(self, relpath: str) -> Path:
        return self.root / relpath


class RemoteTree:
    """A results prefix on an fsspec filesystem (``s3://bucket/prefix``)."""

    def __init__(self, url: str, fs: Any = None) -> None:
        import fsspec

        self.url = url
        self.protocol = url.split("://", 1)[0]
        self.fs, self.root = fsspec.core.url_to_fs(url) if fs is None else (fs, fs._strip_protocol(url))
        self.root = self.root.rstrip("/")

    def _relative(self, path: str) -> str:
        return path[len(self.root) + 1:]

    def _glob(self, pattern: str, kind: str) -> list[str]:
        found = self.fs.glob(f"{self.root}/{pattern}", detail=True)
        return sorted(self._relative(path) for path, info in found.items() if info.get("type") == kind)

    def folders(self, pattern: str) -> list[str]:
        return self._glob(pattern, "directory")

    def files(self, pattern: str) -> list[str]:
        return self._glob(pattern, "file")

    def read_bytes(self, relpath: str) -> bytes:
        return self.fs.cat_file(f"{self.root}/{relpath}")

    def location(self, relpath: str) -> str:
        return f"{self.protocol}://{self.root}/{relpath}"


def tree_of(out: str | Path) -> Tree:
    """The :class:`Tree` of a results location (see :func:`as_location`)."""
    location = as_location(out)
    return RemoteTree(location) if isinstance(location, str) else LocalTree(location)
