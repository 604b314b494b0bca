"""Typed errors of tooleval.

Two families, following the exit-code contract of docs/design.md "Bad input and exit codes":

* :class:`InputFileError` and its subclasses are *file or usage* errors. They stop a command before anything
  is written (exit code 2). Each names the file, the line (1-based, when there is one) and the fix.
* :class:`RowError` is a *row* error: the row is still written with what could be read, the error is listed in
  ``runs/<run>/errors.json`` and the run exits 1.

All errors keep their inputs as attributes and pickle cleanly across processes (Prefect may pickle them), which
is why every constructor passes all of its arguments to ``super().__init__``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "ToolevalError",
    "InputFileError",
    "UnsafeRevisionError",
    "RevisionConflictError",
    "RunIdConflictError",
    "RowError",
    "json_problem",
]


def json_problem(exc: Exception, *, column: bool = True) -> str:
    """What a JSON reader's error says, as a phrase to put after "not valid JSON": Python's
    ``json.JSONDecodeError`` ``"Unterminated string starting at: line 1 column 18 (char 17)"`` becomes
    ``"Unterminated string starting at column 18"``, ``"Expecting value: ..."`` becomes ``"Expecting value at column
    1"``. The line is left out: the caller names the file's line itself. ``column=False``: no place at all
    (``"Unterminated string"``), for a reason that counts like lines together. Any other error: its text up to a
    colon."""
    msg, number = getattr(exc, "msg", None), getattr(exc, "colno", None)
    if not isinstance(msg, str) or not isinstance(number, int):
        return str(exc).split(":")[0] or type(exc).__name__
    if not column:
        return msg.removesuffix(" at").removesuffix(" starting")
    return f"{msg} column {number}" if msg.endswith(" at") else f"{msg} at column {number}"


class ToolevalError(Exception):
    """Base class of every error tooleval raises on purpose."""


class InputFileError(ToolevalError):
    """A file or usage error: nothing is written, the command exits 2.

    Attributes:
        path: The offending file (or folder); ``None`` for a pure usage error.
        line: 1-based line number inside ``path``; ``None`` when the error is not tied to a line.
        problem: What is wrong, in one sentence.
        fix: What the user should do about it.
    """

    def __init__(self, path: str | Path | None, line: int | None, problem: str, fix: str) -> None:
        super().__init__(path, line, problem, fix)
        self.path = None if path is None else str(path)
        self.line = line
        self.problem = problem
        self.fix = fix

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        return f"{where}{self.problem} Fix: {self.fix}"


class UnsafeRevisionError(InputFileError):
    """A dataset revision or run id that is not a safe partition value (docs/design.md "Dataset folder")."""


class RevisionConflictError(InputFileError):
    """A revision name already written with different dataset content (bump the revision)."""


class RunIdConflictError(InputFileError):
    """A run id already used for another dataset revision (run ids are unique across revisions)."""


def _writable(text: Any) -> Any:
    """Text as UTF-8 can hold it: a lone surrogate written as its escape (``A\\udbff``); other values as they
    are. The same as :func:`tooleval.canonical.writable_text`, which this layer cannot import."""
    if not isinstance(text, str) or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class RowError(ToolevalError):
    """A problem confined to one (case, trial) row or one trace line.

    Attributes:
        kind: Closed vocabulary: ``unknown_case`` (a trace whose case id is not in the dataset),
            ``missing_trace`` (a case with no trace), ``bad_trace`` (a trace line that could be read as JSON but
            not as a recorded trace), ``scoring_error`` (scoring raised on this row), ``generation_error``.
        case_id: The case id concerned, when known.
        trial: The trial index, when known.
        message: Human-readable detail.
        path: The file the problem was found in, when there is one.
        line: 1-based line number inside ``path``.
    """

    def __init__(
        self,
        kind: str,
        case_id: str | None,
        trial: int | None,
        message: str,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        # a trace line's case id may hold a lone surrogate (decoded from an escape; no case can): the error row
        # that names it must still be writable to Parquet and JSON, or that one line stops the whole run
        case_id, message, path = (_writable(text) for text in (case_id, message, path))
        super().__init__(kind, case_id, trial, message, path, line)
        self.kind = kind
        self.case_id = case_id
        self.trial = trial
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        return f"{self.kind}: case {self.case_id!r} trial {self.trial}: {self.message}"

    def to_dict(self) -> dict:
        """Return the JSON shape written to ``errors.json``."""
        return {
            "kind": self.kind,
            "case_id": self.case_id,
            "trial": self.trial,
            "message": self.message,
            "path": self.path,
            "line": self.line,
        }
