"""One shard through every per-shard stage, in a worker: generation -> trace capture -> scoring and, beside it
on the same envelopes, the legacy scalar path; then the per-row half of the drift check on that shard.

:func:`run_shard` is the unit the flow's task runner schedules (a process pool uses every core: Python's scoring is
CPU-bound and holds the GIL). Each stage stays its own cached Prefect task (nested task runs), so caching and the UI
are unchanged; what comes back to the flow is small — stage refs, state names, the shard's legacy values and its drift
partial — so the flow's memory does not grow with the shard size.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import time
from collections import Counter
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ProcessPoolTaskRunner
from prefect.utilities.annotations import quote
from pydantic import BaseModel

from flows._publish import run_stage
from tasks import ReplayedLines, capture_shard, generate_shard, legacy_scalar, score_shard
from tasks import offer_seed_state, shared_results
from tooleval.agents import WorkItem
from tooleval.runs.drift import DRIFT_COLUMNS, drift_partial
from tooleval.runs.legacy import LegacyResult
from tooleval.runs.progress import note_stage
from tooleval.runs.shards import cyclic_gc_paused, release_free_memory
from tooleval.storage.stages import StageRef, read_stage_table

__all__ = ["ProcessPool", "ShardContext", "ShardOutcome", "ShardWork", "run_shard", "warm_worker"]


class ShardContext(BaseModel):
    """What every shard of a run shares (picklable, passed to each :func:`run_shard`)."""

    plan_agent: Any
    dataset: Any
    redaction: Any
    executor: Any = None
    out: str
    dirs: dict[str, str]
    code: str
    ragas: str
    generation_scope: str
    scoring_scope: str
    redaction_seed: bytes | None = None
    """:meth:`tooleval.capture.redaction.Redactor.seed_state` of the flow's redactor: each worker's redactor takes
    it instead of reading every case again (in memory only: it holds the secrets)."""
    legacy_only: bool = False
    legacy_pass: bool = True
    retry_errors: bool = False
    progress: str | None = None
    """The flow's progress channel (:func:`tooleval.runs.progress.note_stage`); ``None``: progress is off."""
    kept_results: list[str] | None = None
    """:func:`tooleval.rules.confidential_tools` of the dataset: trace capture keeps their calls' result texts."""


class ShardOutcome(BaseModel):
    """What one shard did."""

    generation: StageRef
    envelopes: StageRef
    rows: StageRef | None
    states: dict[str, str]
    """Stage -> final state name (``Completed``, ``Cached``)."""
    body_s: float
    """Seconds spent inside stage task bodies that ran (cached stages count 0)."""
    wall_s: float
    """Seconds the whole shard took in its worker, Prefect's bookkeeping included."""
    legacy: LegacyResult
    """The shard's legacy result without its per-row values (they went into ``drift``)."""
    legacy_sum: float
    legacy_count: int
    drift: dict[str, Any] | None


def _stage(task_: Any, name: str, states: dict[str, str], timing: list[float], *args: Any,
           retry_errors: bool = False, **kwargs: Any) -> Any:
    """Run one stage task (:func:`flows._publish.run_stage`: a stale cached ref is recomputed); record its final
    state name and, when its body ran, the body's seconds."""
    counter: Counter = Counter()
    ref = run_stage(task_, counter, *args, retry_errors=retry_errors, **kwargs)
    states[name] = next(iter(counter))
    if states[name] != "Cached":
        timing.append(getattr(ref, "elapsed_s", 0.0))
    return ref


class ShardWork:
    """One shard's work items and their trace lines' offsets, as one opaque argument of :func:`run_shard`.

    Prefect walks a task's arguments, element by element, looking for futures and states: once when the task run
    is created in the worker and once more when its parameters are resolved. A shard's lists arrive in the worker
    as plain lists (``quote`` is taken off in the flow), so both walks went through every work item: 18 % of
    the workers' CPU on 200,000 bfcl rows (py-spy). Prefect does not look inside an object that is neither a
    collection, a dataclass nor a pydantic model, so this holder is passed as it is (and pickles as its two lists,
    on a process pool or a Dask cluster alike).

    A run's shard (:meth:`of_shard`) travels as its slice of the plan's index, an Arrow table, and the digests of
    its cases: the flow builds no Python object per row for it (3.4 s of the flow's CPU at 1,000,000 bfcl rows,
    while the workers needed both cores), and the worker builds its items when it first asks for them.
    """

    __slots__ = ("_items", "_offsets", "_table", "digests")

    def __init__(self, items: list[WorkItem] | None = None, offsets: list[tuple[int, int]] | None = None, *,
                 table: pa.Table | None = None, digests: dict[str, str] | None = None):
        self._items, self._offsets, self._table = items, offsets, table
        self.digests = digests
        """``case_id -> case digest`` of the shard's cases (a shard made by :meth:`of_shard`; else ``None``)."""

    @classmethod
    def of_shard(cls, shard: pa.Table, case_digests: Mapping[str, str]) -> "ShardWork":
        """The work of one shard of a run's plan: ``shard`` a slice of :attr:`tooleval.runs.plan.RunPlan.index`'s
        table, ``case_digests`` the plan's digest of every case (:attr:`tooleval.runs.plan.RunPlan.case_digests`).
        Its items are what :meth:`tooleval.runs.plan.RunPlan.shard_items` gives for the shard."""
        table = shard.select(list(_COLUMNS))
        cases = pc.unique(table["case_id"]).to_pylist()
        return cls(table=table, digests={case_id: case_digests[case_id] for case_id in cases})

    @property
    def items(self) -> list[WorkItem]:
        """The shard's work items (:class:`tooleval.agents.WorkItem`), in the plan's order."""
        if self._items is None:
            self._build()
        return self._items

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """``(byte offset, line number)`` of each item's trace line (replay; see
        :meth:`tooleval.runs.plan.RunPlan.shard_items`)."""
        if self._offsets is None:
            self._build()
        return self._offsets

    def _build(self) -> None:
        from tooleval.runs.plan import shard_work_items

        self._items, self._offsets = shard_work_items(self._table, self.digests)

    def __len__(self) -> int:
        return self._table.num_rows if self._table is not None else len(self._items)

    def __reduce__(self):
        """A shard of a plan pickles as its table's Arrow IPC stream and its cases' digests; otherwise as its two
        lists, each work item as the tuple of its fields: a pydantic model pickles its ``__dict__`` and its set of
        fields given, ~6 µs an item to write and read again (10 in a busy worker), against ~2 µs for the tuple and
        the validation that rebuilds the item. Anything else in the list (a test's planted state) pickles as
        itself."""
        if self._table is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, self._table.schema) as writer:
                writer.write_table(self._table)
            return _work_of_stream, (sink.getvalue().to_pybytes(), self.digests)
        if all(type(item) is WorkItem for item in self._items):
            rows = [tuple(getattr(item, name) for name in _ITEM_FIELDS) for item in self._items]
            return _work_of_rows, (rows, self._offsets)
        return ShardWork, (self._items, self._offsets)


_ITEM_FIELDS = tuple(WorkItem.model_fields)
_COLUMNS = ("case_id", "trial", "seed", "line_digest", "offset", "line")
"""The plan index's columns a shard's work is made of."""


def _work_of_rows(rows: list[tuple], offsets: list[tuple[int, int]]) -> ShardWork:
    """The :class:`ShardWork` that :meth:`ShardWork.__reduce__` wrote as field tuples."""
    return ShardWork([WorkItem(**dict(zip(_ITEM_FIELDS, row))) for row in rows], offsets)


def _work_of_stream(data: bytes, digests: dict[str, str]) -> ShardWork:
    """The :class:`ShardWork` that :meth:`ShardWork.__reduce__` wrote as an Arrow IPC stream."""
    return ShardWork(table=pa.ipc.open_stream(data).read_all(), digests=digests)


@task(name="shard", cache_policy=NO_CACHE, persist_result=False)
def run_shard(context: ShardContext, work: ShardWork, scoring_scope: str) -> ShardOutcome:
    """Run one shard's stages (see the module docstring).

    Args:
        context: The run's shared settings.
        work: The shard's work items and trace offsets.
        scoring_scope: :func:`tooleval.runs.shards.scoring_key` of the shard.

    Returns:
        A :class:`ShardOutcome`.
    """
    try:
        with cyclic_gc_paused():
            return _run_shard(context, work.items, work.offsets, scoring_scope)
    finally:
        release_free_memory()  # what the shard's tables and batches left in the allocators


def _run_shard(context: ShardContext, items: list[WorkItem], offsets: list[tuple[int, int]],
               scoring_scope: str) -> ShardOutcome:
    started = time.perf_counter()
    c = context
    offer_seed_state(c.out, c.redaction, c.dataset, c.redaction_seed)
    states: dict[str, str] = {}
    timing: list[float] = []
    # quote(): Prefect would otherwise walk every work item twice per task run looking for futures (visit_collection
    # cost ~15 % of a 20k-row run's wall time); the task still receives the plain list and hashes it for its key
    # on object storage the stages keep their cache records in the bucket, where any machine's run finds them
    generate, capture, score, legacy_task = (shared_results(t, c.out) for t in (generate_shard, capture_shard,
                                                                                 score_shard, legacy_scalar))
    generated = _stage(generate, "generation", states, timing, c.plan_agent, quote(items), c.dataset,
                       c.redaction, c.out, c.dirs["generation"], c.executor, scope=c.generation_scope,
                       retry_errors=c.retry_errors)
    # each stage tells the flow's progress when it has finished the shard: the flow hears of the shard itself
    # only when every stage is done, so its bars would otherwise all show the same count
    note_stage(c.progress, "generation", scoring_scope, len(items))
    replay = ReplayedLines(c.plan_agent, items, offsets, c.dataset, c.out) if c.plan_agent.kind == "replay" else None
    captured = _stage(capture, "trace-capture", states, timing, generated, c.dataset.tool_schema_version,
                      c.code, c.dirs["capture"], c.redaction, c.generation_scope, replay=replay,
                      kept_results=c.kept_results)
    note_stage(c.progress, "trace-capture", scoring_scope, len(items))
    rows = None
    if not c.legacy_only:
        rows = _stage(score, "scoring", states, timing, captured, c.dataset, c.redaction, c.code, c.ragas,
                      c.out, c.dirs["scoring"], scope=scoring_scope)
        note_stage(c.progress, "scoring", scoring_scope, len(items))
    if not c.legacy_pass:  # ``tooleval bench``'s row path alone
        empty = LegacyResult(value=None, rows=0, ragas_version=c.ragas, scorer_version=c.code,
                             computed_at=datetime.now(timezone.utc), per_row=[])
        return ShardOutcome(generation=generated, envelopes=captured, rows=rows, states=states, body_s=sum(timing),
                            wall_s=time.perf_counter() - started, legacy=empty, legacy_sum=0.0, legacy_count=0,
                            drift=None)
    legacy = _stage(legacy_task, "legacy-scalar", states, timing, [captured.path], [captured.digest], c.dataset,
                    c.redaction, c.code, c.ragas, c.out, scope=scoring_scope)
    note_stage(c.progress, "legacy-scalar", scoring_scope, len(items))
    drift = None
    if rows is not None:
        new_rows = read_stage_table(rows, columns=DRIFT_COLUMNS).to_pylist()
        drift = drift_partial(legacy.per_row, new_rows)
    scored = [r.value for r in legacy.per_row if r.value is not None]
    return ShardOutcome(generation=generated, envelopes=captured, rows=rows, states=states, body_s=sum(timing),
                        wall_s=time.perf_counter() - started, legacy=legacy.model_copy(update={"per_row": []}),
                        legacy_sum=math.fsum(scored), legacy_count=len(scored), drift=drift)


class ProcessPool(ProcessPoolTaskRunner):
    """Prefect's process pool, whose thread that passes the workers' events and logs on to the API runs with the
    Prefect settings of the flow that entered the pool.

    Prefect starts that thread bare, and a thread does not inherit the context where ``tooleval run`` sets
    ``PREFECT_API_URL`` to its own server: the thread found no API URL and started a second, temporary API
    server (a ~230 MB process for the rest of the run) to which the workers' task-run events then went, so the
    server the run belongs to never heard of them.
    """

    def __enter__(self) -> "ProcessPool":
        from prefect.context import SettingsContext

        from tooleval.runs.children import ended_on_signals, pool_worker_initializer

        self._flow_settings = SettingsContext.get()  # the entering (flow's) thread's settings
        super().__enter__()
        # The executor spawns its workers on the first submissions, with the initializer it holds: Prefect's,
        # wrapped so that each worker watches for its parent's end from the first moment (the wrapper's module is
        # the first thing a worker imports) and ignores Ctrl-C (see pool_worker_initializer).
        # Each worker also keeps one API client for its life (see keep_api_client), made for the server the flow
        # talks to: the URL is known here, in the flow's settings, not in the worker's environment at its start.
        from prefect.settings import PREFECT_API_URL

        executor = self._executor
        executor._initializer, executor._initargs = pool_worker_initializer, (
            os.getpid(), _initialize_worker, (PREFECT_API_URL.value(), executor._initializer, executor._initargs))
        self._ending = ended_on_signals(self.worker_pids, interrupt=True)
        self._ending.__enter__()
        return self

    def worker_pids(self) -> list[int]:
        """The pids of the pool's live workers (none once it is shut down)."""
        executor = self._executor
        return list(getattr(executor, "_processes", None) or ()) if executor is not None else []

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """Shut the pool down; when an exception ends the flow (Ctrl-C's ``KeyboardInterrupt`` included), end the
        workers first: the executor's own shutdown waits for the shards they run, minutes of a large run."""
        from tooleval.runs.children import end_processes

        try:
            if exc_type is not None:
                end_processes(self.worker_pids())
            super().__exit__(exc_type, exc_value, traceback)
        finally:
            ending = getattr(self, "_ending", None)
            if ending is not None:
                self._ending = None
                ending.__exit__(None, None, None)

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        """Prefect's submit, with the settings' serialisation done once per settings object: Prefect serialises the
        whole context for every submission, and its settings part (several hundred settings, each visited for
        secrets) cost ~40 ms of the flow's CPU a submission, ~6 s of a 1,000,000-row run's plan ranges and shards
        (py-spy). The settings of a flow do not change between its submissions; a task submitted under other
        settings (``temporary_settings`` makes new objects) is serialised afresh."""
        with _settings_serialized_once(self.__dict__.setdefault("_serialized_settings", {})):
            return super().submit(*args, **kwargs)

    def _forward_subprocess_messages(self) -> None:
        from prefect.context import SettingsContext

        settings = getattr(self, "_flow_settings", None)
        if settings is None:
            return super()._forward_subprocess_messages()
        with SettingsContext(profile=settings.profile, settings=settings.settings):
            return super()._forward_subprocess_messages()


@contextmanager
def _settings_serialized_once(memo: dict) -> Iterator[None]:
    """While inside, ``SettingsContext.serialize`` gives the dict it gave before for the same settings and profile
    objects (held in ``memo``, one entry: the last settings seen). The dict is only pickled for the worker, never
    changed, so sharing it is safe."""
    from prefect.context import SettingsContext

    original = SettingsContext.serialize

    def serialize(self: Any, include_secrets: bool = True) -> dict[str, Any]:
        held = memo.get(include_secrets)
        if held is None or held[0] is not self.settings or held[1] is not self.profile:
            held = memo[include_secrets] = (self.settings, self.profile,
                                            original(self, include_secrets=include_secrets))
        return held[2]

    SettingsContext.serialize = serialize
    try:
        yield
    finally:
        SettingsContext.serialize = original


def _initialize_worker(api_url: str | None, initializer: Any, initargs: tuple) -> None:
    """A pool worker's setup: ``initializer(*initargs)`` (Prefect's, which runs :func:`warm_worker`), then
    :func:`keep_api_client` for the server at ``api_url`` (``None``: Prefect's temporary in-process server, whose
    address only Prefect knows; each task run then makes its own client, as Prefect does)."""
    initializer(*initargs)
    settings_hydrated_once()
    if api_url:
        keep_api_client(api_url)


def settings_hydrated_once() -> Callable[[], None]:
    """Make this process build the Prefect settings a task run brings along once per distinct serialisation.

    A pool worker rebuilds the flow's settings for every task run it receives (Prefect's ``hydrated_context``
    validates the serialised settings into a new ``Settings``, reading every settings source again): ~30 ms of CPU
    on a quiet machine and ~80 ms in a busy worker, a task run, the largest Prefect step of a worker's profile (py-spy,
    200,000 bfcl rows). The flow sends the same settings with every shard: a settings context made from the same
    serialised settings takes the ``Settings`` object built the first time (one kept: the last seen), as every task
    run in the flow's own process shares the flow's. A context made from settings objects (``temporary_settings``)
    is made as before.

    Returns:
        A callable that puts Prefect's own constructor back (for tests; a worker keeps it for its life).
    """
    from prefect.context import SettingsContext

    own = SettingsContext.__dict__.get("__init__")  # None: the class inherits pydantic's
    original = SettingsContext.__init__
    held: dict[bytes, tuple[Any, Any]] = {}

    def __init__(self: Any, **data: Any) -> None:
        if not isinstance(data.get("settings"), dict):
            return original(self, **data)
        try:
            key = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a value that does not pickle: built as Prefect builds it
            return original(self, **data)
        done = held.get(key)
        if done is None:
            original(self, **data)
            held.clear()
            held[key] = (self.profile, self.settings)
            return None
        return original(self, profile=done[0], settings=done[1])

    SettingsContext.__init__ = __init__

    def restore() -> None:
        if own is None:
            del SettingsContext.__init__
        else:
            SettingsContext.__init__ = own

    return restore


_KEPT: list[Any] = []  # the worker's client context, referenced for the worker's life


def keep_api_client(api_url: str) -> bool:
    """Enter one Prefect API client context for the rest of this process, so that every task run in it uses that
    client instead of making two of its own.

    Prefect's task engine in a pool worker builds a new ``SyncPrefectClient`` for each task it receives (one while
    it rebuilds the flow's context, one for the task run), and each builds a TLS context from certifi's bundle and
    asks the server for its version: ~30 ms of CPU a shard, and the ~4 % of a worker's time most of any Prefect
    step took in a py-spy profile of 3,000-row shards. Both places look for a client context first
    (``prefect.context.SyncClientContext``), so one entered here, in the worker's only thread that runs tasks, is
    found and reused.

    Args:
        api_url: The API the flow's task runs go to (``http://127.0.0.1:PORT/api``).

    Returns:
        Whether the client was kept; ``False`` when the server could not be reached now (each task run then makes
        its own client, and reports what is wrong, as it would have).
    """
    from prefect.context import SyncClientContext
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if _KEPT:
        return True
    try:
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            context = SyncClientContext()
            context.__enter__()
    except Exception:  # noqa: BLE001 - a task run made without it reports the same problem with its own client
        return False
    _KEPT.append(context)
    return True


def warm_worker(legacy: bool = True) -> None:
    """Process-pool initializer: import the stages once per worker, not once per shard, and ragas when the run has
    a legacy pass (``legacy``), which calls it on every row. The row path never calls ragas: a run without the
    legacy pass leaves it out (its import is ~2 s and ~110 MB of each worker, without the model providers' SDKs,
    which a worker never calls: :func:`tooleval.scoring.ragas_metric.hide_provider_sdks`)."""
    from tooleval.runs.memory import WORKER_MMAP_THRESHOLD, return_freed_memory
    from tooleval.scoring.ragas_metric import hide_provider_sdks, import_ragas_metric

    return_freed_memory(WORKER_MMAP_THRESHOLD)  # before the first buffer: a worker holds what it holds now
    hide_provider_sdks()
    if legacy:
        import_ragas_metric()

    import tooleval.scoring.rows  # noqa: F401

    gc.freeze()  # what is imported lives as long as the worker: the collector's full passes need not scan it


def count_states(outcomes: list[ShardOutcome]) -> dict[str, Counter]:
    """Stage -> Counter of final state names over the shards."""
    counters: dict[str, Counter] = {}
    for outcome in outcomes:
        for stage, name in outcome.states.items():
            counters.setdefault(stage, Counter())[name] += 1
    return counters
