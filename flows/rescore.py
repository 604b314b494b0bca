"""The rescore flow: score a run's immutable trace envelopes again (a new scorer or new rules; no generation)
into a new run id. Envelopes are taken from ``traces/dataset_revision=<rev>/run_id=<run>/`` as stored (older
envelope versions are migrated on read; a newer one is refused), optionally only one case or one trial."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import ExitStack

from prefect import flow

from flows._publish import STAGES, PublicationTarget, RunResult, publish_run, run_stage
from flows._tags import untagged_task_runs
from tasks import legacy_scalar, score_shard
from tasks.legacy import dataset_scope
from tooleval.dataset import check_name
from tooleval.runs.catalog import resolve_run_id
from tooleval.runs.plan import check_run_id, new_run_id
from tooleval.runs.plan import dataset_ref as make_dataset_ref
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.runs.drift import DRIFT_COLUMNS, drift_partial
from tooleval.runs.legacy import LegacyTally
from tooleval.runs.published import check_envelopes, iter_envelopes, open_run
from tooleval.storage import stages_in_use
from tooleval.storage.stages import read_stage_table, stage_dir, write_stage_table
from tooleval.storage import ENVELOPE_SCHEMA
from tooleval.versions import scorer_version


@flow(name="tooleval-rescore", validate_parameters=True)
def rescore(
    run_id: str,
    out: str = "results",
    to_run_id: str | None = None,
    case: str | None = None,
    trial: int | None = None,
    dataset: str | None = None,
    shard_size: int = 50,
) -> RunResult:
    """Rescore a run's trace envelopes into a new run.

    A rescore of a subset (``case`` or ``trial`` given) is a diagnostic run: its legacy scalar is not published
    (the old dashboards would read a one-row "mean"); its drift check still runs.

    Args:
        run_id: The run whose envelopes are rescored, or ``latest`` (the newest run with rows).
        out: Results folder, or an fsspec URL (``s3://bucket/prefix``): the envelopes are read from it one part
            file at a time, and the new run is published there behind its commit marker.
        to_run_id: The new run's id (default: a fresh one, so a nightly deployment publishes a new run each
            night).
        case: Only this case id.
        trial: Only this trial (with or without ``case``).
        dataset: Dataset folder (default: the one recorded in the run's summary).
        shard_size: Rows per scoring task (envelopes are read one published part file, and at most this many
            rows, at a time).

    Returns:
        The new run's :class:`RunResult` (a ``Failed`` state carrying it on drift).

    Raises:
        tooleval.errors.InputFileError: unknown run, nothing matching ``case``/``trial``, a newer envelope version.
    """
    with untagged_task_runs(), ExitStack() as held:  # the holder tag stays on the flow run
        run_id = resolve_run_id(out, run_id)
        source = open_run(out, run_id, dataset)
        target = check_name(to_run_id or new_run_id(), what="run id")
        check_run_id(source.out, target, source.revision)
        check_envelopes(source, case, trial)
        dataset_ref = make_dataset_ref(source.dataset)
        out_dir = str(source.out)
        held.enter_context(stages_in_use(out_dir))  # its stage files (and cached ones) are read until it publishes
        code, ragas = scorer_version(), ragas_version()
        states = {name: Counter() for name in STAGES}
        scope = dataset_scope(dataset_ref)  # a rescore keys its scoring on the whole dataset
        envelope_refs, row_refs, partials = [], [], []
        tally = LegacyTally()
        subset = case is not None or trial is not None
        unrowed = _Unrowed(source, subset)
        capture_dir, scoring_dir = str(stage_dir(out_dir, "capture")), str(stage_dir(out_dir, "scoring"))
        # one shard of envelopes at a time, so memory stays that of one shard: scored, passed through the legacy path
        # and compared per row (a drift partial) before the next is read
        for chunk in iter_envelopes(source, case, trial, batch_rows=shard_size):
            for envelope in chunk:
                envelope["run_id"] = None
                unrowed.saw(envelope)
            ref = write_stage_table(capture_dir, "capture", chunk, ENVELOPE_SCHEMA, arrow=True)
            del chunk
            envelope_refs.append(ref)
            rows = run_stage(score_shard, states["scoring"], ref, dataset_ref, source.redaction, code, ragas,
                             out_dir, scoring_dir, scope=scope)
            row_refs.append(rows)
            legacy = run_stage(legacy_scalar, states["legacy-scalar"], [ref.path], [ref.digest], dataset_ref,
                               source.redaction, code, ragas, out_dir, scope=scope)
            partials.append(drift_partial(legacy.per_row, read_stage_table(rows, columns=DRIFT_COLUMNS).to_pylist()))
            tally.add(legacy)
        legacy = tally.result(ragas, code)
        publication = PublicationTarget(out=out_dir, run_id=target, dataset=dataset_ref, redaction=source.redaction,
                                        slices=source.summary.get("slices"), errors=unrowed.errors(),
                                        publish_legacy=not subset)
        return publish_run(publication, list(zip(envelope_refs, row_refs)), legacy, states, drift_partials=partials,
                           extra_summary={"rescored_from": {"run_id": run_id, "case": case, "trial": trial}})


class _Unrowed:
    """The source run's ``errors.json`` entries that stand for no row (a trace of an unknown case, a case without a
    trace, an unreadable line): a full rescore answers for them too (nothing unscored passes: a case without a row is
    a blocking failure, not a pass). The envelopes are seen one at a time; only the keys the errors name are
    remembered."""

    def __init__(self, source, subset: bool) -> None:
        self._errors = [] if subset else source.errors()  # the committed errors.json, in a folder or a bucket
        self._named = {(e.get("case_id"), e.get("trial")) for e in self._errors}
        self._seen: set = set()

    def saw(self, envelope: dict) -> None:
        key = (envelope["case_id"], envelope["trial"])
        if key in self._named:
            self._seen.add(key)

    def errors(self) -> list[dict]:
        return [e for e in self._errors if (e.get("case_id"), e.get("trial")) not in self._seen]
