"""Input files read whole, but never more than a cap.

A file read in one piece (``dataset.json``, ``tools.json``, ``gate.toml``, an importer's JSON export) is read up
to its cap and one byte more: a file past the cap — or a device that never ends, such as ``/dev/zero`` named as
a file — is refused with the file named and the fix, instead of growing the process until the kernel kills it.
JSON lines files are read a line at a time and capped per line (:func:`tooleval.settings.max_line_bytes`); the
whole-file cap is that same number, so one setting, ``$TOOLEVAL_MAX_LINE_BYTES``, raises both.
"""

from __future__ import annotations

from pathlib import Path

from tooleval.errors import InputFileError

__all__ = ["max_document_bytes", "read_bounded"]


def max_document_bytes() -> int:
    """The largest whole-file input read, in bytes: :func:`tooleval.settings.max_line_bytes` (64 MiB by default).

    Raises:
        tooleval.settings.EnvironmentValueError: ``$TOOLEVAL_MAX_LINE_BYTES`` is not a valid number of bytes.
    """
    from tooleval.settings import max_line_bytes

    return max_line_bytes()


def read_bounded(path: str | Path, limit: int | None = None, *, what: str = "the file") -> bytes:
    """The bytes of ``path``, read whole when it holds at most ``limit`` bytes.

    Args:
        path: The file.
        limit: The cap in bytes; ``None``: :func:`max_document_bytes`.
        what: How messages name the file's role (``"the gate config"``).

    Raises:
        FileNotFoundError: ``path`` does not exist (callers word that case themselves).
        InputFileError: ``path`` holds more than ``limit`` bytes (naming the cap and how to raise it), or another
            ``OSError`` (a folder, no permission).
    """
    from tooleval.settings import MAX_LINE_ENV

    cap = max_document_bytes() if limit is None else limit
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(cap + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputFileError(path, None, f"cannot read {what} ({exc.strerror or exc}).",
                             "check that it is a readable file.") from None
    if len(data) > cap:
        raise InputFileError(path, None, f"{what} is larger than {cap:,} bytes, the most read as one document "
                             "(is it the right file?).",
                             f"point at the right file, or raise the cap with {MAX_LINE_ENV}=<bytes>.")
    return data
