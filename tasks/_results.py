"""Where the stage tasks keep their results and cache records when the results are on object storage, so that
every machine with access to the bucket finds them.

For a folder ``--out``, Prefect keeps the records of the stage tasks (generation, trace capture, scoring, the
legacy scalar and aggregation) on the machine that runs them (``PREFECT_LOCAL_STORAGE_PATH``, set by the
command line). For ``--out s3://bucket/prefix`` that would be this machine's cache: a run planned on another
machine over the same inputs would find none of them and compute every stage again, although the stage files are
already in the bucket. :func:`shared_results` gives each stage task Prefect's result storage on the same store
instead, ``<out>/.tooleval/prefect/storage/<cache key>`` (a :class:`prefect.filesystems.RemoteFileSystem`,
reached with the credentials every process already reads), so any machine's run of the same inputs is
``Cached`` in every stage.

A record on a shared bucket is read by every machine that runs there, so reading it must not be able to run code:
Prefect's default serializer is a pickle, which runs whatever a writer of the bucket put in it, and a record names
its own serializer. The records are written with :class:`StageResultSerializer` (JSON of a stage result, read back
only as one of the classes a stage returns: a stage ref, the legacy result, the aggregation's figures), and
:class:`SharedResultStorage` hands Prefect no record that names another serializer: such a record reads as absent,
so the stage is computed again and its record rewritten. What a record holds is a stage file's URL, digest and row
count, the legacy per-row values or the run's figures: nothing of a trace, and never the redaction key.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Literal

from prefect.filesystems import RemoteFileSystem
from prefect.serializers import Serializer

from tooleval.runs.legacy import LegacyResult
from tooleval.storage import is_remote
from tooleval.storage.stages import StageRef

__all__ = ["StageResultSerializer", "SharedResultStorage", "shared_results", "with_refresh", "results_url"]

RESULTS_PREFIX = ".tooleval/prefect/storage"
"""Where the shared records live under a results URL (the same place as a folder's own records)."""


def results_url(out: str) -> str | None:
    """``<out>/.tooleval/prefect/storage`` for a results URL; ``None`` for a folder (its records stay where the
    command line puts them)."""
    return f"{out.rstrip('/')}/{RESULTS_PREFIX}" if is_remote(out) else None


class StageResultSerializer(Serializer):
    """A stage task's result as JSON, read back only as what a stage returns.

    ``dumps`` accepts a :class:`tooleval.storage.stages.StageRef`, a :class:`tooleval.runs.legacy.LegacyResult` or
    a dict of JSON values (the aggregation's figures); ``loads`` returns the same class.

    Raises:
        TypeError: ``dumps`` of anything else.
        ValueError: ``loads`` of bytes that are not such a result (a record somebody else wrote).
    """

    type: Literal["tooleval-stage-result"] = "tooleval-stage-result"

    def dumps(self, obj: Any) -> bytes:
        if isinstance(obj, StageRef):
            return json.dumps({"kind": "stage-ref", "value": obj.model_dump(mode="json")}).encode()
        if isinstance(obj, LegacyResult):
            return json.dumps({"kind": "legacy", "value": obj.model_dump(mode="json")}).encode()
        if isinstance(obj, dict):
            return json.dumps({"kind": "figures", "value": obj}).encode()
        raise TypeError(f"a shared stage record holds a stage result, not a {type(obj).__name__}")

    def loads(self, blob: bytes) -> Any:
        record = json.loads(blob)
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind == "stage-ref":
            return StageRef.model_validate(record["value"])
        if kind == "legacy":
            return LegacyResult.model_validate(record["value"])
        if kind == "figures" and isinstance(record.get("value"), dict):
            return record["value"]
        raise ValueError(f"not a tooleval stage result (kind {kind!r})")


class SharedResultStorage(RemoteFileSystem):
    """Prefect's :class:`~prefect.filesystems.RemoteFileSystem` over the shared records (``basepath``: a results
    URL's :func:`results_url`), whose reads return only records written with :class:`StageResultSerializer`.

    Prefect looks a cached record up twice, once to see that it exists and once to read it, and both read the
    whole object; a read hands its content to the next read of the same record by the same thread, once, so that a
    cached stage costs one GET (measured on moto's server: 45 ms a lookup with two GETs and the stage file's HEAD,
    20 ms with one).

    Raises:
        FileNotFoundError: from a read, when the record is absent, or is not a JSON record of that serializer
            (Prefect then counts it as missing: the stage runs and writes its own record over it).
    """

    _block_type_name = "tooleval shared stage results"

    async def aread_path(self, path: str) -> bytes:
        return self.read_path(path)

    def read_path(self, path: str, _sync: bool | None = None) -> bytes:
        last = getattr(_LAST_READ, "record", None)
        _LAST_READ.record = None
        if last is not None and last[0] == (id(self), path):
            return last[1]
        content = _checked(path, RemoteFileSystem.read_path(self, path, _sync=True))
        _LAST_READ.record = ((id(self), path), content)
        return content

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self.write_path(path, content)

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:
        _LAST_READ.record = None  # a record read before this write is no longer the record
        return RemoteFileSystem.write_path(self, path, content, _sync=True)


_LAST_READ = threading.local()
"""The last record a thread read (``((storage id, path), content)``), handed to its next read of that path."""


def _checked(path: str, content: bytes) -> bytes:
    """``content`` when it is a result record of :class:`StageResultSerializer`, else FileNotFoundError."""
    try:
        record = json.loads(content)
        kind = record["metadata"]["serializer"]["type"]
    except (ValueError, TypeError, KeyError):
        kind = None
    if kind != StageResultSerializer().type:
        raise FileNotFoundError(f"{path}: not a tooleval stage record (serializer {kind!r}); read as absent")
    return content


_SHARED: dict[tuple[str, str], Any] = {}
"""(task name, results URL) -> the task with its result storage there (made once per process)."""


def shared_results(task: Any, out: str) -> Any:
    """``task`` itself for a folder ``out``; for a results URL, ``task`` with its results and cache records in
    the store (:func:`results_url`, :class:`SharedResultStorage`, :class:`StageResultSerializer`).

    Args:
        task: A stage task (its cache policy and everything else are kept).
        out: The run's results location (a path as text, or a URL).
    """
    url = results_url(out)
    if url is None:
        return task
    key = (task.name, url)
    found = _SHARED.get(key)
    if found is None or found.fn is not task.fn:
        found = _SHARED[key] = _stored(task, task, SharedResultStorage(basepath=url))
    return found


def _stored(plain: Any, task: Any, storage: SharedResultStorage) -> Any:
    """``task`` (a copy of ``plain`` with options) with its results in ``storage``.

    Prefect's task constructor refuses a storage block that is not saved on the Prefect server (so that its UI can
    fetch results), but each machine has its own server, where a saved block's id means nothing to the others; its
    result store itself takes an unsaved block, as it does for the local folder of ``PREFECT_LOCAL_STORAGE_PATH``.
    So the storage is set on the task after it is made, and :func:`with_refresh` makes copies the same way.
    """
    copy = task.with_options(result_serializer=StageResultSerializer())
    copy.result_storage = storage
    copy.tooleval_plain = plain
    return copy


def with_refresh(task: Any) -> Any:
    """``task.with_options(refresh_cache=True)``, for a task of :func:`shared_results` as well (whose storage
    Prefect's ``with_options`` would refuse: see :func:`_stored`)."""
    plain = getattr(task, "tooleval_plain", None)
    if plain is None:
        return task.with_options(refresh_cache=True)
    return _stored(plain, plain.with_options(refresh_cache=True), task.result_storage)
