"""The README's deployment steps against a real Prefect server: `prefect server start` on 127.0.0.1 (in the
background, waited for), `prefect work-pool create`, `prefect deploy --all` (prefect.yaml), `prefect worker
start`; a flow run of the nightly evaluation is triggered through the API, waited for until `Completed`, and its
artifacts are read back through the API. Every process is started in its own process group and stopped with
SIGINT (a SIGKILLed Prefect process orphans its children: PREFECT.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # a real `prefect server start`, a work pool and a worker

PREFECT = str(Path(sys.executable).parent / "prefect")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _wait(predicate, timeout: float, what: str, logs: list[Path]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    tails = "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs if log.exists())
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tails}")


def _api(method: str, url: str, **kwargs):
    """One call to the Prefect API, its JSON body back. A loaded machine makes the SQLite-backed server answer
    503/500 now and then ("database is locked") and slowly: such answers are retried for up to a minute; any
    other non-2xx answer fails the test with the server's own words."""
    deadline = time.monotonic() + 60
    while True:
        try:
            response = httpx.request(method, url, timeout=30, **kwargs)
        except httpx.TransportError as exc:
            if time.monotonic() > deadline:
                raise
            last = repr(exc)
        else:
            if response.status_code < 500 or time.monotonic() > deadline:
                assert response.is_success, f"{method} {url}: {response.status_code} {response.text[:2000]}"
                return response.json()
            last = f"{response.status_code} {response.text[:200]}"
        print(f"retrying {method} {url} after: {last}", file=sys.stderr)
        time.sleep(1)


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    # a seeded home: the server's database already built (these are the deployment steps, not a new home's first
    # start, which tests/cli/test_fresh_machine.py covers), so `prefect server start` answers sooner
    home = seeded_home(tmp_path / "prefect-home")
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
           "PREFECT_WORKER_QUERY_SECONDS": "1", "TOOLEVAL_REPO": str(REPO), "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "server.log"
    with log.open("w") as handle:
        process = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port),
                                    "--no-ui"], env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)

    def healthy():
        try:
            return httpx.get(f"{api}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        _wait(healthy, 60, "the server's /api/health", [log])
        yield api, env, log
    finally:
        _stop(process)
    assert process.returncode is not None


def test_deploy_and_run_the_nightly_evaluation_through_a_worker(server, tmp_path):
    api, env, server_log = server
    run = lambda *args: subprocess.run([PREFECT, *args], env=env, cwd=REPO, capture_output=True, text=True,  # noqa: E731
                                       timeout=120)
    created = run("work-pool", "create", "tooleval", "--type", "process")
    assert created.returncode == 0, created.stdout + created.stderr
    deployed = run("--no-prompt", "deploy", "--all")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    names = {d["name"] for d in _api("POST", f"{api}/deployments/filter", json={})}
    assert names == {"nightly-evaluation", "nightly-drift-check", "nightly-rescore"}
    deployment = _api("GET", f"{api}/deployments/name/tooleval-evaluate/nightly-evaluation")
    assert deployment["schedules"][0]["schedule"]["cron"] == "0 2 * * *"

    worker_log = tmp_path / "worker.log"
    with worker_log.open("w") as handle:
        worker = subprocess.Popen([PREFECT, "worker", "start", "--pool", "tooleval"], env=env, cwd=REPO,
                                  stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        dataset = write_dataset(tmp_path / "tiny", TINY_CASES, TINY_TRACES)
        out = tmp_path / "results"
        flow_run = _api("POST", f"{api}/deployments/{deployment['id']}/create_flow_run", json={
            "parameters": {"spec": {"dataset": str(dataset), "out": str(out), "run_id": "deployed"}}})

        def final_state():
            state = _api("GET", f"{api}/flow_runs/{flow_run['id']}")["state"]
            return state if state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

        state = _wait(final_state, 150, "the flow run to finish", [worker_log, server_log])
        assert state["name"] == "Completed", (state, worker_log.read_text()[-3000:])
    finally:
        _stop(worker)
    artifacts = _api("POST", f"{api}/artifacts/filter", json={
        "artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}})
    by_key = {a["key"]: a for a in artifacts}
    assert set(by_key) == {"tooleval-summary", "tooleval-worst-rows", "tooleval-report"}
    assert "| rows | 4 |" in by_key["tooleval-summary"]["data"]
    worst = json.loads(by_key["tooleval-worst-rows"]["data"])
    # The tiny dataset's failing rows (tests/support/datasets.py): A#1 (wrong amount) and B#0 (malformed
    # call); A#0 and C#0 exact.
    assert sorted((r["case_id"], r["trial"]) for r in worst) == [("A", 1), ("B", 0)]
    report = out / "runs" / "deployed" / "report.html"
    assert by_key["tooleval-report"]["data"] == f"[report of run deployed]({report.resolve().as_uri()})"
    assert report.is_file()
