"""The plan's reading of a traces file split into byte ranges (read by other processes, then joined) gives the same
index as one pass over the file: same keys and line numbers, same errors in the same order (a duplicate key in a
later range reported on its later line), same offsets and line digests, same file digest; and the bulk reading of the
keys by Arrow's reader gives the index the strict reading of every line gives."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooleval.runs.spec import RunSpec
from tooleval.capture.recorded import index_part, index_traces, join_trace_parts, trace_spans
from tooleval.errors import InputFileError


def _trace(case_id: str, trial: int, request: bool = False) -> dict:
    line = {"case_id": case_id, "trial": trial, "agent": {"name": "a", "version": "1", "model": "m"},
            "messages": [{"role": "assistant", "content": "x: y", "tool_calls": []}], "reward": 1.0}
    if request:
        line["request"] = {"messages": [{"role": "user", "content": "hi"}]}
    return line


LINE_KINDS = {
    # each kind is one line's bytes, given a case id and a trial drawn from small sets (so keys repeat)
    "trace": lambda c, t: json.dumps(_trace(c, t)).encode() + b"\n",
    "crlf": lambda c, t: json.dumps(_trace(c, t)).encode() + b"\r\n",
    "request": lambda c, t: json.dumps(_trace(c, t, request=True)).encode() + b"\n",
    "blank": lambda c, t: b"\n",
    "not_json": lambda c, t: b'{"case_id": "' + c.encode() + b'", \n',
    "array": lambda c, t: b"[1, 2]\n",
    "bad_trial": lambda c, t: json.dumps({**_trace(c, 0), "trial": 1.5}).encode() + b"\n",
    "repeated_key": lambda c, t: b'{"case_id": "' + c.encode() + b'", "case_id": "Z", "trial": 0}\n',
    "not_a_trace": lambda c, t: json.dumps({**_trace(c, t), "messages": "none"}).encode() + b"\n",
    "nan": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": NaN}\n',
    # lines Arrow's reader reads otherwise than Python's json, or refuses: each must be read the strict way
    "inf": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": -Inf}\n',
    "minus_nan": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": -NaN}\n',
    "null": lambda c, t: b"null\n",
    "not_utf8": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": "\xff"}\n',
    "control": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": "a\tb"}\n',
    "int_case": lambda c, t: json.dumps({**_trace(c, t), "case_id": 7}).encode() + b"\n",
    "empty_case": lambda c, t: json.dumps({**_trace(c, t), "case_id": ""}).encode() + b"\n",
    "trial_out": lambda c, t: json.dumps({**_trace(c, t), "trial": -1}).encode() + b"\n",
    "escaped_key": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "tri\\u0061l": 5}\n',
    "surrogate": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "extra": "\\ud800"}\n',
    "two_objects": lambda c, t: json.dumps(_trace(c, t)).encode() + b" " + json.dumps(_trace(c, t)).encode() + b"\n",
    "agent_text": lambda c, t: json.dumps({**_trace(c, t), "agent": "a"}).encode() + b"\n",
    "agent_null": lambda c, t: json.dumps({**_trace(c, t), "agent": None}).encode() + b"\n",
    "spaces": lambda c, t: b"  " + json.dumps(_trace(c, t)).encode() + b"  \n",
    "deep": lambda c, t: json.dumps(_trace(c, t))[:-1].encode() + b', "x": ' + b"[" * 3000 + b"]" * 3000 + b"}\n",
    "deep_nested_key": lambda c, t: (b'{"x": ' + b"[" * 3000 + b'{"case_id": "N", "trial": 9}' + b"]" * 3000
                                     + b', "case_id": "' + c.encode() + b'", "trial": %d}\n' % t),
}


def _summary(index) -> dict:
    return {"digest": index.digest, "keys": index.keys, "trial_agents": index.trial_agents,
            "has_requests": index.has_requests, "offsets": list(index.offsets), "digests": bytes(index.line_digests),
            "errors": [(e.kind, e.case_id, e.trial, e.message, e.path, e.line) for e in index.errors]}


def _joined(path: Path, parts: int):
    spans = trace_spans(path, parts)
    assert spans[0][0] == 0 and spans[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    return join_trace_parts(path, hashlib.sha256(path.read_bytes()).hexdigest(),
                            [index_part(path, span) for span in spans]), len(spans)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(st.sampled_from(sorted(LINE_KINDS)), st.sampled_from(["A", "B", "C"]),
                                st.integers(0, 2)), min_size=1, max_size=30),
       parts=st.integers(2, 9), last_newline=st.booleans())
def test_ranges_joined_equal_one_pass(tmp_path_factory, lines, parts, last_newline):
    data = b"".join(LINE_KINDS[kind](case_id, trial) for kind, case_id, trial in lines)
    if not last_newline:
        data = data.rstrip(b"\r\n") or b"{}"  # a last line without its line end
    path = tmp_path_factory.mktemp("t") / "traces.jsonl"
    path.write_bytes(data)
    joined, _ = _joined(path, parts)
    assert _summary(joined) == _summary(index_traces(path))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(st.sampled_from(sorted(LINE_KINDS)), st.sampled_from(["A", "B", "C"]),
                                st.integers(0, 2)), min_size=1, max_size=30),
       last_newline=st.booleans())
def test_the_bulk_reading_equals_the_strict_reading_of_every_line(tmp_path_factory, lines, last_newline):
    from tooleval.capture import _bulk_keys

    data = b"".join(LINE_KINDS[kind](case_id, trial) for kind, case_id, trial in lines)
    if not last_newline:
        data = data.rstrip(b"\r\n") or b"{}"
    path = tmp_path_factory.mktemp("t") / "traces.jsonl"
    path.write_bytes(data)
    bulk = index_traces(path)
    original = _bulk_keys.usable_lines
    _bulk_keys.usable_lines = lambda block, starts, ends: [False] * len(starts)  # every line the strict way
    try:
        strict = index_traces(path)
    finally:
        _bulk_keys.usable_lines = original
    assert _summary(bulk) == _summary(strict)


def test_a_key_repeated_in_a_later_range_is_reported_on_its_later_line(tmp_path):
    # lines 1-4: A/0, B/0, (blank), A/0 again; four ranges put the two A/0 lines in different ranges
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"".join([LINE_KINDS["trace"]("A", 0), LINE_KINDS["trace"]("B", 0), b"\n",
                               LINE_KINDS["trace"]("A", 0)]))
    joined, ranges = _joined(path, 4)
    assert ranges >= 3
    assert joined.keys == {("A", 0): 1, ("B", 0): 2}
    assert [(e.kind, e.line, e.message) for e in joined.errors] == [
        ("bad_trace", 4, "duplicate (case_id, trial); the line 1 copy is used")]


def test_a_too_long_line_in_a_later_range_is_named_by_its_line_in_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLEVAL_MAX_LINE_BYTES", "1024")
    path = tmp_path / "traces.jsonl"
    short = LINE_KINDS["trace"]("A", 0)
    assert len(short) < 1024
    path.write_bytes(short * 5 + b'{"case_id": "B", "trial": 0, "pad": "' + b"x" * 1500 + b'"}\n' + short)
    with pytest.raises(InputFileError) as serial:
        index_traces(path)
    spans = trace_spans(path, 4)
    parts = [index_part(path, span) for span in spans]
    assert any(part.failure is not None for part in parts[1:])  # found by a range that does not start the file
    with pytest.raises(InputFileError) as joined:
        join_trace_parts(path, "", parts)
    assert serial.value.line == joined.value.line == 6
    assert str(serial.value) == str(joined.value)


def test_spans_never_split_a_line(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"x" * 1000 + b"\n" + b"y\n")  # one long line: at most two ranges, cut after it
    spans = trace_spans(path, 8)
    assert spans == [(0, 1001), (1001, 1003)]


def test_the_flow_plan_takes_the_dry_plans_index_of_an_unchanged_file(tmp_path, monkeypatch):
    """``tooleval run`` plans once to check the inputs (``write_key=False``), then the flow plans in the same
    process: the traces file is read once, unless it changed in between."""
    import os

    import tooleval.runs.plan as plan_module
    from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset

    data = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    reads: list[Path] = []
    real = plan_module.index_traces
    monkeypatch.setattr(plan_module, "index_traces", lambda path: reads.append(path) or real(path))
    dry = plan_module.plan_run(RunSpec(dataset=data, out=tmp_path / "out", run_id="r1"), write_key=False)
    wet = plan_module.plan_run(RunSpec(dataset=data, out=tmp_path / "out", run_id="r1"))
    assert len(reads) == 1
    assert wet.index.table.equals(dry.index.table) and wet.errors == dry.errors
    # taken: the next plan reads the file again; so does a plan after the file changed
    plan_module.plan_run(RunSpec(dataset=data, out=tmp_path / "out", run_id="r1"), write_key=False)
    traces = data / "traces.jsonl"
    stat = traces.stat()
    os.utime(traces, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    plan_module.plan_run(RunSpec(dataset=data, out=tmp_path / "out", run_id="r1"))
    assert len(reads) == 3


def test_a_plan_with_the_traces_read_on_threads_is_the_plan_without(tmp_path, monkeypatch):
    """A traces file between the two thresholds is read in ranges by threads of the planning process (no pool
    needed): the same index, digests and errors as one pass over the file; a file problem in a range is still raised
    with its line in the whole file, after the dataset's own checks."""
    import shutil

    import tooleval.runs.plan as plan_module
    from tests.support.paths import BUNDLED

    import gzip

    data = tmp_path / "d"
    shutil.copytree(BUNDLED, data)
    packed = data / "traces.jsonl.gz"  # a gzip file has no byte ranges: the bundled traces uncompressed
    (data / "traces.jsonl").write_bytes(gzip.decompress(packed.read_bytes()))
    packed.unlink()
    plain = plan_module.plan_run(RunSpec(dataset=str(data), out=str(tmp_path / "out"), run_id="r1"))
    threads: list[list] = []
    real = plan_module._parts_on_threads
    monkeypatch.setattr(plan_module, "_parts_on_threads",
                        lambda path, spans: threads.append(spans) or real(path, spans))
    monkeypatch.setattr(plan_module, "PARALLEL_INDEX_BYTES", 1)  # the bundled traces file is small
    ranged = plan_module.plan_run(RunSpec(dataset=str(data), out=str(tmp_path / "out2"), run_id="r1"))
    assert len(threads) == 1 and len(threads[0]) == 2
    assert ranged.index.table.equals(plain.index.table)
    assert (ranged.case_digests, ranged.errors, ranged.agent.traces_digest) == \
        (plain.case_digests, plain.errors, plain.agent.traces_digest)
    traces = data / "traces.jsonl"
    lines = traces.read_bytes().splitlines(keepends=True)
    cap = max(map(len, lines)) + 1
    monkeypatch.setenv("TOOLEVAL_MAX_LINE_BYTES", str(cap))
    long_line = b'{"case_id": "B", "trial": 0, "pad": "' + b"x" * cap + b'"}\n'
    traces.write_bytes(b"".join(lines[:-1]) + long_line + lines[-1])  # the file's last line but one
    with pytest.raises(InputFileError) as caught:
        plan_module.plan_run(RunSpec(dataset=str(data), out=str(tmp_path / "out3"), run_id="r1"))
    assert caught.value.line == len(lines) and f"line longer than {cap} bytes" in str(caught.value)
    assert len(threads) == 2


def test_a_case_id_with_a_lone_surrogate_in_one_range_joins_with_the_plain_ids_of_another(tmp_path):
    # A part's case ids travel as an Arrow array: a string array, or a binary one of UTF-8 bytes where an id holds
    # a lone surrogate (which a string array cannot hold). Ranges of both kinds join into what one pass gives: the
    # keys in line order, and the later copy of a key repeated across the two kinds of range reported on its line.
    lines = [_trace("A", 0), _trace("B", 0), _trace("\ud800x", 1), _trace("A", 0), _trace("\ud800x", 1)]
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    one_pass = index_traces(path)
    for parts in (2, 3, 5):
        joined, count = _joined(path, parts)
        assert count > 1
        assert _summary(joined) == _summary(one_pass)
    assert one_pass.keys == {("A", 0): 1, ("B", 0): 2, ("\ud800x", 1): 3}  # key -> its first line
    # an error names the id with its escape written out, as errors.json can hold it
    assert [(e.kind, e.case_id, e.line) for e in one_pass.errors] == [("bad_trace", "A", 4),
                                                                      ("bad_trace", "\\ud800x", 5)]
