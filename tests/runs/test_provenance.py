"""Provenance and the three boundaries (issue 4): seed 000's join scenario, first divergent boundary and owner,
versioned readers, redaction, rescore and handoff — through the real flow, real Parquet files and DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tooleval.runs.spec import RunSpec
from tests.support.datasets import TINY_CASES, TINY_TRACES, tool_call, write_dataset
from tests.support.paths import GOLDEN
from tests.support.runs import run_small
from tooleval.cli import app
from tooleval.capture.envelope import digest_ok
from tooleval.errors import InputFileError
from tooleval.models import Call
from tooleval.capture.provenance import first_divergent_boundary, join_check
from tooleval.storage import ENVELOPE_SCHEMA, ENVELOPE_VERSION, ROW_SCHEMA, ROW_SCHEMA_VERSION, read_versioned

A_INPUT = [{"role": "user", "content": "Find order A-104 and email its receipt."}]
B_INPUT = [{"role": "user", "content": "Find order B-209 and email its receipt."}]
SEED_CASES = [
    {"case_id": "A-104", "input": A_INPUT, "expected_calls": [
        {"name": "get_order", "args": {"order_id": "A-104"}}, {"name": "send_receipt", "args": {"order_id": "A-104"}}]},
    {"case_id": "B-209", "input": B_INPUT, "expected_calls": [
        {"name": "get_order", "args": {"order_id": "B-209"}}, {"name": "send_receipt", "args": {"order_id": "B-209"}}]},
]


def _trace(case_id, request, request_id, order, **extra):
    calls = [tool_call("get_order", json.dumps({"order_id": order})),
             tool_call("send_receipt", json.dumps({"order_id": order}))]
    return {"case_id": case_id, "trial": 0, "agent": {"name": "support-bot", "version": "7"},
            "request_id": request_id, "response_id": "resp-" + request_id, "request": {"messages": request},
            "generation_started_at": "2026-11-29T10:00:00Z", "generation_finished_at": "2026-11-29T10:00:00.900Z",
            "messages": request + [{"role": "assistant", "content": "", "tool_calls": calls}], **extra}


def _rows(result) -> dict:
    return {r["case_id"]: r for r in pq.read_table(result.rows_path).to_pylist()}


@pytest.mark.usefixtures("prefect_harness")
class TestSeed000Join:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_collector_attached_b209_trace_to_a104(self, tmp_path):
        # A-104 and B-209 ran in parallel within the same second; the collector joined B-209's healthy trace to A-104.
        traces = [_trace("A-104", B_INPUT, "req-B209", "B-209"), _trace("B-209", B_INPUT, "req-B209", "B-209")]
        dataset = write_dataset(tmp_path / "d", SEED_CASES, traces)
        result, _ = run_small(dataset=str(dataset), out=str(tmp_path / "out"), run_id="join")
        rows = _rows(result)
        a = rows["A-104"]
        assert a["provenance_status"] == "mismatch"
        assert "B-209" in a["provenance_detail"] and "req-B209" in a["provenance_detail"]
        assert a["failure_owner"] == "evaluation_platform"
        assert rows["B-209"]["provenance_status"] == "ok" and rows["B-209"]["failure_owner"] is None
        assert result.summary["provenance"] == {"ok": 1, "missing": 0, "mismatch": 1}

    @pytest.mark.slow  # the Prefect test harness's server
    def test_model_itself_emitted_b209_for_a104s_request(self, tmp_path):
        traces = [_trace("A-104", A_INPUT, "req-A104", "B-209"), _trace("B-209", B_INPUT, "req-B209", "B-209")]
        dataset = write_dataset(tmp_path / "d", SEED_CASES, traces)
        result, _ = run_small(dataset=str(dataset), out=str(tmp_path / "out"), run_id="agent")
        a = _rows(result)["A-104"]
        assert a["provenance_status"] == "ok" and a["failure_owner"] == "agent"
        # The mismatch objects are the same as in the broken join: only provenance tells them apart.
        assert [c["args_json"] for c in a["missing_calls"]] == ['{"order_id":"A-104"}'] * 2
        assert [c["args_json"] for c in a["extra_calls"]] == ['{"order_id":"B-209"}'] * 2


class TestBoundaries:
    REFUND_9800 = Call.from_raw("issue_refund", {"order_id": "A-104", "amount_cents": 9800})
    REFUND_8900 = Call.from_raw("issue_refund", {"order_id": "A-104", "amount_cents": 8900})
    INVOICE = Call.from_raw("send_invoice", {"invoice_id": "INV-7"})

    def test_model_9800_executor_8900_is_the_adapter(self):
        assert first_divergent_boundary([self.REFUND_9800], None, [(self.REFUND_8900, 1)]) == "adapter"

    def test_adapter_record_pinpoints_the_adapter(self):
        assert first_divergent_boundary([self.REFUND_9800], [self.REFUND_8900], [(self.REFUND_8900, 1)]) == "adapter"

    def test_both_8900_is_no_boundary(self):
        assert first_divergent_boundary([self.REFUND_8900], None, [(self.REFUND_8900, 1)]) is None

    def test_send_invoice_once_at_model_twice_at_executor(self):
        assert first_divergent_boundary([self.INVOICE], None, [(self.INVOICE, 2)]) == "executor"
        assert first_divergent_boundary([self.INVOICE], None, [(self.INVOICE, 1), (self.INVOICE, 1)]) == "executor"

    def test_no_records_no_boundary(self):
        assert first_divergent_boundary([self.INVOICE], None, None) is None

    def test_join_check_without_identifiers_is_missing(self):
        status, _ = join_check("A", None, None, None, True, {})
        assert status == "missing"


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_owners_through_the_flow(tmp_path):
    cases = [
        {"case_id": "r1", "input": "refund", "expected_calls": [
            {"name": "issue_refund", "args": {"order_id": "A-104", "amount_cents": 9800}}]},
        {"case_id": "r2", "input": "refund again", "expected_calls": [
            {"name": "issue_refund", "args": {"order_id": "A-104", "amount_cents": 9800}}]},
        {"case_id": "inv", "input": "send invoice", "expected_calls": [
            {"name": "send_invoice", "args": {"invoice_id": "INV-7"}}]},
    ]

    def trace(case_id, request, model_amount, executor):
        call = tool_call("issue_refund", json.dumps({"order_id": "A-104", "amount_cents": model_amount}))
        return {"case_id": case_id, "trial": 0, "request_id": "q-" + case_id, "response_id": "p-" + case_id,
                "request": {"messages": [{"role": "user", "content": request}]},
                "messages": [{"role": "user", "content": request},
                             {"role": "assistant", "content": "", "tool_calls": [call]}],
                "executor_calls": executor}

    invoice = {"case_id": "inv", "trial": 0, "request_id": "q-inv", "response_id": "p-inv",
               "request": {"messages": [{"role": "user", "content": "send invoice"}]},
               "messages": [{"role": "user", "content": "send invoice"}, {"role": "assistant", "content": "",
                            "tool_calls": [tool_call("send_invoice", '{"invoice_id": "INV-7"}')]}],
               "executor_calls": [{"name": "send_invoice", "args": {"invoice_id": "INV-7"}, "executions": 2,
                                   "status": "ok"}]}
    traces = [
        trace("r1", "refund", 9800, [{"name": "issue_refund", "args": {"order_id": "A-104", "amount_cents": 8900}}]),
        trace("r2", "refund again", 8900, [{"name": "issue_refund",
                                             "args": {"order_id": "A-104", "amount_cents": 8900}}]),
        invoice,
    ]
    dataset = write_dataset(tmp_path / "d", cases, traces)
    result, _ = run_small(dataset=str(dataset), out=str(tmp_path / "out"), run_id="own")
    rows = _rows(result)
    assert (rows["r1"]["first_divergent_boundary"], rows["r1"]["failure_owner"]) == ("adapter", "adapter")
    assert rows["r1"]["f1"] == 1.0  # the model's own call was right
    assert (rows["r2"]["first_divergent_boundary"], rows["r2"]["failure_owner"]) == (None, "agent")
    assert (rows["inv"]["first_divergent_boundary"], rows["inv"]["failure_owner"]) == ("executor", "executor")
    assert rows["inv"]["duplicate_calls"] == 0  # an executor retry is not an agent duplicate
    assert result.summary["failures_by_owner"] == {"adapter": 1, "agent": 1, "executor": 1}
    envelopes = pq.read_table(result.traces_path).to_pylist()
    executor = next(e for e in envelopes if e["case_id"] == "inv")["executor_calls"]
    assert executor[0]["executions"] == 2 and executor[0]["status"] == "ok"


class TestVersions:
    @pytest.mark.parametrize("version", [1, 2])
    def test_every_older_fixture_reads(self, version):
        envelopes = read_versioned(GOLDEN / f"envelope_v{version}.parquet", "traces")
        rows = read_versioned(GOLDEN / f"rows_v{version}.parquet", "rows")
        assert envelopes.schema == ENVELOPE_SCHEMA and rows.schema == ROW_SCHEMA
        assert envelopes.num_rows == rows.num_rows == 4
        assert all(digest_ok(e) for e in envelopes.to_pylist())  # v1 digests keep their own formula
        assert rows.column("f1").to_pylist() == [1.0, 0.5, 0.0, 1.0]
        if version == 1:
            assert envelopes.column("adapter_calls").null_count == 4  # never invented
            assert rows.column("provenance_status").null_count == 4

    def test_version_3_digest_leaves_out_the_partition_columns(self):
        """Envelope version 3 (issue 9 item 6): one capture serves every revision, so its digest must not change
        with the revision or run it is published under, and must still change with the content; a version-2
        digest keeps covering the revision it was written under."""
        current = read_versioned(GOLDEN / "envelope_v3.parquet", "traces").to_pylist()
        older = read_versioned(GOLDEN / "envelope_v2.parquet", "traces").to_pylist()
        for record in current:
            assert digest_ok(record) and digest_ok(dict(record, dataset_revision="r2", run_id="other"))
            assert digest_ok(dict(record, dataset_revision=None, run_id=None))
            assert not digest_ok(dict(record, case_id=record["case_id"] + "x"))
        for record in older:
            assert digest_ok(record) and not digest_ok(dict(record, dataset_revision="r2"))

    @pytest.mark.parametrize("kind,column,name,current", [
        ("traces", "envelope_version", "envelope", ENVELOPE_VERSION),
        ("rows", "row_schema_version", "rows", ROW_SCHEMA_VERSION)])
    def test_newer_version_is_refused_by_name(self, tmp_path, kind, column, name, current):
        table = pq.read_table(GOLDEN / f"{name}_v{current}.parquet")
        index = table.schema.get_field_index(column)
        newer = table.set_column(index, column, pc.add(table[column], 1))
        path = tmp_path / "newer.parquet"
        pq.write_table(newer, path)
        with pytest.raises(InputFileError) as info:
            read_versioned(path, kind)
        message = str(info.value)
        assert f"{column} {current + 1}" in message and str(path) in message and "upgrade tooleval" in message


SECRET_CASES = [
    {"case_id": "p1", "input": [{"role": "user", "content": "Update my email to ana.lima@example.com please"}],
     "expected_calls": [{"name": "update_contact", "args": {"user_id": "u1", "email": "ana.lima@example.com"}}]},
    {"case_id": "p2", "input": [{"role": "user", "content": "Charge card 4111111111111111 for order 7"}],
     "expected_calls": [{"name": "charge", "args": {"order": 7, "card_number": "4111111111111111", "amount": 250}}]},
]
SECRETS = ["ana.lima@example.com", "4111111111111111", "+1-555-0100", "bob@example.org",
           "adapter.only@example.com", "executor.only@example.com", "result.only@example.com"]


def _secret_traces():
    p1 = [{"role": "user", "content": "Update my email to ana.lima@example.com please"},
          {"role": "assistant", "content": "", "tool_calls": [tool_call(
              "update_contact", '{"user_id": "u1", "email": "ana.lima@example.com"}')]},
          {"role": "tool", "content": '{"ok": true, "phone": "+1-555-0100", "backup_email": "bob@example.org",'
                                      ' "email": "bob@example.org"}'},
          {"role": "assistant", "content": "Done, ana.lima@example.com is saved; backup bob@example.org."}]
    p2 = [{"role": "user", "content": "Charge card 4111111111111111 for order 7"},
          {"role": "assistant", "content": "", "tool_calls": [tool_call(
              "charge", '{"order": 7, "card_number": "4111111111111111", "amount": 250.0}')]},
          {"role": "assistant", "content": "", "tool_calls": [tool_call(
              "charge", '{"card_number": "4111111111111111", "amount": 2')]}]
    # Values that appear only at the adapter and executor boundaries must be redacted there too.
    adapter = [{"name": "update_contact", "args": {"user_id": "u1", "email": "adapter.only@example.com"}}]
    executor = [{"name": "update_contact", "arguments": '{"user_id": "u1", "email": "executor.only@example.com"}',
                 "executions": 1, "status": "ok", "result": '{"email": "result.only@example.com"}'}]
    return [{"case_id": "p1", "trial": 0, "messages": p1, "request": {"messages": p1[:1]},
             "adapter_calls": adapter, "executor_calls": executor},
            {"case_id": "p2", "trial": 0, "messages": p2, "request": {"messages": p2[:1]}}]


def _all_text(folder: Path) -> str:
    chunks = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            chunks.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
        chunks.append(path.read_bytes().decode("latin-1"))
    return "\n".join(chunks)


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_redaction_leaves_no_raw_value_and_the_same_scores(tmp_path):
    dataset = write_dataset(tmp_path / "d", SECRET_CASES, _secret_traces())
    out = tmp_path / "redacted"
    redacted, _ = run_small(dataset=str(dataset), out=str(out), run_id="red")
    CliRunner().invoke(app, ["handoff", "--run-id", "red", "--case", "p2", "--out", str(out)])
    text = _all_text(out)
    for secret in SECRETS:
        assert secret not in text, secret
    assert "redacted:" in text
    plain, _ = run_small(dataset=str(dataset), out=str(tmp_path / "plain"), run_id="plain", redaction=False)
    columns = ["case_id", "tp", "fp", "fn", "f1", "ragas_tool_call_f1", "exact_match", "duplicate_calls",
               "malformed_calls", "provenance_status", "first_divergent_boundary"]
    assert (pq.read_table(redacted.rows_path, columns=columns).to_pylist()
            == pq.read_table(plain.rows_path, columns=columns).to_pylist())
    assert redacted.summary["mean_f1"] == plain.summary["mean_f1"] == pytest.approx((1.0 + 2 / 3) / 2)
    fields = {e["case_id"]: e["redacted_fields"] for e in pq.read_table(redacted.traces_path).to_pylist()}
    assert "email" in fields["p1"] and "phone" in fields["p1"]


@pytest.mark.usefixtures("prefect_harness")
class TestRedactionKey:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_deleting_the_disposable_folder_keeps_the_run_rescorable(self, tiny_dataset, tmp_path):
        import shutil

        out = tmp_path / "out"
        run_small(dataset=str(tiny_dataset), out=str(out), run_id="k1")
        shutil.rmtree(out / ".tooleval")
        result = CliRunner().invoke(app, ["rescore", "--run-id", "k1", "--to-run-id", "k2", "--out", str(out)],
                                    env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output

    @pytest.mark.slow  # the Prefect test harness's server
    def test_a_different_key_is_refused_by_name(self, tiny_dataset, tmp_path):
        out = tmp_path / "out"
        run_small(dataset=str(tiny_dataset), out=str(out), run_id="k1")
        (out / "redaction.key").write_text("another key")
        result = CliRunner().invoke(app, ["rescore", "--run-id", "k1", "--out", str(out)], env={"COLUMNS": "300"})
        assert result.exit_code == 2 and "redaction.key" in result.output and "Traceback" not in result.output

    @pytest.mark.slow  # the Prefect test harness's server
    def test_extra_fields_add_to_the_defaults(self, tmp_path):
        from tooleval.runs.plan import plan_run

        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        plan = plan_run(RunSpec(dataset=dataset, traces=None, out=tmp_path / "out", run_id="x", redact_fields=["customer_id"]))
        assert plan.redaction.fields == ["api_key", "card_number", "customer_id", "email", "phone"]


@pytest.mark.usefixtures("prefect_harness")
class TestRescoreAndHandoff:
    @pytest.mark.slow  # the Prefect test harness's server
    def test_handoff_opens_the_named_case_when_failed_generations_were_filtered(self, tmp_path):
        # Case A's traces are missing (its generations failed and were filtered): positions shift, ids do not.
        traces = [t for t in TINY_TRACES if t["case_id"] != "A"]
        dataset = write_dataset(tmp_path / "d", TINY_CASES, traces)
        out = tmp_path / "out"
        run_small(dataset=str(dataset), out=str(out), run_id="h1")
        result = CliRunner().invoke(app, ["handoff", "--run-id", "h1", "--case", "C", "--out", str(out)])
        assert result.exit_code == 0, result.output
        handoff = json.loads((out / "runs" / "h1" / "handoff" / "C" / "trial-0" / "handoff.json").read_text())
        assert handoff["case_id"] == "C" and handoff["calls"]["model_raw"] == []
        assert json.loads((out / "runs" / "h1" / "handoff" / "C" / "trial-0" / "case.json").read_text())["case_id"] == "C"
        b = CliRunner().invoke(app, ["handoff", "--run-id", "h1", "--case", "B", "--out", str(out)])
        assert b.exit_code == 0
        hb = json.loads((out / "runs" / "h1" / "handoff" / "B" / "trial-0" / "handoff.json").read_text())
        assert hb["case_id"] == "B" and hb["calls"]["model_raw"] == [{"name": "get_order", "arguments": '{"id": "B"'}]
        assert hb["rescore_command"].endswith("--run-id h1 --case=B --trial 0")
        missing = CliRunner().invoke(app, ["handoff", "--run-id", "h1", "--case", "A", "--out", str(out)])
        assert missing.exit_code == 2

    @pytest.mark.slow  # the Prefect test harness's server
    def test_rescore_reproduces_a_row_into_a_new_run_without_generation(self, tiny_dataset, tmp_path):
        out = tmp_path / "out"
        first, _ = run_small(dataset=str(tiny_dataset), out=str(out), run_id="orig")
        result = CliRunner().invoke(app, ["rescore", "--run-id", "orig", "--case", "A", "--trial", "1",
                                          "--to-run-id", "again", "--out", str(out)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        new_rows = pq.read_table(out / "rows" / "dataset_revision=r1" / "run_id=again").to_pylist()
        old = next(r for r in pq.read_table(first.rows_path).to_pylist() if (r["case_id"], r["trial"]) == ("A", 1))
        (new,) = new_rows
        for key in ("trace_digest", "tp", "fp", "fn", "f1", "ragas_tool_call_f1", "wrong_args"):
            assert new[key] == old[key], key
        summary = json.loads((out / "runs" / "again" / "summary.json").read_text())
        assert summary["rescored_from"] == {"run_id": "orig", "case": "A", "trial": 1}
        assert "generation" not in result.output  # no generation stage ran

    @pytest.mark.slow  # the Prefect test harness's server
    def test_rescore_with_changed_case_rules_under_the_same_revision_is_refused(self, tiny_dataset, tmp_path):
        out = tmp_path / "out"
        run_small(dataset=str(tiny_dataset), out=str(out), run_id="orig")
        changed = write_dataset(tmp_path / "changed", [dict(TINY_CASES[0], forbidden_tools=["refund"]),
                                                        *TINY_CASES[1:]], TINY_TRACES)
        result = CliRunner().invoke(app, ["rescore", "--run-id", "orig", "--out", str(out), "--dataset",
                                          str(changed)], env={"COLUMNS": "300"})
        assert result.exit_code == 2 and "bump the revision" in result.output

    @pytest.mark.slow  # the Prefect test harness's server
    def test_rescore_reads_version_1_envelopes(self, tmp_path):
        from flows.rescore import rescore

        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "out"
        part = out / "traces" / "dataset_revision=r1" / "run_id=golden"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes((GOLDEN / "envelope_v1.parquet").read_bytes())
        (out / "runs" / "golden").mkdir(parents=True)
        from tooleval.runs.plan import plan_run

        ref = plan_run(RunSpec(dataset=dataset, traces=None, out=out, run_id="golden", redaction=False)).dataset
        (out / "runs" / "golden" / "summary.json").write_text(json.dumps(
            {"dataset_revision": "r1", "run_id": "golden", "dataset": {"path": str(dataset)},
             "dataset_ref": ref.model_dump(), "redaction": None}))
        state = rescore(run_id="golden", out=str(out), to_run_id="v2", return_state=True)
        result = state.result()
        rows = {(r["case_id"], r["trial"]): r for r in pq.read_table(result.rows_path).to_pylist()}
        assert rows["A", 1]["f1"] == 0.5 and rows["C", 0]["f1"] == 1.0
        assert all(r["provenance_status"] == "missing" for r in rows.values())  # no request recorded in v1
