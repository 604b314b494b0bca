"""Each envelope digest is computed once (issue 9): scoring trusts a stored ``trace_digest`` only when the envelope
stage file's bytes are the ones capture wrote (sha256 = the ref's digest); a file changed after capture is scored
with every digest recomputed, and its changed row is a provenance mismatch as before."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import BUNDLED
from tests.support.profiles import examples
from tasks.scoring import _read_checked
from tooleval.capture.envelope import build_envelope, digest_ok, envelope_digest, generation_envelope
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import find_traces_file, load_dataset
from tooleval.models import RecordedTrace
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import ENVELOPE_SCHEMA
from tooleval.storage.stages import iter_stage_batches, write_stage_table

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
MISMATCH = "the envelope digest does not recompute: the trace changed after capture"


def _captured(tmp_path):
    loaded = load_dataset(BUNDLED)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), loaded.revision, AT)
                 for line in iter_trace_lines(find_traces_file(BUNDLED))]
    return loaded, write_stage_table(tmp_path, "capture", envelopes, ENVELOPE_SCHEMA)


def test_an_intact_stage_file_is_scored_alike_without_recomputing(tmp_path):
    loaded, ref = _captured(tmp_path)
    batches, intact = _read_checked(ref)
    assert intact
    envelopes = [envelope for batch in batches for envelope in batch.to_pylist()]
    trusted = score_envelopes(loaded.cases, envelopes, digests_verified=True)
    recomputed = score_envelopes(loaded.cases, envelopes)
    assert trusted == recomputed
    assert len(trusted) == 200
    assert not any(row["provenance_detail"] == MISMATCH for row in trusted)


def test_a_verified_file_hands_over_its_messages_as_bytes_and_scores_alike(tmp_path):
    # the messages of a verified file come as UTF-8 bytes (orjson reads them without a str in between) and the
    # capture time is left unread; the rows are those of the plain reading, column for column
    loaded, ref = _captured(tmp_path)
    batches, intact = _read_checked(ref)
    envelopes = [envelope for batch in batches for envelope in batch.to_pylist()]
    plain = [envelope for batch in iter_stage_batches(ref) for envelope in batch]
    assert intact and len(envelopes) == 200
    assert all(type(e["messages_json"]) is bytes and "captured_at" not in e for e in envelopes)
    assert [e["messages_json"].decode() for e in envelopes] == [e["messages_json"] for e in plain]
    assert (score_envelopes(loaded.cases, envelopes, digests_verified=True)
            == score_envelopes(loaded.cases, plain, digests_verified=True))


def test_capture_reads_a_payload_as_bytes_alike():
    for line in list(iter_trace_lines(find_traces_file(BUNDLED)))[:20]:
        text = json.dumps(line.data, ensure_ascii=False)
        record = {"case_id": line.data["case_id"], "trial": line.data["trial"], "error": None}
        as_text = generation_envelope({**record, "payload_json": text}, AT, None)
        as_bytes = generation_envelope({**record, "payload_json": text.encode()}, AT, None)
        assert as_text == as_bytes and digest_ok(as_bytes)


def test_a_stage_file_changed_after_capture_recomputes_and_names_the_row(tmp_path):
    loaded, ref = _captured(tmp_path)
    table = pq.read_table(ref.path)
    envelopes = table.to_pylist()
    envelopes[3]["messages_json"] = envelopes[3]["messages_json"].replace("}", ', "x": 1}', 1)  # trace_digest kept
    pq.write_table(table.from_pylist(envelopes, schema=table.schema), ref.path)
    changed, intact = _read_checked(ref)
    assert not intact
    rows = score_envelopes(loaded.cases, [e for batch in changed for e in batch.to_pylist()], digests_verified=intact)
    flagged = [i for i, row in enumerate(rows) if row["provenance_detail"] == MISMATCH]
    assert flagged == [3]


# JSON values of every kind a trace can hold: floats integral or not (250.0 digests as 250), in the range that
# orjson and Python spell differently (1e-05), big and negative integers, text with escapes, controls, non-BMP
# characters and number-like content inside strings (which must not change the digest either way)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([250.0, -0.0, 1e-05, 1e16]),
                     st.text(), st.sampled_from(["1,250.00", "[3.5]", "a:1e5", "\u2028\x7f\U0001F600"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                       max_leaves=20)


@settings(max_examples=examples(300), deadline=None)
@given(content=_VALUES, metadata=st.dictionaries(st.text(max_size=6), _VALUES, max_size=3),
       request=st.one_of(st.none(), st.lists(st.dictionaries(st.text(max_size=6), _VALUES, max_size=3), max_size=3)))
def test_the_digest_written_at_capture_is_the_one_recomputed_from_the_stored_text(content, metadata, request):
    # capture hashes the canonical text of the values it has just written; a reader recomputes it from the
    # stored JSON text (digest_ok): both must agree for every value, or every row reads as tampered
    trace = RecordedTrace.model_validate({
        "case_id": "c", "trial": 0, "agent": {"name": "a"}, "metadata": metadata,
        "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": content}],
        **({} if request is None else {"request": {"messages": request}})})
    record = build_envelope(trace, None, AT)
    assert record["trace_digest"] == envelope_digest(record)
    assert digest_ok(record)


_TEXT = st.one_of(st.text(), st.sampled_from(["a\\\"b", "\u2028\x7f\U0001F600", "1,250.00", ":1.5"]))


@settings(max_examples=300, deadline=None)
@given(case_id=_TEXT.filter(bool), agent=_TEXT, status=_SCALARS, prompt=st.one_of(st.none(), _TEXT),
       args=st.dictionaries(st.text(max_size=6), _VALUES, max_size=3), fields=st.lists(_TEXT, max_size=3),
       started=st.one_of(st.none(), st.datetimes(timezones=st.just(timezone.utc))))
def test_the_digest_of_the_small_columns_is_the_one_recomputed(case_id, agent, status, prompt, args, fields,
                                                                 started):
    # the columns beside the JSON text are digested by one orjson call when they hold no float, no integer beyond
    # 64 bits, and the canonical way otherwise: a reader recomputing the canonical way
    # (digest_ok) must find the same digest for both (a status holding 1.5 or 2**70, text with escapes)
    trace = RecordedTrace.model_validate({
        "case_id": case_id, "trial": 3, "agent": {"name": agent, "model": prompt}, "prompt_version": prompt,
        "messages": [{"role": "assistant", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": agent, "arguments": _argument_text(args)}}]}],
        "executor_calls": [{"name": agent, "args": args, "executions": 2, "status": status}],
        "adapter_calls": [{"name": "t", "args": args}], "generation_started_at": started})
    record = build_envelope(trace, None, AT, redacted_fields=fields)
    assert record["trace_digest"] == envelope_digest(record)


def _argument_text(value):
    return json.dumps(value, ensure_ascii=False)


def test_every_bundled_envelope_digest_recomputes():
    loaded = load_dataset(BUNDLED)
    for line in iter_trace_lines(find_traces_file(BUNDLED)):
        record = build_envelope(RecordedTrace.model_validate(line.data), loaded.revision, AT)
        assert record["trace_digest"] == envelope_digest(record)
