"""The run documents under ``runs/<run>/``: one model each, with a version.

``summary.json`` (:class:`RunSummary`), the entries of ``errors.json`` (:class:`ErrorEntry`) and ``drift.json``
(:class:`DriftDocument`) are written through these models, so a key cannot appear, vanish or change type in one
writer and be read differently elsewhere: a misspelt or unknown key is refused when the run publishes, not found
by a dashboard later. Each document's version is recorded in it (``summary_version``, ``drift_version``; the
errors list's version is ``summary.versions.errors``), and a test holds each model's JSON Schema to a fingerprint
recorded per version, so changing a document's shape without bumping its version fails.

Documents written before these versions existed read as version 0 (:func:`read_summary`): their keys are the
same, only the version key is absent. A document newer than this reader is refused by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tooleval.errors import InputFileError
from tooleval.storage import ErrorKind

__all__ = ["SUMMARY_VERSION", "TABLE_ENTRIES_KEPT", "PER_TOOL_TABLES", "bounded_tables", "DRIFT_VERSION", "ERRORS_VERSION", "RunSummary", "RowOutcomeInfo", "ErrorEntry", "DriftDocument",
           "read_summary", "summary_document", "errors_document", "drift_document", "DOCUMENT_MODELS"]

SUMMARY_VERSION = 4
"""Version of :class:`RunSummary`. History: 0 — unversioned summaries (same keys, no ``summary_version``); 1 — the
typed summary (``summary_version``, ``versions.summary`` / ``errors`` / ``drift``); 2 — ``row_outcome`` (which
outcome judged the rows) and ``failures_by_rule``. A summary before version 2 was judged ``no_blocking``; 3 —
``name_only_rows`` and ``mean_name_f1``, and ``mean_f1`` / ``exact_match_rows`` leave the name-only rows out (a
summary before version 3 had none: no call was matched by name only then), and ``row_outcome.accept_name_only``;
4 — the per-tool tables keep their :data:`TABLE_ENTRIES_KEPT` worst entries and ``omitted_entries`` counts the
rest (a summary before version 4 held every entry: none omits any)."""

TABLE_ENTRIES_KEPT = 100
"""Entries a per-tool table of ``summary.json`` (and so of the report) keeps: the worst ones, by their count (a
corpus of 1,000,000 distinct tool names wrote a 138 MB summary and a 254 MB report). The full tables stay in SQL
(``tooleval sql``, over the rows' ``missing_calls``, ``extra_calls``, ``wrong_args`` and ``tool_families``)."""

PER_TOOL_TABLES = ("failures_by_tool", "schema_findings_by_tool", "failures_by_tool_family")
"""The summary's tables with one entry per tool name or tool family: as many entries as the corpus has tools."""

ERRORS_VERSION = 2
"""Version of the ``errors.json`` entries (:class:`ErrorEntry`), recorded as ``summary.versions.errors``. History:
1 — ``kind`` any text; 2 — ``kind`` one of the closed set :data:`tooleval.storage.ERROR_KINDS` (which added
``unreadable_trace`` and ``duplicate_key``). Every version-1 document is a version-2 document: its kinds were
already of that set."""

DRIFT_VERSION = 1
"""Version of :class:`DriftDocument`. History: 0 — unversioned; 1 — typed, with ``drift_version``."""


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Versions(_Document):
    """What wrote the run: package, scorer (a digest of the scoring package's sources), ragas, and the row schema
    and document versions."""

    tooleval: str
    scorer: str
    ragas: str
    row_schema: int
    summary: int | None = None
    errors: int | None = None
    drift: int | None = None


class DatasetInfo(_Document):
    """The dataset the run scored: its name, folder and content digest (sha256 of its files)."""

    name: str
    path: str
    content_digest: str


class LegacyFigures(_Document):
    """The legacy scalar the run published: mean ragas ToolCallF1 (in [0, 1], null without scored rows) and rows."""

    value: float | None
    rows: int


class DriftFigures(_Document):
    """The drift check's verdict in brief (the whole check is ``drift.json``)."""

    verdict: Literal["ok", "drift"]
    attribution: str | None
    legacy_value: float | None
    new_value: float | None


class RowOutcomeInfo(_Document):
    """When a row of the run passed, and where that was decided (:func:`tooleval.runs.gate.row_outcome_record`)."""

    gate: Literal["match", "no_blocking"]
    """The gate's row outcome: ``match`` — calls match the reference under the case's match mode (``calls_match``)
    and no blocking rule fires (the default without gate.toml); ``no_blocking`` — no blocking rule fires."""
    passes_when: str
    """The same in words."""
    config: str | None
    """The gate.toml that set it; null: the default (the dataset has no gate.toml and none was named)."""
    variability: str
    """The ``--outcome`` of pass@k / pass^k (``gate``: the gate's row outcome above)."""
    accept_name_only: bool | None = None
    """gate.toml's ``accept_name_only``: whether a row whose calls' arguments were not captured may pass on their
    names (false: it fails as ``args_not_captured``, in the gate, pass@k and ``tooleval compare`` alike); null
    before summary version 3, when no row was matched by name only."""


class RunSummary(_Document):
    """``runs/<run>/summary.json``: what a run is and its figures (docs/design.md "summary.json").

    Counts are non-negative integers over the run's rows; means are in [0, 1] (null without scored rows). Figures
    a legacy-only run does not compute are absent from its file (they are ``None`` here)."""

    summary_version: int = SUMMARY_VERSION
    dataset_revision: str
    run_id: str
    dataset: DatasetInfo
    versions: Versions
    slices: list[str] | None = None
    redaction: dict[str, Any] | None = None
    """The redaction config (field names, paths, the key's sha256); null when redaction was off."""
    dataset_ref: dict[str, Any]
    """The planned dataset (:class:`tooleval.runs.plan.DatasetRef`): revision, digests, tool schema version."""
    legacy: LegacyFigures
    agent: dict[str, Any] | None = None
    """The agent configuration (:class:`tooleval.runs.plan.AgentConfig`)."""
    repeats: int | None = None
    timing: dict[str, Any] | None = None
    """Seconds and counts of the shard phase (``shards``, ``workers``, ``shard_size``, ``stages_wall_s``, ...)."""
    rescored_from: dict[str, Any] | None = None
    """For ``tooleval rescore``: the run, case and trial it rescored."""
    rows: int | None = None
    exact_match_rows: int | None = None
    expected_calls: int | None = None
    observed_calls: int | None = None
    tp: int | None = None
    fp: int | None = None
    fn: int | None = None
    rows_with_missing: int | None = None
    rows_with_extra: int | None = None
    rows_with_duplicates: int | None = None
    rows_with_malformed: int | None = None
    rows_without_calls: int | None = None
    rows_with_errors: int | None = None
    mean_f1: float | None = None
    """Mean F1 of the scored rows whose arguments were all compared (name-only rows left out)."""
    mean_ragas_tool_call_f1: float | None = None
    name_only_rows: int | None = None
    """Rows with a call whose arguments were not captured (row column ``name_only``), matched by name only."""
    mean_name_f1: float | None = None
    """Mean F1 of the name-only rows (a name-level figure); null without such rows."""
    failures_by_tool: dict[str, dict[str, int]] | None = None
    """Tool name -> ``{"missing", "extra", "wrong_args"}`` counts."""
    failures_by_owner: dict[str, int] | None = None
    provenance: dict[str, int] | None = None
    """``{"ok", "missing", "mismatch"}`` row counts of the join check."""
    rows_schema_checked: int | None = None
    rows_with_schema_findings: int | None = None
    schema_findings: int | None = None
    schema_findings_by_tool: dict[str, dict[str, int]] | None = None
    variability: dict[str, Any] | None = None
    """pass@k / pass^k with bootstrap intervals (:func:`tooleval.runs.variability.variability_summary`)."""
    gate: dict[str, Any] | None = None
    """The release gate's verdict (:meth:`tooleval.rules.GateVerdict.to_dict`)."""
    row_outcome: RowOutcomeInfo | None = None
    """Which outcome judged the rows (gate, pass@k, pass^k); absent before summary version 2 (``no_blocking``)."""
    rows_evaluated: int | None = None
    scored_rows: int | None = None
    unscored_cases: int | None = None
    false_positive_calls: int | None = None
    false_negative_calls: int | None = None
    blocking_rows: int | None = None
    waived_rows: int | None = None
    quarantined_rows: int | None = None
    advisory_violations: int | None = None
    violations_by_rule: dict[str, int] | None = None
    failures_by_rule: dict[str, int] | None = None
    """Blocking rule -> failing rows (a row failing two rules counts under both)."""
    failures_by_tool_family: dict[str, int] | None = None
    failures_by_slice: dict[str, int] | None = None
    failures_by_slice_and_rule: dict[str, dict[str, int]] | None = None
    rows_by_slice: dict[str, dict[str, Any]] | None = None
    drift: DriftFigures | None = None
    omitted_entries: dict[str, dict[str, Any]] | None = None
    """Per-tool table -> what was left out past its :data:`TABLE_ENTRIES_KEPT` worst entries: ``{"entries": n,
    "counts": ...}``, ``counts`` the left-out entries' counts summed (a number, or ``{kind: n}`` for a table of
    ``{kind: n}`` entries). Absent when no table was cut."""
    errors: int = 0
    """Entries in ``errors.json``."""
    completed_at: str | None = None
    """ISO 8601 UTC time of the publication."""


class ErrorEntry(_Document):
    """One entry of ``runs/<run>/errors.json``: a trace or row the run could not score.

    ``kind`` is one of the closed set :data:`tooleval.storage.ERROR_KINDS` (its docstring says what each means);
    ``path`` and ``line`` (1-based) name the input where the problem was found, when there is one."""

    kind: ErrorKind
    case_id: str | None = None
    trial: int | None = None
    message: str
    path: str | None = None
    line: int | None = None


class DriftDocument(_Document):
    """``runs/<run>/drift.json``: the legacy scalar against the row-level path on the same traces, row by row
    (:func:`tooleval.runs.drift.drift_report` says what each figure is)."""

    drift_version: int = DRIFT_VERSION
    verdict: Literal["ok", "drift"]
    attribution: str | None = None
    reasons: list[str] = Field(default_factory=list)
    tolerance: float
    legacy: dict[str, Any]
    new: dict[str, Any]
    difference: float | None = None
    coverage: dict[str, Any]
    rows_differing: list[dict[str, Any]] = Field(default_factory=list)
    rows_differing_count: int = 0
    slices: list[str] | None = None
    published_legacy_value: float | None = None


DOCUMENT_MODELS: dict[str, tuple[type[BaseModel], int]] = {
    "summary": (RunSummary, SUMMARY_VERSION), "errors": (ErrorEntry, ERRORS_VERSION),
    "drift": (DriftDocument, DRIFT_VERSION),
}
"""Each run document's model and current version (what the version test fingerprints)."""


def summary_document(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` checked against :class:`RunSummary` and returned as the JSON object to write (keys that were
    not given stay absent; ``summary_version`` is always written).

    Raises:
        pydantic.ValidationError: an unknown key or a value of the wrong type (a defect of the writer).
    """
    model = RunSummary.model_validate(bounded_tables(summary))
    return {"summary_version": model.summary_version, **model.model_dump(mode="json", exclude_unset=True)}


def _weight(value: Any) -> int:
    return sum(value.values()) if isinstance(value, dict) else int(value or 0)


def _cut(table: dict[str, Any], kept: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The ``kept`` worst entries of ``table`` (highest count first, then by name) in name order, and what the
    others add up to (``None`` when none is left out)."""
    if len(table) <= kept:
        return table, None
    ranked = sorted(table.items(), key=lambda item: (-_weight(item[1]), item[0]))
    rest = ranked[kept:]
    if all(isinstance(value, dict) for _, value in rest):
        counts: Any = {}
        for _, value in rest:
            for kind, n in value.items():
                counts[kind] = counts.get(kind, 0) + int(n)
        counts = dict(sorted(counts.items()))
    else:
        counts = sum(_weight(value) for _, value in rest)
    return dict(sorted(ranked[:kept])), {"entries": len(rest), "counts": counts}


def bounded_tables(summary: dict[str, Any], kept: int = TABLE_ENTRIES_KEPT) -> dict[str, Any]:
    """``summary`` with each of its :data:`PER_TOOL_TABLES` (at the top and in ``gate.counts``) cut to its
    ``kept`` worst entries, and ``omitted_entries`` saying what was left out; a new dict when anything was cut."""
    omitted: dict[str, dict[str, Any]] = dict(summary.get("omitted_entries") or {})
    out = dict(summary)
    for name in PER_TOOL_TABLES:
        table = out.get(name)
        if isinstance(table, dict):
            out[name], left = _cut(table, kept)
            if left is not None:
                omitted[name] = left
    gate = out.get("gate")
    if isinstance(gate, dict) and isinstance(gate.get("counts"), dict):
        counts = dict(gate["counts"])
        for name in PER_TOOL_TABLES:
            if isinstance(counts.get(name), dict):
                counts[name], left = _cut(counts[name], kept)
                if left is not None:
                    omitted.setdefault(name, left)
        out["gate"] = {**gate, "counts": counts}
    if omitted:
        out["omitted_entries"] = omitted
    return out


def errors_document(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``errors.json``'s entries, each checked against :class:`ErrorEntry` (every key written, nulls included)."""
    return [ErrorEntry.model_validate(entry).model_dump(mode="json") for entry in errors]


def drift_document(drift: dict[str, Any]) -> dict[str, Any]:
    """``drift`` checked against :class:`DriftDocument`, with ``drift_version`` (keys not given stay absent)."""
    model = DriftDocument.model_validate(drift)
    return {"drift_version": model.drift_version, **model.model_dump(mode="json", exclude_unset=True)}


def read_summary(path: str | Path, text: str | bytes | None = None) -> RunSummary:
    """Read a ``summary.json`` as a :class:`RunSummary` (a summary without ``summary_version`` is version 0).

    Args:
        path: The file (read unless ``text`` is given; named in errors).
        text: The file's content, when already read (object storage).

    Raises:
        InputFileError: not JSON, not a summary, or a ``summary_version`` newer than this reader knows.
    """
    try:
        data = json.loads(Path(path).read_bytes() if text is None else text)
    except (OSError, ValueError) as exc:
        raise InputFileError(path, None, f"cannot read the run summary: {exc}.",
                             "restore the file from the run's publication or re-run it.") from exc
    if not isinstance(data, dict):
        raise InputFileError(path, None, "the run summary is not a JSON object.", "re-run the run.")
    version = data.get("summary_version", 0)
    if not isinstance(version, int) or version > SUMMARY_VERSION:
        raise InputFileError(path, None, f"summary_version {version!r} is newer than this tooleval reads "
                             f"(up to {SUMMARY_VERSION}).", "upgrade tooleval to read it; nothing was changed.")
    return RunSummary.model_validate({**data, "summary_version": version})
