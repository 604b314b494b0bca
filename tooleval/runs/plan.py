"""Planning a run: everything that is checked before anything is written, so that a bad
file stops a run with nothing half-written (docs/design.md "Bad input and exit codes").

:func:`plan_run` loads the dataset, scans the traces, checks names, the revision registry and the run id, and
decides the work items. It raises :class:`~tooleval.errors.InputFileError` (exit 2, nothing written) for file or
usage errors and lists row-level problems (unknown case ids, cases without a trace, unusable trace lines) in
:attr:`RunPlan.errors` for ``errors.json`` (exit 1, other rows still scored).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import secrets
import threading
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, field_validator

from typing import Annotated, Any, Callable, Mapping, Union

from pydantic import Field

from tooleval.canonical import canonical_json, json_type_name
from tooleval.agents import OpenAIAgentConfig, ReplayAgentConfig, WorkItem
from tooleval.dataset import (CasePart, case_digests, case_slices, check_name, find_traces_file, is_loaded,
                              load_dataset, load_dataset_cached, stream_case_references, tool_schema_version,
                              traces_in_dataset)
from tooleval.errors import (InputFileError, RevisionConflictError, RowError, RunIdConflictError,
                             json_problem)
from tooleval.capture.recorded import (TraceIndex, TracePart, file_digest, index_part, index_traces,
                                      join_trace_parts, replay_columns, trace_spans)
from tooleval.capture.keys import PlannedKey, persist_key, plan_key
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig
from tooleval.runs.shards import ShardIndex, cyclic_gc_paused, default_shard_size, scan_lines
from tooleval.runs.spec import RunSpec

__all__ = ["DatasetRef", "RunPlan", "check_revision_content", "plan_run", "new_run_id", "revision_record_path",
           "revision_record_relpath", "shard_work_items"]


class DatasetRef(BaseModel):
    """A dataset by path, revision and content digest (what tasks receive instead of the cases)."""

    model_config = ConfigDict(frozen=True)

    path: str
    name: str
    revision: str
    content_digest: str
    tool_schema_version: str | None = None
    """``tools-<12 hex of sha256(tools.json)>``; ``None`` when the dataset has no tools.json."""
    policy_digest: str | None = None
    """sha256 of the dataset's gate.toml ``[policy]`` (how rows are checked): part of the scoring cache key, not
    of the revision's content digest (waivers and floors in gate.toml change without a new revision)."""
    tool_names: list[str] = []
    """Names of the tools in ``tools.json``; any iterable (a set included) is stored as a sorted list, because
    a set hashes differently in each process and would change the cache key."""

    @field_validator("tool_names", mode="before")
    @classmethod
    def _sorted(cls, value: object) -> object:
        return sorted(set(value)) if isinstance(value, (set, frozenset, list, tuple)) else value


AgentConfig = Annotated[Union[ReplayAgentConfig, OpenAIAgentConfig], Field(discriminator="kind")]


class ExecutorRef(BaseModel):
    """Recorded tool results for the live agent's tool loop: a JSON-lines file ``{name, args, result}``."""

    model_config = ConfigDict(frozen=True)

    path: str
    digest: str


class RunPlan(BaseModel):
    """What a run will do."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    dataset: DatasetRef
    agent: AgentConfig
    executor: ExecutorRef | None = None
    out: str
    run_id: str
    index: ShardIndex
    """The work as a compact index of (case_id, trial) keys in content-hashed buckets (:mod:`tooleval.runs.shards`):
    shard composition depends on the keys only, so shard cache keys survive a growing corpus."""
    case_digests: dict[str, str]
    """Case id -> :func:`tooleval.dataset.case_digest` of every planned case."""
    shard_size: int
    """Rows per shard asked for (explicit, or :func:`tooleval.runs.shards.default_shard_size`)."""
    errors: list[dict]
    """Row-level problems found while planning (``RowError.to_dict()`` shapes)."""
    slices: list[str] | None = None
    """Only cases of these slices are evaluated (``None``: all)."""
    redaction: RedactionConfig | None = None
    """Redaction applied at trace capture (``None``: off)."""
    has_requests: bool = False
    """Whether any trace records its generation request (only then does the join check read every case's input,
    so only then is the whole dataset's input set part of the scoring cache key)."""

    def shard_items(self, shard) -> tuple[list[WorkItem], list[tuple[int, int]]]:
        """Work items and their trace lines' ``(byte offset, line number)`` of one shard (a slice of
        :attr:`index`'s table)."""
        return shard_work_items(shard, self.case_digests)

    @property
    def items(self) -> list[WorkItem]:
        """Every work item, shard by shard (for small runs and tests; flows take one shard at a time)."""
        return [item for shard in self.index.shards() for item in self.shard_items(shard)[0]]


def shard_work_items(shard: pa.Table, case_digests: Mapping[str, str]
                     ) -> tuple[list[WorkItem], list[tuple[int, int]]]:
    """:meth:`RunPlan.shard_items` of a shard (a slice of the plan index's table, or its columns ``case_id``,
    ``trial``, ``seed``, ``line_digest``, ``offset``, ``line``), given the digest of each of its cases."""
    with cyclic_gc_paused():
        items = [
            WorkItem(case_id=c, case_digest=case_digests[c], trial=t, seed=s, trace_digest=d)
            for c, t, s, d in zip(*(shard[name].to_pylist() for name in ("case_id", "trial", "seed",
                                                                         "line_digest")))
        ]
    where = (shard[name].to_pylist() for name in ("offset", "line"))
    return items, list(zip(*where))


def new_run_id(now: datetime | None = None) -> str:
    """A fresh run id: UTC timestamp plus 6 random hex digits, e.g. ``20261130T002251Z-3fa9c1``."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def revision_record_relpath(revision: str) -> str:
    """Where, relative to ``--out``, the content digest of a written revision is recorded (the revision ledger)."""
    return f"revisions/{revision}.json"


def revision_record_path(out: Path, revision: str) -> Path:
    """Where the content digest of a written revision is recorded: ``<out>/revisions/<revision>.json``."""
    return out / revision_record_relpath(revision)


def check_revision_content(out: Path | str, dataset_path: Path, revision: str, digest: str) -> None:
    """Refuse a dataset whose ``revision`` was already written to ``out`` with other content (its ledger entry,
    :func:`revision_record_relpath`, records another content digest); no entry yet passes.

    Raises:
        RevisionConflictError: the recorded digest differs from ``digest`` (exit 2: bump the revision).
        InputFileError: the ledger entry is not a JSON object.
    """
    _check_revision_registry(out, dataset_path, revision, digest)


def _check_revision_registry(out: Path | str, dataset_path: Path, revision: str, digest: str) -> None:
    from tooleval.storage import tree_of

    try:
        data = tree_of(out).read_bytes(revision_record_relpath(revision))
    except (FileNotFoundError, IsADirectoryError):
        return
    ledger = f"{out}/{revision_record_relpath(revision)}" if isinstance(out, str) else revision_record_path(out, revision)
    known = _ledger_value(ledger, data, "content_digest", "restore it (it records the content digest of "
                          f"revision {revision!r}), or remove it if no run of that revision is kept here: the next run "
                          "records the revision again.")
    if known != digest:
        raise RevisionConflictError(
            dataset_path / "dataset.json",
            None,
            f"revision {revision!r} was already written to {out} with different dataset content "
            f"(recorded digest {str(known)[:12]}..., now {digest[:12]}...).",
            "bump 'revision' in dataset.json; a revision names one immutable dataset content.",
        )


def _ledger_value(path: Path | str, data: bytes, key: str, fix: str) -> object:
    """``key`` of the JSON object ``data`` read from ``path`` (a revision ledger or a run summary).

    Raises:
        InputFileError: ``data`` is not a JSON object in UTF-8 (naming the file, the line and ``fix``).
    """
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InputFileError(path, exc.lineno, f"not valid JSON ({json_problem(exc)}).", fix) from None
    except (UnicodeDecodeError, RecursionError):
        raise InputFileError(path, None, "not a JSON object in UTF-8 text.", fix) from None
    if not isinstance(value, dict):
        raise InputFileError(path, 1, f"not a JSON object (a JSON {json_type_name(value)}).", fix)
    return value.get(key)


def check_run_id(out: Path | str, run_id: str, revision: str) -> None:
    from tooleval.storage import document_path, read_document

    data = read_document(out, f"runs/{run_id}/summary.json")
    if data is None:
        return
    summary = document_path(out, f"runs/{run_id}/summary.json")
    previous = _ledger_value(summary, data, "dataset_revision", "restore it from the run's publication, or choose "
                             "another --run-id.")
    if previous != revision:
        # named where the user looks for it (the run's folder), not where its publication keeps the file
        raise RunIdConflictError(
            f"{str(out).rstrip('/')}/runs/{run_id}/summary.json",
            None,
            f"run id {run_id!r} already belongs to dataset revision {previous!r}, not {revision!r}.",
            "choose another --run-id (or omit it for a fresh one).",
        )


def plan_run(
    spec: RunSpec,
    *,
    write_key: bool = True,
    index_parts: IndexParts | None = None,
    case_parts: CaseParts | None = None,
    on_redaction: Callable[[Any, bytes, Any], None] | None = None,
) -> RunPlan:
    """Check the inputs and decide the work of a run.

    Args:
        spec: The run's options (:class:`tooleval.runs.spec.RunSpec`); its ``workers`` (default 1 here) size the
            default shard, and its gate config is checked now (the dataset's gate.toml is checked too).
        write_key: Create ``<out>/redaction.key`` (a new key) once every check passed; ``False`` for a dry
            plan that must write nothing (the CLI's own check before it starts the flow).
        index_parts: Reads byte ranges of a traces file of :data:`POOL_INDEX_BYTES` or more elsewhere (the
            flow's worker processes), while this process loads the dataset (:data:`IndexParts`); ``None``, or a
            smaller file: threads of this process read a file of :data:`PARALLEL_INDEX_BYTES` or more in ranges
            meanwhile, a smaller one is read after the load. Either way the plan is the same.
        case_parts: Reads byte ranges of a large ``cases.jsonl`` elsewhere (:data:`CaseParts`), each line checked
            as :func:`tooleval.dataset.load_dataset` checks it; ``None``: read here. Either way the plan is the same.
        on_redaction: Called once the run's redaction is known and before the traces file's index is awaited,
            as ``on_redaction(config, key, cases)`` (the :class:`~tooleval.capture.redaction.RedactionConfig` the
            plan will hold, the key's bytes, and a reader of every case of the dataset, slices or not: a callable
            that takes a line screen and returns the cases, or their :class:`~tooleval.dataset.CaseReferences`,
            which seed alike, in file order: ``functools.partial(stream_case_references, …)``, which
            :meth:`tooleval.capture.redaction.Redactor.seed_cases` takes as it is), so that the caller can seed
            the run's redactor meanwhile; not called when redaction is off. For a local dataset it is called
            before the dataset is loaded, with the cases read from ``cases.jsonl`` as they come (a dataset that
            then fails its load raises as usual).

    Returns:
        A :class:`RunPlan`; one work item per (case, trial) found in the traces for a known case.

    Raises:
        InputFileError: any file or usage error (the message names the file, the line and the fix).
    """
    from tooleval.rules import load_gate_config
    from tooleval.storage import as_location, check_out_folder
    from tooleval.storage import check_remote

    dataset, traces, out, run_id, agent = spec.dataset, spec.traces, spec.out, spec.run_id, spec.agent
    repeats, tool_results, slices, workers = spec.repeats, spec.tool_results, spec.slices, spec.workers or 1
    redact_fields, redact_paths = spec.redact_fields, spec.redact_paths
    location = as_location(out) if isinstance(out, str) else Path(out)
    out_path = location.resolve() if isinstance(location, Path) else location  # a folder, or a URL (s3://…)
    if isinstance(out_path, Path):
        check_out_folder(out_path)
    else:
        check_remote(out_path)
    run_id = check_name(run_id if run_id is not None else new_run_id(), what="run id")
    if agent is None and repeats != 1:
        raise InputFileError(None, None, f"--repeats {repeats} with the replay agent: replay takes its trials from "
                             "the recorded traces (one per recorded trial).", "drop --repeats, or use --agent openai.")
    if agent is None and tool_results is not None:
        raise InputFileError(tool_results, None, "--tool-results is for a live agent; the replay agent's tool "
                             "results are in the recorded traces.", "drop --tool-results, or use --agent openai.")
    # the cases' ranges go to the workers first: the plan needs the cases before the traces' keys
    cases_early = _start_cases(dataset, case_parts, workers) if case_parts is not None else None
    early = _start_index(traces, dataset, index_parts, workers) if agent is None else None
    # the key is decided now, so that the run's redactor is seeded while the cases and traces are read elsewhere;
    # a key problem is still reported after the dataset's own problems, as before
    key, key_error = None, None
    if spec.redaction:
        try:
            key = plan_key(out_path, new_key=spec.new_redaction_key)
        except InputFileError as exc:
            key_error = exc
    seeded_early = False
    # the seeding starts now, from the file, so that it runs while the cases are checked and the traces indexed
    early_cases = cases_early.path if cases_early is not None else _local_cases_file(dataset)
    if key is not None and on_redaction is not None and early_cases is not None:
        on_redaction(_redaction_config(key, redact_fields, redact_paths), key.key,
                     functools.partial(stream_case_references, early_cases))
        seeded_early = True
    # the memoised load (a copy: slices narrow its cases): the shard tasks and run_scopes of this process then
    # reuse it instead of parsing cases.jsonl again (2 s at 14,000 cases)
    if isinstance(dataset, str) and "://" in dataset:  # a URL: read from this machine's copy, as given
        loaded = load_dataset(dataset)
    else:
        try:
            parts = None if cases_early is None else cases_early.collect
            loaded = dataclasses.replace(load_dataset_cached(dataset, case_parts=parts), path=Path(dataset))
        except Exception:
            load_dataset(dataset)  # the error as the direct load words it (the path as given); else the first
            raise
    if spec.gate_config is not None:
        load_gate_config(spec.gate_config)
    all_cases = loaded.cases  # what the run's redactor is seeded with, whatever the slices
    every_case = set(loaded.cases)
    every_digest = case_digests(loaded.cases)  # kept from the load: not another pass over cases.jsonl
    if slices is not None:
        slices = sorted(set(slices))
        by_case = case_slices(loaded.cases)
        known = set(by_case.values())
        unknown = [s for s in slices if s not in known]
        if unknown:
            raise InputFileError(
                loaded.path / "cases.jsonl", None, f"no case has slice {', '.join(map(repr, unknown))}.",
                f"choose from {sorted(s for s in known if s is not None)}.",
            )
        loaded.cases = {k: loaded.cases[k] for k, slice_ in by_case.items() if slice_ in slices}
    digests = {case_id: every_digest[case_id] for case_id in loaded.cases}
    if key_error is not None:
        raise key_error
    if key is not None and on_redaction is not None and not seeded_early:
        on_redaction(_redaction_config(key, redact_fields, redact_paths), key.key,
                     functools.partial(stream_case_references, all_cases))
    if agent is not None:
        plan = _live_plan(spec, loaded, digests, out_path, run_id, _redaction_config(key, redact_fields, redact_paths))
        if write_key and key is not None and (held := persist_key(out_path, key)) is not key:
            plan = plan.model_copy(update={"redaction": _redaction_config(held, redact_fields, redact_paths)})
        return plan
    traces_path, traces_source = _traces_file(traces, loaded.path, dataset)
    index = _remembered_index(traces_path, take=write_key)
    if index is None:
        index = early.index() if early is not None and early.path == traces_path else index_traces(traces_path)
        if not write_key:
            _remember_index(traces_path, index)
    _check_revision_registry(out_path, loaded.path, loaded.revision, loaded.content_digest)
    check_run_id(out_path, run_id, loaded.revision)
    table, errors = replay_columns(index, loaded.cases, loaded.path / "cases.jsonl",
                                   skipped=every_case if slices is not None else None)
    traced_cases = set(pc.unique(table["case_id"]).to_pylist())
    # the index's columns in key order, taken by Arrow from the traces index (dicts and tuples by key were ~0.5 GB
    # of the flow's peak at 1,000,000 rows)
    numbers = table["line"].combine_chunks()
    if index.offsets:  # the index read the file once and kept each line's place
        offset_column, digest_column = _placed_columns(index, numbers)
    else:  # a gzip file: line digests read again (offsets stay unknown)
        keys = list(zip(table["case_id"].to_pylist(), table["trial"].to_pylist()))
        _, by_key = scan_lines(traces_path, dict(zip(numbers.to_pylist(), keys)))
        offset_column, digest_column = [-1] * len(keys), [by_key[key] for key in keys]
        del by_key, keys
    if write_key:  # the flow's own plan: nothing reads the index's keys again (a dry plan's index is kept whole)
        index.key_table = None
    line_bytes = traces_path.stat().st_size / len(index.offsets) if index.offsets else None  # gzip: unknown
    size = spec.shard_size or default_shard_size(table.num_rows, workers, line_bytes)
    if write_key and key is not None:
        key = persist_key(out_path, key)  # another run may have created the folder's key since it was planned
    return RunPlan(
        redaction=_redaction_config(key, redact_fields, redact_paths),
        dataset=dataset_ref(loaded, source=dataset),
        agent=ReplayAgentConfig(traces_path=traces_source, traces_digest=index.digest),
        out=str(out_path),
        run_id=run_id,
        index=ShardIndex.from_columns(table["case_id"], table["trial"], size, offset_column, numbers,
                                      digest_column),
        case_digests={case_id: digests[case_id] for case_id in traced_cases},
        shard_size=size,
        has_requests=index.has_requests,
        errors=[error.to_dict() for error in errors],
        slices=slices,
    )


def _placed_columns(index: TraceIndex, numbers: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The byte offset (int64) and the digest (32 hex characters, string) of each line of ``numbers`` (1-based
    line numbers of an uncompressed file's index), taken by Arrow from the index's packed arrays: the same values
    as ``index.offsets[n - 1]`` and :meth:`TraceIndex.line_digest`, without a Python object per line (a million
    lines took ~0.5 s and ~100 MB of the flow's heap)."""
    positions = numbers.cast(pa.int64())
    if len(positions):
        positions = pc.subtract(positions, 1)
    lines = len(index.offsets)
    offsets = pa.Array.from_buffers(pa.int64(), lines, [None, pa.py_buffer(index.offsets)])
    hexes = pa.Array.from_buffers(pa.binary(32), lines, [None, pa.py_buffer(index.line_digests.hex().encode())])
    return offsets.take(positions), hexes.take(positions).cast(pa.binary()).cast(pa.string())


IndexParts = Callable[[Path, list[tuple[int, int]]], Callable[[], list[TracePart]]]
"""``(traces file, byte ranges) -> collect``: starts :func:`tooleval.capture.recorded.index_part` of each range
(in other processes) and returns a callable that waits for them and gives their parts in range order."""

CaseParts = Callable[[Path, list[tuple[int, int]]], Callable[[], list[CasePart]]]
"""``(cases.jsonl, byte ranges) -> collect``: starts :func:`tooleval.dataset.load_case_range` of each range (in
other processes) and returns a callable that waits for them and gives their parts in range order."""

PARALLEL_CASES_BYTES = 64 << 20
"""A ``cases.jsonl`` at least this large (bytes; ~120,000 bfcl cases, ~2 s to check here) is read in ranges by
``case_parts``: below it this process reads it sooner than the workers are up (each imports the stages first,
~3 s)."""

PARALLEL_INDEX_BYTES = 32 << 20
"""A traces file at least this large (bytes, uncompressed) is read in byte ranges, on threads of this process
(Arrow's JSON reader, which does most of the work, lets them run together) or by ``index_parts``
(:data:`POOL_INDEX_BYTES`); below it, splitting the file costs more than it saves."""

POOL_INDEX_BYTES = 384 << 20
"""A traces file at least this large (bytes, uncompressed; ~400,000 bfcl rows) is read in ranges by ``index_parts``
(the flow's workers): below it, this process's threads read it before the workers have imported the stages."""

RANGE_BYTES = 128 << 20
"""About this many bytes per range (at least two ranges per worker, at most :data:`MAX_RANGES`): each range is one
task run on the process pool, which costs ~70 ms of Prefect's bookkeeping, so a few dozen at most; yet enough of them
that the workers finish together."""

MAX_RANGES = 64


def range_count(size: int, workers: int) -> int:
    """How many ranges a traces file of ``size`` bytes is read in: about :data:`RANGE_BYTES` each, at least two per
    worker and at most :data:`MAX_RANGES`, rounded up to a multiple of ``workers`` so that every worker gets as
    many (an 892 MB file in 7 ranges on two workers leaves one worker idle ~2 s while the other reads its fourth)."""
    count = max(2 * workers, -(-size // RANGE_BYTES))
    count = -(-count // workers) * workers
    return max(1, min(MAX_RANGES - MAX_RANGES % workers if workers <= MAX_RANGES else MAX_RANGES, count))


@dataclasses.dataclass
class _EarlyIndex:
    """A traces file being read in ranges elsewhere while the dataset loads here; its whole-file digest is
    computed by a thread of this process meanwhile (hashing releases the interpreter lock)."""

    path: Path
    collect: Callable[[], list[TracePart]]
    digest: list[str]
    thread: threading.Thread

    def index(self) -> TraceIndex:
        parts = self.collect()
        self.thread.join()
        if not self.digest:  # the file could not be read by the thread: read it here, to raise what the plan does
            return index_traces(self.path)
        return join_trace_parts(self.path, self.digest[0], parts)


_DRY_INDEX: dict[tuple, TraceIndex] = {}
"""The traces index of this process's last dry plan (``write_key=False``: ``tooleval run``'s own check before it
starts the flow), by the file's path, size, modification time and inode: the flow's plan in the same process
takes it instead of reading a large file a second time (~20 s per 200,000 multi-turn traces). Held until taken
or replaced; the replay agent still checks each line's digest, so a line changed meanwhile becomes a row error,
never a wrong row."""


def _file_stamp(path: Path) -> tuple | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _remember_index(path: Path, index: TraceIndex) -> None:
    stamp = _file_stamp(path)
    _DRY_INDEX.clear()
    if stamp is not None:
        _DRY_INDEX[stamp] = index


def _remembered_index(path: Path, *, take: bool) -> TraceIndex | None:
    """The dry plan's index of ``path`` when the file is unchanged since; ``take`` removes it from the memo."""
    stamp = _file_stamp(path)
    if stamp is None or stamp not in _DRY_INDEX:
        return None
    return _DRY_INDEX.pop(stamp) if take else _DRY_INDEX[stamp]


@dataclasses.dataclass
class _EarlyCases:
    """A ``cases.jsonl`` being read in ranges elsewhere (:data:`CaseParts`)."""

    path: Path
    collect: Callable[[], list[CasePart]]


def _local_cases_file(dataset: str | Path) -> Path | None:
    """The ``cases.jsonl`` of a local dataset folder, ``None`` for a URL or when there is no such file."""
    if isinstance(dataset, str) and "://" in dataset:
        return None
    path = Path(dataset) / "cases.jsonl"
    return path if path.is_file() else None


def _start_cases(dataset: str | Path, case_parts: CaseParts, workers: int) -> _EarlyCases | None:
    """Start reading a large local ``cases.jsonl`` in ranges; ``None`` when it is small, remote, missing, or
    already loaded by this process (a dry plan's load is reused instead)."""
    if isinstance(dataset, str) and "://" in dataset or is_loaded(dataset):
        return None
    path = Path(dataset) / "cases.jsonl"
    try:
        if path.stat().st_size < PARALLEL_CASES_BYTES:
            return None
        spans = trace_spans(path, 2 * max(workers, 1))  # any JSON-lines file: ranges cut at line starts
    except OSError:
        return None
    return _EarlyCases(path=path, collect=case_parts(path, spans))


def _start_index(traces: str | Path | None, dataset: str | Path, index_parts: IndexParts | None,
                 workers: int) -> _EarlyIndex | None:
    """Start reading a large local traces file in ranges: by ``index_parts`` (:data:`IndexParts`) from
    :data:`POOL_INDEX_BYTES` on, else on threads of this process (:func:`_parts_on_threads`); ``None`` when it is
    small, compressed, remote, or cannot be found yet (the plan then reads it after loading the dataset). Either way
    a file problem is raised when the index is collected, after the dataset's own problems."""
    if isinstance(dataset, str) and "://" in dataset or isinstance(traces, str) and "://" in traces:
        return None
    try:
        path, _ = _traces_file(traces, Path(dataset), dataset)
        size = path.stat().st_size
    except (InputFileError, OSError):
        return None
    if path.name.endswith(".gz") or size < PARALLEL_INDEX_BYTES or _remembered_index(path, take=False) is not None:
        return None
    pooled = index_parts is not None and size >= POOL_INDEX_BYTES
    try:
        spans = trace_spans(path, range_count(size, workers) if pooled else _THREADS)
    except OSError:
        return None
    digest: list[str] = []

    def whole() -> None:
        try:
            digest.append(file_digest(path))
        except OSError:
            pass

    thread = threading.Thread(target=whole, name="tooleval-traces-digest", daemon=True)
    thread.start()
    collect = index_parts(path, spans) if pooled else _parts_on_threads(path, spans)
    return _EarlyIndex(path=path, collect=collect, digest=digest, thread=thread)


_THREADS = 2
"""Threads (and ranges) of this process that read a traces file below :data:`POOL_INDEX_BYTES`: Arrow's JSON reader
and the longer lines' digests run outside the interpreter lock, the rest of a line's indexing inside it, so a third
thread would mostly wait (the whole file's digest has its own)."""


def _parts_on_threads(path: Path, spans: list[tuple[int, int]]) -> Callable[[], list[TracePart]]:
    """:data:`IndexParts` on threads of this process: each range's :func:`index_part` starts now; the callable
    returned waits for them and gives their parts in range order (raising what a range raised)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=len(spans), thread_name_prefix="tooleval-traces-index")
    futures = [pool.submit(index_part, path, span) for span in spans]
    pool.shutdown(wait=False)  # the threads end with their ranges
    return lambda: [future.result() for future in futures]


def _redaction_config(key: PlannedKey | None, fields: list[str] | None, paths: list[str] | None):
    if key is None:
        return None
    return RedactionConfig(
        fields=sorted(set(DEFAULT_FIELDS) | set(fields or [])),
        paths=paths or [],
        key_digest=key.digest,
    )


def _live_plan(spec: RunSpec, loaded, digests, out_path, run_id, redaction):
    agent, traces, tool_results, repeats = spec.agent, spec.traces, spec.tool_results, spec.repeats
    slices = None if spec.slices is None else sorted(set(spec.slices))
    if traces is not None:
        raise InputFileError(traces, None, "--traces is for the replay agent.", "drop --traces with --agent openai.")
    if repeats < 1:
        raise InputFileError(None, None, f"--repeats must be at least 1, not {repeats}.", "pass --repeats 1 or more.")
    agent.api_key()  # raises InputFileError (exit 2) when the key's variable is unset
    executor = None
    if tool_results is not None:
        path = Path(tool_results)
        if not path.is_file():
            raise InputFileError(path, None, "tool results file not found.", "check the --tool-results path.")
        from tooleval.agents import read_tool_results

        read_tool_results(path)  # every line checked now: a bad file is exit 2 before anything runs
        executor = ExecutorRef(path=str(path.resolve()), digest=file_digest(path))
    _check_revision_registry(out_path, loaded.path, loaded.revision, loaded.content_digest)
    check_run_id(out_path, run_id, loaded.revision)
    keys = [(case_id, trial) for case_id in sorted(loaded.cases) for trial in range(repeats)]
    size = spec.shard_size or default_shard_size(len(keys), spec.workers or 1)
    return RunPlan(dataset=dataset_ref(loaded, source=spec.dataset), agent=agent, executor=executor, out=str(out_path), run_id=run_id,
                   index=ShardIndex.build(keys, size), case_digests=digests, shard_size=size, errors=[],
                   slices=slices, redaction=redaction, has_requests=True)


def _traces_file(traces: str | Path | None, dataset_folder: Path, dataset: str | Path) -> tuple[Path, str]:
    """``(a local file to read, the location every worker reads)`` of the run's recorded traces: ``--traces``, or
    the dataset's own file. A URL (``--traces s3://…``, or the file inside a ``--dataset s3://…``) is read from
    this machine's copy (:func:`tooleval.storage._machine.local_copy`) and stays a URL for the workers.

    Raises:
        InputFileError: no such file.
    """
    from tooleval.storage import as_location
    from tooleval.storage import local_copy

    if traces is None:
        local = find_traces_file(dataset_folder)
        source = as_location(str(dataset)) if isinstance(dataset, str) else None
        if isinstance(source, str):
            return local, f"{source}/{local.relative_to(dataset_folder).as_posix()}"
        return local, str(local.resolve())
    location = as_location(str(traces)) if isinstance(traces, str) else Path(traces)
    if isinstance(location, Path) and not location.exists():
        # a bare name (what the error listing several agents' traces shows) names a file of the dataset's traces/
        location = traces_in_dataset(dataset_folder, str(traces)) or location
    local = local_copy(location)
    if not local.is_file():
        raise InputFileError(local, None, "traces file not found.",
                             "check the --traces path, or give the name of a file in the dataset's traces/ folder.")
    return local, location if isinstance(location, str) else str(local.resolve())


def dataset_ref(loaded, source: str | Path | None = None) -> DatasetRef:
    """The :class:`DatasetRef` of a loaded :class:`tooleval.dataset.Dataset`; ``source`` is the ``--dataset``
    given, kept as the path when it is a URL (``s3://…``: every worker reads its own copy of it)."""
    from tooleval.storage import as_location

    location = as_location(str(source)) if isinstance(source, str) else None
    from tooleval.rules import load_policy

    policy = load_policy(loaded.path).model_dump(mode="json")
    return DatasetRef(
        policy_digest=hashlib.sha256(canonical_json(policy).encode()).hexdigest(),
        tool_schema_version=tool_schema_version(loaded.path),
        path=location if isinstance(location, str) else str(loaded.path.resolve()),
        name=loaded.manifest.name,
        revision=loaded.revision,
        content_digest=loaded.content_digest,
        tool_names={tool.name for tool in loaded.tools},
    )
