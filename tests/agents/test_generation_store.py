"""The per-item generation store: a second run makes zero requests; a SIGKILLed run resumes only what is missing."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import chat_server as chat
from tooleval.agents import GenerationStore, OpenAIAgentConfig, WorkItem, item_key, openai_generate
from tooleval.dataset import case_digest
from tooleval.models import Case, ToolSpec


KEY_ENV = "TOOLEVAL_TEST_OPENAI_KEY"
TOOLS = [ToolSpec(name="get_order", parameters={"type": "object", "properties": {"id": {"type": "string"}}})]
CASES = {f"c{i}": Case(case_id=f"c{i}", input=f"question c{i}", expected_calls=[]) for i in range(5)}


def items(trials: int = 1) -> list[WorkItem]:
    return [WorkItem(case_id=c.case_id, case_digest=case_digest(c), trial=t, seed=7 + t)
            for c in CASES.values() for t in range(trials)]


def routes(**override) -> dict:
    base = {f"question {cid}": [chat.completion(chat.call("get_order", json.dumps({"id": cid})),
                                                response_id=f"resp-{cid}")] for cid in CASES}
    base.update({f"question {cid}": replies for cid, replies in override.items()})
    return base


def config(server, **overrides) -> OpenAIAgentConfig:
    settings = {"base_url": server.base_url, "model": "scripted", "api_key_env": KEY_ENV, "max_retries": 1,
                "backoff_initial_s": 0.01, "backoff_max_s": 0.02, "request_timeout_s": 5.0}
    return OpenAIAgentConfig(**{**settings, **overrides})


def timeless(records: list[dict]) -> list[dict]:
    """Records without what differs between two equivalent runs: attempt timing and the server's request ids."""
    out = copy.deepcopy(records)
    for record in out:
        trace = json.loads(record["payload_json"])
        trace.pop("generation_started_at", None)
        trace.pop("generation_finished_at", None)
        for attempt in trace["metadata"]["attempts"]:
            attempt.update(started_at=None, elapsed_s=None, provider_request_id=None)
        record["payload_json"] = trace
    return out


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")


@pytest.fixture
def server():
    with chat.ChatServer(routes()) as running:
        yield running


def test_a_second_run_makes_zero_requests(server, tmp_path):
    store = GenerationStore(tmp_path / "generations")
    work = items(trials=3)
    first = openai_generate(config(server), work, CASES, TOOLS, store=store)
    assert server.count == 15 and len(store) == 15
    second = openai_generate(config(server, concurrency=1, request_timeout_s=9), work, CASES, TOOLS, store=store)
    assert server.count == 15  # operational settings changed: still all cached
    assert second == first
    assert openai_generate(config(server, temperature=0.5), work[:1], CASES, TOOLS, store=store)[0]["error"] is None
    assert server.count == 16  # a generation setting changed: a new key


def test_failed_items_are_not_stored_and_are_retried_by_the_next_run(tmp_path):
    store = GenerationStore(tmp_path / "generations")
    with chat.ChatServer(routes(c2=[chat.error(503, "overloaded")])) as server:
        records = openai_generate(config(server), items(), CASES, TOOLS, store=store)
        assert [r["error"] is None for r in records] == [True, True, False, True, True] and len(store) == 4
        assert server.count == 6  # c2 twice (max_retries=1)
        server.routes["question c2"] = routes()["question c2"]  # the server recovers
        again = openai_generate(config(server), items(), CASES, TOOLS, store=store)
        assert server.count == 7 and server.requests[-1].route == "question c2"
    assert all(r["error"] is None for r in again) and again[:2] == records[:2] and len(store) == 5


CHILD = """
import json, sys
from tooleval.agents import GenerationStore, OpenAIAgentConfig, WorkItem, openai_generate
from tooleval.models import Case, ToolSpec
spec = json.load(open(sys.argv[1]))
openai_generate(OpenAIAgentConfig.model_validate(spec["config"]), [WorkItem.model_validate(i) for i in spec["items"]],
                {c["case_id"]: Case.model_validate(c) for c in spec["cases"]},
                [ToolSpec.model_validate(t) for t in spec["tools"]], store=GenerationStore(spec["store"]))
"""


def test_sigkill_midway_then_rerun_generates_only_the_missing_items(tmp_path):
    store = GenerationStore(tmp_path / "generations")
    work = items()
    with chat.ChatServer(routes(c2=[chat.completion(delay_s=60)])) as server:  # c2 hangs until the kill
        spec = {"config": config(server, concurrency=1).model_dump(), "items": [i.model_dump() for i in work],
                "cases": [c.model_dump(mode="json") for c in CASES.values()],
                "tools": [t.model_dump(mode="json") for t in TOOLS], "store": str(store.root)}
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "spec.json")],
                                 env={**os.environ, KEY_ENV: "sk-test"})
        try:
            deadline = time.monotonic() + 60
            while not (len(store) == 2 and server.count_for("question c2") == 1):
                assert time.monotonic() < deadline and child.poll() is None, "the child never reached case c2"
                time.sleep(0.05)
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert len(store) == 2 and server.count == 3
        server.routes["question c2"] = routes()["question c2"]  # the server recovers
        resumed = openai_generate(config(server), work, CASES, TOOLS, store=store)
        assert server.count == 6  # c2, c3, c4 only
        assert sorted(s.route for s in server.requests[3:]) == ["question c2", "question c3", "question c4"]
        uninterrupted = openai_generate(config(server), work, CASES, TOOLS, store=GenerationStore(tmp_path / "other"))
    assert timeless(resumed) == timeless(uninterrupted)


def test_store_files_are_atomic_and_only_successes_are_kept(tmp_path):
    store = GenerationStore(tmp_path / "s")
    item = items()[0]
    key = item_key(item, "a" * 64)
    assert store.get(key) is None and key not in store and len(store) == 0
    record = {"case_id": "c0", "trial": 0, "seed": 7, "payload_json": "{}", "error": None}
    path = store.put(key, record)
    assert store.get(key) == record and path == store.root / key[:2] / f"{key}.json"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    (path.parent / ".tmp-killed.json").write_text('{"store_version": 1, "ke')  # a write cut by SIGKILL
    assert len(store) == 1 and store.get(key) == record
    with pytest.raises(ValueError, match="only successful"):
        store.put(key, {**record, "error": "generation_error: timeout"})
    with pytest.raises(ValueError, match="64 lowercase hex"):
        store.get("../../etc/passwd")
    path.write_text("not json")
    assert store.get(key) is None  # unreadable reads as missing: regenerated and overwritten


def test_item_key_covers_case_content_agent_trial_and_seed():
    item = WorkItem(case_id="x", case_digest="d" * 64, trial=0, seed=0)
    key = item_key(item, "a" * 64)
    assert len(key) == 64
    assert item_key(item.model_copy(update={"case_id": "renamed"}), "a" * 64) == key
    for change in ({"case_digest": "e" * 64}, {"trial": 1}, {"seed": 1}):
        assert item_key(item.model_copy(update=change), "a" * 64) != key
    assert item_key(item, "b" * 64) != key
