"""A shard's scoring memo is bounded: once it holds more than ``tasks.scoring.MEMO_ENTRIES`` case entries and
distinct calls, the next batches start an empty one. The rows must not depend on it: scoring one shard with the
memo emptied after every batch gives the rows that one memo for the whole shard gives, column for column, on a bfcl
corpus (cases whose trials straddle batches, wrong-argument pairs, write rules) and a tau corpus (user turns,
confirmations, calls repeated across cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tasks.scoring as scoring_task
from tasks import ReplayedLines, capture_shard, generate_shard, score_shard
from tooleval.dataset import load_dataset_cached
from tooleval.rules import confidential_tools
from tooleval.runs.plan import plan_run
from tooleval.runs.shards import run_scopes, scoring_key
from tooleval.runs.spec import RunSpec
from tooleval.scoring import ShardMemo
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.storage.stages import read_stage_table, stage_dir
from tooleval.synth import write_synth
from tooleval.versions import scorer_version

KEY = "tooleval-memo-bound-test-key-0001"


def _one_shard_rows(dataset: Path, out: Path) -> list[dict]:
    """The rows of ``dataset`` planned as one shard, its stages run in this process (capture writes batches of
    64 rows, so the shard is scored over many batches)."""
    plan = plan_run(RunSpec(dataset=str(dataset), traces=None, out=str(out), run_id="memo", workers=1,
                            shard_size=1_000_000))
    generation_scope, scoring_scope = run_scopes(plan)
    loaded = load_dataset_cached(plan.dataset.path)
    kept = confidential_tools(loaded.tools, loaded.cases)
    dirs = {name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")}
    shards = list(plan.index.shards())
    assert len(shards) == 1
    items, offsets = plan.shard_items(shards[0])
    generated = generate_shard.fn(plan.agent, items, plan.dataset, plan.redaction, plan.out, dirs["generation"],
                                  plan.executor, scope=generation_scope)
    replay = ReplayedLines(plan.agent, items, offsets, plan.dataset, plan.out)
    envelopes = capture_shard.fn(generated, plan.dataset.tool_schema_version, scorer_version(), dirs["capture"],
                                 plan.redaction, generation_scope, replay=replay, kept_results=kept)
    scored = score_shard.fn(envelopes, plan.dataset, plan.redaction, scorer_version(), ragas_version(), plan.out,
                            dirs["scoring"], scope=scoring_key(scoring_scope, items))
    return read_stage_table(scored).to_pylist()


@pytest.mark.parametrize("profile,rows", [("bfcl", 1_500), ("tau", 300)])
def test_rows_do_not_depend_on_when_the_scoring_memo_is_emptied(profile, rows, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    monkeypatch.setattr("tooleval.capture._shard.STAGE_ROW_GROUP", 64)
    synth = write_synth(rows, 5, profile, tmp_path / profile)
    whole = _one_shard_rows(synth.path, tmp_path / "whole")

    emptied = []
    fresh = ShardMemo.fresh

    def counted(self):
        emptied.append(self.size())
        return fresh(self)

    monkeypatch.setattr(ShardMemo, "fresh", counted)
    monkeypatch.setattr(scoring_task, "MEMO_ENTRIES", 0)
    bounded = _one_shard_rows(synth.path, tmp_path / "bounded")
    # every batch but the last left a memo to empty: the rows of ~rows / 64 batches were scored from fresh memos
    assert len(emptied) >= rows // 64 - 1, emptied
    assert len(bounded) == len(whole) == rows
    for left, right in zip(whole, bounded):
        assert left == right, {name: (left[name], right[name]) for name in left if left[name] != right[name]}


def test_a_memo_below_its_bound_is_kept_for_the_whole_shard(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    monkeypatch.setattr("tooleval.capture._shard.STAGE_ROW_GROUP", 64)
    synth = write_synth(300, 5, "tau", tmp_path / "tau")
    emptied = []
    fresh = ShardMemo.fresh
    monkeypatch.setattr(ShardMemo, "fresh", lambda self: emptied.append(1) or fresh(self))
    _one_shard_rows(synth.path, tmp_path / "out")
    # 300 tau rows resample a few dozen cases and repeat their calls: far below 16,384 entries
    assert emptied == []
