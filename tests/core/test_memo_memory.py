"""Memos that key or keep orjson's output hold right-sized bytes.

``orjson.dumps`` hands back a bytes object that keeps its whole write buffer (4,097 bytes for a 97-byte text,
measured with ``tracemalloc``), so a memo of a few hundred thousand short argument texts grew each worker of a
1,000,000-row bfcl run by ~2.3 MB per 1,000 rows (the bfcl run's workers reached ~1.7 GB). Each test measures the
memory an entry adds with ``tracemalloc`` and fails when the kept text is orjson's own object again."""

from __future__ import annotations

import tracemalloc

import orjson

from tooleval.canonical import kept_bytes
from tooleval.capture.redaction import RedactionConfig, Redactor
from tooleval.models import Call, ToolSpec
from tooleval.rules import _schema


def _bytes_per(count: int, make) -> float:
    """Traced bytes held after ``make(i)`` for ``i < count`` (results kept), divided by ``count``."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(i) for i in range(count)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return held / count


def test_kept_bytes_is_an_equal_right_sized_copy():
    text = orjson.dumps({"a": 1, "b": "x" * 50})  # 14 + 50 = 64 bytes
    assert kept_bytes(text) == text and len(kept_bytes(text)) == 64
    assert _bytes_per(2000, lambda i: orjson.dumps({"a": i, "b": "x" * 50})) > 4000  # orjson's buffer, kept
    assert _bytes_per(2000, lambda i: kept_bytes(orjson.dumps({"a": i, "b": "x" * 50}))) < 200


def test_the_schema_findings_memo_keeps_short_keys():
    spec = ToolSpec(name="search", parameters={"type": "object", "properties": {"q": {"type": "string"},
                                                                                "n": {"type": "integer"}}})
    _schema._FINDINGS.clear()

    def finding(i: int):
        # each call distinct (a new memo entry); "n" as text is a wrong type, so the jsonschema memo fills too
        return _schema.schema_findings([Call.from_raw("search", {"q": f"flight {i}", "n": str(i)})],
                                       {"search": spec})

    finding(-1)  # the tool's plan and validator, compiled once, outside the measure
    per_row = _bytes_per(1500, finding)
    assert len(_schema._FINDINGS) >= 1500 and len(_schema._TYPES) >= 1500
    # an entry in each memo (two ~30-byte keys, tuples, the findings) and the kept findings: ~2 KB; with orjson's
    # own buffers as keys, 2 x 4 KB more
    assert per_row < 4000, per_row
    _schema._FINDINGS.clear()
    _schema._TYPES.clear()


def test_the_redaction_part_memo_keeps_short_texts():
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    redactor.seed([{"email": "mia.li@example.com"}])  # a default field: its value is a secret

    def redact(i: int) -> str:
        # a new short user message each time (learned: a key and its redacted text in the memo); the first part
        # holds the seeded secret, so the trace is never judged quiet whole
        trace = {"case_id": f"c{i}", "trial": 0, "messages": [
            {"role": "system", "content": "You help mia.li@example.com."},
            {"role": "user", "content": f"book flight {i} for mia.li@example.com"}]}
        return redactor.redact_trace_text(trace)

    assert "mia.li@example.com" not in redact(-1)
    per_trace = _bytes_per(1500, redact)
    # the returned text (~150 bytes), one memo entry (a ~60-byte key, its redacted text, the entry): ~1.5 KB;
    # with orjson's buffers kept, 2 x 4 KB more
    assert per_trace < 4000, per_trace


def test_seeding_holds_short_texts_of_the_parts_it_has_seen():
    # seeding remembers each distinct part's text to skip repeats: 142,858 bfcl cases held ~1 GB at their peak
    # while orjson's 4 KB buffers were the texts kept
    redactor = Redactor(RedactionConfig(), b"k" * 32)
    values = [[{"role": "user", "content": f"find flight {i}"}] for i in range(3000)]
    tracemalloc.start()
    try:
        redactor.seed(iter(values))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / len(values) < 2000, peak / len(values)  # ~40-byte texts in a set; with orjson's own: > 4 KB
