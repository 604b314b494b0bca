"""Content-defined shards (tooleval.runs.shards): boundaries by case id, trials together, a growing corpus
keeps the shards it does not touch, and the default shard size."""

from __future__ import annotations

import hashlib
import io

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tooleval.runs.spec import RunSpec
from tooleval.runs.progress import StageProgress
from tooleval.runs.shards import MAX_SHARD, MAX_SHARD_BYTES, MIN_SHARD, ShardIndex, cases_per_shard, default_shard_size, is_boundary


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


def test_default_shard_size_of_long_lines_is_bounded_by_bytes():
    # 200,000 tau rows of ~16,500 bytes: 12,500 rows by count, but 32 MiB / 16,500 = 33,554,432 / 16,500 = 2,033.6
    assert default_shard_size(200_000, 2, 16_500) == 2_033
    # 1,000,000 bfcl rows of ~934 bytes: 33,554,432 / 934 = 35,925 rows allowed, so the row bound (20,000) holds
    assert default_shard_size(1_000_000, 2, 934) == MAX_SHARD
    assert default_shard_size(30_000, 2, 16_500) == 1_875  # 30,000 / 16 under the byte bound
    assert default_shard_size(100_000, 2, 10**8) == MIN_SHARD  # never below the floor


def test_the_plan_sizes_shards_by_the_traces_files_mean_line(tmp_path, monkeypatch):
    """2,000 tau rows: 125 rows a shard by count (2,000 / 16); with the byte bound lowered to 1.8 MB (~108
    lines of ~16.5 KB), the plan passes the file's mean line length and gets 1.8 MB / that length instead."""
    import tooleval.runs.shards as shards
    from tooleval.runs.plan import plan_run
    from tooleval.synth import write_synth

    data = write_synth(2_000, 0, "tau", tmp_path / "data").path
    traces = data / "traces.jsonl"
    mean = traces.stat().st_size / traces.read_bytes().count(b"\n")
    assert 10_000 < mean < 30_000  # tau lines: ~16 KB
    assert plan_run(RunSpec(dataset=str(data), traces=None, out=str(tmp_path / "out"), run_id="r", workers=2)).shard_size == 125
    monkeypatch.setattr(shards, "MAX_SHARD_BYTES", 1_800_000)
    smaller = plan_run(RunSpec(dataset=str(data), traces=None, out=str(tmp_path / "out"), run_id="s", workers=2)).shard_size
    assert smaller == int(1_800_000 // mean) < 125


def test_release_free_memory_gives_arrows_freed_buffers_back(tmp_path):
    """A ~60 MB table of long strings written and read back five times, then dropped: Arrow's pool keeps its
    pages (mimalloc), so the process stays larger until they are released; released, it shrinks by at least half
    the table (what the pool kept is at least one table's buffers)."""
    import psutil
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tooleval.runs.shards import release_free_memory

    path = tmp_path / "t.parquet"
    text = [f"{i:08d}" + "x" * 16_000 for i in range(4_000)]  # 4,000 x ~16 KB = ~64 MB
    pq.write_table(pa.table({"payload_json": text}), path, compression="zstd")
    del text
    for _ in range(5):
        table = pq.read_table(path)
        assert table.nbytes > 60_000_000
        del table
    process = psutil.Process()
    before = process.memory_info().rss
    release_free_memory()
    assert before - process.memory_info().rss > 30_000_000


@given(st.dictionaries(st.tuples(st.sampled_from([f"c{i}" for i in range(40)]), st.integers(0, 5)),
                       st.tuples(st.integers(-1, 10**9), st.booleans(), st.one_of(st.none(), st.text("0123abc", min_size=1))),
                       max_size=120),
       st.integers(1, 50))
def test_the_plans_columns_give_the_table_its_dicts_give(found, size):
    # the plan builds the index from columns in key order (from_sorted); build takes dicts by key: equal tables
    keys = sorted(found)
    lines = {key: number for number, key in enumerate(keys, start=3)}
    offsets = {key: (found[key][0], lines[key]) for key in keys}
    digests = {key: found[key][2] for key in keys}
    by_dicts = ShardIndex.build(list(reversed(keys)), size, offsets, digests)
    by_columns = ShardIndex.from_sorted(keys, size, [found[k][0] for k in keys], [lines[k] for k in keys],
                                        [found[k][2] for k in keys])
    assert by_columns.table.equals(by_dicts.table) and by_columns.cases_per_shard == by_dicts.cases_per_shard
    assert by_columns.table.column("seed").type == "int64"


@given(st.dictionaries(st.tuples(st.sampled_from([f"c{i}" for i in range(40)]), st.integers(0, 5)),
                       st.tuples(st.integers(-1, 10**9), st.text("0123456789abcdef", min_size=32, max_size=32)),
                       max_size=120),
       st.integers(1, 50))
def test_arrow_columns_give_the_table_lists_give(found, size):
    # the plan passes its offsets and digests as Arrow arrays taken from the traces index: the same table
    keys = sorted(found)
    lines = list(range(1, len(keys) + 1))
    offsets, digests = [found[k][0] for k in keys], [found[k][1] for k in keys]
    by_lists = ShardIndex.from_sorted(keys, size, offsets, lines, digests)
    by_arrays = ShardIndex.from_sorted(keys, size, pa.array(offsets, pa.int64()), lines,
                                       pa.array(digests, pa.string()))
    assert by_arrays.table.equals(by_lists.table) and by_arrays.cases_per_shard == by_lists.cases_per_shard


def test_the_index_columns_by_hand(tmp_path):
    # offsets and digests of chosen lines, taken from the index's packed arrays, equal the per-line values
    import hashlib

    from tooleval.capture.recorded import index_traces
    from tooleval.runs.plan import _placed_columns

    lines = [b'{"case_id": "a", "trial": 0, "messages": []}\n', b"\n",
             b'{"case_id": "b", "trial": 1, "messages": []}\r\n', b'{"case_id": "c", "trial": 0, "messages": []}\n']
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"".join(lines))
    index = index_traces(path)
    offsets, digests = _placed_columns(index, pa.array([4, 1, 3]))
    assert offsets.to_pylist() == [len(lines[0]) + 1 + len(lines[2]), 0, len(lines[0]) + 1]
    assert digests.to_pylist() == [hashlib.sha256(lines[n - 1].rstrip(b"\r\n")).hexdigest()[:32] for n in (4, 1, 3)]
    assert digests.to_pylist() == [index.line_digest(n) for n in (4, 1, 3)]
    empty = _placed_columns(index, pa.array([], pa.int64()))
    assert empty[0].to_pylist() == [] and empty[1].type == pa.string()


def test_ranges_come_in_multiples_of_the_workers():
    from tooleval.runs.plan import MAX_RANGES, RANGE_BYTES, range_count

    assert RANGE_BYTES == 128 << 20 and MAX_RANGES == 64
    assert range_count(892_000_000, 2) == 8  # 7 ranges of 128 MiB, one more so that each worker reads 4
    assert range_count(500_000_000, 3) == 6  # 4 ranges, rounded up to 6
    assert range_count(40_000_000, 2) == 4  # at least two per worker
    assert range_count(10 ** 12, 2) == 64 and range_count(10 ** 12, 3) == 63  # the cap, a multiple of 3 below it
