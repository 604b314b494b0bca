"""The generation stage's cache key over its work items: one digest of every item's fields, in order."""

from __future__ import annotations

import hashlib
import json

from prefect.cache_policies import Inputs
from prefect.utilities.hashing import hash_objects

from tasks.generation import _WorkItemsKey, generate_shard, work_items_digest
from tooleval.agents import WorkItem


def _items() -> list[WorkItem]:
    return [WorkItem(case_id="c-1", case_digest="d1", trial=0, seed=7, trace_digest="t1"),
            WorkItem(case_id="c-2", case_digest="d2", trial=1, seed=8, trace_digest=None)]


class TestWorkItemsDigest:
    def test_is_the_sha256_of_the_items_fields_as_compact_json(self):
        # written out by hand: each item's fields in WorkItem's order, JSON without spaces
        text = ('[{"case_id":"c-1","case_digest":"d1","trial":0,"seed":7,"trace_digest":"t1"},'
                '{"case_id":"c-2","case_digest":"d2","trial":1,"seed":8,"trace_digest":null}]')
        assert json.loads(text) == [item.model_dump() for item in _items()]
        assert work_items_digest(_items()) == hashlib.sha256(text.encode()).hexdigest()

    def test_every_field_and_the_order_count(self):
        base = work_items_digest(_items())
        assert work_items_digest(list(reversed(_items()))) != base
        for field, value in (("case_id", "c-9"), ("case_digest", "d9"), ("trial", 5), ("seed", 9),
                             ("trace_digest", "t9")):
            changed = _items()
            changed[0] = changed[0].model_copy(update={field: value})
            assert work_items_digest(changed) != base, field

    def test_other_values_are_hashed_as_prefect_hashes_inputs(self):
        assert work_items_digest(["a", 1]) == hash_objects(["a", 1], raise_on_failure=True)


def test_generation_policy_keys_the_items_by_their_digest():
    policy = _WorkItemsKey()
    assert policy.compute_key(None, {"items": _items()}, {}) == work_items_digest(_items())
    inputs = [p for p in generate_shard.cache_policy.policies if isinstance(p, Inputs)]
    assert [p.exclude for p in inputs] == [["agent", "dataset", "items"]]  # not hashed a second time by INPUTS
    assert any(isinstance(p, _WorkItemsKey) for p in generate_shard.cache_policy.policies)
