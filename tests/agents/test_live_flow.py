"""The live agent through the whole flow against a real chat-completions server on 127.0.0.1 (issue 6):
repeats, the generation cache (a second run asks nothing), resuming after SIGKILL, retries, errors kept per row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.support import chat_server as chat
from tests.support.datasets import write_dataset
from tests.support.runs import published_rows, run_small
from tooleval.cli import app
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # the Prefect test harness's server

KEY_ENV = "OPENAI_API_KEY"


TOOLS = [{"name": "get_order", "side_effect": "read",
          "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]


def _dataset(tmp_path: Path, case_ids: list[str]) -> Path:
    cases = [{"case_id": c, "input": f"question {c}", "expected_calls": [{"name": "get_order", "args": {"id": c}}]}
             for c in case_ids]
    folder = write_dataset(tmp_path / "d", cases, None)
    (folder / "tools.json").write_text(json.dumps(TOOLS))
    return folder


def _ok(case_id: str, delay_s: float = 0.0):
    return chat.completion(chat.call("get_order", json.dumps({"id": case_id})), response_id=f"resp-{case_id}",
                           delay_s=delay_s)



def _run_args(server, dataset, out, run_id, *extra):
    return ["run", "--agent", "openai", "--base-url", server.base_url, "--model", "scripted", "--dataset",
            str(dataset), "--out", str(out), "--run-id", run_id, *extra]


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")


@pytest.mark.usefixtures("prefect_harness")
class TestLiveRuns:
    def test_repeats_and_a_second_run_makes_no_generation_request(self, tmp_path):
        dataset = _dataset(tmp_path, ["c1", "c2"])
        out = tmp_path / "out"
        with chat.ChatServer({"question c1": [_ok("c1")], "question c2": [_ok("c2")]}) as server:
            first = CliRunner().invoke(app, _run_args(server, dataset, out, "live1", "--repeats", "3",
                                                      "--outcome", "exact"), env={"COLUMNS": "200"})
            assert first.exit_code == 0, first.output
            assert server.count == 6  # 2 cases x 3 trials
            rows = published_rows(out, "live1")
            assert len(rows) == 6 and {r["trial"] for r in rows} == {0, 1, 2}
            assert sorted(s.body["seed"] for s in server.requests if s.route == "question c1") == [0, 1, 2]
            assert all(r["f1"] == 1.0 and r["provenance_status"] == "ok" for r in rows)
            assert all(r["request_id"].startswith("tooleval-") and r["response_id"].startswith("resp-") for r in rows)
            second = CliRunner().invoke(app, _run_args(server, dataset, out, "live2", "--repeats", "3",
                                                       "--outcome", "exact"), env={"COLUMNS": "200"})
            assert second.exit_code == 0, second.output
            assert server.count == 6  # zero generation requests the second time
        summary = json.loads((out / "runs" / "live1" / "summary.json").read_text())
        assert summary["variability"]["pass@k"] == {"1": 1.0, "2": 1.0, "3": 1.0}
        assert "pass@k" in first.output or "pass@" in first.output

    def test_429_storm_persistent_400_and_malformed_arguments(self, tmp_path):
        from tooleval.agents import OpenAIAgentConfig

        dataset = _dataset(tmp_path, ["c1", "c2", "c3"])
        storm = [chat.error(429, headers={"Retry-After": "0"})] * 4 + [_ok("c1")]
        routes = {
            "question c1": storm,
            "question c2": [chat.error(400, "bad request")],
            "question c3": [chat.completion(chat.call("get_order", '{"id": "c3"'), response_id="resp-c3")],
        }
        with chat.ChatServer(routes) as server:
            agent = OpenAIAgentConfig(base_url=server.base_url, model="scripted", backoff_initial_s=0.01,
                                      backoff_max_s=0.05, max_retries=6, concurrency=1)
            result, _ = run_small(dataset=str(dataset), out=str(tmp_path / "out"), run_id="r", agent=agent,
                                   outcome="exact")
            assert server.count_for("question c1") == 5  # four 429s ridden out, then success
            assert server.count_for("question c2") == 1  # a 400 is not retried
        rows = {r["case_id"]: r for r in pq.read_table(result.rows_path).to_pylist()}
        assert rows["c1"]["f1"] == 1.0 and rows["c1"]["error_kind"] is None
        assert rows["c2"]["error_kind"] == "generation_error" and rows["c2"]["f1"] is None
        assert rows["c2"]["error_message"].startswith("client_error")
        assert rows["c3"]["malformed_calls"] == 1 and rows["c3"]["observed_calls"][0]["args_raw"] == '{"id": "c3"'
        assert [e["case_id"] for e in result.errors] == ["c2"]
        envelope = next(e for e in pq.read_table(result.traces_path).to_pylist() if e["case_id"] == "c1")
        attempts = json.loads(envelope["metadata_json"])["attempts"]
        assert [a["status"] for a in attempts] == ["rate_limited"] * 4 + ["ok"]


def _cli(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tooleval.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


@pytest.mark.usefixtures("prefect_harness")
def test_sigkill_midway_then_rerun_generates_only_the_missing_trials(tmp_path):
    """A run killed (SIGKILL, process group) while c3's generation hangs, after c0..c2 finished; the rerun asks only
    for c3..c5 and ends with rows identical to an uninterrupted run's. Only the killed run is a separate process;
    the rerun and the uninterrupted run go through the same CLI in this process (each separate process pays a
    temporary Prefect server's start-up)."""
    case_ids = [f"c{i}" for i in range(6)]
    dataset = _dataset(tmp_path, case_ids)
    routes = {f"question {c}": [_ok(c)] for c in case_ids}
    routes["question c3"] = [_ok("c3", delay_s=120)]  # hangs until the kill
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({KEY_ENV: "sk-test", "TOOLEVAL_PREFECT_HOME": str(seeded_home(tmp_path / "prefect-home")),
                "COLUMNS": "200"})
    with chat.ChatServer(routes) as server:
        common = ["--agent", "openai", "--base-url", server.base_url, "--model", "scripted", "--dataset",
                  str(dataset), "--concurrency", "1", "--outcome", "exact"]
        out = tmp_path / "killed"
        store = out / ".tooleval" / "generations"
        child = _cli(["run", *common, "--out", str(out), "--run-id", "k1"], env)
        deadline = time.monotonic() + 180
        while not (server.count_for("question c3") == 1 and len(list(store.rglob("*.json"))) == 3):
            assert time.monotonic() < deadline and child.poll() is None, "the run never reached case c3"
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)  # the whole group: the run and its temporary Prefect server
        child.wait(timeout=30)
        child.stdout.close()
        assert server.count == 4 and len(list(store.rglob("*.json"))) == 3
        server.routes["question c3"] = [_ok("c3")]  # the server recovers
        rerun = CliRunner().invoke(app, ["run", *common, "--out", str(out), "--run-id", "k1"], env={"COLUMNS": "200"})
        assert rerun.exit_code == 0, rerun.output
        assert sorted(s.route for s in server.requests[4:]) == ["question c3", "question c4", "question c5"]
        clean = CliRunner().invoke(app, ["run", *common, "--out", str(tmp_path / "clean"), "--run-id", "k1"],
                                   env={"COLUMNS": "200"})
        assert clean.exit_code == 0, clean.output
    keep = ["case_id", "trial", "request_id", "response_id", "observed_calls", "tp", "fp", "fn", "f1",
            "ragas_tool_call_f1", "error_kind", "error_message"]
    resumed = [{k: r[k] for k in keep} for r in published_rows(out, "k1")]
    uninterrupted = [{k: r[k] for k in keep} for r in published_rows(tmp_path / "clean", "k1")]
    assert resumed == uninterrupted and len(resumed) == 6
