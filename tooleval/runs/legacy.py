"""The legacy scalar path: what the old pipeline published — one mean ragas ToolCallF1 and a row count per
(dataset revision, run), nothing else, so that dashboards fed by the old number keep it while they migrate
(docs/design.md "Stages").

It reads the same immutable trace envelopes as the row-level path but shares none of its call handling: calls
are read back from the envelope's raw ``messages_json`` here, and ragas itself scores them. That independence is
what lets the drift check (:mod:`tooleval.runs.drift`) catch a row-level path that drifted.

How a call is handed to ragas (docs/design.md "ragas column", the old pipeline's contract): the argument text parsed
as JSON; empty text or ``null`` is ``{}``; anything that is not a JSON object (or not JSON, or ``NaN``) becomes
``{"__malformed__": <raw text>}``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel

from tooleval.canonical import strict_json_loads
from tooleval.scoring.rows import reference_calls, trace_reference_secrets
from tooleval.models import Case
from tooleval.scoring.ragas_metric import ragas_tool_call_f1_many, ragas_version

__all__ = [
    "LEGACY_METRIC",
    "LegacyResult",
    "LegacyRow",
    "LegacyTally",
    "legacy_calls",
    "legacy_record",
    "legacy_score",
    "merge_legacy",
    "stage_legacy",
]

LEGACY_METRIC = "tool_call_f1"


class LegacyRow(BaseModel):
    """One envelope's legacy value (kept for the drift check; never published by the legacy path)."""

    case_id: str
    trial: int
    value: float | None
    """ragas ToolCallF1 in [0, 1] (rounded by ragas to 4 places); ``None`` for a failed generation."""


class LegacyResult(BaseModel):
    """The legacy scalar of one run, with the per-row values behind it."""

    metric: str = LEGACY_METRIC
    value: float | None
    """Mean of the per-row values over envelopes that have one; ``None`` when none has."""
    rows: int
    """Number of envelopes (the old pipeline's row count)."""
    ragas_version: str
    scorer_version: str
    computed_at: datetime
    per_row: list[LegacyRow]
    elapsed_s: float = 0.0
    """Seconds the legacy task body took (see :class:`tooleval.storage.stages.StageRef`)."""

    # A shard's result is pickled into Prefect's result store and read back from it: its per-row values travel as
    # three plain columns, since pickling ten thousand models one by one cost ~0.1 s a shard (and as much to read)
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        rows = state["__dict__"]["per_row"]
        packed = ([r.case_id for r in rows], [r.trial for r in rows], [r.value for r in rows])
        return {**state, "__dict__": {**state["__dict__"], "per_row": _PackedRows(*packed)}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        rows = state["__dict__"]["per_row"]
        if isinstance(rows, _PackedRows):
            rows = [LegacyRow(case_id=c, trial=t, value=v) for c, t, v in zip(rows.case_ids, rows.trials, rows.values)]
            state = {**state, "__dict__": {**state["__dict__"], "per_row": rows}}
        super().__setstate__(state)


class _PackedRows(NamedTuple):
    """:attr:`LegacyResult.per_row` as pickled: the case ids, trials and values, one list each."""

    case_ids: list[str]
    trials: list[int]
    values: list[float | None]


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        return {}
    try:
        parsed = strict_json_loads(raw)
    except (ValueError, TypeError, RecursionError):
        return {"__malformed__": raw if isinstance(raw, str) else repr(raw)}
    if parsed is None:
        return {}
    return parsed if isinstance(parsed, dict) else {"__malformed__": raw}


def legacy_calls(messages_json: str) -> list[dict[str, Any]]:
    """The assistant's tool calls in a message list, as ragas is given them: ``[{"name", "args"}]``."""
    try:
        # orjson reads the long message lists several times faster; it equals the standard library's reading
        # on every text it accepts but one kind, integers beyond 64 bits (it makes them floats), which can
        # only matter inside a call's name or arguments given as JSON values rather than text: those, and the
        # texts orjson refuses (NaN, lone surrogates), are read again by the standard library below
        calls = _calls(orjson.loads(messages_json), exact=False)
    except orjson.JSONDecodeError:
        calls = None
    return calls if calls is not None else _calls(json.loads(messages_json), exact=True)


def _calls(messages: Any, exact: bool) -> list[dict[str, Any]] | None:
    """:func:`legacy_calls` of decoded messages; ``None`` (when not ``exact``) at a call whose name or arguments
    are not text, which the standard library's reading must decide."""
    calls = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            body = call.get("function", call)
            raw = body["arguments"] if "arguments" in body else body.get("args")
            name = body.get("name")
            if not exact and not (isinstance(name, str) and (raw is None or isinstance(raw, str))):
                return None
            calls.append({"name": name, "args": _args(raw)})
    return calls


def legacy_score(
    envelopes: list[dict[str, Any]], cases: dict[str, Case], scorer_version: str, redactor: Any = None
) -> LegacyResult:
    """Compute the legacy scalar over a run's envelopes.

    Args:
        envelopes: Envelope records (``case_id``, ``trial``, ``messages_json``, ``error`` and, for a redacted run,
            ``metadata_json``).
        cases: The dataset's cases by id (the reference calls). An envelope of an unknown case is skipped.
        scorer_version: Recorded beside the value (the drift check attributes differences by version).
        redactor: The redactor the traces went through (:class:`tooleval.capture.redaction.Redactor`), so that the
            reference arguments are redacted alike; ``None`` when redaction is off.

    Returns:
        A :class:`LegacyResult`; ``rows`` counts every envelope of a known case, failed generations included.
    """
    per_row: list[LegacyRow] = []
    pending: list[tuple[int, list[dict], list[dict]]] = []
    plain: dict[str, list[dict]] = {}
    # a case is looked up once per batch, not once per envelope: the dataset's cases are read from its file on demand
    # (~50 us a case), and a case's trials arrive together
    known: dict[str, Case | None] = {}
    read_ahead = getattr(cases, "read_ahead", None)  # a dataset's cases, read on demand: the batch's in one pass
    if read_ahead is not None:
        read_ahead(case_id for case_id in dict.fromkeys(e["case_id"] for e in envelopes) if case_id in cases)
    for envelope in envelopes:
        case_id = envelope["case_id"]
        case = known[case_id] if case_id in known else known.setdefault(case_id, cases.get(case_id))
        if case is None:
            continue
        per_row.append(LegacyRow(case_id=envelope["case_id"], trial=envelope["trial"], value=None))
        if envelope.get("error") is not None or envelope.get("messages_json") is None:
            continue
        extra = trace_reference_secrets(redactor, case, envelope)
        reference = plain.get(case.case_id) if not extra else None
        if reference is None:
            reference = [{"name": c.name, "args": c.args or {}}
                         for c in reference_calls(case.expected_calls, redactor, extra)]
            if not extra:  # the base secrets only: the same for every trial of the case
                plain[case.case_id] = reference
        pending.append((len(per_row) - 1, reference, legacy_calls(envelope["messages_json"])))
    values = ragas_tool_call_f1_many([(reference, observed) for _, reference, observed in pending])
    for (index, _, _), value in zip(pending, values):
        per_row[index].value = value
    scored = [row.value for row in per_row if row.value is not None]
    return LegacyResult(
        value=sum(scored) / len(scored) if scored else None,
        rows=len(per_row),
        ragas_version=ragas_version(),
        scorer_version=scorer_version,
        computed_at=datetime.now(timezone.utc),
        per_row=per_row,
    )


def merge_legacy(results: list[LegacyResult], *, keep_rows: bool = True) -> LegacyResult:
    """One legacy result from per-file (per-shard) results: rows add up, the value is the mean over every scored
    row (``math.fsum``), versions and times come from the first result.

    Args:
        results: At least one result.
        keep_rows: Keep the per-row values (``False`` drops them: the scalar alone).

    Raises:
        ValueError: ``results`` is empty.
    """
    import math

    if not results:
        raise ValueError("no legacy results to merge")
    scored = [r.value for result in results for r in result.per_row if r.value is not None]
    first = results[0]
    return LegacyResult(
        value=math.fsum(scored) / len(scored) if scored else None,
        rows=sum(result.rows for result in results),
        ragas_version=first.ragas_version,
        scorer_version=first.scorer_version,
        computed_at=first.computed_at,
        per_row=[r for result in results for r in result.per_row] if keep_rows else [],
        elapsed_s=sum(result.elapsed_s for result in results),
    )


class LegacyTally:
    """The legacy scalar of a run from per-shard (per-file) results added one at a time: their scored values go into a
    compact array (8 bytes each) and their per-row objects are dropped, so a run's legacy pass never holds a
    :class:`LegacyRow` per row (a million of them would not fit a worker's memory). :meth:`result` equals
    :func:`merge_legacy` with ``keep_rows=False`` over the same results."""

    def __init__(self) -> None:
        from array import array

        self.values = array("d")
        self.rows = 0
        self.elapsed_s = 0.0
        self.first: LegacyResult | None = None

    def add(self, result: LegacyResult) -> None:
        self.values.extend(r.value for r in result.per_row if r.value is not None)
        self.rows += result.rows
        self.elapsed_s += result.elapsed_s
        self.first = self.first or result.model_copy(update={"per_row": []})

    def result(self, ragas_version: str, scorer_version: str) -> LegacyResult:
        """The merged result (versions and time from the first result added; these when none was)."""
        import math

        first = self.first
        return LegacyResult(
            value=math.fsum(self.values) / len(self.values) if self.values else None,
            rows=self.rows,
            ragas_version=first.ragas_version if first else ragas_version,
            scorer_version=first.scorer_version if first else scorer_version,
            computed_at=first.computed_at if first else datetime.now(timezone.utc),
            per_row=[],
            elapsed_s=self.elapsed_s,
        )


def legacy_record(
    result: LegacyResult, revision: str, run_id: str, published_at: datetime | None = None
) -> dict[str, Any]:
    """The published scalar: ``scalar.json`` content and the one row of ``scalar.parquet``
    (revision, run id, metric, value, rows, ragas version, scorer version, computed at).

    ``computed_at`` is when *this run* published the scalar (``published_at``, default now), not when the value
    was first computed: a run over unchanged inputs takes the value from the cache, and the old dashboards order
    their series by ``computed_at``.
    """
    return {
        "dataset_revision": revision,
        "run_id": run_id,
        "metric": result.metric,
        "value": result.value,
        "rows": result.rows,
        "ragas_version": result.ragas_version,
        "scorer_version": result.scorer_version,
        "computed_at": published_at or datetime.now(timezone.utc),
    }


def stage_legacy(
    publication: Any, result: LegacyResult, revision: str, run_id: str, published_at: datetime | None = None
) -> None:
    """Stage ``legacy/dataset_revision=<rev>/run_id=<run>/{scalar.parquet, scalar.json}`` in a publication
    (:class:`tooleval.storage.Publication`); the partition is replaced as a whole on commit."""
    import pyarrow as pa

    from tooleval.storage import LEGACY_SCHEMA

    record = legacy_record(result, revision, run_id, published_at)
    table = pa.Table.from_pylist([record], schema=LEGACY_SCHEMA)
    publication.add_table("legacy", revision, run_id, table, filename="scalar.parquet")
    publication.add_partition_json(
        "legacy", revision, run_id, "scalar.json", dict(record, computed_at=record["computed_at"].isoformat())
    )
