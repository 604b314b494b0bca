"""Scale behaviour of the evaluation flow (issue 9): the same rows whatever the worker count, and caches that
survive a growing corpus (content-defined shards)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tooleval.runs.spec import RunSpec
from tests.support.runs import published_rows, run_small
from tooleval.synth import write_synth

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]  # runs on a process pool of Prefect workers

_NOT_COMPARED = {"run_id"}  # rows carry no time column; run_id differs by construction



@pytest.fixture(scope="module")
def pool_pair(tmp_path_factory):
    """One corpus of 700 rows run twice: on one worker (``one``), then on a process pool of two (``two``). The pool
    is the costly part (its spawned workers import Prefect, the stages and ragas), so both tests of the pool read
    this one pool run: the pool's run also plans on the pool (its traces file, ~650 KB here, the threshold
    lowered, is read in byte ranges by the workers while the flow loads the dataset), and the children alive when
    each run's publication starts are recorded. Returns ``(tmp, one, two, ranges per run, children per run)``."""
    import multiprocessing

    import flows.evaluate as evaluate_module
    import tooleval.runs.plan as plan_module
    from flows.evaluate import run_evaluate

    tmp = tmp_path_factory.mktemp("pool-pair")
    ranges: dict[str, list[int]] = {"one": [], "two": []}
    children: dict[str, list[list[str]]] = {"one": [], "two": []}
    running = ["one"]
    own = evaluate_module._index_parts
    aggregate = evaluate_module.RunPublisher.aggregate

    def counting():
        start = own()
        if start is None:
            return None

        def counted(path, spans):
            ranges[running[0]].append(len(spans))
            return start(path, spans)

        return counted

    def recording_aggregate(self, *args, **kwargs):
        children[running[0]].append(sorted(p.name for p in multiprocessing.active_children()))
        return aggregate(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(plan_module, "PARALLEL_INDEX_BYTES", 1)
        monkeypatch.setattr(plan_module, "POOL_INDEX_BYTES", 1)
        monkeypatch.setattr(plan_module, "RANGE_BYTES", 64 << 10)
        monkeypatch.setattr(evaluate_module, "_index_parts", counting)
        monkeypatch.setattr(evaluate_module.RunPublisher, "aggregate", recording_aggregate)
        data = write_synth(700, 3, "bfcl", tmp / "data").path
        one = run_evaluate(RunSpec(dataset=str(data), out=str(tmp / "out"), run_id="one", workers=1,
                                   shard_size=100))
        running[0] = "two"
        two = run_evaluate(RunSpec(dataset=str(data), out=str(tmp / "out2"), run_id="two", workers=2,
                                   shard_size=100), rows_hint=None)
    return tmp, one, two, ranges, children


def test_rows_identical_with_one_worker_and_a_process_pool(pool_pair):
    """The pool's run also plans on the pool: its traces file (~650 KB here; the threshold is lowered) is read in
    byte ranges by the workers while the flow loads the dataset."""
    tmp_path, (one, drift_one), (two, drift_two), ranges, _ = pool_pair
    assert ranges["one"] == []  # one thread: the plan reads the file itself
    assert len(ranges["two"]) == 1 and ranges["two"][0] >= 5  # ~650 KB in 64 KB ranges, each cut at a line end
    assert (drift_one, drift_two) == (False, False)
    assert one.errors == two.errors
    assert one.summary["timing"]["workers"] == 1 and two.summary["timing"]["workers"] == 2
    assert two.summary["timing"]["shards"] > 2
    revision = one.dataset_revision
    first = published_rows(tmp_path / "out", "one", revision=revision, drop=_NOT_COMPARED)
    second = published_rows(tmp_path / "out2", "two", revision=revision, drop=_NOT_COMPARED)
    assert len(first) == 700
    differing = sorted({k for a, b in zip(first, second) for k in a if a[k] != b[k]})
    assert differing == []
    assert first == second


def test_adding_ten_cases_reruns_only_the_shards_that_hold_them(tmp_path):
    """3,003 bfcl rows (429 cases x 7 trials), then the same corpus plus 10 cases (70 rows) under a new
    revision: every stage's shards of the old cases stay Cached — generation, capture, scoring and the legacy
    pass (envelopes carry no revision until publication: envelope version 3) — and only the shard(s) holding
    the new case ids (which sort after every old id) run again. The second run's rows carry the new revision.
    What shows it is the count of shards (16, at 200 rows a shard) against the at most two that run again,
    not the corpus's size: 10,003 rows at 500 a shard showed the same with over three times the rows to score."""
    from flows.evaluate import evaluate

    small = write_synth(3_003, 5, "bfcl", tmp_path / "small").path
    grown = write_synth(3_073, 5, "bfcl", tmp_path / "grown").path  # same first 429 cases, 10 more
    manifest = json.loads((grown / "dataset.json").read_text())
    out = tmp_path / "out"
    first = evaluate(RunSpec(dataset=str(small), out=str(out), run_id="night-1", workers=1, shard_size=200))
    second = evaluate(RunSpec(dataset=str(grown), out=str(out), run_id="night-2", workers=1, shard_size=200))
    assert first.dataset_revision != second.dataset_revision == manifest["revision"]
    assert second.summary["rows"] == 3_073
    shards = second.summary["timing"]["shards"]
    assert shards > 10
    for stage in ("generation", "trace-capture", "scoring", "legacy-scalar"):
        states = second.stage_states[stage]
        assert sum(states.values()) == shards, stage
        assert states.get("Completed", 0) <= 2 and states["Cached"] >= shards - 2, (stage, states)
    rows = pq.read_table(out / "rows" / f"dataset_revision={second.dataset_revision}" / "run_id=night-2",
                         columns=["dataset_revision"])
    traces = pq.read_table(out / "traces" / f"dataset_revision={second.dataset_revision}" / "run_id=night-2",
                           columns=["dataset_revision", "trace_digest"])
    assert set(rows.column("dataset_revision").to_pylist()) == {second.dataset_revision}  # stamped when published
    assert set(traces.column("dataset_revision").to_pylist()) == {second.dataset_revision}
    assert traces.column("trace_digest").null_count == 0


def test_process_pool_workers_end_before_the_publication(pool_pair):
    """The pool's workers (each holding a worker's imports and caches) are gone once every shard is done, so they
    do not add to the peak memory of the publication's steps after the shards (aggregate, gate, report)."""
    _, _, (result, drift), _, children = pool_pair
    assert drift is False and result.summary["timing"]["workers"] == 2
    assert result.summary["timing"]["shards"] >= 2  # the shards did run on the pool's workers
    assert children["two"] == [[]]  # no worker process left alive when the publication started


def test_the_flow_gives_the_plans_freed_memory_back_before_the_first_shard(tmp_path, monkeypatch):
    """The plan's per-key objects are freed once the index is an Arrow table; the flow gives their pages back
    before the shards run (else it held them through the whole shard phase: ~120 MB at 1,000,000 bfcl rows).
    One thread runs the shards here, so the order of the calls is the order of the events."""
    import flows._shards as shards_module
    import flows.evaluate as evaluate_module

    events: list[str] = []
    monkeypatch.setattr(evaluate_module, "release_free_memory", lambda: events.append("flow release"))
    real = shards_module._run_shard

    def recording(*args, **kwargs):
        events.append("shard")
        return real(*args, **kwargs)

    monkeypatch.setattr(shards_module, "_run_shard", recording)
    data = write_synth(300, 3, "bfcl", tmp_path / "data").path
    result, drift = run_small(dataset=str(data), out=str(tmp_path / "out"), run_id="release", shard_size=100)
    assert drift is False and result.summary["timing"]["shards"] >= 2
    assert events[0] == "flow release" and events.count("shard") == result.summary["timing"]["shards"]
