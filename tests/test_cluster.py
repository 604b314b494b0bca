"""``tooleval run --dask-address`` on a real Dask cluster, and results read from S3 (issue 10, "Must show").

Everything is a separate process on 127.0.0.1: ``dask scheduler``, two ``dask worker`` processes (a third replaces
one killed with SIGKILL mid-run), moto's S3 server (``moto_server``, from the ``[dev]`` extra) and ``tooleval`` itself.
The workers get the redaction key only through ``TOOLEVAL_REDACTION_KEY_FILE`` in their own environment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tooleval.storage import read_table

ROWS = 20_000
KEY = "cluster-test-key-5d41402abc4b2a76"
TIME_COLUMNS = {"run_id", "captured_at", "generation_started_at", "generation_finished_at", "computed_at"}
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Child processes of this test, each in its own process group, ended by their ids at teardown."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, *args: str, env: dict[str, str]) -> subprocess.Popen:
        with (self.logs / f"{name}.log").open("w") as log:
            process = subprocess.Popen([str(BIN / args[0]), *args[1:]], env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)


def _wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on 127.0.0.1:{port}"
            time.sleep(0.2)


def _wait_workers(address: str, count: int, timeout: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(count, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A scheduler, two workers and an S3 endpoint; the environment a client uses with them."""
    base = tmp_path_factory.mktemp("cluster")
    key_file = base / "worker.key"
    key_file.write_text(KEY + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLEVAL_REDACTION", "PREFECT_API_URL"))}
    env.update(TOOLEVAL_REDACTION_KEY_FILE=str(key_file), AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION="us-east-1", DASK_DISTRIBUTED__WORKER__DAEMON="false")
    processes = Processes(base)
    scheduler_port, s3_port = _free_port(), _free_port()
    address = f"tcp://127.0.0.1:{scheduler_port}"
    env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{s3_port}"
    try:
        processes.start("s3", "moto_server", "-H", "127.0.0.1", "-p", str(s3_port), env=env)
        processes.start("scheduler", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(scheduler_port),
                        "--no-dashboard", env=env)
        _wait_port(scheduler_port)
        workers = [processes.start(f"worker-{i}", "dask", "worker", address, "--nthreads", "1", "--no-dashboard",
                                   "--name", f"w{i}", env=env) for i in (1, 2)]
        _wait_workers(address, 2)
        _wait_port(s3_port)
        dataset = base / "corpus"
        subprocess.run([str(BIN / "tooleval"), "synth", "--rows", str(ROWS), "--out", str(dataset)], env=env,
                       check=True, capture_output=True)
        yield {"base": base, "env": env, "address": address, "processes": processes, "workers": workers,
               "dataset": dataset}
    finally:
        processes.stop()


def _tooleval(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tooleval"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def _rows(out: Path) -> list[dict]:
    table = read_table(out, "rows")
    keep = [name for name in table.column_names if name not in TIME_COLUMNS]
    return sorted(table.select(keep).to_pylist(), key=lambda row: (row["case_id"], row["trial"]))


def test_dask_run_with_a_killed_worker_equals_the_local_run_and_sql_reads_s3(cluster, monkeypatch):
    env, base = cluster["env"], cluster["base"]
    local_out, dask_out = base / "local", base / "dask"

    local = _tooleval(env, "run", "--dataset", str(cluster["dataset"]), "--out", str(local_out), "--run-id", "local")
    assert local.returncode in (0, 1), local.stderr[-3000:]

    # the Dask run; once a few shards are scored, worker 1 is SIGKILLed and a third worker takes its place
    run = subprocess.Popen([str(BIN / "tooleval"), "run", "--dataset", str(cluster["dataset"]), "--out",
                            str(dask_out), "--run-id", "dask", "--dask-address", cluster["address"]], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scored = dask_out / ".tooleval" / "stages" / "scoring"
    deadline = time.monotonic() + 240
    while not (scored.is_dir() and len(list(scored.glob("*.parquet"))) >= 2):
        assert run.poll() is None, run.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no shard was scored on the cluster"
        time.sleep(0.2)
    done_at_kill = len(list(scored.glob("*.parquet")))
    victim = cluster["workers"][0]
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    cluster["processes"].start("worker-3", "dask", "worker", cluster["address"], "--nthreads", "1",
                               "--no-dashboard", "--name", "w3", env=env)
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == local.returncode, stderr[-3000:]

    summary = json.loads((dask_out / "runs" / "dask" / "summary.json").read_text())
    shards = summary["timing"]["shards"]
    # the kill came mid-run: fewer shards were scored than the run has
    assert 2 <= done_at_kill < shards
    assert summary["rows"] == ROWS and summary["timing"]["workers"] >= 2

    # identical rows (every column but run_id and times, sorted by (case_id, trial)): none lost or doubled
    expected, got = _rows(local_out), _rows(dask_out)
    assert len(got) == ROWS == len({(r["case_id"], r["trial"]) for r in got})
    assert got == expected

    # the key reached the workers from their own environment only: no key file next to the results, and its
    # text is in no file under --out (stage files, partitions, Prefect's database of flow and task parameters)
    assert not (dask_out / "redaction.key").exists()
    needle = KEY.encode()
    assert [p for p in dask_out.rglob("*") if p.is_file() and needle in p.read_bytes()] == []

    # the published results copied to S3 (as `aws s3 sync` would) read back through DuckDB's fsspec filesystem
    import fsspec

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.setenv(name, env[name])
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    s3.mkdir("results-bucket")
    for kind in ("rows", "traces", "legacy", "runs"):
        s3.put(str(dask_out / kind), f"results-bucket/nightly/{kind}", recursive=True)
    query = _tooleval(env, "sql", "--out", "s3://results-bucket/nightly", "--format", "jsonl",
                      "SELECT case_id, trial, f1, ragas_tool_call_f1, exact_match FROM rows ORDER BY case_id, trial")
    assert query.returncode == 0, query.stderr[-3000:]
    read = [json.loads(line) for line in query.stdout.splitlines()]
    assert read == [{k: r[k] for k in ("case_id", "trial", "f1", "ragas_tool_call_f1", "exact_match")}
                    for r in expected]
