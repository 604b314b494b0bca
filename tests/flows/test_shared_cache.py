"""One stage cache for every machine: with ``--out s3://…`` the stage tasks' results and cache records live in the
bucket (:mod:`tasks._results`), so a run planned on another machine over the same inputs is ``Cached`` in every
stage.

Two "machines" are two ``tooleval run`` processes with their own Prefect homes (``TOOLEVAL_PREFECT_HOME``), their
own caches (``XDG_CACHE_HOME``: each fetches the dataset from the bucket into its own input cache, at another path)
and one bucket on moto's S3 server on 127.0.0.1. The redaction key reaches both from the environment only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.storage.s3_server import moto_s3
from tests.support.pace import PATIENT_S
from tests.support.paths import REPO
from tests.support.runs import published_rows
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # moto's S3 server and two `tooleval run` processes over 2,000 rows

ROWS = 2_000
"""Rows of the corpus. The default shard size is about 8 shards per worker (at least 100 rows), so these run in
about 8 shards, as 20,000 rows do (of 2,500 rows): each stage is looked up and Cached once per shard just the
same, at a tenth of the generation and scoring work."""
KEY = "shared-cache-key-7d793037a0760186"
STAGE_TASKS = ("generation", "trace-capture", "scoring", "legacy-scalar", "aggregation")


def _machine(base: Path, name: str, endpoint: str) -> dict[str, str]:
    """The environment of one machine: its own Prefect home and cache, the shared store's endpoint and keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_", "AWS_"))}
    env.update(PYTHONPATH=str(REPO), COLUMNS="200", TOOLEVAL_PREFECT_HOME=str(seeded_home(base / name / "home")),
               XDG_CACHE_HOME=str(base / name / "cache"), TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               TOOLEVAL_WARM_RUNNER="0", TOOLEVAL_REDACTION_KEY=KEY, AWS_ACCESS_KEY_ID="test",
               AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint)
    return env


def _tooleval(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tooleval.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=PATIENT_S)


def _printed_states(stdout: str) -> dict[str, str]:
    """The "Stages" table the run prints: stage -> its final state ("Cached", or "Cached x31, Completed x1")."""
    states = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0] in STAGE_TASKS:
            states[cells[0]] = cells[1]
    return states


def _recorded_states(home: Path) -> dict[str, dict[str, int]]:
    """Stage -> final state name -> task runs, as the machine's own Prefect server recorded them (its database)."""
    counts: dict[str, dict[str, int]] = {}
    with sqlite3.connect(home / "prefect.db") as db:
        for name, state in db.execute("SELECT name, state_name FROM task_run"):
            stage = name.rsplit("-", 1)[0]
            if stage in STAGE_TASKS:
                counts.setdefault(stage, {}).setdefault(state, 0)
                counts[stage][state] += 1
    return counts


def test_a_run_on_another_machine_is_cached_in_every_stage(tmp_path, monkeypatch):
    import fsspec
    from s3fs import S3FileSystem

    with moto_s3() as endpoint:
        a, b = _machine(tmp_path, "a", endpoint), _machine(tmp_path, "b", endpoint)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
            monkeypatch.setenv(name, a[name])
        S3FileSystem.clear_instance_cache()
        s3 = fsspec.filesystem("s3", skip_instance_cache=True)
        bucket = f"results-{uuid.uuid4().hex[:8]}"
        s3.mkdir(bucket)
        corpus = tmp_path / "corpus"
        made = _tooleval(a, tmp_path, "synth", "--rows", str(ROWS), "--profile", "bfcl", "--seed", "0", "--out",
                         str(corpus))
        assert made.returncode == 0, made.stderr[-3000:]
        s3.put(str(corpus), f"{bucket}/corpus", recursive=True)
        dataset, out = f"s3://{bucket}/corpus", f"s3://{bucket}/nightly"

        first = _tooleval(a, tmp_path, "run", "--dataset", dataset, "--out", out, "--run-id", "on-a")
        assert first.returncode in (0, 1), first.stderr[-3000:]
        assert set(_printed_states(first.stdout).values()) == {"Completed"}
        second = _tooleval(b, tmp_path, "run", "--dataset", dataset, "--out", out, "--run-id", "on-b")
        assert second.returncode == first.returncode, second.stderr[-3000:]

        # every stage Cached, as the run prints it and as machine B's Prefect server recorded its task runs
        assert _printed_states(second.stdout) == dict.fromkeys(STAGE_TASKS, "Cached")
        recorded = _recorded_states(tmp_path / "b" / "home")
        shards = json.loads(s3.cat_file(f"{bucket}/nightly/runs/on-b/summary.json"))["timing"]["shards"]
        assert shards > 1
        assert recorded == {**{stage: {"Cached": shards} for stage in STAGE_TASKS[:4]},
                            "aggregation": {"Cached": 1}}
        # each machine read the dataset from its own input cache, and B kept no stage record of its own
        assert list((tmp_path / "a" / "cache" / "tooleval" / "inputs").iterdir())
        assert list((tmp_path / "b" / "cache" / "tooleval" / "inputs").iterdir())
        assert not [p for p in (tmp_path / "b" / "home" / "storage").rglob("*") if p.is_file()]

        # B's rows are A's, every column but the run id
        assert published_rows(out, "on-b", drop={"run_id"}) == published_rows(out, "on-a", drop={"run_id"})
        assert len(published_rows(out, "on-b")) == ROWS

        # the shared records are JSON stage results, never a pickle; nothing under --out holds the key
        records = s3.find(f"{bucket}/nightly/.tooleval/prefect/storage")
        assert records
        for record in records:
            assert json.loads(s3.cat_file(record))["metadata"]["serializer"]["type"] == "tooleval-stage-result"
        needle = KEY.encode()
        assert [name for name in s3.find(f"{bucket}/nightly") if needle in s3.cat_file(name)] == []
    S3FileSystem.clear_instance_cache()
