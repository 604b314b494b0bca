"""Each envelope digest is computed once (issue 9): scoring trusts a stored ``trace_digest`` only when the envelope
stage file's bytes are the ones capture wrote (sha256 = the ref's digest); a file changed after capture is scored
with every digest recomputed, and its changed row is a provenance mismatch as before."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow.parquet as pq

from conftest import BUNDLED
from tasks.scoring import _read_checked
from tooleval.capture.envelope import build_envelope
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import find_traces_file, load_dataset
from tooleval.models import RecordedTrace
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import ENVELOPE_SCHEMA
from tooleval.storage.stages import write_stage_table

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
    envelopes = [envelope for batch in batches for envelope in batch]
    trusted = score_envelopes(loaded.cases, envelopes, digests_verified=True)
    recomputed = score_envelopes(loaded.cases, envelopes)
    assert trusted == recomputed
    assert len(trusted) == 200
    assert not any(row["provenance_detail"] == MISMATCH for row in trusted)


def test_a_stage_file_changed_after_capture_recomputes_and_names_the_row(tmp_path):
    loaded, ref = _captured(tmp_path)
    table = pq.read_table(ref.path)
    envelopes = table.to_pylist()
    envelopes[3]["messages_json"] = envelopes[3]["messages_json"].replace("}", ', "x": 1}', 1)  # trace_digest kept
    pq.write_table(table.from_pylist(envelopes, schema=table.schema), ref.path)
    changed, intact = _read_checked(ref)
    assert not intact
    rows = score_envelopes(loaded.cases, [e for batch in changed for e in batch], digests_verified=intact)
    flagged = [i for i, row in enumerate(rows) if row["provenance_detail"] == MISMATCH]
    assert flagged == [3]
