"""Content-defined shards (tooleval.runs.shards): boundaries by case id, trials together, a growing corpus
keeps the shards it does not touch, and the default shard size."""

from __future__ import annotations

import hashlib
import io

from tooleval.runs.progress import StageProgress
from tooleval.runs.shards import MAX_SHARD, MIN_SHARD, ShardIndex, cases_per_shard, default_shard_size, is_boundary


def _keys(cases: int, trials: int = 7, prefix: str = "bfcl-") -> list[tuple[str, int]]:
    return [(f"{prefix}{i:07d}", t) for i in range(cases) for t in range(trials)]


def _shards(index: ShardIndex) -> list[tuple]:
    return [tuple(zip(s["case_id"].to_pylist(), s["trial"].to_pylist())) for s in index.shards()]


def test_boundary_is_the_hash_of_the_case_id():
    # by hand: sha256("bfcl-0000005")[:8] as an int, mod 64
    digest = int.from_bytes(hashlib.sha256(b"bfcl-0000005").digest()[:8], "big")
    assert is_boundary("bfcl-0000005", 64) == (digest % 64 == 0)
    assert is_boundary("anything", 1)


def test_cases_per_shard_is_a_power_of_two():
    # 630 rows per shard at 7 trials per case = 90 cases -> 2**round(log2 90) = 2**6 = 64
    assert cases_per_shard(10_003, 1_429, 630) == 64
    assert cases_per_shard(10_073, 1_439, 630) == 64  # 1 % more cases: the same K, the same boundaries
    assert cases_per_shard(0, 0, 100) == 1


def test_trials_of_a_case_share_a_shard_and_every_key_is_kept():
    keys = _keys(300)
    index = ShardIndex.build(list(reversed(keys)), 200)
    shards = _shards(index)
    assert sorted(k for s in shards for k in s) == sorted(keys)
    owner = {}
    for number, shard in enumerate(shards):
        for case_id, _ in shard:
            assert owner.setdefault(case_id, number) == number
    assert len(shards) > 3


def test_appending_cases_changes_only_the_last_shards():
    before = set(_shards(ShardIndex.build(_keys(1_429), 630)))
    after = _shards(ShardIndex.build(_keys(1_439), 630))
    changed = [s for s in after if s not in before]
    assert len(after) > 10 and len(changed) == 1
    assert ("bfcl-0001438", 6) in changed[0]


def test_removing_a_case_changes_only_its_shard():
    keys = _keys(1_429)
    before = _shards(ShardIndex.build(keys, 630))
    gone = next(f"bfcl-{i:07d}" for i in range(700, 800) if not is_boundary(f"bfcl-{i:07d}", 64))
    after = _shards(ShardIndex.build([k for k in keys if k[0] != gone], 630))
    assert len([s for s in after if s not in set(before)]) == 1
    assert len(after) == len(before)  # a case that starts no shard: its shard shrinks, nothing else moves
    boundary = next(f"bfcl-{i:07d}" for i in range(700, 800) if is_boundary(f"bfcl-{i:07d}", 64))
    merged = _shards(ShardIndex.build([k for k in keys if k[0] != boundary], 630))
    assert len(merged) == len(before) - 1  # a boundary case: its shard joins the one before it
    assert len([s for s in merged if s not in set(before)]) == 1


def test_default_shard_size():
    assert default_shard_size(200, 2) == MIN_SHARD == 100  # 200 / 16 = 12.5 -> the floor
    assert default_shard_size(100_000, 2) == 6_250  # 100,000 / (2 workers x 8)
    assert default_shard_size(10_000_000, 2) == MAX_SHARD


def test_offsets_and_line_digests_are_carried():
    keys = [("a", 0), ("b", 0)]
    index = ShardIndex.build(keys, 10, {("a", 0): (0, 1), ("b", 0): (17, 2)}, {("a", 0): "x", ("b", 0): "y"})
    table = index.table.to_pylist()
    assert [(r["case_id"], r["offset"], r["line"], r["line_digest"]) for r in table] == [
        ("a", 0, 1, "x"), ("b", 17, 2, "y")]


def test_progress_without_a_terminal_prints_plain_lines():
    stream = io.StringIO()
    with StageProgress(["generation", "scoring"], 100, stream=stream, interval=0.0) as bar:
        bar.advance("generation", 60)
        bar.advance(["generation", "scoring"], 40)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("progress: generation 60/100")
    assert lines[1].startswith("progress: generation 100/100") and "scoring 40/100" in lines[1]
    assert lines[-1].startswith("done: generation 100/100") and "scoring 40/100" in lines[-1]
    fused = io.StringIO()  # every stage at the same count: one count and one rate, not the same rate per stage
    with StageProgress(["generation", "scoring"], 100, stream=fused, interval=3600.0) as bar:
        bar.advance(["generation", "scoring"], 100)
    (line,) = fused.getvalue().splitlines()
    assert line.startswith("done: 100/100 rows (") and line.endswith("rows/s) through generation -> scoring")
    silent = io.StringIO()
    with StageProgress(["generation"], 1, stream=silent, enabled=False) as bar:
        bar.advance("generation", 1)
    assert silent.getvalue() == ""
