"""One code path: ``check_tool_calls`` and ``tooleval run`` give identical rows on the bundled data — every column
but ``run_id`` and the gate's verdict (``gate_verdict``, ``gate_rules``: set by the run's gate at publication), both redacted with the same key — whether the test hands over the run's published envelopes or
the raw recorded trace lines (which it then captures and redacts itself, as the run's generation and capture
stages did)."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.support.paths import BUNDLED
from tooleval.storage import ROW_COLUMNS, read_table
from tooleval.testing import check_tool_calls

pytestmark = pytest.mark.slow  # the Prefect test harness's server

COMPARED = [c for c in ROW_COLUMNS if c not in ("run_id", "gate_verdict", "gate_rules")]
"""The scored row's columns: the run id, and the gate's verdict, which a run sets when it publishes (judged by the
run's gate.toml, its waivers and quarantine), are the run's, not the trajectory's."""


@pytest.fixture(scope="module")
def published(bundled_pair):
    """The bundled run ``base``: its rows by (case, trial), its envelopes and its redaction key."""
    rows = {(r["case_id"], r["trial"]): {c: r[c] for c in COMPARED}
            for r in read_table(bundled_pair, "rows", run_id="base").to_pylist()}
    envelopes = read_table(bundled_pair, "traces", run_id="base").to_pylist()
    key = (bundled_pair / "redaction.key").read_bytes()
    return rows, envelopes, key


def test_from_the_published_envelopes(published):
    rows, envelopes, key = published
    assert len(rows) == len(envelopes) == 200
    checked = {}
    for envelope in envelopes:
        row = check_tool_calls(envelope, dataset=BUNDLED, redaction_key=key).row.record()
        checked[(row["case_id"], row["trial"])] = {c: row[c] for c in COMPARED}
    assert checked == rows


def test_from_the_recorded_traces(published):
    rows, _, key = published
    with gzip.open(BUNDLED / "traces.jsonl.gz", "rt") as handle:
        lines = [json.loads(line) for line in handle]
    checked = {}
    for line in lines:
        row = check_tool_calls(line, dataset=BUNDLED, redaction_key=key).row.record()
        checked[(row["case_id"], row["trial"])] = {c: row[c] for c in COMPARED}
    assert checked == rows
    exact = sum(1 for r in checked.values() if r["exact_match"])
    assert (len(checked), exact) == (200, 12)
    assert sum(1 for r in checked.values() if r["calls_match"]) == exact  # the bundled cases are unordered
