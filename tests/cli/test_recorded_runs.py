"""The wait for a command's task runs to be recorded (``wait_until_recorded``) ends once every run is final, but
for the runs a lost Dask worker left ``Running``: the shard was run again on another worker, and no one will
report the lost runs finished, so waiting for them only cost the wait's whole timeout at the end of the run.
The runs are shaped as the server recorded them in ``tests/flows/test_cluster.py`` (a worker killed mid-shard)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from tooleval.cli import _prefect_server as server

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _run(run_id: str, task_key: str, state: str | None, started_s: float | None, parent: str | None = None):
    return SimpleNamespace(
        id=run_id, task_key=task_key, start_time=None if started_s is None else T0 + timedelta(seconds=started_s),
        state=None if state is None else SimpleNamespace(type=SimpleNamespace(value=state)),
        task_inputs={"__parents__": [SimpleNamespace(id=parent)]} if parent else {})


def _lost_worker() -> list:
    """A shard whose first attempt died in its legacy stage and whose second attempt finished, beside a shard that
    finished at once."""
    return [_run("shard-1", "shard", "COMPLETED", 10.0),
            _run("gen-1a", "generation", "COMPLETED", 0.1, "shard-1"),
            _run("legacy-1a", "legacy-scalar", "RUNNING", 1.5, "shard-1"),  # its worker was killed here
            _run("gen-1b", "generation", "COMPLETED", 10.1, "shard-1"),
            _run("legacy-1b", "legacy-scalar", "COMPLETED", 10.4, "shard-1"),
            _run("shard-2", "shard", "COMPLETED", 0.0),
            _run("gen-2", "generation", "COMPLETED", 0.2, "shard-2"),
            _run("legacy-2", "legacy-scalar", "COMPLETED", 0.5, "shard-2")]


def test_a_run_a_lost_worker_left_running_is_superseded_by_the_later_finished_run_of_its_task():
    assert server.superseded(_lost_worker()) == {"legacy-1a"}


@pytest.mark.parametrize("change", ["parent open", "later run open", "earlier run final", "other task", "not started"])
def test_a_run_still_to_be_reported_is_never_superseded(change):
    """Every other open run is still waited for: its parent is not final yet, the later run of its task is still
    open (a stale cached result computed again: the first run, final, was followed by one not reported yet), no
    later run of the same task, or a run never started."""
    runs = _lost_worker()
    if change == "parent open":
        runs[0] = _run("shard-1", "shard", "RUNNING", 10.0)
    elif change == "later run open":
        runs[2], runs[4] = (_run("legacy-1a", "legacy-scalar", "COMPLETED", 1.5, "shard-1"),
                            _run("legacy-1b", "legacy-scalar", "RUNNING", 10.4, "shard-1"))
    elif change == "earlier run final":
        runs[2] = _run("legacy-1a", "legacy-scalar", "RUNNING", 11.0, "shard-1")  # started after the final one
    elif change == "other task":
        runs[4] = _run("legacy-1b", "scoring", "COMPLETED", 10.4, "shard-1")
    else:
        runs[2] = _run("legacy-1a", "legacy-scalar", None, None, "shard-1")
    assert server.superseded(runs) == set()


class _Client:
    """The sync Prefect client ``wait_until_recorded`` reads task runs through, holding ``runs``."""

    def __init__(self, runs: list) -> None:
        self.runs, self.reads = runs, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def read_task_runs(self, flow_run_filter, limit, offset):
        self.reads += 1
        return self.runs[offset:offset + limit]


@pytest.fixture
def recorded(monkeypatch):
    """Runs the server holds: a list the test fills; the client's queues have nothing to drain."""
    import prefect.client.orchestration
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    held: list = []
    client = _Client(held)
    monkeypatch.setattr(prefect.client.orchestration, "get_client", lambda sync_client: client)
    for worker in (EventsWorker, APILogWorker):
        monkeypatch.setattr(worker, "drain_all", classmethod(lambda cls, timeout=None, at_exit=False: None))
    return held, client


def test_the_wait_ends_when_only_runs_of_a_lost_worker_are_open(recorded):
    held, client = recorded
    held += _lost_worker()
    assert server.wait_until_recorded(expected=4, timeout=30.0) is True
    assert client.reads == 2  # one pass (the page of runs, then the empty page): the lost run is not waited for


def test_the_wait_still_waits_for_an_open_run_that_was_not_superseded(recorded):
    held, _ = recorded
    held += _lost_worker()
    held[4] = _run("legacy-1b", "legacy-scalar", "RUNNING", 10.4, "shard-1")  # the second attempt's, not reported yet
    assert server.wait_until_recorded(expected=4, timeout=0.3) is False
