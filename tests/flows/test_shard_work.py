"""A shard's work reaches its worker in one holder that Prefect does not walk (:class:`flows._shards.ShardWork`).

Prefect walks a task run's arguments twice in the worker — to list the upstream runs it depends on, and to
resolve futures and states into their results — and each walk visits every element of every list. On 200,000 bfcl
rows the two walks over the shards' work items were 18 % of the workers' CPU (py-spy). The tests call the two
functions Prefect's task engine calls (:func:`prefect.utilities.engine.collect_task_run_inputs_sync` and
:func:`prefect.utilities.engine.resolve_inputs_sync`) with a completed task-run state planted among the items: a
walk that went inside would find it (and resolve it to its result), which the plain lists show it does.
"""

from __future__ import annotations

import pickle
from uuid import uuid4

from prefect.states import Completed
from prefect.utilities.engine import collect_task_run_inputs_sync, resolve_inputs_sync

from flows._shards import ShardWork
from tooleval.agents import WorkItem


def _planted() -> tuple[list, object]:
    state = Completed(data="resolved")
    state.state_details.task_run_id = uuid4()
    item = WorkItem(case_id="c1", case_digest="d" * 16, trial=0, seed=7, trace_digest="t" * 32)
    return [item, state], state


def test_prefect_does_not_look_inside_the_holder_when_it_lists_upstream_runs():
    items, state = _planted()
    assert len(collect_task_run_inputs_sync(items)) == 1  # a plain list is walked: the state is found
    assert collect_task_run_inputs_sync(ShardWork(items, [(0, 1, True)] * 2)) == set()


def test_prefect_passes_the_holder_on_unchanged_when_it_resolves_parameters():
    items, state = _planted()
    assert resolve_inputs_sync({"items": list(items)})["items"][1] == "resolved"  # a plain list is rebuilt
    work = ShardWork(items, [(0, 1, True), (10, 2, False)])
    resolved = resolve_inputs_sync({"work": work})["work"]
    assert resolved is work
    assert resolved.items[1] is state


def test_the_holder_pickles_as_its_two_lists():
    items, _ = _planted()
    work = ShardWork(items[:1], [(0, 1, True)])
    back = pickle.loads(pickle.dumps(work))
    assert back.items == work.items and back.offsets == [(0, 1, True)] and len(back) == 1


def test_a_plans_shard_travels_as_its_index_slice_and_gives_the_plans_items(tmp_path):
    # the items and offsets a worker gets from the shard's Arrow slice are RunPlan.shard_items' for that shard,
    # after a pickle round trip as a process pool makes; the scoring key from the shard's case digests is the one
    # computed from its items
    from tests.support.paths import BUNDLED
    from tooleval.runs.plan import plan_run
    from tooleval.runs.shards import scoring_key, scoring_key_of_cases
    from tooleval.runs.spec import RunSpec

    plan = plan_run(RunSpec(dataset=str(BUNDLED), out=str(tmp_path / "out"), run_id="r1", shard_size=64))
    shards = list(plan.index.shards())
    assert len(shards) > 1
    for shard in shards:
        items, offsets = plan.shard_items(shard)
        work = ShardWork.of_shard(shard, plan.case_digests)
        back = pickle.loads(pickle.dumps(work))
        assert len(back) == len(items) == shard.num_rows
        assert back.items == items and back.offsets == offsets
        assert back.digests == {item.case_id: item.case_digest for item in items}
        assert scoring_key_of_cases("scope", back.digests) == scoring_key("scope", items)
