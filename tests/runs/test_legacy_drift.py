"""The legacy scalar path and the drift check (issue 5): agreement on the bundled data, each injected fault
caught and named, and the old dashboard's query unchanged when the row-level writer is switched on."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import BUNDLED
from tests.support.runs import run_small
from tooleval.cli import app
from tooleval.dataset import load_dataset
from tooleval.runs.drift import check_drift
from tooleval.capture.envelope import build_envelope
from tooleval.runs.legacy import legacy_calls, legacy_score
from tooleval.models import RecordedTrace
from tooleval.capture.recorded import iter_trace_lines
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import connect

OLD_DASHBOARD_QUERY = "SELECT dataset_revision, run_id, value, rows FROM legacy_scalars ORDER BY computed_at"
AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def bundled():
    """Envelopes, rows and the legacy result of the bundled dataset, computed without Prefect."""
    dataset = load_dataset(BUNDLED)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), dataset.revision, AT)
                 for line in iter_trace_lines(BUNDLED / "traces.jsonl.gz")]
    rows = score_envelopes(dataset.cases, envelopes)
    legacy = legacy_score(envelopes, dataset.cases, "scorer-x")
    return envelopes, rows, legacy


def _key(row):
    return {"case_id": row["case_id"], "trial": row["trial"]}


class TestBundledAgreement:
    def test_legacy_equals_new_mean_and_coverage(self, bundled):
        _, rows, legacy = bundled
        report = check_drift(legacy, rows)
        assert report["verdict"] == "ok" and report["reasons"] == [] and report["attribution"] is None
        assert legacy.rows == 200 and report["coverage"]["legacy"] == report["coverage"]["new"] == 200
        assert abs(report["difference"]) <= 1e-9
        # The mean of ragas' per-row values, summed independently here.
        assert legacy.value == pytest.approx(sum(r["ragas_tool_call_f1"] for r in rows) / 200, abs=1e-12)

    def test_legacy_reads_calls_from_raw_messages(self):
        messages = [{"role": "assistant", "tool_calls": [
            {"function": {"name": "a", "arguments": ""}},
            {"function": {"name": "b", "arguments": "[1]"}},
            {"function": {"name": "c", "arguments": "NaN"}},
            {"function": {"name": "d", "arguments": '{"x": 10.0}'}},
        ]}]
        assert legacy_calls(json.dumps(messages)) == [
            {"name": "a", "args": {}}, {"name": "b", "args": {"__malformed__": "[1]"}},
            {"name": "c", "args": {"__malformed__": "NaN"}}, {"name": "d", "args": {"x": 10.0}},
        ]


class TestInjectedFaults:
    def test_row_missing_from_new_path(self, bundled):
        _, rows, legacy = bundled
        report = check_drift(legacy, rows[1:])
        assert report["verdict"] == "drift"
        assert report["coverage"]["only_legacy"] == [_key(rows[0])]
        assert report["coverage"]["new"] == 199

    def test_row_scored_twice(self, bundled):
        _, rows, legacy = bundled
        report = check_drift(legacy, rows + [rows[5]])
        assert report["verdict"] == "drift"
        assert report["coverage"]["duplicated_new"] == [_key(rows[5])]

    def test_failed_generation_filtered_out_of_one_side_only(self, bundled):
        envelopes, rows, _ = bundled
        dataset = load_dataset(BUNDLED)
        failed = dict(envelopes[7], error="generation_error: timeout", messages_json=None, model_calls=[])
        legacy = legacy_score(envelopes[:7] + [failed] + envelopes[8:], dataset.cases, "s")
        new = [row for i, row in enumerate(rows) if i != 7]  # the row-level side dropped the failure
        report = check_drift(legacy, new)
        assert report["verdict"] == "drift" and report["coverage"]["only_legacy"] == [_key(rows[7])]
        assert legacy.rows == 200 and sum(r.value is None for r in legacy.per_row) == 1

    def test_other_ragas_version_on_one_side_is_attributed_to_the_library(self, bundled):
        _, rows, legacy = bundled
        report = check_drift(legacy, [dict(r, ragas_version="0.2.15") for r in rows])
        assert report["verdict"] == "drift" and report["attribution"] == "library_version"
        assert "library version change, not an agent regression" in report["reasons"][0]

    def test_one_value_altered(self, bundled):
        _, rows, legacy = bundled
        index = next(i for i, r in enumerate(rows) if r["ragas_tool_call_f1"] == 0.0)
        altered = [dict(r) for r in rows]
        altered[index]["ragas_tool_call_f1"] = 1.0
        report = check_drift(legacy, altered)
        assert report["verdict"] == "drift" and report["attribution"] == "row_level_path"
        assert report["rows_differing"] == [dict(_key(rows[index]), legacy=0.0, new=1.0)]
        assert report["difference"] == pytest.approx(1.0 / 200)


@pytest.mark.usefixtures("prefect_harness")
class TestFlowAndCommands:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_old_dashboard_query_unchanged_when_the_row_writer_is_switched_on(self, tmp_path):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "results"
        before, _ = run_small(dataset=str(dataset), out=str(out), run_id="nightly", legacy_only=True)
        assert before.rows_path is None and not (out / "rows").exists()
        old_before = connect(out).execute(OLD_DASHBOARD_QUERY).fetchall()
        after, drifted = run_small(dataset=str(dataset), out=str(out), run_id="nightly")
        assert not drifted and after.drift["verdict"] == "ok"
        old_after = connect(out).execute(OLD_DASHBOARD_QUERY).fetchall()
        # By hand: ragas values A#0 1.0, A#1 0.5, B#0 0.0 (malformed), C#0 0.0 (both empty) -> mean 0.375.
        assert old_before == old_after == [("r1", "nightly", 0.375, 4)]
        evidence = connect(out).execute(
            "SELECT case_id, trial, ragas_tool_call_f1, len(missing_calls), len(extra_calls) FROM rows "
            "WHERE dataset_revision = 'r1' AND run_id = 'nightly' ORDER BY case_id, trial").fetchall()
        assert evidence == [("A", 0, 1.0, 0, 0), ("A", 1, 0.5, 1, 1), ("B", 0, 0.0, 1, 1), ("C", 0, 0.0, 0, 0)]
        scalar = json.loads((out / "legacy" / "dataset_revision=r1" / "run_id=nightly" / "scalar.json").read_text())
        assert scalar["value"] == 0.375 and scalar["rows"] == 4 and scalar["ragas_version"] == "0.4.3"

    @pytest.mark.slow  # the Prefect test harness's server
    def test_drift_command_catches_a_tampered_row_and_exits_1(self, tmp_path):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "results"
        runner = CliRunner()
        ran = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "d1"])
        assert ran.exit_code == 0, ran.output
        clean = runner.invoke(app, ["drift", "--run-id", "d1", "--out", str(out)])
        assert clean.exit_code == 0, clean.output
        assert json.loads((out / "runs" / "d1" / "drift.json").read_text())["verdict"] == "ok"
        (part,) = (out / "rows" / "dataset_revision=r1" / "run_id=d1").glob("part-*.parquet")
        table = pq.read_table(part)
        values = table["ragas_tool_call_f1"].to_pylist()
        values[0] = 0.25
        import pyarrow as pa

        pq.write_table(table.set_column(table.schema.get_field_index("ragas_tool_call_f1"),
                                        "ragas_tool_call_f1", pa.array(values, pa.float64())), part)
        drifted = runner.invoke(app, ["drift", "--run-id", "d1", "--out", str(out)], env={"COLUMNS": "200"})
        assert drifted.exit_code == 1
        report = json.loads((out / "runs" / "d1" / "drift.json").read_text())
        assert report["verdict"] == "drift"
        assert report["rows_differing"] == [{"case_id": "A", "trial": 0, "legacy": 1.0, "new": 0.25}]

    @pytest.mark.slow  # the Prefect test harness's server
    def test_legacy_command_republishes_the_scalar(self, tmp_path):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "results"
        runner = CliRunner()
        assert runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "l1"]).exit_code == 0
        scalar = out / "legacy" / "dataset_revision=r1" / "run_id=l1" / "scalar.json"
        scalar.unlink()
        result = runner.invoke(app, ["legacy", "--run-id", "l1", "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert json.loads(scalar.read_text())["value"] == 0.375
        assert "0.3750 over 4 rows" in result.output

    @pytest.mark.slow  # the Prefect test harness's server
    def test_unknown_run_exits_2(self, tmp_path):
        result = CliRunner().invoke(app, ["drift", "--run-id", "nope", "--out", str(tmp_path)])
        assert result.exit_code == 2


def test_a_legacy_result_pickles_its_per_row_values_as_columns_and_reads_back_equal():
    """Prefect's result store pickles each shard's legacy result: the rows travel as three plain lists (no model
    per row in the pickle) and come back as equal :class:`LegacyRow` models, a failed generation's ``None`` kept."""
    import pickle

    from tooleval.runs.legacy import LegacyResult, LegacyRow

    rows = [LegacyRow(case_id="c1", trial=0, value=0.5), LegacyRow(case_id="c1", trial=1, value=None),
            LegacyRow(case_id="c2", trial=0, value=1.0)]
    result = LegacyResult(value=0.75, rows=3, ragas_version="0.4.3", scorer_version="s",
                          computed_at=datetime(2026, 1, 2, tzinfo=timezone.utc), per_row=rows, elapsed_s=1.5)
    data = pickle.dumps(result)
    assert b"LegacyRow" not in data  # one reference to the class per row would be there, were rows pickled one by one
    back = pickle.loads(data)
    assert back == result
    assert [(r.case_id, r.trial, r.value) for r in back.per_row] == [("c1", 0, 0.5), ("c1", 1, None), ("c2", 0, 1.0)]
    assert back.model_copy(update={"per_row": []}).rows == 3


@pytest.mark.parametrize("arguments, args", [
    # arguments as JSON text: the integer is read from that text by the strict reader, exactly
    ('"{\\"n\\": 123456789012345678901234567890}"', {"n": 123456789012345678901234567890}),
    # arguments as a JSON value inside the message list: beyond 64 bits, still the exact integer (not 1.2345e29)
    ('{"n": 123456789012345678901234567890}', {"n": 123456789012345678901234567890}),
    ('{"n": -9223372036854775809}', {"n": -9223372036854775809}),
    ('null', {}),
])
def test_legacy_calls_read_wide_integers_exactly_however_the_arguments_are_written(arguments, args):
    text = f'[{{"role": "user", "content": "hi \\ud83d\\ude00"}}, {{"role": "assistant", "tool_calls": ' \
           f'[{{"function": {{"name": "f", "arguments": {arguments}}}}}]}}]'
    calls = legacy_calls(text)
    assert calls == [{"name": "f", "args": args}]
    assert all(type(v) is int for v in calls[0]["args"].values())
