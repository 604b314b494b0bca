"""The run catalog of results on object storage (:mod:`tooleval.storage._catalog`), ``tooleval runs`` and
``tooleval gc`` on a bucket: moto's S3 server on 127.0.0.1, reached through s3fs and boto3 as ``--out s3://…`` is,
every request it serves logged so that a test can count the listings."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tooleval.runs.catalog import collect_garbage, delete_run, list_runs
from tooleval.storage import CATALOG, Publication, catalog_for, read_marker, recover, stages_in_use, tree_of

from tests.storage.s3_server import fresh_prefix, moto_s3
from tests.storage.test_commit import rows

pytestmark = pytest.mark.slow  # moto's S3 server



@pytest.fixture(scope="module")
def server():
    """moto's S3 server in this process, and the log of the requests it served."""
    log: list = []
    with moto_s3(log=log) as endpoint:
        yield endpoint, log


@pytest.fixture
def out(server, monkeypatch):
    """A fresh ``s3://`` results prefix (its own bucket)."""
    with fresh_prefix(server[0], monkeypatch) as prefix:
        yield prefix


def _listings(log: list) -> int:
    """How many of the logged requests listed objects (a GET of the bucket itself, with a prefix or not)."""
    return sum(1 for method, path, _query in log if method == "GET" and path.strip("/").count("/") == 0)


def publish_run(out: str, run_id: str, day: int, digests: tuple[str, ...] = ()) -> None:
    """A run as a results location holds it: rows, a summary whose completed_at orders the runs by ``day``, and
    the stage files it used (``stages.json``)."""
    with Publication(out) as pub:
        pub.add_table("rows", "r1", run_id, rows(2, run_id))
        pub.add_json(f"runs/{run_id}/summary.json", {
            "dataset_revision": "r1", "run_id": run_id, "completed_at": f"2024-01-{day:02d}T00:00:00+00:00",
            "rows": 2, "mean_f1": 0.5, "gate": {"passed": day % 2 == 0}, "drift": {"verdict": "ok"}})
        pub.add_json(f"runs/{run_id}/stages.json", {"digests": list(digests)})


def _catalog(out: str) -> dict:
    return json.loads(tree_of(out).read_bytes(CATALOG))


def test_a_commit_writes_the_catalog_and_listing_the_runs_reads_only_it(out, server):
    log = server[1]
    for day, run_id in enumerate(("a", "b", "c"), start=1):
        publish_run(out, run_id, day)
    document = _catalog(out)
    assert document["format"] == 1 and sorted(document["runs"]) == ["a", "b", "c"]
    assert not any(entry.get("pending") for entry in document["runs"].values())
    assert document["runs"]["b"]["publication"] == read_marker(out, "b")["publication"]

    log.clear()
    infos = list_runs(out)
    assert [i.run_id for i in infos] == ["c", "b", "a"]  # newest first
    assert (infos[0].rows, infos[0].mean_f1, infos[0].gate, infos[0].drift) == (2, 0.5, "FAIL", "ok")
    assert [m for m, *_ in log] == ["GET"] and _listings(log) == 0  # one read: the catalog

    # the command: a constant number of listings (the bucket check, the leases), whatever the number of runs
    from tooleval.cli import app

    def command_listings() -> tuple[int, list[str]]:
        log.clear()
        result = CliRunner().invoke(app, ["runs", "--out", out, "--format", "jsonl"])
        assert result.exit_code == 0, result.output
        return _listings(log), [json.loads(line)["run_id"] for line in result.output.splitlines()]

    few, listed = command_listings()
    assert listed == ["c", "b", "a"]
    for day in range(4, 14):
        publish_run(out, f"run{day}", day)
    more, listed = command_listings()
    assert len(listed) == 13 and more == few <= 3


def test_a_run_missing_from_every_listing_is_listed_from_the_catalog(out):
    """The catalog is what is listed: a run whose objects no listing of the bucket shows (here: its entry alone,
    its marker written by hand) is listed, which a scan of runs/ would not do."""
    publish_run(out, "a", 1)
    catalog = catalog_for(out)
    entry = dict(_catalog(out)["runs"]["a"], completed_at="2024-02-01T00:00:00+00:00")
    catalog.update(lambda runs: {**runs, "elsewhere": entry})
    assert [i.run_id for i in list_runs(out)] == ["elsewhere", "a"]


def test_a_deleted_catalog_is_rebuilt_from_the_markers(out, server):
    for day, run_id in enumerate(("a", "b"), start=1):
        publish_run(out, run_id, day)
    before = _catalog(out)
    tree_of(out).delete(CATALOG)
    assert [i.run_id for i in list_runs(out)] == ["b", "a"]
    assert _catalog(out) == before  # written again, equal to what the commits wrote
    tree_of(out).write_bytes(CATALOG, b'{"format": 99, "runs": {}}')  # another format: rebuilt as well
    assert [i.run_id for i in list_runs(out)] == ["b", "a"] and _catalog(out) == before


def test_a_writer_killed_between_its_note_and_its_commit_is_settled(out):
    publish_run(out, "a", 1)
    catalog = catalog_for(out)
    catalog.note_pending("a", "f" * 32)  # killed after noting, before its marker: the run is still the old one
    catalog.note_pending("ghost", "e" * 32)  # a first publication killed before its marker
    assert catalog.pending() == ["a", "ghost"]
    assert [i.run_id for i in list_runs(out)] == ["a"]
    assert catalog.pending() == []  # no live writer holds them: settled from the markers
    assert sorted(_catalog(out)["runs"]) == ["a"]
    assert recover(out) == []  # recovery looks only at noted runs and left leases


def test_runs_delete_and_gc_keep_on_a_bucket(out):
    tree = tree_of(out)
    stage = {name: f"{name * 8}" for name in "abcd"}
    for name, digest in stage.items():  # a stage file and the shared record that names it, per run
        path = f".tooleval/stages/scoring/{digest}.parquet"
        tree.write_bytes(path, b"stage " + name.encode())
        tree.write_bytes(f".tooleval/prefect/storage/key{name}", json.dumps(
            {"metadata": {"serializer": {"type": "tooleval-stage-result"}},
             "result": json.dumps({"kind": "stage-ref", "value": {"path": tree.location(path)}})}).encode())
    for day, name in enumerate("abcd", start=1):
        publish_run(out, f"run-{name}", day, (stage[name],))

    freed = delete_run(out, "run-a")
    assert freed > 0 and read_marker(out, "run-a") is None
    assert not tree.walk_files("runs/run-a") and not tree.walk_files("rows/dataset_revision=r1/run_id=run-a")
    assert [i.run_id for i in list_runs(out)] == ["run-d", "run-c", "run-b"]

    with stages_in_use(out):  # a run of some machine in progress: every stage file is kept
        held = collect_garbage(out, keep=2)
    assert held.run_in_progress and held.deleted_runs == ["run-b"] and held.stage_files == 0

    from tooleval.cli import app

    result = CliRunner().invoke(app, ["gc", "--out", out, "--keep", "1"])
    assert result.exit_code == 0, result.output
    assert "deleted run run-c" in result.output
    assert [i.run_id for i in list_runs(out)] == ["run-d"]
    assert tree.files(".tooleval/stages/scoring/*") == [f".tooleval/stages/scoring/{stage['d']}.parquet"]
    assert tree.walk_files(".tooleval/prefect/storage") == [".tooleval/prefect/storage/keyd"]
    assert sorted(_catalog(out)["runs"]) == ["run-d"]
    assert not [f for f in tree.walk_files(".tooleval/locks") if f.rsplit("/", 1)[-1].startswith(".")]


WRITER = """
import sys
sys.path.insert(0, {here!r})
from tests.storage.test_run_catalog import publish_run
publish_run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def test_commits_started_together_keep_each_others_entries(out):
    """Eight processes commit eight runs at once: each changes the catalog with a write conditional on the version it
    read, and retries when another landed first, so none loses another's entry."""
    import os
    import subprocess
    import sys

    from tests.support.pace import PATIENT_S
    from tests.support.paths import REPO

    publish_run(out, "first", 1)  # the catalog exists: every writer changes it, none creates it
    writers = [subprocess.Popen([sys.executable, "-c", WRITER.format(here=str(REPO)), out, f"w{i}", str(i + 2)],
                                env=dict(os.environ), cwd=REPO) for i in range(8)]
    assert [w.wait(timeout=PATIENT_S) for w in writers] == [0] * 8
    runs = _catalog(out)["runs"]
    assert sorted(runs) == sorted(["first", *(f"w{i}" for i in range(8))])
    assert not any(entry.get("pending") for entry in runs.values())
    assert len(list_runs(out)) == 9


def test_a_change_landing_between_a_read_and_its_write_is_kept(out):
    """The write is conditional on the version read: a change another writer made in between fails it, and the
    change is made again on the catalog as it now is (If-Match on S3)."""
    publish_run(out, "a", 1)
    mine, theirs = catalog_for(out), catalog_for(out)
    attempts = []

    def change(runs: dict) -> dict:
        attempts.append(sorted(runs))
        if len(attempts) == 1:  # another writer's change lands after this read
            theirs.update(lambda current: {**current, "theirs": {"summary": False}})
        return {**runs, "mine": {"summary": False}}

    mine.update(change)
    assert attempts == [["a"], ["a", "theirs"]]
    assert sorted(_catalog(out)["runs"]) == ["a", "mine", "theirs"]


def test_a_publication_reads_back_nothing_it_wrote_and_lists_each_folder_once(out, server):
    """A run's first publication on a bucket: each of its requests is needed (on S3 each costs tens of
    milliseconds). No object is read after this writer wrote it (its documents, its marker, the catalog, its
    lease), no HEAD is asked before a read, and the run's partition folders are listed once, for the marker and
    the tidying after it."""
    publish_run(out, "first", 1)  # the catalog exists
    log = server[1]
    log.clear()
    publish_run(out, "a", 2)
    assert not [request for request in log if request[0] == "HEAD"], log
    written: set[str] = set()
    for method, path, _query in log:
        if method == "PUT":
            written.add(path)
        elif method == "GET" and path in written:
            pytest.fail(f"{path} read back after it was written: {log}")
    listings = [query for method, path, query in log if method == "GET" and path.strip("/").count("/") == 0]
    assert listings and len(listings) == len(set(listings)), listings
    # what was not read back is what is there: the catalog's entry, the documents at their usual names
    entry = _catalog(out)["runs"]["a"]
    assert (entry["publication"], entry["rows"], entry["gate"], entry.get("pending")) == (
        read_marker(out, "a")["publication"], 2, "PASS", None)
    assert json.loads(tree_of(out).read_bytes("runs/a/stages.json")) == {"digests": []}


def test_a_catalog_changed_by_another_writer_after_its_own_write_is_read_again(out):
    """A catalog's next change starts from what it wrote itself, without reading it; when another writer changed
    the catalog meanwhile, the conditional write fails and the change is made again on the catalog as it now is."""
    publish_run(out, "a", 1)
    mine, theirs = catalog_for(out), catalog_for(out)
    mine.update(lambda runs: {**runs, "mine": {"summary": False}})
    theirs.update(lambda runs: {**runs, "theirs": {"summary": False}})
    seen = []

    def change(runs: dict) -> dict:
        seen.append(sorted(runs))
        return {**runs, "again": {"summary": False}}

    mine.update(change)
    assert seen == [["a", "mine"], ["a", "mine", "theirs"]]
    assert sorted(_catalog(out)["runs"]) == ["a", "again", "mine", "theirs"]
