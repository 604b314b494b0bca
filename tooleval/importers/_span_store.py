"""Gathering the spans of each trace across export batches, on disk.

A collector exports a trace's spans in whatever batches it flushed, interleaved with other traces' spans, so a
trace is complete only at the end of the file. Holding every span in memory until then would grow with the file;
:class:`SpanStore` spills them to a SQLite file in a temporary folder instead (SQLite's page cache is capped), and
hands back one trace at a time, its spans in start-time order.

A span exported twice (the same trace and span id; a collector retry) is kept once, the first time it was seen.
:func:`check_tree` tells whether the spans of a trace form a forest: a span whose parent is not in the trace (a
batch was lost) or a cycle of parents (a broken exporter) makes the trace unusable, and the importer skips it with
the place of the offending span.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tooleval.importers._span_source import Span

__all__ = ["SpanStore", "check_tree"]

_CACHE_KIB = 32 * 1024
"""SQLite's page cache, in KiB: what the spill may hold in memory (the rest stays on disk)."""


class SpanStore:
    """Spans on disk, grouped by trace. Use as a context manager; the temporary file is removed on exit."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self._dir = tempfile.mkdtemp(prefix="tooleval-spans-", dir=folder)
        self._db = sqlite3.connect(os.path.join(self._dir, "spans.sqlite"))
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE", f"cache_size=-{_CACHE_KIB}"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE spans (trace_id TEXT, span_id TEXT, seq INTEGER, start INTEGER, body BLOB,"
                         " PRIMARY KEY (trace_id, span_id)) WITHOUT ROWID")
        self._seq = 0
        self.duplicates = 0

    def __enter__(self) -> "SpanStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()
        for name in os.listdir(self._dir):
            os.remove(os.path.join(self._dir, name))
        os.rmdir(self._dir)

    def add(self, span: Span) -> None:
        """Keep one span (a repeat of a (trace id, span id) already kept is counted in :attr:`duplicates`)."""
        self._seq += 1
        cursor = self._db.execute("INSERT OR IGNORE INTO spans VALUES (?, ?, ?, ?, ?)",
                                  (span.trace_id, span.span_id, self._seq, span.start_ns,
                                   pickle.dumps(span, protocol=pickle.HIGHEST_PROTOCOL)))
        self.duplicates += cursor.rowcount == 0
        if self._seq % 10_000 == 0:
            self._db.commit()

    def traces(self) -> Iterator[list[Span]]:
        """Each trace's spans (start time, then file order), traces in trace-id order (deterministic)."""
        self._db.commit()
        rows = self._db.execute("SELECT trace_id, body FROM spans ORDER BY trace_id, start, seq")
        current: str | None = None
        spans: list[Span] = []
        for trace_id, body in rows:
            if trace_id != current and spans:
                yield spans
                spans = []
            current = trace_id
            spans.append(pickle.loads(body))
        if spans:
            yield spans


    def stash_table(self) -> None:
        """Create the table of converted traces, which :meth:`stashed` hands back in (case, start) order."""
        self._db.execute("CREATE TABLE IF NOT EXISTS converted (case_id TEXT, start INTEGER, trace_id TEXT,"
                         " body BLOB)")

    def stash(self, case_id: str, start_ns: int, trace_id: str, body: bytes) -> None:
        """Keep one converted trace until every trace is read (its trial depends on the case's other traces)."""
        self._db.execute("INSERT INTO converted VALUES (?, ?, ?, ?)", (case_id, start_ns, trace_id, body))

    def stashed(self) -> Iterator[bytes]:
        """The converted traces by case id, then start time, then trace id (so trials follow time)."""
        self._db.commit()
        for (body,) in self._db.execute("SELECT body FROM converted ORDER BY case_id, start, trace_id"):
            yield body


def check_tree(spans: list[Span]) -> tuple[str, str] | None:
    """Why the spans of one trace do not form a tree, with the place of the offending span; ``None`` if they do.

    Returns:
        ``(reason, where)``: ``"a span's parent is missing from the trace"`` or ``"the spans' parents form a
        cycle"``, and the ``file:line`` of the first such span.
    """
    by_id = {span.span_id: span for span in spans}
    for span in spans:
        if span.parent_id is not None and span.parent_id not in by_id:
            return "a span's parent is missing from the trace", span.where
    for span in spans:
        seen = {span.span_id}
        parent = span.parent_id
        while parent is not None:
            if parent in seen:
                return "the spans' parents form a cycle", span.where
            seen.add(parent)
            parent = by_id[parent].parent_id
    return None
