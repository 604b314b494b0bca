"""Publication behind the commit marker, under kill -9 at every pause point; the writer lease; links (issue 12)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tooleval.storage import (
    ROW_SCHEMA,
    LeaseHeldError,
    OutFolderError,
    Publication,
    RunLease,
    connect,
    document_path,
    read_table,
    recover,
    table_from_rows,
    write_partition,
)
from tooleval.storage._pause import PAUSE_ENV, PAUSE_FILE_ENV

from tests.storage.test_partition import _traces, staging_leftovers

REPO = Path(__file__).resolve().parents[2]


def rows(n: int, prefix: str):
    return table_from_rows([{"case_id": f"{prefix}{i}", "trial": 0, "f1": 1.0} for i in range(n)], ROW_SCHEMA)


def publish(out: Path, prefix: str, n: int) -> None:
    """One complete publication of run ``x``: rows and traces of ``n`` cases named ``<prefix><i>``, a summary."""
    with Publication(out) as pub:
        pub.add_table("rows", "r1", "x", rows(n, prefix))
        pub.add_table("traces", "r1", "x", _traces(n))
        pub.add_json("runs/x/summary.json", {"rows": n, "prefix": prefix})
        pub.add_json("runs/x/errors.json", [])


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from tests.storage.test_commit import publish
publish(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
"""


def start_writer(out: Path, point: str, tmp_path: Path, prefix: str = "new", n: int = 3) -> tuple[subprocess.Popen, Path]:
    flag = tmp_path / f"paused-{point}-{time.monotonic_ns()}"
    env = dict(os.environ, **{PAUSE_ENV: point, PAUSE_FILE_ENV: str(flag)})
    process = subprocess.Popen([sys.executable, "-c", WRITER.format(here=str(REPO)), str(out), prefix, str(n)],
                               env=env, cwd=REPO)
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert process.poll() is None, "the writer exited before its pause point"
        assert time.monotonic() < deadline, "the writer never reached its pause point"
        time.sleep(0.05)
    return process, flag


def kill9(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


def seen(out: Path) -> tuple[list[str], int, dict]:
    """What a reader sees of run x: row case ids, trace count, summary (all through the marker)."""
    case_ids = sorted(read_table(out, "rows", run_id="x").column("case_id").to_pylist())
    traces = connect(out).execute("SELECT count(*) FROM traces WHERE run_id = 'x'").fetchone()[0]
    summary = json.loads(document_path(out, "runs/x/summary.json").read_text())
    return case_ids, traces, summary


OLD = (["old0", "old1"], 2, {"rows": 2, "prefix": "old"})
NEW = (["new0", "new1", "new2"], 3, {"rows": 3, "prefix": "new"})


class TestKilledPublication:
    """kill -9 of a replacing publication at each deterministic pause point: readers see old or new, never a mix,
    before and after the kill; the next command (recover) leaves exactly one complete run and no debris."""

    @pytest.mark.parametrize("point, expected", [("written", OLD), ("committed", NEW), ("rolling", NEW)])
    def test_replace_killed(self, tmp_path, point, expected):
        out = tmp_path / "out"
        publish(out, "old", 2)
        process, _ = start_writer(out, point, tmp_path)
        assert seen(out) == expected  # a reader while the writer is paused
        kill9(process)
        assert seen(out) == expected  # after the kill, before any recovery
        recover(out)
        assert seen(out) == expected
        assert staging_leftovers(out) == []
        summary = json.loads((out / "runs/x/summary.json").read_text())  # the usual name, for people and tools
        assert summary == expected[2]
        publish(out, "again", 1)  # the run is writable again: the dead holder's lease is taken over at once
        assert seen(out)[0] == ["again0"]

    def test_first_publication_killed_before_commit_is_invisible_then_discarded(self, tmp_path):
        out = tmp_path / "out"
        process, _ = start_writer(out, "written", tmp_path)
        kill9(process)
        assert read_table(out, "rows").num_rows == 0
        assert connect(out).execute("SELECT count(*) FROM rows").fetchone() == (0,)
        assert not document_path(out, "runs/x/summary.json").exists()
        assert recover(out) == ["x"]
        assert list((out / "rows").rglob("*.parquet")) == []
        assert not (out / "runs/x/.publications").exists()

    def test_stale_staging_of_older_versions_is_cleaned(self, tmp_path):
        out = tmp_path / "out"
        publish(out, "old", 2)
        (out / ".staging/4f1c/tables").mkdir(parents=True)
        (out / ".staging/4f1c/tables/part-0.parquet").write_bytes(b"half")
        recover(out)
        assert not (out / ".staging").exists()
        assert seen(out) == OLD


class TestLease:
    def test_second_writer_refused_naming_the_holder(self, tmp_path):
        out = tmp_path / "out"
        process, _ = start_writer(out, "written", tmp_path)
        try:
            with pytest.raises(LeaseHeldError) as info:
                publish(out, "second", 1)
            message = str(info.value)
            assert f"pid {process.pid} on host {socket.gethostname()!r}" in message and "run 'x'" in message
            assert info.value.holder["pid"] == process.pid
        finally:
            kill9(process)

    def test_other_run_ids_publish_side_by_side(self, tmp_path):
        out = tmp_path / "out"
        process, _ = start_writer(out, "written", tmp_path)
        try:
            write_partition(out, "rows", "r1", "y", rows(4, "y"))  # run y while run x is held
            assert read_table(out, "rows", run_id="y").num_rows == 4
        finally:
            kill9(process)

    def test_stale_lease_of_a_dead_process_is_taken_over(self, tmp_path):
        out = tmp_path / "out"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        lease = RunLease(out, "x")
        lease.acquire()
        lease.release()
        record = {"run_id": "x", "host": socket.gethostname(), "pid": dead.pid, "started": "1", "token": "t",
                  "acquired_at": "2026-01-01T00:00:00+00:00",
                  "expires_at": (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()}
        (out / ".tooleval/locks/x.json").write_text(json.dumps(record))
        publish(out, "new", 3)  # not expired, but its holder is gone
        assert seen(out) == NEW

    def test_lease_of_another_host_is_honoured_until_it_expires(self, tmp_path):
        out = tmp_path / "out"
        (out / ".tooleval/locks").mkdir(parents=True)
        record = {"run_id": "x", "host": "worker-7", "pid": 1, "started": None, "token": "t",
                  "acquired_at": "2026-01-01T00:00:00+00:00",
                  "expires_at": (datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat()}
        (out / ".tooleval/locks/x.json").write_text(json.dumps(record))
        with pytest.raises(LeaseHeldError, match="pid 1 on host 'worker-7'"):
            publish(out, "new", 3)
        record["expires_at"] = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat()
        (out / ".tooleval/locks/x.json").write_text(json.dumps(record))
        publish(out, "new", 3)
        assert seen(out) == NEW

    def test_a_live_lease_is_renewed(self, tmp_path):
        lease = RunLease(tmp_path, "x", ttl=1.5)
        lease.acquire()
        try:
            first = json.loads(lease.path.read_text())["expires_at"]
            deadline = time.monotonic() + 10  # renewal every ttl/3 = 0.5 s; generous for a loaded machine
            while json.loads(lease.path.read_text())["expires_at"] == first and time.monotonic() < deadline:
                time.sleep(0.1)
            assert json.loads(lease.path.read_text())["expires_at"] > first
        finally:
            lease.release()
        assert not lease.path.exists()


class TestNeverOutsideOut:
    """Links inside --out are refused, never followed: nothing lands outside the results folder."""

    @pytest.mark.parametrize("link", ["runs", "rows", "runs/x", "revisions", "traces/dataset_revision=r1"])
    def test_link_inside_out_is_refused(self, tmp_path, link):
        out, outside = tmp_path / "out", tmp_path / "outside"
        outside.mkdir()
        (out / link).parent.mkdir(parents=True, exist_ok=True)
        (out / link).symlink_to(outside, target_is_directory=True)
        with pytest.raises(OutFolderError, match="symbolic link inside the results folder"):
            with Publication(out) as pub:
                pub.add_table("traces", "r1", "x", _traces(1))
                pub.add_table("rows", "r1", "x", rows(1, "a"))
                pub.add_json("runs/x/summary.json", {})
                pub.add_json("revisions/r1.json", {})
        assert list(outside.rglob("*")) == []

    def test_link_as_a_document_is_not_written_through(self, tmp_path):
        out, outside = tmp_path / "out", tmp_path / "secret.json"
        outside.write_text("keep")
        publish(out, "old", 1)
        (out / "runs/x/summary.json").unlink()
        (out / "runs/x/summary.json").symlink_to(outside)
        publish(out, "new", 3)
        assert outside.read_text() == "keep"
        assert json.loads((out / "runs/x/summary.json").read_text())["prefix"] == "new"

    @pytest.mark.parametrize("name", ["rows", "runs", ".tooleval"])
    def test_a_file_where_a_folder_belongs(self, tmp_path, name):
        out = tmp_path / "out"
        out.mkdir()
        (out / name).write_text("not a folder")
        with pytest.raises(OutFolderError, match="a file stands where a folder of the results should be"):
            publish(out, "new", 1)
