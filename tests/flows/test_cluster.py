"""``tooleval run --dask-address`` on a real Dask cluster with its results written straight to S3 (issue 10,
"Must show").

Everything is a separate process on 127.0.0.1: ``dask scheduler``, two ``dask worker`` processes (a third replaces
one killed with SIGKILL mid-run), moto's S3 server (``moto_server``, from the ``[dev]`` extra) and ``tooleval`` itself.
Workers write their stage files to ``s3://…/.tooleval/stages`` and the client publishes there behind the commit
marker; the credentials and endpoint reach every process through the standard ``AWS_*`` variables only.
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

from tests.support.pace import PATIENT_S
from tests.support.runs import published_rows

pytestmark = pytest.mark.slow  # a Dask scheduler, two workers and moto's S3 server

ROWS = 2_000
SHARD_ROWS = "250"
"""About 8 shards: enough that the kill lands mid-run, few enough that per-shard overhead on the S3 server stays small."""
BUCKET = "results-bucket"
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


def _wait_port(port: int, timeout: float = PATIENT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on 127.0.0.1:{port}"
            time.sleep(0.2)


def _wait_workers(address: str, count: int, timeout: float = PATIENT_S) -> None:
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
               AWS_DEFAULT_REGION="us-east-1", DASK_DISTRIBUTED__WORKER__DAEMON="false",
               XDG_CACHE_HOME=str(base / "cache"))  # the client's Prefect home for an s3:// --out
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
        _s3(env).mkdir(BUCKET)
        dataset = base / "corpus"
        subprocess.run([str(BIN / "tooleval"), "synth", "--rows", str(ROWS), "--out", str(dataset)], env=env,
                       check=True, capture_output=True)
        yield {"base": base, "env": env, "address": address, "processes": processes, "workers": workers,
               "dataset": dataset}
    finally:
        processes.stop()


def _tooleval(env: dict[str, str], cwd: Path, *args: str, timeout: float = PATIENT_S) -> subprocess.CompletedProcess:
    """``tooleval ARGS`` in ``cwd`` (so that a stray local folder named ``s3:`` would show up there)."""
    return subprocess.run([str(BIN / "tooleval"), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def _s3(env: dict[str, str]):
    """An s3fs filesystem on the moto server, with the test's credentials (not this process's environment)."""
    import s3fs

    return s3fs.S3FileSystem(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                             endpoint_url=env["AWS_ENDPOINT_URL"], skip_instance_cache=True)



def test_dask_run_to_s3_with_a_killed_worker_equals_the_local_run_and_sql_reads_it(cluster, monkeypatch):
    env, base = cluster["env"], cluster["base"]
    local_out, dask_out = base / "local", f"s3://{BUCKET}/nightly"
    s3 = _s3(env)

    local = _tooleval(env, base, "run", "--dataset", str(cluster["dataset"]), "--out", str(local_out),
                      "--run-id", "local", "--shard-size", SHARD_ROWS)
    assert local.returncode in (0, 1), local.stderr[-3000:]

    # the Dask run, straight to S3; once a few shards are scored, worker 1 is SIGKILLed and a third worker takes
    # its place
    run = subprocess.Popen([str(BIN / "tooleval"), "run", "--dataset", str(cluster["dataset"]), "--out",
                            dask_out, "--run-id", "dask", "--dask-address", cluster["address"], "--shard-size",
                            SHARD_ROWS], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=base)
    scored = f"{BUCKET}/nightly/.tooleval/stages/scoring/*.arrow"
    deadline = time.monotonic() + 240
    while True:
        s3.invalidate_cache()
        if len(s3.glob(scored)) >= 2:
            break
        assert run.poll() is None, run.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no shard was scored on the cluster"
        time.sleep(0.2)
    s3.invalidate_cache()
    done_at_kill = len(s3.glob(scored))
    victim = cluster["workers"][0]
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    cluster["processes"].start("worker-3", "dask", "worker", cluster["address"], "--nthreads", "1",
                               "--no-dashboard", "--name", "w3", env=env)
    stdout, stderr = run.communicate(timeout=PATIENT_S)
    assert run.returncode == local.returncode, stderr[-3000:]

    s3.invalidate_cache()
    summary = json.loads(s3.cat_file(f"{BUCKET}/nightly/runs/dask/summary.json"))
    shards = summary["timing"]["shards"]
    # the kill came mid-run: fewer shards were scored than the run has
    assert 2 <= done_at_kill < shards
    assert summary["rows"] == ROWS and summary["timing"]["workers"] >= 2
    # published behind its commit marker, the lease given back, nothing written to a local folder named "s3:"
    marker = json.loads(s3.cat_file(f"{BUCKET}/nightly/runs/dask/commit.json"))
    assert marker["state"] == "clean" and not s3.exists(f"{BUCKET}/nightly/.tooleval/locks/dask.json")
    assert not (base / "s3:").exists()

    # identical rows (every column but run_id and times, sorted by (case_id, trial)): none lost or doubled
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.setenv(name, env[name])
    from s3fs import S3FileSystem

    S3FileSystem.clear_instance_cache()
    expected, got = published_rows(local_out, drop=TIME_COLUMNS), published_rows(dask_out, drop=TIME_COLUMNS)
    assert len(got) == ROWS == len({(r["case_id"], r["trial"]) for r in got})
    assert got == expected

    # the key reached the workers from their own environment only: no key object next to the results, and its
    # text is in no object under --out (stage files, partitions, run files) nor in the client's Prefect home
    # (its database of flow and task parameters)
    needle = KEY.encode()
    objects = s3.find(f"{BUCKET}/nightly")
    assert not any(name.endswith("redaction.key") for name in objects)
    assert [name for name in objects if needle in s3.cat_file(name)] == []
    assert [p for p in (base / "cache").rglob("*") if p.is_file() and needle in p.read_bytes()] == []

    query = _tooleval(env, base, "sql", "--out", dask_out, "--format", "jsonl",
                      "SELECT case_id, trial, f1, ragas_tool_call_f1, exact_match FROM rows ORDER BY case_id, trial")
    assert query.returncode == 0, query.stderr[-3000:]
    read = [json.loads(line) for line in query.stdout.splitlines()]
    assert read == [{k: r[k] for k in ("case_id", "trial", "f1", "ragas_tool_call_f1", "exact_match")}
                    for r in expected]
