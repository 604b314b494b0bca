"""Tool schema checks through real runs (issue 13 item 6): the bundled tau-bench airline run, a small dataset with
a tools.json that makes every finding kind, a dataset without tools.json, older row partitions, and the gate.

The bundled run's findings are counted independently here, with ``jsonschema`` directly over the raw recorded
traces (every object schema made strict with ``additionalProperties: false``): 4 unknown parameters, all in one
``update_reservation_flights`` call whose two flights carry ``origin`` and ``destination``, which the schema's
flight items (``flight_number``, ``date``) do not declare.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from jsonschema import Draft202012Validator
from junitparser import Failure, JUnitXml
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, tool_call, trace, write_dataset
from tests.support.paths import BUNDLED, GOLDEN
from tooleval.cli import app
from tooleval.models import Case, ToolSpec
from tooleval.scoring.rows import score_envelopes
from tooleval.storage import connect, read_versioned

runner = CliRunner()


def _strict(schema):
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if isinstance(schema.get("properties"), dict):
            schema.setdefault("additionalProperties", False)
    return [_strict(item) for item in schema] if isinstance(schema, list) else schema


def independent_findings(dataset: Path, traces: Path) -> Counter:
    """(tool, kind) -> findings, from the raw traces and tools.json with jsonschema alone (not tooleval)."""
    tools = {t["name"]: t for t in json.loads((dataset / "tools.json").read_text())}
    validators = {name: Draft202012Validator(_strict(t.get("parameters") or {})) for name, t in tools.items()}
    found: Counter = Counter()
    opener = gzip.open if traces.suffix == ".gz" else open
    with opener(traces, "rt") as handle:
        for line in map(json.loads, handle):
            for message in line["messages"]:
                for call in message.get("tool_calls") or []:
                    name, text = call["function"]["name"], call["function"]["arguments"]
                    try:
                        args = json.loads(text) if text else {}
                    except ValueError:
                        continue  # malformed: not checked
                    if not isinstance(args, dict):
                        continue
                    if name not in tools:
                        found[name, "undeclared_tool"] += 1
                        continue
                    for error in validators[name].iter_errors(args):
                        if error.validator == "additionalProperties":
                            declared = error.schema.get("properties", {})
                            found[name, "unknown_parameter"] += sum(1 for k in error.instance if k not in declared)
                        elif error.validator == "required":
                            found[name, "missing_required"] += 1
                        elif error.validator == "type":
                            found[name, "wrong_type"] += 1
    return found


class TestBundledRun:
    """The bundled run (``base`` of the session's ``bundled_pair``): its figures stay, 4 advisory findings."""

    @pytest.mark.slow  # the Prefect test harness's server
    def test_figures_unchanged_and_findings_counted(self, bundled_pair):
        summary = json.loads((bundled_pair / "runs" / "base" / "summary.json").read_text())
        assert summary["rows"] == 200 and summary["exact_match_rows"] == 12
        assert round(summary["mean_f1"], 4) == 0.3538 and round(summary["mean_ragas_tool_call_f1"], 4) == 0.3449
        drift = json.loads((bundled_pair / "runs" / "base" / "drift.json").read_text())
        assert drift["verdict"] == "ok"
        expected = independent_findings(BUNDLED, BUNDLED / "traces.jsonl.gz")
        assert expected == Counter({("update_reservation_flights", "unknown_parameter"): 4})
        assert summary["schema_findings"] == 4 and summary["rows_with_schema_findings"] == 1
        assert summary["rows_schema_checked"] == 200
        assert summary["schema_findings_by_tool"] == {"update_reservation_flights": {"unknown_parameter": 4}}

    @pytest.mark.slow  # the Prefect test harness's server
    def test_rows_carry_the_findings_as_advisory_violations(self, bundled_pair):
        con = connect(bundled_pair)
        found = con.execute(
            "SELECT case_id, trial, f.path FROM (SELECT case_id, trial, unnest(schema_findings) AS f FROM rows "
            "WHERE run_id = 'base') ORDER BY ALL").fetchall()
        (case_id, trial), = {(c, t) for c, t, _ in found}
        assert [p for _, _, p in found] == ["flights[0].destination", "flights[0].origin", "flights[1].destination",
                                            "flights[1].origin"]
        row = con.execute("SELECT mismatch_categories, violations FROM rows WHERE run_id = 'base' AND case_id = ? "
                          "AND trial = ?", [case_id, trial]).fetchone()
        assert "schema" in row[0]
        schema = [v for v in row[1] if v["rule"] == "tool_schema"]
        assert [(v["severity"], v["tool"]) for v in schema] == [("advisory", "update_reservation_flights")]
        assert con.execute("SELECT count(*) FROM rows WHERE run_id = 'base' AND list_contains(mismatch_categories, "
                           "'schema')").fetchone()[0] == 1

    @pytest.mark.slow  # the Prefect test harness's server
    def test_report_lists_the_findings(self, bundled_pair):
        html = (bundled_pair / "runs" / "base" / "report.html").read_text()
        section = html[html.index('id="table-schema"'):html.index("<h2>Failing rows</h2>")]
        assert "<td>update_reservation_flights</td>" in section and "flights[0].origin" in section
        assert "4 finding(s) in 1 row(s)" in html


TOOLS = [
    {"name": "get_order", "parameters": {"type": "object", "properties": {"id": {"type": "string"}},
                                         "required": ["id"]}},
    {"name": "refund",
     "parameters": {"type": "object", "properties": {"id": {"type": "string"}, "cents": {"type": "integer"}},
                    "required": ["id", "cents"]}},
]
SCHEMA_TRACES = [
    *TINY_TRACES,
    # B trial 1: every kind — an undeclared tool, a missing required parameter, an unknown one, a wrong type
    trace("B", 1, [tool_call("get_ordr", '{"id": "B"}'), tool_call("get_order", '{"order": "B"}'),
                   tool_call("get_order", '{"id": 7}')], 0.0),
]


@pytest.fixture(scope="module")
def schema_runs(tmp_path_factory, prefect_harness):
    """The tiny dataset with and without a tools.json, each run once through ``tooleval run``."""
    root = tmp_path_factory.mktemp("schema")
    with_tools = write_dataset(root / "with", TINY_CASES, SCHEMA_TRACES)
    (with_tools / "tools.json").write_text(json.dumps(TOOLS))
    without = write_dataset(root / "without", TINY_CASES, SCHEMA_TRACES, revision="r2")
    out = root / "results"
    for dataset, run_id in ((with_tools, "with"), (without, "without")):
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", run_id])
        assert result.exit_code == 0, result.output
    return out, with_tools


class TestSmallDataset:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_every_kind_through_the_flow(self, schema_runs):
        out, dataset = schema_runs
        summary = json.loads((out / "runs" / "with" / "summary.json").read_text())
        expected = independent_findings(dataset, dataset / "traces.jsonl")
        assert expected == Counter({("get_ordr", "undeclared_tool"): 1, ("get_order", "missing_required"): 1,
                                    ("get_order", "unknown_parameter"): 1, ("get_order", "wrong_type"): 1})
        by_tool = {(tool, kind): n for tool, kinds in summary["schema_findings_by_tool"].items()
                   for kind, n in kinds.items()}
        assert by_tool == dict(expected)
        assert (summary["schema_findings"], summary["rows_with_schema_findings"]) == (4, 1)
        rows = {(r["case_id"], r["trial"]): r for r in pq.read_table(
            next((out / "rows").glob("*/run_id=with/*.parquet"))).to_pylist()}
        assert [(f["call_index"], f["kind"], f["path"]) for f in rows["B", 1]["schema_findings"]] == [
            (0, "undeclared_tool", ""), (1, "missing_required", "id"), (1, "unknown_parameter", "order"),
            (2, "wrong_type", "id")]
        assert rows["A", 0]["schema_findings"] == [] and rows["A", 0]["exact_match"]
        assert rows["B", 0]["schema_findings"] == []  # a malformed call is not checked (it is `malformed`)

    @pytest.mark.slow  # the Prefect test harness's server
    def test_figures_equal_the_run_without_tools_json(self, schema_runs):
        out, _ = schema_runs
        con = connect(out)
        metrics = "case_id, trial, tp, fp, fn, f1, exact_match, ragas_tool_call_f1"
        with_tools = con.execute(f"SELECT {metrics} FROM rows WHERE run_id = 'with' ORDER BY 1, 2").fetchall()
        without = con.execute(f"SELECT {metrics} FROM rows WHERE run_id = 'without' ORDER BY 1, 2").fetchall()
        assert with_tools == without and len(with_tools) == 5

    @pytest.mark.slow  # the Prefect test harness's server
    def test_without_tools_json_nothing_is_checked(self, schema_runs):
        out, _ = schema_runs
        summary = json.loads((out / "runs" / "without" / "summary.json").read_text())
        assert (summary["rows_schema_checked"], summary["schema_findings"]) == (0, 0)
        assert summary["schema_findings_by_tool"] == {}
        con = connect(out)
        assert con.execute("SELECT count(*) FROM rows WHERE run_id = 'without' AND schema_findings IS NULL"
                           ).fetchone()[0] == 5
        html = (out / "runs" / "without" / "report.html").read_text()
        assert "No call was checked: the dataset has no tools.json" in html

    @pytest.mark.slow  # the Prefect test harness's server
    def test_gate_blocks_only_the_named_tool(self, schema_runs, tmp_path):
        out, _ = schema_runs
        # judged by the rules alone: rows A#1 and B#0 differ from their references, which would fail them by default
        config = tmp_path / "gate.toml"
        config.write_text('schema_version = 1\nrow_outcome = "no_blocking"\n')
        advisory = runner.invoke(app, ["gate", "--run-id", "with", "--out", str(out), "--config", str(config)],
                                 env={"COLUMNS": "250"})
        assert advisory.exit_code == 0, advisory.output
        config.write_text('schema_version = 1\nrow_outcome = "no_blocking"\n'
                          '[tool_schema]\nblocking_tools = ["get_order"]\n')
        blocked = runner.invoke(app, ["gate", "--run-id", "with", "--out", str(out), "--config", str(config)],
                                env={"COLUMNS": "250"})
        assert blocked.exit_code == 1, blocked.output
        assert "1 blocking row(s)" in blocked.output and "tool_schema" in blocked.output
        assert any(line.startswith("  B#1  f1 ") and line.endswith("  tool_schema") for line in
                   blocked.output.splitlines()), blocked.output
        xml = JUnitXml.fromfile(str(out / "runs" / "with" / "junit.xml"))
        failing = [c.name for suite in xml for c in suite if any(isinstance(r, Failure) for r in c.result)]
        assert failing == ["B#1"]
        config.write_text('schema_version = 1\nrow_outcome = "no_blocking"\n'
                          '[tool_schema]\nblocking_tools = ["refund"]\n')
        other = runner.invoke(app, ["gate", "--run-id", "with", "--out", str(out), "--config", str(config)])
        assert other.exit_code == 0, other.output


def golden_tools() -> dict[str, ToolSpec]:
    """The tools the golden row fixtures were scored with: ``get_order`` takes ``order_id`` (so each readable
    ``get_order`` call has an unknown ``id`` and lacks ``order_id``)."""
    return {"get_order": ToolSpec(name="get_order", parameters={
                "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}),
            "refund": ToolSpec(name="refund", parameters={
                "type": "object", "properties": {"id": {"type": "string"}, "cents": {"type": "integer"}},
                "required": ["id", "cents"]})}


def _published_v7_rows(record: Path | None = None) -> list[dict]:
    """The version-6 fixture's envelopes scored, then judged as :class:`flows._publish.RunPublisher` judges a shard
    (:meth:`tooleval.runs.gate.GateJudge.add_table`, :func:`tooleval.runs.gate.with_gate_verdicts`) under a gate
    with a waiver on case B's reference_mismatch and case C quarantined; written to ``record`` when given."""
    from datetime import date

    import pyarrow as pa

    from tests.scoring.test_name_only import AT, NAME_ONLY_TRACES
    from tooleval.capture.envelope import build_envelope
    from tooleval.models import RecordedTrace
    from tooleval.rules import GateConfig, QuarantineEntry, Waiver
    from tooleval.runs.gate import GATE_COLUMNS, GateJudge, with_gate_verdicts
    from tooleval.storage import ROW_SCHEMA

    envelopes = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
    revision = envelopes[0]["dataset_revision"]
    envelopes += [build_envelope(RecordedTrace.model_validate(t), revision, AT) for t in NAME_ONLY_TRACES]
    cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
    table = pa.Table.from_pylist(score_envelopes(cases, envelopes, tools=golden_tools()), schema=ROW_SCHEMA)
    config = GateConfig(waivers=[Waiver(case="B", rule="reference_mismatch", owner="qa", reason="B's malformed call",
                                        expires=date(2099, 12, 31))],
                        quarantine=[QuarantineEntry(case="C", owner="qa", reason="flaky reference")])
    table = with_gate_verdicts(table, GateJudge(None, [], config).add_table(table.select(GATE_COLUMNS)))
    if record is not None:
        pq.write_table(table, record)
    return table.to_pylist()


class TestOlderRows:
    def test_version_2_rows_read_as_not_checked(self):
        rows = read_versioned(GOLDEN / "rows_v2.parquet", "rows")
        assert rows.column("schema_findings").null_count == 4

    def test_version_3_fixture_is_what_the_scorer_writes(self):
        """``rows_v3.parquet``: ``envelope_v2.parquet`` scored against the tiny cases and a tools.json whose
        ``get_order`` takes ``order_id`` (so each readable ``get_order`` call has an unknown ``id`` and lacks
        ``order_id``)."""
        tools = golden_tools()
        envelopes = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
        cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
        scored = score_envelopes(cases, envelopes, tools=tools)
        stored = read_versioned(GOLDEN / "rows_v3.parquet", "rows").to_pylist()
        columns = ("case_id", "trial", "f1", "exact_match", "mismatch_categories", "schema_findings", "violations")
        assert [{k: r[k] for k in columns} for r in stored] == [{k: r[k] for k in columns} for r in scored]
        assert [len(r["schema_findings"]) for r in stored] == [2, 2, 0, 0]
        assert {r["row_schema_version"] for r in stored} == {3}

    def test_version_4_fixture_is_what_the_scorer_writes(self):
        """``rows_v4.parquet``: the version-3 fixture's envelopes and tools, plus an envelope whose trace could not
        be read (``bad_trace``): its error is two columns, the kind and the message."""
        tools = golden_tools()
        envelopes = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
        broken = dict(envelopes[3], trial=1, messages_json=None, model_calls=[], trace_digest=None,
                      error="bad_trace: case 'C' trial 1: messages: field required")
        cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
        scored = score_envelopes(cases, [*envelopes, broken], tools=tools)
        stored = read_versioned(GOLDEN / "rows_v4.parquet", "rows").to_pylist()
        # read as the current version (match mode unordered, calls_match = exact_match): today's scorer gives the
        # same row for these cases, whose mode is the default, except for the version it writes
        skip = {"scorer_version", "ragas_version", "row_schema_version"}
        assert [{k: v for k, v in r.items() if k not in skip} for r in stored] == [
            {k: v for k, v in r.items() if k not in skip} for r in scored]
        assert [(r["error_kind"], r["error_message"]) for r in stored] == [(None, None)] * 4 + [
            ("bad_trace", "case 'C' trial 1: messages: field required")]
        assert [r["f1"] for r in stored] == [1.0, 0.5, 0.0, 1.0, None]  # A exact, A wrong cents, B malformed, C
        assert {r["row_schema_version"] for r in stored} == {4}

    def test_version_5_fixture_is_what_the_scorer_writes(self):
        """``rows_v5.parquet``: the version-4 fixture's envelopes and tools scored with a match mode per case — A
        ``strict`` (trial 0 in order: matches; trial 1 wrong cents: does not), B ``superset`` of an empty
        reference (its one malformed call is allowed: ``calls_match`` true although ``exact_match`` is false), C
        an ordered ``subset`` (the abstention matches; the unreadable trace has no verdict)."""
        tools = golden_tools()
        envelopes = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
        broken = dict(envelopes[3], trial=1, messages_json=None, model_calls=[], trace_digest=None,
                      error="bad_trace: case 'C' trial 1: messages: field required")
        modes = {"A": {"match_mode": "strict"}, "B": {"match_mode": "superset", "expected_calls": []},
                 "C": {"match_mode": "subset", "ordered": True}}
        cases = {c["case_id"]: Case.model_validate({**c, **modes[c["case_id"]]}) for c in TINY_CASES}
        scored = score_envelopes(cases, [*envelopes, broken], tools=tools)
        stored = read_versioned(GOLDEN / "rows_v5.parquet", "rows").to_pylist()
        # read as the current version (name_only false: no call of these traces lacks its arguments), today's
        # scorer gives the same rows, except for the version it writes
        skip = {"scorer_version", "ragas_version", "row_schema_version"}
        assert [{k: v for k, v in r.items() if k not in skip} for r in stored] == [
            {k: v for k, v in r.items() if k not in skip} for r in scored]
        assert [(r["match_mode"], r["calls_match"], r["exact_match"]) for r in stored] == [
            ("strict", True, True), ("strict", False, False), ("superset", True, False),
            ("subset_ordered", True, True), ("subset_ordered", None, None)]
        assert {r["row_schema_version"] for r in stored} == {5}

    def test_version_6_fixture_is_what_the_scorer_writes(self):
        """``rows_v6.parquet``: the version-4 fixture's envelopes and tools (default match mode) plus two traces whose
        calls' arguments were not captured (tests/scoring/test_name_only.py ``NAME_ONLY_TRACES``): A#2 get_order(?) and
        refund(A, 9800) match by name and key (f1 1.0, not an exact match); B#1 refund(?) where get_order(B) is
        expected (f1 0.0); each with one advisory ``args_not_captured``."""
        from tests.scoring.test_name_only import AT, NAME_ONLY_TRACES
        from tooleval.capture.envelope import build_envelope
        from tooleval.models import RecordedTrace

        envelopes = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
        revision = envelopes[0]["dataset_revision"]
        envelopes += [build_envelope(RecordedTrace.model_validate(t), revision, AT) for t in NAME_ONLY_TRACES]
        cases = {c["case_id"]: Case.model_validate(c) for c in TINY_CASES}
        scored = score_envelopes(cases, envelopes, tools=golden_tools())
        stored = read_versioned(GOLDEN / "rows_v6.parquet", "rows").to_pylist()
        # read as the current version (no gate verdict stored: null, as the scoring stage leaves it), today's
        # scorer gives the same rows, except for the version it writes
        skip = {"scorer_version", "ragas_version", "row_schema_version"}
        assert [{k: v for k, v in r.items() if k not in skip} for r in stored] == [
            {k: v for k, v in r.items() if k not in skip} for r in scored]
        assert [(r["case_id"], r["trial"], r["f1"], r["exact_match"], r["name_only"]) for r in stored] == [
            ("A", 0, 1.0, True, False), ("A", 1, 0.5, False, False), ("B", 0, 0.0, False, False),
            ("C", 0, 1.0, True, False), ("A", 2, 1.0, False, True), ("B", 1, 0.0, False, True)]
        assert [[v["rule"] for v in r["violations"]] for r in stored[4:]] == [["args_not_captured"]] * 2
        assert {r["row_schema_version"] for r in stored} == {6}

    def test_version_7_fixture_is_what_the_scorer_and_the_gate_write(self):
        """``rows_v7.parquet``: the version-6 fixture's rows as a run publishes them, judged by a gate of the default
        row outcome (``match``) with a waiver of ``reference_mismatch`` on case B and case C quarantined. By hand:
        A#0 matches (pass); A#1 wrong cents (fail: reference_mismatch); B#0 malformed (its reference_mismatch is
        waived: waived); C#0 quarantined whatever it did; A#2 and B#1 matched by name only, which the gate blocks
        unless accept_name_only (fail: args_not_captured; B#1's reference_mismatch is waived, that one is not)."""
        stored = read_versioned(GOLDEN / "rows_v7.parquet", "rows").to_pylist()
        skip = {"scorer_version", "ragas_version"}
        assert [{k: v for k, v in r.items() if k not in skip} for r in stored] == [
            {k: v for k, v in r.items() if k not in skip} for r in _published_v7_rows()]
        assert [(r["case_id"], r["trial"], r["gate_verdict"], r["gate_rules"]) for r in stored] == [
            ("A", 0, "pass", []), ("A", 1, "fail", ["reference_mismatch"]), ("B", 0, "waived", ["reference_mismatch"]),
            ("C", 0, "quarantined", []), ("A", 2, "fail", ["args_not_captured"]),
            ("B", 1, "fail", ["args_not_captured"])]
        assert [r["blocking"] for r in stored] == [False] * 6  # the scorer's column: no recorded blocking severity
        assert {r["row_schema_version"] for r in stored} == {7}

    @pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
    def test_older_rows_read_the_gate_verdict_as_null(self, tmp_path, version):
        """Rows published before version 7 never stored the gate's verdict: every reader gives null (never one
        rebuilt from the row's columns, which would miss the run's waivers and quarantine)."""
        from tooleval.storage import scan_rows_sql, source_connection

        part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=old"
        part.mkdir(parents=True)
        path = part / "part-0.parquet"
        path.write_bytes((GOLDEN / f"rows_v{version}.parquet").read_bytes())
        arrow = read_versioned(path, "rows")
        assert arrow["gate_verdict"].null_count == arrow.num_rows == arrow["gate_rules"].null_count
        source = scan_rows_sql(path)
        assert source_connection(source).execute(
            f"SELECT count(*), count(gate_verdict), count(gate_rules) FROM {source}").fetchone() == (
            arrow.num_rows, 0, 0)

    @pytest.mark.parametrize("version", [1, 2, 3, 4])
    def test_older_rows_read_as_unordered_with_their_exact_match(self, tmp_path, version):
        """Rows before version 5 were scored under the one rule there was: every reader gives them ``match_mode``
        ``unordered`` and ``calls_match`` = ``exact_match`` (null where the row has no verdict)."""
        from tooleval.runs.gate import gate_batches
        from tooleval.storage import scan_rows_sql, source_connection

        part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=old"
        part.mkdir(parents=True)
        path = part / "part-0.parquet"
        path.write_bytes((GOLDEN / f"rows_v{version}.parquet").read_bytes())
        exact = pq.read_table(path, columns=["exact_match"])["exact_match"].to_pylist()
        expected = [("unordered", value) for value in exact]
        arrow = read_versioned(path, "rows")
        assert list(zip(arrow["match_mode"].to_pylist(), arrow["calls_match"].to_pylist())) == expected
        only = read_versioned(path, "rows", ["calls_match", "match_mode"])  # without asking for exact_match
        assert list(zip(only["match_mode"].to_pylist(), only["calls_match"].to_pylist())) == expected
        source = scan_rows_sql(path)
        sql = source_connection(source).execute(f"SELECT match_mode, calls_match FROM {source}").fetchall()
        assert sql == expected
        rows = [row for batch in gate_batches([path]) for row in batch]
        assert len(rows) == len(exact)

    def test_a_version_3_error_text_reads_as_kind_and_message(self, tmp_path):
        """A version-3 row kept its error as one ``"<kind>: <message>"`` text; every reader splits it the same way
        (the kind before the first colon, the message after ``": "``; a kind outside the closed set is ``other``)."""
        import pyarrow as pa

        from tooleval.storage import scan_rows_sql, source_connection

        table = pq.read_table(GOLDEN / "rows_v3.parquet")
        texts = ["scoring_error: calls differ: 2 != 3", None, "weird: thing", None]
        table = table.set_column(table.schema.get_field_index("error"), "error", pa.array(texts, pa.string()))
        part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=old"
        part.mkdir(parents=True)
        pq.write_table(table, part / "part-0.parquet")
        expected = [("scoring_error", "calls differ: 2 != 3"), (None, None), ("other", "weird: thing"), (None, None)]
        arrow = read_versioned(part / "part-0.parquet", "rows")
        assert list(zip(arrow["error_kind"].to_pylist(), arrow["error_message"].to_pylist())) == expected
        assert "error" not in arrow.column_names
        source = scan_rows_sql(part / "part-0.parquet")
        sql = source_connection(source).execute(f"SELECT error_kind, error_message FROM {source}").fetchall()
        assert sql == expected
        # the gate reads the same split
        from tooleval.runs.gate import gate_batches

        (batch,) = list(gate_batches([part / "part-0.parquet"]))
        assert [(r["error_kind"], r["error_message"]) for r in batch] == expected

    def test_a_version_2_partition_still_summarizes_and_reports(self, tmp_path):
        import duckdb

        from tooleval.runs.aggregate import summarize_rows
        from tooleval.runs.report import _data
        from tooleval.storage import scan_rows_sql

        part = tmp_path / "rows" / "dataset_revision=r1" / "run_id=old"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes((GOLDEN / "rows_v2.parquet").read_bytes())  # no schema_findings
        source = scan_rows_sql(part / "part-0.parquet")
        figures = summarize_rows(source)
        assert figures["rows"] == 4 and figures["rows_schema_checked"] == 0 and figures["schema_findings"] == 0
        con = duckdb.connect()
        rows, failing = _data.worst_rows(con, source)
        assert failing == 2 and all(r["schema_findings"] is None for r in rows)  # A#1 (f1 0.5) and B#0 (0.0)
        assert _data.schema_findings(con, source) == []
