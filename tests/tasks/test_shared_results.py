"""The stage records kept on the store for a results URL (:mod:`tasks._results`), on fsspec's in-memory filesystem
(``memory://`` counts as a URL, as ``s3://`` does): what a record holds, that a pickled record is never unpickled,
and that Prefect's two reads of a cached record cost one read of the store."""

from __future__ import annotations

import json
import pickle
import uuid
from datetime import datetime, timezone

import fsspec
import pytest
from prefect.results import ResultStore

from tasks import score_shard, shared_results, with_refresh
from tasks._results import SharedResultStorage, StageResultSerializer, results_url
from tooleval.runs.legacy import LegacyResult
from tooleval.storage.stages import StageRef

REF = StageRef(stage="scoring", path="s3://b/p/.tooleval/stages/scoring/ab.parquet", digest="ab", rows=3,
               elapsed_s=0.5)


@pytest.fixture
def base():
    url = f"memory://results-{uuid.uuid4().hex[:8]}/.tooleval/prefect/storage"
    yield url
    fsspec.filesystem("memory").rm(url.split("://", 1)[1], recursive=True)


def test_a_folder_keeps_the_task_and_a_url_shares_its_records():
    assert results_url("/tmp/results") is None and shared_results(score_shard, "/tmp/results") is score_shard
    assert results_url("s3://b/nightly") == "s3://b/nightly/.tooleval/prefect/storage"
    shared = shared_results(score_shard, "s3://b/nightly")
    assert shared is shared_results(score_shard, "s3://b/nightly")  # made once per process
    assert isinstance(shared.result_storage, SharedResultStorage)
    assert shared.result_storage.basepath == "s3://b/nightly/.tooleval/prefect/storage"
    assert shared.cache_policy == score_shard.cache_policy and shared.fn is score_shard.fn
    refreshed = with_refresh(shared)
    assert refreshed.refresh_cache and refreshed.result_storage is shared.result_storage
    assert with_refresh(score_shard).refresh_cache


@pytest.mark.parametrize("value", [REF, LegacyResult(value=0.5, rows=2, ragas_version="r", scorer_version="s",
                                                     computed_at=datetime(2024, 1, 1, tzinfo=timezone.utc),
                                                     per_row=[]),
                                   {"rows": 3, "mean_f1": 0.25, "tools": ["a"]}])
def test_a_stage_result_round_trips_as_its_class(value):
    serializer = StageResultSerializer()
    assert serializer.loads(serializer.dumps(value)) == value
    assert type(serializer.loads(serializer.dumps(value))) is type(value)


def test_anything_else_is_neither_written_nor_read():
    serializer = StageResultSerializer()
    with pytest.raises(TypeError):
        serializer.dumps([1, 2])
    with pytest.raises(ValueError):
        serializer.loads(json.dumps({"kind": "os.system", "value": "true"}).encode())


def test_a_record_is_json_and_reads_back_through_prefects_store(base):
    store = ResultStore(result_storage=SharedResultStorage(basepath=base), serializer=StageResultSerializer())
    store.write(REF, key="k1")
    raw = json.loads(fsspec.filesystem("memory").cat_file(f"{base}/k1".split("://", 1)[1]))
    assert raw["metadata"]["serializer"] == {"type": "tooleval-stage-result"}
    assert raw["metadata"]["storage_block_id"] is None
    assert store.exists("k1") and store.read("k1").result == REF


class _Planted:
    def __reduce__(self):
        return (print, ("a planted record ran code",))


def test_a_pickled_record_planted_in_the_bucket_reads_as_absent(base):
    """A writer of the bucket puts a record whose serializer is a pickle under a cache key: Prefect would unpickle
    it (a record names its own serializer); the storage refuses it, so the stage is computed again."""
    planted = ResultStore(result_storage=SharedResultStorage(basepath=base))  # Prefect's default: cloudpickle
    planted.write(_Planted(), key="k2")
    assert b"pickle" in fsspec.filesystem("memory").cat_file(f"{base}/k2".split("://", 1)[1])
    store = ResultStore(result_storage=SharedResultStorage(basepath=base), serializer=StageResultSerializer())
    assert not store.exists("k2")
    with pytest.raises(FileNotFoundError):
        store.read("k2")
    assert pickle.dumps(REF)  # (the ref itself pickles: it is what a process pool hands back)


def test_prefects_exists_then_read_costs_one_read_of_the_store(base, monkeypatch):
    storage = SharedResultStorage(basepath=base)
    store = ResultStore(result_storage=storage, serializer=StageResultSerializer(), cache_result_in_memory=False)
    store.write(REF, key="k3")
    reads = []
    fs = storage.filesystem
    original = fs.open

    def counting(path, mode="rb", **kwargs):
        if "r" in mode:
            reads.append(path)
        return original(path, mode, **kwargs)

    monkeypatch.setattr(fs, "open", counting)
    assert store.exists("k3") and store.read("k3").result == REF
    assert len(reads) == 1
    # a record written after a read is read again, not taken from the read before it
    assert store.exists("k3")
    store.write(REF.model_copy(update={"rows": 4}), key="k3")
    assert store.read("k3").result.rows == 4
