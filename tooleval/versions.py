"""Version identifiers recorded on rows and used in cache keys.

Prefect's ``TASK_SOURCE`` policy hashes only a task function's own text, so a change in a helper module the
task calls would not invalidate cached scores (PrefectHQ/prefect issues 16925 and 23062). The scorer
version is therefore a digest of the *whole* ``tooleval`` package source: any change to any module that scoring
can reach yields a new version, a new cache key, and a re-score.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["tooleval_version", "source_digest", "scorer_version"]

_PACKAGE_DIR = Path(__file__).resolve().parent


def tooleval_version() -> str:
    """The installed distribution version of tooleval (``"0+unknown"`` when run from a bare checkout)."""
    try:
        return version("tooleval")
    except PackageNotFoundError:
        return "0+unknown"


def source_digest(package_dir: Path) -> str:
    """sha256 over every ``*.py`` file under ``package_dir`` (relative path + bytes, in sorted order).

    Args:
        package_dir: Root folder of a Python package.

    Returns:
        64 hex characters.
    """
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def scorer_version() -> str:
    """``"<tooleval version>+<first 12 hex of the package source digest>"``, e.g. ``"0.1.0+3f2a9c0d1e2b"``."""
    return f"{tooleval_version()}+{source_digest(_PACKAGE_DIR)[:12]}"
