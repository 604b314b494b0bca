"""The process pool of ``tooleval run`` (:class:`flows._shards.ProcessPool`): the thread that passes the workers'
events and logs on to the API talks to the flow's Prefect API, not to a second temporary server."""

from __future__ import annotations

import threading

import pytest

from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

from flows._shards import ProcessPool
from flows.evaluate import task_runner


def test_the_message_thread_uses_the_api_url_of_the_flow_that_entered_the_pool():
    """Prefect calls each message processor factory once, on the forwarding thread, as that thread starts: the
    settings the factory sees are those the thread would send the workers' events with. The URL is set only in
    the entering thread's context (as ``tooleval run`` sets its own server's), never in the environment."""
    seen: list[str | None] = []
    started = threading.Event()

    def factory():
        seen.append(get_current_settings().api.url)
        started.set()
        return lambda kind, payload: (kind, payload)

    url = "http://127.0.0.1:9/api"  # nothing listens there: the pool starts no worker, sends no event
    with temporary_settings(updates={PREFECT_API_URL: url}):
        with ProcessPool(max_workers=1, subprocess_message_processor_factories=[factory]):
            assert started.wait(10)
    assert seen == [url]


def test_a_run_on_two_workers_gets_the_pool():
    runner = task_runner(2, rows=100_000)
    assert type(runner) is ProcessPool
    assert runner.duplicate().__class__ is ProcessPool  # Prefect copies the runner per flow run


def test_workers_import_ragas_only_for_a_run_with_a_legacy_pass():
    """The row path never calls ragas; only the legacy pass does. A pool for a run without it leaves ragas out of
    its workers (~2 s and ~107 MB each); the initializer's argument survives Prefect's copy of the runner."""
    import subprocess
    import sys

    probe = ("import sys; from flows._shards import warm_worker; warm_worker({}); "
             "print('ragas' in sys.modules, 'tooleval.scoring.rows' in sys.modules)")
    for legacy, expected in ((False, "False True"), (True, "True True")):
        done = subprocess.run([sys.executable, "-c", probe.format(legacy)], capture_output=True, text=True,
                              check=True)
        assert done.stdout.split()[-2:] == expected.split()
    assert task_runner(2, rows=100_000, legacy=False).duplicate()._initargs == (False,)
    assert task_runner(2, rows=100_000).duplicate()._initargs == (True,)


def _client_in_use() -> tuple[int, bool, bool]:
    """In a pool worker: the process, whether the task run's client context is the one the worker keeps, and
    whether the flow context rebuilt for the task holds that context's client."""
    import os

    from prefect.context import FlowRunContext, SyncClientContext

    import flows._shards as shards

    kept = shards._KEPT[0] if shards._KEPT else None
    return (os.getpid(), kept is not None and SyncClientContext.get() is kept,
            kept is not None and FlowRunContext.get().client is kept.client)


@pytest.mark.slow  # a process-pool worker process under the Prefect test harness
def test_a_worker_keeps_one_api_client_for_every_task_run(prefect_harness):
    """Every task run a pool worker receives uses the client the worker made when it started (no TLS context and
    version request of its own): both shard tasks, in one worker, find the kept client context, and the flow
    context Prefect rebuilds for each holds its client."""
    from prefect import flow, task

    probe = task(_client_in_use, name="client-probe")

    @flow(task_runner=ProcessPool(max_workers=1))
    def two_tasks():
        return [future.result() for future in (probe.submit(), probe.submit())]

    first, second = two_tasks()
    assert first[0] == second[0]  # one worker ran both
    assert first[1:] == (True, True) and second[1:] == (True, True)


def test_the_pool_serialises_the_same_settings_once_and_new_settings_afresh(monkeypatch):
    """Prefect serialises the whole context for every submission; inside the pool's submit the settings part is
    serialised once per settings object: equal to Prefect's own serialisation, not computed again for the same
    settings, and computed again (with the new value) under settings made by ``temporary_settings``."""
    from prefect.context import SettingsContext, serialize_context

    from flows._shards import _settings_serialized_once

    original = SettingsContext.serialize
    calls: list[int] = []

    def counted(self, include_secrets=True):
        calls.append(1)
        return original(self, include_secrets=include_secrets)

    monkeypatch.setattr(SettingsContext, "serialize", counted)
    expected = serialize_context()["settings_context"]
    calls.clear()
    memo: dict = {}
    with _settings_serialized_once(memo):
        first = serialize_context()["settings_context"]
        second = serialize_context()["settings_context"]
        assert calls == [1]  # the second submission reused the first's serialisation
        url = "http://127.0.0.1:9/api"
        with temporary_settings(updates={PREFECT_API_URL: url}):
            changed = serialize_context()["settings_context"]
        assert calls == [1, 1]
    assert first == second == expected
    assert changed["settings"]["api"]["url"] == url != first["settings"].get("api", {}).get("url")
    assert SettingsContext.serialize is counted  # put back on leaving


def test_a_worker_builds_the_same_serialised_settings_once():
    """A pool worker rebuilds the flow's settings for each task run it receives (Prefect's ``hydrated_context``
    makes ``SettingsContext(**serialised)``). With :func:`flows._shards.settings_hydrated_once` the same
    serialisation, as each task run brings it (a fresh unpickled copy), gives the same ``Settings`` object, equal
    to what Prefect builds; other settings are built afresh, and the constructor is Prefect's again after restore."""
    import pickle

    from prefect.context import SettingsContext, serialize_context

    from flows._shards import settings_hydrated_once

    serialised = serialize_context()["settings_context"]
    url = "http://127.0.0.1:9/api"
    with temporary_settings(updates={PREFECT_API_URL: url}):
        other = serialize_context()["settings_context"]
    expected = SettingsContext(**pickle.loads(pickle.dumps(serialised)))
    restore = settings_hydrated_once()
    try:
        first, second = (SettingsContext(**pickle.loads(pickle.dumps(serialised))) for _ in range(2))
        changed = SettingsContext(**pickle.loads(pickle.dumps(other)))
        with second:  # a context made from the held settings enters as any other
            assert get_current_settings() is first.settings
    finally:
        restore()
    assert second.settings is first.settings and first.settings == expected.settings
    assert first.profile == expected.profile
    assert changed.settings is not first.settings and changed.settings.api.url == url
    assert "__init__" not in SettingsContext.__dict__  # pydantic's own constructor again
    assert SettingsContext(**serialised).settings is not first.settings
