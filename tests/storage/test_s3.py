"""Publication behind the commit marker and the writer lease on S3 (issue 10): moto's S3 server on 127.0.0.1,
reached through s3fs exactly as ``--out s3://bucket/prefix`` is (credentials and endpoint from the standard
AWS environment variables). The local-folder behaviour of the same protocol: test_commit.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tooleval.runs.spec import RunSpec
from tooleval.storage import (LeaseHeldError, Publication, connect, read_document, read_marker, read_table,
                              recover, tree_of)
from tooleval.storage._hold import hold_run, lease_for
from tooleval.storage._lease import read_lease
from tooleval.storage._pause import PAUSE_ENV, PAUSE_FILE_ENV
from tooleval.storage._remote_lease import RemoteLease

from tests.storage.test_commit import NEW, OLD, REPO, kill9, publish, rows

pytestmark = pytest.mark.slow  # moto's S3 server

AWS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server in this process (a thread), on a free port of 127.0.0.1."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def out(s3_endpoint, monkeypatch):
    """A fresh ``s3://`` results prefix on the moto server (its own bucket)."""
    import fsspec
    from s3fs import S3FileSystem

    for name, value in {**AWS, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    S3FileSystem.clear_instance_cache()  # cached instances keep the credentials and endpoint they were made with
    bucket = f"results-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3").mkdir(bucket)
    yield f"s3://{bucket}/nightly"
    S3FileSystem.clear_instance_cache()


WRITER = """
import sys
sys.path.insert(0, {here!r})
from tests.storage.test_commit import publish
publish(sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def seen(out: str) -> tuple[list[str], int, dict]:
    """What a reader sees of run x on S3: row case ids, trace count, summary (all through the marker)."""
    case_ids = sorted(read_table(out, "rows", run_id="x").column("case_id").to_pylist())
    traces = connect(out).execute("SELECT count(*) FROM traces WHERE run_id = 'x'").fetchone()[0]
    return case_ids, traces, json.loads(read_document(out, "runs/x/summary.json"))


def start_writer(out: str, point: str, tmp_path: Path, prefix: str = "new", n: int = 3) -> subprocess.Popen:
    """A writer process publishing run x to ``out``, paused at ``point`` (it holds the lease meanwhile)."""
    flag = tmp_path / f"paused-{point}-{time.monotonic_ns()}"
    env = dict(os.environ, **{PAUSE_ENV: point, PAUSE_FILE_ENV: str(flag)})
    process = subprocess.Popen([sys.executable, "-c", WRITER.format(here=str(REPO)), out, prefix,
                                str(n)], env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert process.poll() is None, "the writer exited before its pause point"
        assert time.monotonic() < deadline, "the writer never reached its pause point"
        time.sleep(0.05)
    return process


def _versioned(out: str) -> list[str]:
    """Every partition file of run x on the store, committed or not."""
    tree = tree_of(out)
    return [f for kind in ("rows", "traces") for f in tree.walk_files(f"{kind}/dataset_revision=r1/run_id=x")]


class TestPublicationOnS3:
    def test_publication_reads_back_through_every_reader(self, out):
        publish(out, "old", 2)
        assert seen(out) == OLD
        marker = read_marker(out, "x")
        assert marker["state"] == "clean" and len(marker["partitions"]) == 2
        # the documents are also at their usual names, for people and other tools
        assert json.loads(tree_of(out).read_bytes("runs/x/summary.json")) == OLD[2]
        assert read_lease(out, "x") is None  # released

    def test_a_publication_killed_before_its_marker_leaves_the_previous_run_readable(self, out, tmp_path):
        publish(out, "old", 2)
        process = start_writer(out, "written", tmp_path)  # every new object PUT, the marker not yet
        assert len(_versioned(out)) == 4  # old rows + traces, and the new ones beside them
        assert seen(out) == OLD  # readers honour the marker: the new objects are invisible
        kill9(process)
        assert seen(out) == OLD
        assert recover(out) == ["x"]  # the dead writer was on this host: its lease is taken over at once
        assert seen(out) == OLD and len(_versioned(out)) == 2  # the orphaned objects are deleted
        publish(out, "again", 1)
        assert seen(out)[0] == ["again0"]

    def test_a_publication_killed_after_its_marker_is_the_new_run(self, out, tmp_path):
        publish(out, "old", 2)
        process = start_writer(out, "committed", tmp_path)  # the marker PUT done, nothing tidied yet
        kill9(process)
        assert seen(out) == NEW
        recover(out)
        assert seen(out) == NEW and len(_versioned(out)) == 2
        assert json.loads(tree_of(out).read_bytes("runs/x/summary.json")) == NEW[2]

    def test_a_first_publication_killed_before_its_marker_is_invisible_then_discarded(self, out, tmp_path):
        kill9(start_writer(out, "written", tmp_path))
        assert read_table(out, "rows").num_rows == 0 and read_document(out, "runs/x/summary.json") is None
        assert recover(out) == ["x"]
        assert _versioned(out) == [] and tree_of(out).walk_files("runs/x/.publications") == []

    def test_a_writer_whose_lease_was_taken_over_does_not_commit(self, out):
        publish(out, "old", 2)
        publication = Publication(out)
        publication.add_table("rows", "r1", "x", rows(3, "new"))
        thief = {**read_lease(out, "x"), "token": "another-writer"}
        tree_of(out).write_bytes(".tooleval/locks/x.json", json.dumps(thief).encode())
        with pytest.raises(LeaseHeldError, match="taken over by another writer"):
            publication.commit()
        assert seen(out) == OLD and len(_versioned(out)) == 2  # nothing committed, the new object discarded

    def test_the_report_trend_reads_the_runs_published_on_s3(self, out):
        from tooleval.runs.report._data import run_history

        for run, when, f1 in (("b", "2026-11-02T00:00:00+00:00", 0.5), ("a", "2026-11-01T00:00:00+00:00", 0.25)):
            with Publication(out) as publication:
                publication.add_table("rows", "r1", run, rows(1, run))
                publication.add_json(f"runs/{run}/summary.json", {"run_id": run, "completed_at": when, "mean_f1": f1})
        history = run_history(out, {"run_id": "c", "completed_at": "2026-11-03T00:00:00+00:00", "mean_f1": 1.0})
        assert [(h["run_id"], h["mean_f1"]) for h in history] == [("a", 0.25), ("b", 0.5), ("c", 1.0)]


def _record(host: str, pid: int, expires_in_s: float, token: str = "t") -> dict:
    return {"run_id": "x", "host": host, "pid": pid, "started": None, "token": token,
            "acquired_at": "2026-01-01T00:00:00+00:00",
            "expires_at": (datetime.now(timezone.utc) + timedelta(seconds=expires_in_s)).isoformat()}


class TestLeaseOnS3:
    def test_a_second_writer_is_refused_naming_the_holder(self, out, tmp_path):
        process = start_writer(out, "written", tmp_path)
        try:
            with pytest.raises(LeaseHeldError) as info:
                publish(out, "second", 1)
            assert f"pid {process.pid} on host {socket.gethostname()!r}" in str(info.value)
        finally:
            kill9(process)

    def test_a_lease_of_another_host_is_honoured_until_it_expires_then_taken_over(self, out):
        lock = ".tooleval/locks/x.json"
        tree_of(out).write_bytes(lock, json.dumps(_record("worker-7", 1, 300)).encode())
        with pytest.raises(LeaseHeldError, match="pid 1 on host 'worker-7'"):
            publish(out, "new", 3)
        tree_of(out).write_bytes(lock, json.dumps(_record("worker-7", 1, -1)).encode())  # expired a second ago
        publish(out, "new", 3)
        assert seen(out) == NEW

    def test_a_live_lease_is_renewed_and_released(self, out):
        lease = RemoteLease(out, "x", ttl=1.5, settle=0.1)
        assert lease.try_acquire() is None
        try:
            first = read_lease(out, "x")["expires_at"]
            deadline = time.monotonic() + 10  # renewal every ttl/3 = 0.5 s; generous for a loaded machine
            while read_lease(out, "x")["expires_at"] == first and time.monotonic() < deadline:
                time.sleep(0.1)
            assert read_lease(out, "x")["expires_at"] > first and lease.held()
        finally:
            lease.release()
        assert read_lease(out, "x") is None

    def test_a_lease_that_stopped_renewing_expires_and_is_taken_over(self, out):
        first = RemoteLease(out, "x", ttl=1.0, settle=0.1)
        assert first.try_acquire() is None
        first._stop.set()  # the holder hangs: no more renewals (its process, on "another host", cannot be checked)
        first._thread.join(timeout=5)
        record = read_lease(out, "x")
        tree_of(out).write_bytes(".tooleval/locks/x.json", json.dumps(dict(record, host="worker-7")).encode())
        second = RemoteLease(out, "x", ttl=1.0, settle=0.1)
        assert second.try_acquire()["token"] == first.token  # still valid: refused
        time.sleep(1.1)
        assert second.try_acquire() is None  # expired: taken over
        assert not first.held() and second.held()
        second.release()

    def test_without_conditional_writes_the_read_back_catches_a_writer_that_put_within_the_settle_window(
            self, out, monkeypatch):
        mine, theirs = RemoteLease(out, "x", settle=0.2), RemoteLease(out, "x", settle=0.2)
        mine._store = theirs._store = None  # the protocol of a store without conditional writes
        put = RemoteLease._put

        def racing_put(self, record):  # both read "free"; the other's PUT lands just after ours
            put(self, record)
            if self is mine:
                put(theirs, theirs._record())

        monkeypatch.setattr(RemoteLease, "_put", racing_put)
        holder = mine.try_acquire()
        assert holder is not None and holder["token"] == theirs.token  # ours was overwritten: we back off
        assert mine._thread is None

    def test_hold_run_picks_the_remote_lease_for_a_url(self, out, tmp_path):
        assert isinstance(lease_for(out, "x"), RemoteLease)
        assert not isinstance(lease_for(tmp_path, "x"), RemoteLease)
        assert not isinstance(lease_for(f"file://{tmp_path}", "x"), RemoteLease)
        with hold_run(out, "x") as lease:
            assert read_lease(out, "x")["token"] == lease.token
        assert read_lease(out, "x") is None


class TestInputsOnS3:
    """``--dataset s3://…`` and ``--traces s3://…``: read from this machine's copy, the URL kept for the workers."""

    @pytest.fixture
    def dataset_url(self, out, tmp_path, monkeypatch):
        from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset

        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        folder = write_dataset(tmp_path / "tiny", TINY_CASES, TINY_TRACES)
        url = out.replace("/nightly", "/datasets/tiny")
        import fsspec

        fsspec.filesystem("s3").put(str(folder), url.removeprefix("s3://"), recursive=True)
        return url, folder

    def test_a_dataset_url_is_copied_once_per_version_and_loads_like_the_folder(self, dataset_url, tmp_path):
        from tooleval.dataset import load_dataset
        from tooleval.storage._machine import local_copy

        url, folder = dataset_url
        first = local_copy(url)
        assert first.is_relative_to(tmp_path / "cache" / "tooleval" / "inputs") and first.name == "tiny"
        assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in folder.iterdir())
        assert local_copy(url) == first  # unchanged objects: the same copy, nothing fetched again
        assert load_dataset(url).content_digest == load_dataset(folder).content_digest
        tree_of(url).write_bytes("cases.jsonl", (folder / "cases.jsonl").read_bytes()[:-1] + b" \n")
        assert local_copy(url) != first  # a changed object: a new copy

    def test_a_plan_over_urls_hands_the_workers_urls(self, dataset_url, out, monkeypatch):
        from tooleval.runs.plan import plan_run

        url, folder = dataset_url
        monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", "k")
        plan = plan_run(RunSpec(dataset=url, traces=None, out=out, run_id="p1"), write_key=False)
        local = plan_run(RunSpec(dataset=folder, traces=None, out=out, run_id="p1"), write_key=False)
        assert plan.dataset.path == url and plan.agent.traces_path == f"{url}/traces.jsonl"
        assert plan.out == out and plan.dataset.content_digest == local.dataset.content_digest
        assert [i.trace_digest for i in plan.items] == [i.trace_digest for i in local.items]
        explicit = plan_run(RunSpec(dataset=url, traces=f"{url}/traces.jsonl", out=out, run_id="p1"), write_key=False)
        assert explicit.agent.traces_path == f"{url}/traces.jsonl"

    def test_a_missing_url_is_a_usage_error(self, out):
        from tooleval.errors import InputFileError
        from tooleval.storage._machine import local_copy

        with pytest.raises(InputFileError, match="nothing is stored"):
            local_copy(f"{out}/no-such-dataset")

    def test_an_s3_out_without_an_environment_key_is_refused(self, dataset_url, out, monkeypatch):
        from tooleval.errors import InputFileError
        from tooleval.runs.plan import plan_run

        monkeypatch.delenv("TOOLEVAL_REDACTION_KEY", raising=False)
        monkeypatch.delenv("TOOLEVAL_REDACTION_KEY_FILE", raising=False)
        with pytest.raises(InputFileError, match="never stored next to the results"):
            plan_run(RunSpec(dataset=dataset_url[1], traces=None, out=out, run_id="p1"))
        assert tree_of(out).walk_files("") == []
