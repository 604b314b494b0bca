"""Two writers of one run id started together on S3 (moto's server on 127.0.0.1, two writer processes): exactly
one holds the lease each time, the other is refused (the error the CLI turns into exit 2), and a reader polling
the run meanwhile only ever sees one writer's whole publication. With conditional writes (the lease and the
marker as compare-and-swaps), and on a store that answers them ``501 Not Implemented`` (the fallback, warned
about, which two writers started together still resolve by its read-back)."""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tooleval.storage import read_document, read_table
from tooleval.storage._lease import read_lease
from tooleval.storage._remote_lease import RemoteLease

from tests.storage.s3_server import fresh_prefix, moto_s3
from tests.storage.race_writer import START_TIMEOUT_S, start_line, write

pytestmark = pytest.mark.slow  # moto's S3 server and writer processes racing for a lease

ROUNDS = 50
PAIRS = 2
"""Pairs of writer processes racing at once, each in rounds of its own."""
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["conditional", "without-conditions"], scope="module")
def store(request):
    """``(endpoint, kind)``: moto's S3 server as is (conditional writes), or answering them 501."""
    with moto_s3(reject_conditions=request.param != "conditional") as endpoint:
        yield endpoint, request.param


@pytest.fixture
def out(store, monkeypatch):
    endpoint, _ = store
    with fresh_prefix(endpoint, monkeypatch, "race") as prefix:
        yield prefix


@pytest.fixture(scope="module")
def conditional_store():
    """moto's S3 server as is, for the guarantees only conditional writes give (without them the fallback narrows
    these windows without closing them, docs/cluster.md; the CLI's exit code does not depend on the store)."""
    with moto_s3() as endpoint:
        yield endpoint


@pytest.fixture
def conditional_out(conditional_store, monkeypatch):
    with fresh_prefix(conditional_store, monkeypatch, "race") as prefix:
        yield prefix


def _observe(out: str, run_id: str) -> tuple[list[str], dict | None] | None:
    """What a reader sees of ``run_id`` through its commit marker: row case ids and the summary (None before
    any commit)."""
    summary = read_document(out, f"runs/{run_id}/summary.json")
    if summary is None:
        return None
    case_ids = sorted(read_table(out, "rows", run_id=run_id).column("case_id").to_pylist())
    return case_ids, json.loads(summary)


def _whole(observed: tuple[list[str], dict]) -> bool:
    case_ids, summary = observed
    label = summary["writer"]
    return case_ids == [f"{label}{i}" for i in range(3)]


def _check_round(out: str, kind: str, round_: int, run_id: str, results: list[tuple[str, str]]) -> tuple[str, ...]:
    """Check one round's end: one writer committed its whole publication, the other was refused, the lease is
    given back. Returns the round's sorted outcomes."""
    winners = [r[1] for r in results if r[0] == "committed"]
    refusals = [r[1] for r in results if r[0] == "refused"]
    assert len(winners) == 1 and len(refusals) == 1, (round_, results)
    held = f"run {run_id!r} is being written by another tooleval process"
    # Without conditional writes a writer stalled past the read-back's settle time can also believe it took
    # the lease (the window docs/cluster.md describes); the check before its commit then finds the lease
    # taken over and refuses with nothing committed: the same error, exit code and outcome, one step later.
    # With conditional writes the loser is always refused at the lease.
    taken_over = f"the lease of run {run_id!r} was taken over by another writer"
    assert held in refusals[0] or (kind != "conditional" and taken_over in refusals[0]), refusals[0]
    final = _observe(out, run_id)
    assert final is not None and final[1]["writer"] == winners[0] and _whole(final)
    assert read_lease(out, run_id) is None  # released by the winner
    return tuple(sorted(r[0] for r in results))


def test_two_writers_started_together_exactly_one_holds_the_lease(out, store, caplog):
    _, kind = store
    outcomes: list[tuple[str, str]] = []
    observed: list[tuple] = []
    context = multiprocessing.get_context("spawn")
    # The two pool processes meet at a barrier at the start of each round (each blocks there, so the second task
    # can only go to the other process): they start together without a start time set far enough ahead for both
    # to have received their task, which cost each round that wait, and the reader that many polls of nothing.
    # The winner then holds the lease until the loser has tried to take it (a second barrier, which each meets
    # once its try is over): however late a loaded machine lets the loser try, it meets the held lease, where a
    # fixed hold of the winner (0.3 s, each round) only made that likely.
    # PAIRS such pools race at once, each for a run id of its own (as runs of one bucket do): a round mostly waits
    # (on the server, and without conditional writes on the read-back's settle time), and one pair's wait is the
    # other's turn, so the rounds take about half the time, each still two writers started together.
    with contextlib.ExitStack() as stack:
        pools = [stack.enter_context(context.Pool(2, initializer=start_line,
                                                  initargs=(context.Barrier(2), context.Barrier(2))))
                 for _ in range(PAIRS)]
        for started in [pool.starmap_async(time.sleep, [(0,), (0,)]) for pool in pools]:
            started.get(timeout=START_TIMEOUT_S)  # every process started and imported before the first round
        racing: dict[int, tuple[int, str, Any]] = {}  # pool -> its round, run id and writers
        next_round = 0
        while next_round < ROUNDS or racing:
            for index, pool in enumerate(pools):
                if index not in racing and next_round < ROUNDS:
                    run_id = f"race{next_round}"
                    racing[index] = (next_round, run_id, pool.starmap_async(
                        write, [(out, run_id, "a", None, 0.0), (out, run_id, "b", None, 0.0)], chunksize=1))
                    next_round += 1
            for index, (round_, run_id, pending) in list(racing.items()):
                if pending.ready():
                    del racing[index]
                    outcomes.append(_check_round(out, kind, round_, run_id, pending.get(timeout=120)))
                else:  # a reader polling the run while both writers race
                    seen = _observe(out, run_id)
                    if seen is not None:
                        observed.append(seen)
            time.sleep(0.02)
    assert outcomes == [("committed", "refused")] * ROUNDS
    assert observed and all(_whole(seen) for seen in observed)
    unconditional = [r for r in caplog.records if "does not honour conditional writes" in r.getMessage()]
    if kind == "conditional":
        assert not unconditional
    else:  # each writer process warns once; the main process, a reader, takes no lease
        lease = RemoteLease(out, "probe")
        with caplog.at_level(logging.WARNING):
            assert lease.try_acquire() is None
            lease.release()
        assert not lease.conditional
        assert any("does not honour conditional writes" in r.getMessage() for r in caplog.records)


def test_a_stale_lease_raced_by_two_takers_goes_to_exactly_one(conditional_out):
    """The takeover path: both find an expired lease and replace it; with conditional writes only the write
    whose ``If-Match`` still names the version read succeeds."""
    out = conditional_out
    from tooleval.storage import tree_of

    for round_ in range(10):
        run_id = f"stale{round_}"
        expired = {"run_id": run_id, "host": "worker-7", "pid": 1, "started": None, "token": "gone",
                   "acquired_at": "2026-01-01T00:00:00+00:00", "expires_at": "2026-01-01T00:02:00+00:00"}
        tree_of(out).write_bytes(f".tooleval/locks/{run_id}.json", json.dumps(expired).encode())
        takers = [RemoteLease(out, run_id, ttl=30), RemoteLease(out, run_id, ttl=30)]
        barrier = threading.Barrier(2)
        held: list = [None, None]

        def take(i: int) -> None:
            barrier.wait()
            held[i] = takers[i].try_acquire()

        threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [i for i in range(2) if held[i] is None]
        assert len(winners) == 1, held
        loser = 1 - winners[0]
        assert held[loser]["token"] == takers[winners[0]].token
        assert read_lease(out, run_id)["token"] == takers[winners[0]].token
        takers[winners[0]].release()
        assert read_lease(out, run_id) is None


def test_a_writer_stalled_past_its_expiry_cannot_commit_over_the_writer_that_took_over(conditional_out):
    """A writer that checked its lease, then stalled past its expiry while another took the lease and committed,
    must not commit: its marker's condition names the marker version it read before its check."""
    out = conditional_out
    from tooleval.storage import MarkerChangedError, Publication

    from tests.storage.race_writer import write as publish_as

    stalled = Publication(out)
    from tooleval.storage import ROW_SCHEMA, table_from_rows

    stalled.add_table("rows", "r1", "x", table_from_rows([{"case_id": "late0", "trial": 0, "f1": 1.0}], ROW_SCHEMA))
    original = stalled._check_still_held

    def stall_after_the_check() -> None:
        original()  # the lease is ours here; then this writer stalls, the lease expires and is taken over
        stalled._holder._stop.set()
        stalled._holder._thread.join()
        record = read_lease(out, "x")
        from tooleval.storage import tree_of

        tree_of(out).write_bytes(".tooleval/locks/x.json", json.dumps(dict(
            record, host="worker-7", expires_at="2026-01-01T00:00:00+00:00")).encode())
        from tooleval.storage._hold import _HELD

        held = dict(_HELD)
        _HELD.clear()  # the other writer is another process: it does not share this one's lease
        try:
            assert publish_as(out, "x", "b", time.time(), 0.0) == ("committed", "b")
        finally:
            _HELD.update(held)

    stalled._check_still_held = stall_after_the_check
    with pytest.raises(MarkerChangedError, match="committed by another writer"):
        stalled.commit()
    assert _observe(out, "x") == (["b0", "b1", "b2"], {"writer": "b", "rows": 3})


def test_the_cli_refuses_a_second_writer_with_exit_2(conditional_out, tmp_path):
    """``tooleval run --out s3://…`` while another live writer holds the run's lease: exit 2, naming it."""
    out = conditional_out
    holder = RemoteLease(out, "taken", ttl=120)
    assert holder.try_acquire() is None
    try:
        env = dict(os.environ, TOOLEVAL_REDACTION_KEY="race-test", XDG_CACHE_HOME=str(tmp_path / "cache"),
                   PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "tooleval.cli", "run", "--out", out, "--run-id", "taken"],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        holder.release()
    assert done.returncode == 2, done.stderr
    assert "run 'taken' is being written by another tooleval process" in " ".join(done.stderr.split())
