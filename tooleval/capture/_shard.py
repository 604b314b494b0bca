"""Trace capture of one shard, batch by batch: each generation record's trace decoded once (a replayed line read
in bulk with its neighbours), redacted, and its envelope and view values appended as one row to the stage file's next
record batch (:class:`tooleval.capture.envelope.EnvelopeColumns`), which becomes Arrow columns at once.

What trace capture writes is documented in ``tasks/capture.py``; this module is how, without a record per row in
between and with what depends on one value computed once per distinct value of the shard.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator

import pyarrow as pa

from tooleval.canonical import dumps_text, loads_text
from tooleval.capture.envelope import EnvelopeColumns, _recorded_trace
from tooleval.capture.redaction import Redactor
from tooleval.capture.recorded import TraceLine, line_problem, plain_trace_shape, redaction_error
from tooleval.storage.stages import STAGE_GROUP_TEXT, STAGE_ROW_GROUP

__all__ = ["capture_tables"]

Redact = Callable[[dict[str, Any], Any], dict[str, Any]]
"""``(trace, case or a function returning it) -> the redacted trace`` (with its ``redacted_fields``)."""


def capture_tables(records: Iterable[dict[str, Any]], captured_at: datetime, tool_schema_version: str | None,
                   kept: Collection[str] | None, *,
                   lines: tuple[Path, Iterator[TraceLine | None], list[Any]] | None = None,
                   redact: Redact | None = None, case_of: Callable[[str], Any] | None = None,
                   untouched: Callable[[bytes], bool] | None = None) -> Iterator[pa.Table]:
    """The capture stage file's record batches, as tables of :data:`tooleval.storage.CAPTURE_SCHEMA`, each closed
    at :data:`~tooleval.storage.stages.STAGE_ROW_GROUP` rows or :data:`~tooleval.storage.stages.STAGE_GROUP_TEXT`
    characters of JSON text (as :func:`~tooleval.storage.stages.write_stage_table` groups records).

    Args:
        records: The generation records, in the generation file's order (a generator is consumed once).
        captured_at: Timezone-aware UTC capture time.
        tool_schema_version: Recorded for a trace that does not name its own.
        kept: The tools whose result texts the transcript view keeps; ``None``: every tool's.
        lines: For a generation file that refers to recorded lines: the traces file, each work item's line
            (:func:`tooleval.agents.replay_lines`) and the work items (:class:`tooleval.agents.WorkItem`), in the
            generation file's order.
        redact: Applied to each replayed line's values (a live response was redacted by the generation stage).
        case_of: Case id -> its case (for the redaction's markers; looked up only for a trace with secrets).
        untouched: Whether ``redact`` provably leaves a trace as it is, judged on orjson's writing of the whole
            line (:meth:`tooleval.capture.redaction.Redactor.untouched_text`): such a line is not redacted.

    Raises:
        ValueError: a record refers to a recorded line and ``lines`` is ``None``, or the records are not the work
            items in order.
        tooleval.errors.InputFileError: the traces file changed after the run was planned.
    """
    columns = EnvelopeColumns(captured_at, tool_schema_version, kept)
    path, found, items = lines if lines is not None else (None, None, None)
    item_list = iter(items) if items is not None else None
    for record in records:
        refers = bool(record.get("line_digest")) and record.get("payload_json") is None
        if item_list is not None:
            item = next(item_list, None)
            if item is None or (record["case_id"], record["trial"]) != (item.case_id, item.trial):
                raise ValueError("the generation stage file does not list the shard's work items in order")
            line = next(found)  # one per work item, in order, whether or not this record refers to it
            if refers:
                _add_line(columns, path, line, item, redact, case_of, untouched)
                refers = False
                record = None
        elif refers and record.get("error") is None:
            raise ValueError("the generation stage file refers to recorded trace lines: pass replay=ReplayedLines(...) "
                             "naming the traces file")
        if record is not None:
            _add_record(columns, record)
        if len(columns) >= STAGE_ROW_GROUP or columns.text >= STAGE_GROUP_TEXT:
            yield columns.table()
            columns.clear()
    if len(columns):
        yield columns.table()


def _same_values(redacted: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether the redaction kept every value of ``data`` as it is (the same objects): then the redacted trace has
    the shape the line was found to have."""
    for key, value in data.items():
        if redacted.get(key, _ABSENT) is not value:
            return False
    return True


_ABSENT = object()
_NOTHING_WRITTEN: dict[str, bytes] = {}
"""What an unredacted line's redaction wrote (nothing; read only, shared by such lines)."""
_BY_PARTS = Redactor.redact_trace_values


def _add_record(columns: EnvelopeColumns, record: dict[str, Any]) -> None:
    """A generation record that holds its response (a live agent's redacted text) or only its error."""
    text = record.get("payload_json")
    if text is None:
        columns.add_failed(record["case_id"], record["trial"], record.get("error"))
        return
    payload = loads_text(text)
    redacted = payload.pop("redacted_fields", None)
    columns.add_model(_recorded_trace(payload), redacted, record.get("error"))


def _add_line(columns: EnvelopeColumns, path: Path, line: TraceLine | None, item: Any,
              redact: Redact | None, case_of: Callable[[str], Any] | None,
              untouched: Callable[[bytes], bool] | None = None) -> None:
    """A replayed line's row: its error when it is not a valid trace, else its redacted envelope."""
    key = (item.case_id, item.trial)
    if line is None:
        columns.add_failed(key[0], key[1], f"generation_error: no recorded response for case {key[0]!r} trial "
                                           f"{key[1]}")
        return
    error, plain = line_problem(path, line, key)
    if error is not None:
        columns.add_failed(key[0], key[1], error)
        return
    data = line.data
    written: dict[str, bytes] = _NOTHING_WRITTEN
    if redact is not None and untouched is not None and line.written is not None and untouched(line.written):
        # redaction would return the same values with no redacted field (replacing any the line names)
        if "redacted_fields" in data:
            data = {**data, "redacted_fields": []}
    elif redact is not None:
        written = {}
        try:
            case = (lambda: case_of(key[0])) if case_of is not None else None
            # the run's redactor also hands back the messages' writing it made part by part
            data = redact(data, case, written=written) if getattr(redact, "__func__", None) is _BY_PARTS \
                else redact(data, case)
        except (ValueError, RecursionError) as exc:  # UnicodeError is a ValueError
            columns.add_failed(key[0], key[1], redaction_error(key, exc, f"line {line.line} of {path}", str(path),
                                                                 line.line))
            return
    try:
        if plain and (data is line.data or _same_values(data, line.data) or plain_trace_shape(data)):
            columns.add_values(data, messages_json=written.get("messages"))
        else:
            payload = dict(data)
            redacted = payload.pop("redacted_fields", None)
            columns.add_model(_recorded_trace(payload), redacted)
    except (ValueError, RecursionError):
        # values that cannot be written as they are (nesting beyond Python's recursion limit): the way of their
        # text, which makes the row's error when the text cannot be written either
        try:
            text = dumps_text(data)
        except (ValueError, RecursionError) as exc:
            columns.add_failed(key[0], key[1], redaction_error(key, exc, f"line {line.line} of {path}", str(path),
                                                                 line.line))
            return
        payload = loads_text(text)
        redacted = payload.pop("redacted_fields", None)
        columns.add_model(_recorded_trace(payload), redacted)
