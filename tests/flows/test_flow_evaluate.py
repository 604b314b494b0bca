"""The evaluation flow under one session-scoped Prefect harness: real Parquet files, real DuckDB.

Expected figures for the bundled dataset are the measured facts of ../shared/data/README.md (tau-bench
gpt-4o airline, 50 tasks x 4 trials): 632 expected and 1,164 observed calls, 12 exact-match runs, 124 runs
missing a call, 162 with an extra call, 16 repeating an identical call, 18 with no call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tooleval.runs.spec import RunSpec
from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import BUNDLED
from tooleval.errors import InputFileError, UnsafeRevisionError
from tooleval.storage import connect

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]  # the Prefect test harness's server


def _evaluate(**kwargs):
    from flows.evaluate import evaluate

    return evaluate(RunSpec(**kwargs))


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
            and ".tooleval" not in p.parts}


@pytest.fixture(scope="module")
def bundled_runs(tmp_path_factory):
    """The bundled dataset evaluated twice into one results folder (second run: new run id, same inputs)."""
    out = tmp_path_factory.mktemp("bundled") / "results"
    first = _evaluate(dataset=str(BUNDLED), out=str(out), run_id="first")
    second = _evaluate(dataset=str(BUNDLED), out=str(out), run_id="second")
    return out, first, second


class TestBundledRun:
    def test_completed_at_is_the_end_of_the_run(self, bundled_runs):
        # after every shard's rows were written and judged (not when the shards started), and the legacy scalar
        # carries the same moment
        from datetime import datetime, timezone

        out, first, _ = bundled_runs
        completed = datetime.fromisoformat(first.summary["completed_at"])
        parts = list((out / "rows").glob("dataset_revision=*/run_id=first/*.parquet"))
        assert parts
        newest = max(datetime.fromtimestamp(p.stat().st_mtime, timezone.utc) for p in parts)
        assert completed >= newest, (completed, newest)
        (scalar,) = (out / "legacy").glob("*/run_id=first/scalar.json") or \
            [p for p in (out / "legacy").rglob("scalar.json") if "first" in str(p)]
        assert json.loads(scalar.read_text())["computed_at"] == first.summary["completed_at"]

    def test_measured_figures(self, bundled_runs):
        _, first, _ = bundled_runs
        s = first.summary
        assert s["rows"] == 200
        assert s["expected_calls"] == 632
        assert s["observed_calls"] == 1164
        assert s["exact_match_rows"] == 12
        assert s["rows_with_missing"] == 124
        assert s["rows_with_extra"] == 162
        assert s["rows_with_duplicates"] == 16
        assert s["rows_without_calls"] == 18
        assert s["rows_with_malformed"] == 0
        assert s["tp"] + s["fp"] == 1164 and s["tp"] + s["fn"] == 632
        assert sum(t["missing"] for t in s["failures_by_tool"].values()) == s["fn"]
        assert sum(t["extra"] for t in s["failures_by_tool"].values()) == s["fp"]
        assert s["errors"] == 0 and first.errors == []
        # tau-bench's historical trajectories carry no request or provider response ids: all 200 are `missing`.
        assert s["provenance"] == {"ok": 0, "missing": 200, "mismatch": 0}

    def test_a_finished_run_keeps_no_redactor_in_the_process(self, bundled_runs):
        # both runs redacted (on by default) with a redactor the flow built and cached in this process; once a run
        # has ended, neither its redactor, its case-input map nor its seed state stays for the next command
        from tasks import _shared

        assert _shared._redactor.cache_info().currsize == 0
        assert _shared._inputs.cache_info().currsize == 0
        assert _shared._SEEDS == {}

    def test_rows_partition_and_duckdb(self, bundled_runs):
        out, first, _ = bundled_runs
        part = out / "rows" / f"dataset_revision={first.dataset_revision}" / "run_id=first"
        # one part file per shard. 200 rows at the default shard size for 2 workers (200 / 16 -> the 100-row
        # floor): 100 rows / 4 trials per case = 25 cases per shard -> K = 32; a shard starts at the first case
        # and at every case id whose sha256's first 8 bytes are 0 mod 32 (content-defined, tooleval.runs.shards)
        import hashlib

        case_ids = sorted({str(c) for c in range(50)})
        starts = 1 + sum(int.from_bytes(hashlib.sha256(c.encode()).digest()[:8], "big") % 32 == 0
                         for c in case_ids[1:])
        shards = first.summary["timing"]["shards"]
        assert shards == starts == 4
        names = sorted(p.name for p in part.iterdir())  # part-<i>-<publication id>.parquet (the commit marker)
        assert [re.fullmatch(r"part-(\d+)-[0-9a-f]{32}\.parquet", n).group(1) for n in names] == [
            str(i) for i in sorted(range(shards), key=str)]
        con = connect(out)
        count, revisions = con.execute(
            "SELECT count(*), list(DISTINCT dataset_revision) FROM rows WHERE run_id = 'first'").fetchone()
        assert count == 200 and revisions == ["gpt-4o-airline-v1"]
        keys = con.execute("SELECT count(DISTINCT (case_id, trial)) FROM rows WHERE run_id = 'first'").fetchone()[0]
        assert keys == 200
        # recorded_reward carries the benchmark's reward: 84 of the 200 runs have reward 1.0 (source data).
        assert con.execute("SELECT sum(recorded_reward) FROM rows WHERE run_id = 'first'").fetchone()[0] == 84
        traces = con.execute("SELECT count(*) FROM traces WHERE run_id = 'first'").fetchone()[0]
        assert traces == 200

    def test_policy_counts_through_the_flow(self, bundled_runs):
        # Same counts as tests/rules/test_rules_tau_bench.py computes independently from the raw source: 21 runs
        # write although their reference has no write (../shared/data/README.md), 35 write without confirmation.
        out, _, _ = bundled_runs
        con = connect(out)

        def rows_with(rule: str, severity: str) -> int:
            return con.execute(
                "SELECT count(*) FROM rows WHERE run_id = 'first' AND len(list_filter(violations, "
                "lambda v: v.rule = ? AND v.severity = ?)) > 0", [rule, severity]).fetchone()[0]

        assert rows_with("forbidden_tool", "blocking") == 21
        missing_confirmation = con.execute(
            "SELECT count(*) FROM rows WHERE run_id = 'first' AND "
            "list_contains(list_transform(violations, lambda v: v.rule), 'missing_confirmation')").fetchone()[0]
        assert missing_confirmation == 35

    def test_variability_of_the_published_rows(self, bundled_runs):
        from tooleval.runs.variability import outcome_from_spec, variability_summary

        # Expected values: the issue's figures, computed independently from the 200 runs' rewards.
        rows = pq.read_table(bundled_runs[1].rows_path).to_pylist()
        figures = variability_summary(rows, outcome_from_spec("recorded_reward"))
        assert [round(figures["pass^k"][k], 4) for k in "1234"] == [0.42, 0.2733, 0.22, 0.2]
        assert [round(figures["pass@k"][k], 4) for k in "1234"] == [0.42, 0.5667, 0.66, 0.72]
        default = bundled_runs[1].summary["variability"]  # the run's own table, outcome = gate pass
        assert default["outcome"] == "gate" and default["k_max"] == 4 and set(default["pass@k"]) == set("1234")

    def test_summary_json(self, bundled_runs):
        out, first, _ = bundled_runs
        summary = json.loads((out / "runs" / "first" / "summary.json").read_text())
        for key in ("dataset_revision", "run_id", "versions", "rows", "exact_match_rows", "expected_calls",
                    "observed_calls", "tp", "fp", "fn", "rows_with_missing", "rows_with_extra",
                    "rows_with_duplicates", "rows_with_malformed", "rows_without_calls", "mean_f1",
                    "mean_ragas_tool_call_f1", "failures_by_tool", "errors"):
            assert key in summary, key
        assert summary["versions"]["ragas"] == "0.4.3"
        assert json.loads((out / "runs" / "first" / "errors.json").read_text()) == []

    def test_legacy_scalar_agrees_with_the_row_level_path(self, bundled_runs):
        out, first, _ = bundled_runs
        drift = json.loads((out / "runs" / "first" / "drift.json").read_text())
        assert drift["verdict"] == "ok" and drift["coverage"]["legacy"] == drift["coverage"]["new"] == 200
        assert abs(drift["difference"]) <= 1e-9
        assert drift["coverage"]["only_legacy"] == drift["coverage"]["only_new"] == []
        assert first.summary["drift"]["verdict"] == "ok"
        value, rows = connect(out).execute(
            "SELECT value, rows FROM legacy_scalars WHERE run_id = 'first'").fetchone()
        assert rows == 200 and abs(value - first.summary["mean_ragas_tool_call_f1"]) <= 1e-9

    def test_second_run_takes_every_stage_from_the_cache(self, bundled_runs):
        out, first, second = bundled_runs
        for stage, counts in second.stage_states.items():
            assert set(counts) == {"Cached"}, (stage, counts)
        assert set(first.stage_states["scoring"]) == {"Completed"}
        a = pq.read_table(Path(first.rows_path)).drop_columns(["run_id"])
        b = pq.read_table(Path(second.rows_path)).drop_columns(["run_id"])
        assert a.equals(b)
        assert second.summary["rows"] == 200


class TestSmallRuns:
    def test_row_values(self, tiny_dataset, tmp_path):
        out = tmp_path / "results"
        result = _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="t1")
        rows = {(r["case_id"], r["trial"]): r for r in pq.read_table(result.rows_path).to_pylist()}
        assert rows["A", 0]["exact_match"] and rows["A", 0]["f1"] == 1.0
        wrong = rows["A", 1]
        assert (wrong["tp"], wrong["fp"], wrong["fn"], wrong["f1"]) == (1, 1, 1, 0.5)
        assert [w["paths"] for w in wrong["wrong_args"]] == [["cents"]]
        malformed = rows["B", 0]
        assert malformed["malformed_calls"] == 1 and malformed["observed_calls"][0]["args_raw"] == '{"id": "B"'
        assert malformed["observed_calls"][0]["args_json"] is None and malformed["f1"] == 0.0
        abstain = rows["C", 0]
        assert abstain["f1"] == 1.0 and abstain["ragas_tool_call_f1"] == 0.0 and abstain["precision"] is None
        assert result.summary["rows_with_malformed"] == 1 and result.errors == []

    def test_rerun_replaces_and_empty_rerun_leaves_one_empty_part(self, tiny_dataset, tmp_path):
        out = tmp_path / "results"
        _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="keep")
        _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="again")
        keep_before = _tree(out / "rows" / "dataset_revision=r1" / "run_id=keep")
        again = _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="again")
        assert pq.read_table(again.rows_path).num_rows == 4  # replaced, not appended (H13)
        empty = tmp_path / "empty.jsonl"
        empty.write_text("")
        result = _evaluate(dataset=str(tiny_dataset), traces=str(empty), out=str(out), run_id="again")
        parts = list(Path(result.rows_path).glob("*.parquet"))
        assert len(parts) == 1 and pq.read_table(parts[0]).num_rows == 0
        assert pq.read_schema(parts[0]).names[:4] == ["dataset_revision", "run_id", "case_id", "trial"]
        assert {e["kind"] for e in result.errors} == {"missing_trace"} and len(result.errors) == 3
        assert _tree(out / "rows" / "dataset_revision=r1" / "run_id=keep") == keep_before
        con = connect(out)
        assert con.execute("SELECT count(*) FROM rows WHERE run_id = 'again'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM rows WHERE run_id = 'keep'").fetchone()[0] == 4

    def test_unknown_case_and_case_without_trace_are_listed(self, tmp_path):
        traces = TINY_TRACES[:2] + [dict(TINY_TRACES[0], case_id="ZZZ")]
        dataset = write_dataset(tmp_path / "d", TINY_CASES, traces)
        result = _evaluate(dataset=str(dataset), out=str(tmp_path / "results"), run_id="e1")
        kinds = sorted((e["kind"], e["case_id"]) for e in result.errors)
        assert kinds == [("missing_trace", "B"), ("missing_trace", "C"), ("unknown_case", "ZZZ")]
        assert result.summary["rows"] == 2 and result.summary["errors"] == 3
        written = json.loads((tmp_path / "results" / "runs" / "e1" / "errors.json").read_text())
        assert sorted(e["case_id"] for e in written) == ["B", "C", "ZZZ"]
        assert next(e for e in written if e["case_id"] == "ZZZ")["line"] == 3

    def test_bad_trace_line_becomes_an_error_not_a_crash(self, tmp_path):
        # its key (C, 1) is readable, its messages are not a list: an error row for (C, 1) naming the field, the
        # file and the line, besides the 4 scored rows
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        with (dataset / "traces.jsonl").open("a") as handle:
            handle.write(json.dumps({"case_id": "C", "trial": 1, "messages": "not a list"}) + "\n")
        result = _evaluate(dataset=str(dataset), out=str(tmp_path / "results"), run_id="b1")
        assert (result.summary["rows"], result.summary["rows_with_errors"]) == (5, 1)
        (error,) = result.errors
        assert (error["kind"], error["case_id"], error["trial"]) == ("bad_trace", "C", 1)
        assert "field messages: Input should be a valid list" in error["message"]
        assert error["message"].endswith(f"(line 5 of {dataset / 'traces.jsonl'})")

    def test_a_case_whose_only_trace_line_is_bad_gets_one_error(self, tmp_path):
        # case C's only line has trial "x" (not an int): one bad_trace entry naming C and the line, not also a
        # missing_trace entry for the same case (the gate counts C unscored through the bad_trace entry)
        traces = [t for t in TINY_TRACES if t["case_id"] != "C"]
        dataset = write_dataset(tmp_path / "d", TINY_CASES, traces)
        with (dataset / "traces.jsonl").open("a") as handle:
            handle.write(json.dumps({"case_id": "C", "trial": "x", "messages": []}) + "\n")
        result = _evaluate(dataset=str(dataset), out=str(tmp_path / "results"), run_id="b2")
        (error,) = result.errors
        assert (error["kind"], error["case_id"], error["line"]) == ("bad_trace", "C", len(traces) + 1)


class TestBadInputWritesNothing:
    def _results_with_one_run(self, tmp_path, dataset) -> Path:
        out = tmp_path / "results"
        _evaluate(dataset=str(dataset), out=str(out), run_id="good")
        return out

    def test_broken_cases_line(self, tiny_dataset, tmp_path):
        out = self._results_with_one_run(tmp_path, tiny_dataset)
        before = _tree(out)
        lines = (tiny_dataset / "cases.jsonl").read_text().splitlines()
        lines[1] = lines[1][:-5]
        (tiny_dataset / "cases.jsonl").write_text("\n".join(lines) + "\n")
        with pytest.raises(InputFileError) as info:
            _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="good")
        assert info.value.path.endswith("cases.jsonl") and info.value.line == 2
        assert "cases.jsonl:2:" in str(info.value) and "Fix:" in str(info.value)
        assert _tree(out) == before

    @pytest.mark.parametrize("revision", ["../x", "a/b", "..", ""])
    def test_unsafe_revision(self, tmp_path, revision):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES, revision=revision)
        with pytest.raises(UnsafeRevisionError) as info:
            _evaluate(dataset=str(dataset), out=str(tmp_path / "results"))
        assert repr(revision) in str(info.value)
        assert not (tmp_path / "results").exists()

    def test_revision_with_changed_content_is_refused(self, tiny_dataset, tmp_path):
        out = self._results_with_one_run(tmp_path, tiny_dataset)
        before = _tree(out)
        cases = [dict(TINY_CASES[0], expected_calls=[])] + TINY_CASES[1:]
        write_dataset(tiny_dataset, cases, None)
        with pytest.raises(InputFileError, match="bump 'revision'"):
            _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="other")
        assert _tree(out) == before

    def test_run_id_reused_for_another_revision_is_refused(self, tiny_dataset, tmp_path):
        out = self._results_with_one_run(tmp_path, tiny_dataset)
        other = write_dataset(tmp_path / "d2", TINY_CASES, TINY_TRACES, revision="r2")
        with pytest.raises(InputFileError, match="already belongs to dataset revision 'r1'") as raised:
            _evaluate(dataset=str(other), out=str(out), run_id="good")
        # the file named is the run's summary where the user finds it, not its copy inside a publication's folder
        assert raised.value.path == f"{out}/runs/good/summary.json"

    def test_an_unreadable_traces_line_is_listed_not_a_file_error(self, tiny_dataset, tmp_path):
        # one bad line of a traces file never stops the run (cases, tools and the manifest stay file errors)
        out = self._results_with_one_run(tmp_path, tiny_dataset)
        with (tiny_dataset / "traces.jsonl").open("a") as handle:
            handle.write("{not json\n")
        result = _evaluate(dataset=str(tiny_dataset), out=str(out), run_id="good")
        assert result.summary["rows"] == 4
        (error,) = result.errors
        assert (error["kind"], error["path"], error["line"]) == (
            "unreadable_trace", str(tiny_dataset / "traces.jsonl"), 5)
        assert error["message"].startswith("not valid JSON (Expecting property name enclosed in double quotes")


def test_partition_columns_read_as_strings(bundled_runs):
    out, _, _ = bundled_runs
    types = connect(out).execute("SELECT DISTINCT typeof(dataset_revision), typeof(run_id) FROM rows").fetchall()
    assert types == [("VARCHAR", "VARCHAR")]
