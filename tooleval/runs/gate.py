"""Running the release gate over a run's rows: the config a run uses, the verdict, ``junit.xml``.

The gate config is ``--config FILE`` or the dataset's own ``gate.toml`` (defaults when it has none: a row passes
only when its calls match the reference and no violation blocks; F1 floors are advisory). The verdict is computed with today's UTC date (an expired waiver
fails the gate).

Nothing unscored passes (a case the agent never answered is not a case it passed): :func:`gate_rows` adds a
placeholder row for every case of the run's scope (:func:`gate_scope`) that has no row, and for every trace that made
none (``errors.json``: a trace of an unknown case, a line that could not be read as a trace); the gate fails each as
rule ``unscored``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from tooleval.models import Case
from tooleval.rules import (ROW_OUTCOMES, GateConfig, GateTally, GateVerdict, evaluate_gate, load_gate_config,
                            write_junit)

__all__ = ["GATE_BATCH_ROWS", "GATE_COLUMNS", "GATE_VERDICT_COLUMNS", "GateJudge", "gate_batches", "gate_config_for",
           "gate_config_source", "gate_rows", "gate_scope", "judge_rows", "row_outcome_record", "run_gate",
           "unscored_rows", "with_gate_verdicts", "write_junit"]

GATE_COLUMNS = ["case_id", "trial", "slice", "violations", "error_kind", "error_message", "missing_calls", "extra_calls", "wrong_args",
                "f1", "exact_match", "fp", "fn", "tool_families", "blocking", "match_mode", "calls_match", "name_only"]
"""The row columns the gate and its JUnit report read (the call lists, the evidence and the provenance columns
stay in the Parquet files)."""

GATE_BATCH_ROWS = 5_000
"""Rows read into Python at once by the gate (one Parquet record batch)."""

_UNSCORED_KINDS = ("missing_trace", "unknown_case", "bad_trace", "generation_error", "unreadable_trace",
                   "duplicate_key")
"""``errors.json`` kinds that stand for a (case, trial) without a row (a row that exists carries its own error)."""


def gate_batches(paths: Iterable[str | Path]) -> Iterator[list[dict[str, Any]]]:
    """The rows of ``paths`` (row Parquet files of the current row schema, in report order) for the gate: one
    file's gate columns at a time as Arrow, turned into row dicts of :data:`GATE_COLUMNS` (those the files have)
    at most :data:`GATE_BATCH_ROWS` rows at a time."""
    import pyarrow as pa

    from tooleval.storage import ROW_SCHEMA, conform
    from tooleval.storage import read_parquet, read_parquet_schema

    for path in paths:  # a local path or a URL (stage files on object storage)
        present = read_parquet_schema(path).names
        columns = [c for c in GATE_COLUMNS if c in present]
        if "error" in present and "error_kind" not in present:  # rows before version 4: one error text
            columns = [*columns, "error"]
            schema = pa.schema([ROW_SCHEMA.field(c) for c in GATE_COLUMNS
                                if c in present or c in ("error_kind", "error_message")])
        else:
            schema = pa.schema([ROW_SCHEMA.field(c) for c in columns])
        table = conform(read_parquet(path, columns=columns), schema)
        for batch in table.to_batches(max_chunksize=GATE_BATCH_ROWS):
            yield batch.to_pylist()


def gate_config_for(dataset_path: str | Path, config: str | Path | None = None) -> GateConfig:
    """The gate config of a run: ``config`` when given, else ``<dataset>/gate.toml``, else the defaults.

    Raises:
        tooleval.errors.InputFileError: unreadable TOML, unknown keys or invalid values (file and line named).
    """
    if config is not None:
        return load_gate_config(Path(config))
    own = Path(dataset_path) / "gate.toml"
    return load_gate_config(own) if own.is_file() else GateConfig()


def gate_config_source(dataset_path: str | Path, config: str | Path | None = None) -> str | None:
    """The file :func:`gate_config_for` reads: ``config``, else ``<dataset>/gate.toml`` when it exists, else
    ``None`` (the defaults)."""
    if config is not None:
        return str(config)
    own = Path(dataset_path) / "gate.toml"
    return str(own) if own.is_file() else None


def row_outcome_record(config: GateConfig, source: str | None, variability_outcome: str) -> dict[str, Any]:
    """What ``summary.json``'s ``row_outcome`` says: which outcome judged the run's rows and why.

    Args:
        config: The run's gate config.
        source: :func:`gate_config_source` (``None``: the defaults, the dataset has no gate.toml).
        variability_outcome: The ``--outcome`` spec of pass@k / pass^k (``gate`` follows the gate).

    Returns:
        ``{"gate": "match" | "no_blocking", "passes_when": <words>, "config": <gate.toml path or null>,
        "variability": <spec>, "accept_name_only": <bool>}``.
    """
    words = ROW_OUTCOMES[config.row_outcome]
    if not config.accept_name_only:
        words += "; a row with a call whose arguments were not captured fails (args_not_captured)"
    return {"gate": config.row_outcome, "passes_when": words, "config": source,
            "variability": variability_outcome, "accept_name_only": config.accept_name_only}


def run_gate(rows: list[dict[str, Any]], config: GateConfig) -> GateVerdict:
    """The gate verdict of ``rows`` (row dicts with the row columns) under ``config``, as of today (UTC)."""
    return evaluate_gate(rows, config, today=datetime.now(timezone.utc).date())


def gate_scope(cases: Mapping[str, Case], slices: Iterable[str] | None = None) -> dict[str, str | None]:
    """The cases a run answers for, ``case_id -> slice``: every case of the dataset, or those of the ``--slices``
    asked for. A diagnostic subset (``rescore --case/--trial``) has no scope beyond its own rows: pass ``None``
    to :func:`gate_rows` instead."""
    from tooleval.dataset import case_slices

    wanted = None if slices is None else set(slices)
    return {case_id: slice_ for case_id, slice_ in case_slices(cases).items() if wanted is None or slice_ in wanted}


def unscored_rows(rows: list[dict[str, Any]], scope: Mapping[str, str | None] | None,
                  errors: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """Placeholder rows (``unscored: true``) for what the run should have scored and did not.

    Args:
        rows: The run's rows (``case_id``, ``trial``).
        scope: :func:`gate_scope`, or ``None`` (a diagnostic subset: only ``errors`` count).
        errors: ``errors.json`` entries (``kind``, ``case_id``, ``trial``, ``message``, ``line``).

    Returns:
        One row per (case, trial) named by an error of kind ``missing_trace``, ``unknown_case``, ``bad_trace``,
        ``generation_error``, ``unreadable_trace`` or ``duplicate_key`` that has no row, then one per case of ``scope`` still without any row, in that
        order. Each has ``error_kind`` and ``error_message`` (from ``errors.json``), ``unscored`` true and null metrics. A line that named
        no case gets the case id ``<traces line N>`` so that JUnit can name it.
    """
    seen = _Seen(errors)
    for row in rows:
        seen.add(row)
    return seen.placeholders(scope)


class _Seen:
    """What :func:`unscored_rows` needs to know of the rows, gathered one row at a time: the case ids that have a
    row, and which of the (case, trial) keys named by ``errors`` have one (not every key of the run)."""

    def __init__(self, errors: Iterable[Mapping[str, Any]]) -> None:
        self.errors = [e for e in errors if e.get("kind") in _UNSCORED_KINDS]
        self.named = {(_error_case(e), e.get("trial")) for e in self.errors}
        self.present: set[tuple[str, Any]] = set()
        self.cases: set[str] = set()

    def add(self, row: Mapping[str, Any]) -> None:
        key = (str(row["case_id"]), row.get("trial"))
        self.cases.add(key[0])
        if key in self.named:
            self.present.add(key)

    def add_table(self, table: Any) -> None:
        """:meth:`add` of every row of an Arrow table with ``case_id`` and ``trial`` columns: the case ids as a
        set, and only the rows of the cases named by the errors one by one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        cases = table.column("case_id")
        self.cases.update(str(case) for case in pc.unique(cases).to_pylist())
        named = sorted({case for case, _ in self.named})
        if named:
            mine = table.filter(pc.is_in(cases, value_set=pa.array(named, pa.string())))
            for row in mine.select(["case_id", "trial"]).to_pylist():
                self.add(row)

    def placeholders(self, scope: Mapping[str, str | None] | None) -> list[dict[str, Any]]:
        present, cases_with_rows = set(self.present), set(self.cases)
        out: list[dict[str, Any]] = []
        for error in self.errors:
            case_id = _error_case(error)
            key = (case_id, error.get("trial"))
            if key in present or (error.get("trial") is None and case_id in cases_with_rows):
                continue
            present.add(key)
            cases_with_rows.add(case_id)
            out.append(_placeholder(case_id, error.get("trial"), (scope or {}).get(case_id),
                                    error["kind"], error.get("message")))
        for case_id, slice_ in (scope or {}).items():
            if case_id not in cases_with_rows:
                out.append(_placeholder(case_id, None, slice_, "missing_trace", "the run has no row for this case"))
        return out


def _error_case(error: Mapping[str, Any]) -> str:
    case_id = error.get("case_id")
    return f"<traces line {error.get('line')}>" if case_id is None else str(case_id)


class GateJudge:
    """The gate of one run judged as its rows arrive, batch by batch (:meth:`add`), then :meth:`verdict`.

    Only the listed rows (``config.listed_rows`` per list) are kept with their evidence, plus the run's case ids
    (for the cases in ``scope`` without a row): memory does not grow with the rows.

    Args:
        scope: :func:`gate_scope`, or ``None`` for a diagnostic subset.
        errors: ``errors.json`` entries known before the rows (those of kinds that stand for a missing row);
            entries about rows that exist change nothing.
        config: The gate configuration.
    """

    def __init__(self, scope: Mapping[str, str | None] | None, errors: Iterable[Mapping[str, Any]],
                 config: GateConfig) -> None:
        self.scope = scope
        self.tally = GateTally(config, today=datetime.now(timezone.utc).date())
        self.seen = _Seen(errors)

    def add(self, batch: list[dict[str, Any]]) -> None:
        """Judge a batch of row dicts (:data:`GATE_COLUMNS`), in report order."""
        for row in batch:
            self.tally.add(row)
            self.seen.add(row)

    def add_table(self, table: Any) -> Any:
        """Judge the rows of an Arrow table of :data:`GATE_COLUMNS` (those the rows have), in report order: the
        same as :meth:`add` of its rows, over the columns (:meth:`tooleval.rules.GateTally.add_table`).

        Returns:
            Each row's verdict, in the table's order: an Arrow table of ``gate_verdict`` and ``gate_rules``
            (:meth:`tooleval.rules.GateTally.add_table`), what :func:`with_gate_verdicts` stores on the rows.
        """
        verdicts = self.tally.add_table(table)
        self.seen.add_table(table)
        return verdicts

    def verdict(self) -> GateVerdict:
        """The verdict, after the rows and their :func:`unscored_rows` placeholders (as of today, UTC)."""
        for placeholder in self.seen.placeholders(self.scope):
            self.tally.add(placeholder)
        return self.tally.verdict()


GATE_VERDICT_COLUMNS = ("gate_verdict", "gate_rules")
"""The row columns that hold the gate's verdict of each row (set at publication, null in the scoring stage)."""


def with_gate_verdicts(rows: Any, verdicts: Any) -> Any:
    """``rows`` (an Arrow table of the row schema) with its :data:`GATE_VERDICT_COLUMNS` replaced by ``verdicts``
    (:meth:`GateJudge.add_table` of the same rows, in the same order).

    Raises:
        ValueError: ``verdicts`` does not have one entry per row.
    """
    if verdicts.num_rows != rows.num_rows:
        raise ValueError(f"{verdicts.num_rows} gate verdicts for {rows.num_rows} rows")
    for name in GATE_VERDICT_COLUMNS:
        index = rows.schema.get_field_index(name)
        column = verdicts.column(name).cast(rows.schema.field(name).type)
        rows = rows.set_column(index, rows.schema.field(name), column)
    return rows


def judge_rows(batches: Iterable[Any], scope: Mapping[str, str | None] | None,
               errors: Iterable[Mapping[str, Any]], config: GateConfig) -> GateVerdict:
    """The gate verdict of a run's rows streamed batch by batch, then of their :func:`unscored_rows` placeholders
    (:class:`GateJudge`).

    Args:
        batches: The rows, in report order: each batch a list of row dicts (e.g. one Parquet record batch's
            ``to_pylist()``), or an Arrow table of :data:`GATE_COLUMNS` (e.g. one row file, read as the current row
            schema), judged over its columns (:meth:`GateJudge.add_table`): the same verdict.
        scope: :func:`gate_scope`, or ``None`` for a diagnostic subset.
        errors: ``errors.json`` entries.
        config: The gate configuration.
    """
    judge = GateJudge(scope, errors, config)
    for batch in batches:
        if isinstance(batch, list):
            judge.add(batch)
        else:
            judge.add_table(batch)
    return judge.verdict()


def _placeholder(case_id: str, trial: int | None, slice_: str | None, kind: str,
                 message: str | None) -> dict[str, Any]:
    return {"case_id": case_id, "trial": trial, "slice": slice_, "error_kind": kind, "error_message": message,
            "unscored": True, "f1": None,
            "exact_match": None, "fp": None, "fn": None, "missing_calls": None, "extra_calls": None,
            "wrong_args": None, "violations": None, "tool_families": None}


def gate_rows(rows: list[dict[str, Any]], scope: Mapping[str, str | None] | None,
              errors: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """``rows`` followed by their :func:`unscored_rows`: what :func:`run_gate` and ``write_junit`` judge."""
    return list(rows) + unscored_rows(rows, scope, errors)
