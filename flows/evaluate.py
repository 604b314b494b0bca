"""The nightly evaluation flow: generation -> trace capture -> scoring -> aggregation, on shards, with the
legacy scalar path and the drift check beside them.

Each stage is a separate cached task (``tasks/``); the flow plans the run (every file or usage error is raised
here, before anything is written; the plan holds a compact index of keys in content-defined shards,
:mod:`tooleval.runs.shards`), runs each shard through its stages on the task runner (:mod:`flows._shards`: a
process pool uses every core), then publishes the run's partitions and run files together
(:class:`tooleval.storage.Publication`: committed at once by the run's marker). On drift between the
legacy scalar and the row-level path the flow run ends ``Failed`` (its data is still the :class:`RunResult`).
"""

from __future__ import annotations

import gc
import math
import os
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from prefect import flow
from prefect.futures import as_completed

from flows._publish import STAGES, PublicationTarget, RunPublisher, RunResult
from flows._dask import check_scheduler, dask_runner, dask_workers, shard_task
from flows._shards import ShardContext, ShardOutcome, ShardWork, count_states, run_shard
from flows._tags import untagged_task_runs
from tasks import cached_redactor, forget_run_state, offer_seed_state
from tooleval.runs.legacy import LegacyResult
from tooleval.dataset import load_dataset_cached
from tooleval.rules import confidential_tools
from tooleval.runs.plan import RunPlan, plan_run
from tooleval.runs.spec import DEFAULT_DATASET, RunSpec
from tooleval.runs.progress import StageProgress
from tooleval.runs.shards import cyclic_gc_paused, release_free_memory, run_scopes, scoring_key_of_cases
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.storage import stages_in_use
from tooleval.storage.stages import stage_dir
from tooleval.versions import scorer_version

__all__ = ["evaluate", "run_evaluate", "task_runner", "RunResult", "RunSpec", "DriftFound", "DEFAULT_DATASET", "STAGES"]

@flow(name="tooleval-evaluate", validate_parameters=True)
def evaluate(spec: RunSpec = RunSpec()) -> RunResult:
    """Evaluate a dataset's recorded (or generated) trajectories and publish envelopes, rows, the legacy scalar,
    a summary and the drift check: plan -> run the shards -> aggregate -> gate and drift -> publish.

    Args:
        spec: The run (:class:`tooleval.runs.spec.RunSpec`), validated when made; a deployment passes its fields.

    Returns:
        The published run's :class:`RunResult`.

    Raises:
        tooleval.errors.InputFileError: a file or usage error; nothing is written.
        DriftFound: the drift check found the legacy scalar and the row-level path apart; the run is published
            and the exception carries its :class:`RunResult` (the flow run ends ``Failed``).
    """
    flow_started = time.perf_counter()  # the body's own clock: Prefect's start-up and flow-run set-up stay out
    spec = spec.model_copy(update={"workers": spec.workers or os.cpu_count() or 1})
    with untagged_task_runs(), run_process_state():  # the holder tag stays on the flow run
        plan, context = _plan(spec)
        states = {name: Counter() for name in STAGES}
        # from here to the publication any stage file may be read (a cached task's too): gc spares them meanwhile
        with stages_in_use(plan.out), RunPublisher(PublicationTarget.of_run(plan, spec), states) as publisher:
            outcomes, timing = _shards(plan, context, spec, publisher)
            for stage, counter in count_states(outcomes).items():
                states[stage].update(counter)
            legacy = _merged_legacy(outcomes, context)
            with cyclic_gc_paused():
                publisher.aggregate({"agent": plan.agent.model_dump(mode="json"), "repeats": spec.repeats,
                                     "timing": timing}, legacy)
                publisher.gate_and_drift(legacy, None if spec.legacy_only else [o.drift for o in outcomes])
                publisher.report()
                published = publisher.publish()
    result = published if isinstance(published, RunResult) else published.data  # a drift failure carries it
    # the flow's wall time ends with the publication, so it cannot be in summary.json (written during it)
    result.summary["timing"]["flow_wall_s"] = time.perf_counter() - flow_started
    if not isinstance(published, RunResult):
        raise DriftFound(result)
    return result


class DriftFound(Exception):
    """The drift check found the legacy scalar and the row-level path apart: the run was published, and its
    :class:`RunResult` is :attr:`result` (the flow run ends ``Failed`` with this exception)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("drift between the legacy scalar and the row-level path: "
                         + "; ".join((result.drift or {}).get("reasons") or []))
        self.result = result


@contextmanager
def run_process_state() -> Iterator[None]:
    """What a run leaves of itself in this process, given back when it ends: a warm runner keeps the process for
    the next command, and holds none of the run's plan, redactor or case-input map meanwhile.

    The cyclic collector runs first: the run paused it through its plan, shards and publication, so the cycles
    those made (Prefect's states and futures, tracebacks, the publication's tables and writers) were still alive;
    collected before the allocators give their free pages back, they gave ~100 MB more back after a 1,000,000-row
    bfcl run (585 to 480 MB), which the next run in the process (a warm runner's, ``tooleval bench``'s second)
    otherwise started with."""
    try:
        yield
    finally:
        forget_run_state()
        gc.collect()
        release_free_memory()


def _plan(spec: RunSpec) -> tuple[RunPlan, ShardContext]:
    """Plan the run (every file or usage error is raised here, before anything is written) and make what every
    shard shares. The run's redactor is seeded once, in this process, on a thread while the plan waits for the
    traces file's ranges; the workers get its seed with the shards."""
    seeding = _Seeding()
    with cyclic_gc_paused():  # the plan allocates per row: no full-heap GC passes meanwhile
        plan = plan_run(spec, index_parts=_index_parts(), case_parts=_case_parts(), on_redaction=seeding.start)
    seeding.offer(plan)
    redactor = cached_redactor(plan.out, plan.redaction, plan.dataset)
    generation_scope, scoring_scope = run_scopes(plan, redactor)
    # the plan's per-key objects (a million keys' tuples, dicts and columns before they became the index's Arrow
    # table) are freed by now: give their pages back before the shards run, or the flow holds them through the
    # whole shard phase (~120 MB at 1,000,000 bfcl rows)
    release_free_memory()
    context = ShardContext(
        redaction_seed=redactor.seed_state() if redactor is not None else None,
        plan_agent=plan.agent, dataset=plan.dataset, redaction=plan.redaction, executor=plan.executor, out=plan.out,
        dirs={name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")},
        code=scorer_version(), ragas=ragas_version(), generation_scope=generation_scope,
        scoring_scope=scoring_scope, legacy_only=spec.legacy_only, legacy_pass=spec.legacy_pass,
        retry_errors=plan.agent.kind != "replay", kept_results=_kept_results(plan),
    )
    return plan, context


def _kept_results(plan: RunPlan) -> list[str]:
    """The tools whose result texts trace capture keeps (:func:`tooleval.rules.confidential_tools`)."""
    loaded = load_dataset_cached(plan.dataset.path)
    return confidential_tools(loaded.tools, loaded.cases)


def _shards(plan: RunPlan, context: ShardContext, spec: RunSpec,
            publisher: RunPublisher) -> tuple[list[ShardOutcome], dict[str, Any]]:
    """Run every shard, each published (its partition files written, its rows judged by the gate) as soon as it
    and every shard before it are done, while the workers score the next ones: the flow's own work overlaps the
    shard phase instead of following it. Then the pool's workers are stopped. Returns the outcomes in shard
    order and the phase's timing."""
    def publish_shard(index: int, done: ShardOutcome) -> None:
        with cyclic_gc_paused():
            publisher.add_shard(index, done.envelopes, done.rows, done.generation)
        release_free_memory()  # the shard's envelope table, read whole, stays in Arrow's pool otherwise

    started = time.perf_counter()
    outcomes = _run_shards(plan, context, spec.workers, spec.progress, publish_shard)
    wall = time.perf_counter() - started
    _stop_worker_processes()
    if spec.progress:  # the aggregation, gate, drift check, report and publication print nothing for seconds
        print("aggregating and publishing the run…", file=sys.stderr, flush=True)
    timing = {"shards": len(outcomes), "workers": _effective_workers(spec.workers), "shard_size": plan.shard_size,
              "stages_wall_s": wall, "body_s": sum(o.body_s for o in outcomes),
              "shard_wall_s": sum(o.wall_s for o in outcomes)}
    return outcomes, timing


class _Seeding:
    """Seeds the run's redactor on a thread of the flow's process while the plan goes on (the plan mostly waits
    for the cases' and the traces file's ranges then): seeding reads every case line, decoding those that may hold
    a secret (~1.6 s at 142,858 bfcl cases, none of which does; ~3 s at tau's 200,000 rows, all of which name a
    field), which the flow otherwise spent after the plan with both workers idle. ``cases``: what
    :meth:`tooleval.capture.redaction.Redactor.seed_cases` takes (the plan gives a reader of ``cases.jsonl``, so
    that the lines the seeding would find nothing in are never decoded)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._config = None
        self._state: list[bytes | None] = []

    def start(self, config, key: bytes, cases: Any) -> None:
        from tooleval.capture.redaction import Redactor

        def seed() -> None:
            try:
                redactor = Redactor(config, key)
                redactor.seed_cases(cases)
                self._state.append(redactor.seed_state())
            except Exception:  # noqa: BLE001 - the redactor is then seeded after the plan, which reports the error
                self._state.append(None)

        self._config = config
        self._thread = threading.Thread(target=seed, name="tooleval-redactor-seed", daemon=True)
        self._thread.start()

    def offer(self, plan: RunPlan) -> None:
        """Wait for the seeding, and offer its state for the plan's redactor (:func:`tasks._shared.offer_seed_state`)
        when the plan kept the redaction it was started with (a key another run wrote meanwhile is not)."""
        if self._thread is None:
            return
        self._thread.join()
        if self._state and self._state[0] is not None and plan.redaction == self._config:
            offer_seed_state(plan.out, plan.redaction, plan.dataset, self._state[0])


def _run_shards(plan: RunPlan, context: ShardContext, workers: int, progress: bool,
                on_shard: Callable[[int, ShardOutcome], None]) -> list[ShardOutcome]:
    """Submit every shard to the flow's task runner, at most ``2 * workers`` in flight (the plan's index holds
    keys only; a shard's work items exist only while it is in flight), and collect the outcomes in shard order.
    ``on_shard(index, outcome)`` is called for each shard in shard order, as soon as it and every shard before it
    are done (the publication of the done shards overlaps the work of the others)."""
    shards = list(plan.index.shards())
    outcomes: dict[int, ShardOutcome] = {}
    pending: dict[Any, int] = {}
    stages = (["generation", "trace-capture"] + ([] if context.legacy_only else ["scoring"])
              + (["legacy-scalar"] if context.legacy_pass else []))
    workers = _effective_workers(workers)
    inline = workers == 1  # one worker: no task run per shard, only the stage tasks
    fed = 0

    def feed() -> None:  # every done shard whose predecessors are all done, in order
        nonlocal fed
        while fed in outcomes:
            on_shard(fed, outcomes[fed])
            fed += 1

    keys: dict[int, str] = {}  # shard index -> the shard's scoring key, which names it in the progress channel
    with StageProgress(stages, plan.index.rows, enabled=progress) as bar:
        context = context.model_copy(update={"progress": bar.channel})
        if inline:
            for index, shard in enumerate(shards):
                work = ShardWork.of_shard(shard, plan.case_digests)
                keys[index] = scoring_key_of_cases(context.scoring_scope, work.digests)
                outcomes[index] = run_shard.fn(context, work, keys[index])
                bar.shard_done(keys[index], list(outcomes[index].states), shard.num_rows)
                feed()
            return [outcomes[i] for i in range(len(shards))]
        position, submit = 0, shard_task(run_shard)

        def top_up() -> None:
            nonlocal position
            while position < len(shards) and len(pending) < 2 * workers:
                work = ShardWork.of_shard(shards[position], plan.case_digests)
                keys[position] = scoring_key_of_cases(context.scoring_scope, work.digests)
                future = submit.submit(context, work, keys[position])
                pending[future] = position
                position += 1

        while position < len(shards) or pending:
            top_up()
            done = next(as_completed(list(pending)))
            index = pending.pop(done)
            outcome = done.result()
            outcomes[index] = outcome
            bar.shard_done(keys[index], list(outcome.states), shards[index].num_rows)
            top_up()  # the workers get their next shards before this thread spends seconds publishing done ones
            feed()
    return [outcomes[i] for i in range(len(shards))]


def _index_parts() -> Callable[[Path, list[tuple[int, int]]], Callable[[], list]] | None:
    """On a process pool, the plan's reading of a very large traces file (:data:`tooleval.runs.plan.POOL_INDEX_BYTES`)
    is split into byte ranges read by the workers (which also start, and import the stages, meanwhile) while the
    flow loads the dataset; on one thread or a Dask cluster (whose workers may not see this machine's files), and for
    a smaller file, the plan reads the file itself (in ranges on its threads)."""
    from tasks.planning import index_traces_range

    return _ranges_on_pool(index_traces_range)


def _case_parts() -> Callable[[Path, list[tuple[int, int]]], Callable[[], list]] | None:
    """On a process pool, a large ``cases.jsonl`` is checked in byte ranges by the workers (before they read the
    traces file's ranges) while this process seeds the run's redactor; elsewhere the plan reads it itself."""
    from tasks.planning import load_cases_range

    return _ranges_on_pool(load_cases_range)


def _ranges_on_pool(range_task: Any) -> Callable[[Path, list[tuple[int, int]]], Callable[[], list]] | None:
    """``(file, byte ranges) -> collect``: submits ``range_task(path, span)`` for each range to the flow's process
    pool and returns a callable that waits for their results, in range order; ``None`` on any other runner."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ProcessPoolTaskRunner

    if not isinstance(getattr(FlowRunContext.get(), "task_runner", None), ProcessPoolTaskRunner):
        return None

    def start(path: Path, spans: list[tuple[int, int]]) -> Callable[[], list]:
        futures = [range_task.submit(str(path), span) for span in spans]
        return lambda: [future.result() for future in futures]

    return start


def _stop_worker_processes() -> None:
    """End the process pool's workers once every shard is done, before the publication: two idle workers would hold
    ~1.4 GB through the publication of a 100,000-row run. ``cancel_all`` is the runner's own shutdown (every future is
    already resolved, so nothing is cancelled); the runner's exit at the end of the flow finds the pool gone and does
    nothing more. Other runners (one thread, Dask) are left as they are."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ProcessPoolTaskRunner

    runner = getattr(FlowRunContext.get(), "task_runner", None)
    if isinstance(runner, ProcessPoolTaskRunner):
        runner.cancel_all()


def _effective_workers(workers: int) -> int:
    """Workers of the task runner this flow runs on: ``workers`` on a process pool, the cluster's workers (at least
    2, so that shards are submitted) on Dask, else 1 (a single thread)."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ProcessPoolTaskRunner

    context = FlowRunContext.get()
    runner = getattr(context, "task_runner", None)
    if type(runner).__name__ == "DaskTaskRunner":
        return dask_workers(runner)
    return workers if isinstance(runner, ProcessPoolTaskRunner) else 1


def _merged_legacy(outcomes: list[ShardOutcome], context: ShardContext) -> LegacyResult:
    """The run's legacy scalar from the shards' sums (the per-row values stayed in the workers' drift partials)."""
    count = sum(o.legacy_count for o in outcomes)
    return LegacyResult(
        value=math.fsum(o.legacy_sum for o in outcomes) / count if count else None,
        rows=sum(o.legacy.rows for o in outcomes),
        ragas_version=context.ragas,
        scorer_version=context.code,
        computed_at=datetime.now(timezone.utc),
        per_row=[],
    )


PROCESS_POOL_MIN_ROWS = 50_000
"""Below this many rows a run uses one worker in the flow's process: starting a process pool (spawned workers
importing Prefect, the stages and ragas) cost 10-30 s on the 2-core machine, more than the work it would share
(measured: 25,725 bfcl rows took 26 s with one worker, 70 s with a two-process pool on a loaded machine)."""


def task_runner(workers: int, rows: int | None = None, dask_address: str | None = None, legacy: bool = True) -> Any:
    """The task runner for ``workers`` and a corpus of ``rows``: one thread (one worker, or fewer than
    :data:`PROCESS_POOL_MIN_ROWS` rows) or a process pool whose workers import the stages (and ragas, when the
    run has a ``legacy`` pass) once (README "Scale" says why not Dask for one machine). With ``dask_address``
    (``tcp://HOST:PORT``), the existing Dask cluster there, through prefect-dask's ``DaskTaskRunner``
    (:mod:`flows._dask`)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows._shards import ProcessPool, warm_worker

    if dask_address is not None:
        return dask_runner(dask_address)
    if workers <= 1 or (rows is not None and rows < PROCESS_POOL_MIN_ROWS):
        return ThreadPoolTaskRunner(max_workers=1)
    return ProcessPool(max_workers=workers, initializer=warm_worker, initargs=(legacy,))


def run_evaluate(spec: RunSpec, rows_hint: int | None = None) -> tuple[RunResult, bool]:
    """Call :func:`evaluate` on the task runner that fits (:func:`task_runner`) and return ``(result,
    drift_failed)`` instead of raising on a drift failure.

    Args:
        spec: The run; its ``dask_address`` (``tcp://HOST:PORT`` of an existing Dask scheduler) runs the shards on
            that cluster's workers.
        rows_hint: The planned rows (a small run stays in one process); ``None``: ``workers`` alone decides.

    Raises:
        tooleval.errors.InputFileError: a file or usage error (re-raised from the flow); the Dask scheduler
            cannot be reached (exit 2, nothing published).
    """
    workers = spec.workers or os.cpu_count() or 1
    if spec.dask_address is not None:
        check_scheduler(spec.dask_address)
    runner = task_runner(workers, rows_hint, spec.dask_address, legacy=spec.legacy_pass or spec.legacy_only)
    state = evaluate.with_options(task_runner=runner)(spec, return_state=True)
    data = state.result(raise_on_failure=False)
    if isinstance(data, RunResult):
        return data, False
    if isinstance(data, DriftFound):
        return data.result, True
    state.result()  # re-raises the flow's exception
    raise RuntimeError(f"evaluate returned {data!r}")
