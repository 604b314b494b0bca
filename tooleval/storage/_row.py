"""The row: one (case, trial) under ``rows/``, defined once.

:class:`Row` is the only definition of a row's columns. Its fields carry their Arrow type and meaning, and
:data:`ROW_SCHEMA` (what the scoring stage writes and every reader conforms to) is derived from them in field
order, so a column cannot be added, renamed or retyped in one place and forgotten in another. A test holds the
derived schema to a fingerprint recorded per :data:`ROW_SCHEMA_VERSION`: changing a column without bumping the
version fails it.

A row's error is two columns, ``error_kind`` (a closed vocabulary, :data:`ERROR_KINDS`) and ``error_message``;
rows written before version 4 kept one ``"<kind>: <message>"`` text in ``error``, which readers split with
:func:`split_error` (the kind is the text before the first colon, the message what follows ``": "``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

import pyarrow as pa

from tooleval.storage._types import (CALL_TYPE, COERCION_TYPE, SCHEMA_FINDING_TYPE, VIOLATION_TYPE,
                                     WRONG_ARGS_TYPE)

__all__ = ["Row", "ROW_SCHEMA", "ROW_SCHEMA_VERSION", "ROW_COLUMNS", "ERROR_KINDS", "ErrorKind", "GATE_VERDICTS",
           "GATE_PASSES", "split_error", "join_error"]

ROW_SCHEMA_VERSION = 7
"""Version of :data:`ROW_SCHEMA`; bump on any change of a column's meaning or type (added columns too).

History: 1 — the foundation columns; 2 — provenance (``provenance_status``, ``provenance_detail``,
``first_divergent_boundary``, ``failure_owner``, ``tool_schema_version``) and policy columns; 3 — tool schema
checks (``schema_findings``, the mismatch category ``schema`` and the violation rule ``tool_schema``); 4 — the
row's error as ``error_kind`` (closed vocabulary) and ``error_message`` instead of one ``error`` text; 5 — trajectory
match modes: ``match_mode`` (the case's mode) and ``calls_match`` (the calls match under it); 6 — ``name_only``
(some observed call's arguments were not captured: matched by name only, never an ``exact_match``) and the
advisory violation rule ``args_not_captured``; 7 — the release gate's own verdict of the row, ``gate_verdict``
(:data:`GATE_VERDICTS`) and ``gate_rules``, set when the run is published (the scoring stage leaves them null). Readers refuse a newer version and read older ones through
:mod:`tooleval.storage._versions`."""

ErrorKind = Literal["bad_trace", "generation_error", "scoring_error", "unknown_case", "missing_trace", "other",
                    "unreadable_trace", "duplicate_key"]
"""Why a row has no scores, or why a trace line made no row (the kinds of ``errors.json`` are the same set):

* ``bad_trace``: the recorded trace could be read as JSON but not as a trace. A row carries it when the line holds
  a value no row can keep (nesting too deep, a non-finite number, a lone surrogate) or a field of the wrong type or
  range (``"messages": 5``, a text ``metadata.reward``), the field, file and line named in its message;
  ``errors.json`` alone lists it, with the file and line, when the line's ``case_id`` or ``trial`` cannot be read
  (a trial outside ``0..2**31 - 1``, ``true``), or for a second line of the same (case, trial).
* ``generation_error``: the agent gave no usable response.
* ``scoring_error``: scoring raised on this row (e.g. the envelope's stored calls are not its messages' calls).
* ``unknown_case`` / ``missing_trace``: a trace whose case is not in the dataset, a case with no trace
  (``errors.json`` only; no row is written for them).
* ``other``: an error text of an older row whose kind is none of these.
* ``unreadable_trace``: a traces-file line that is not a JSON object (not UTF-8, not JSON, truncated, or an array,
  a string, a number, ``null``): ``errors.json`` only, with the file and line; the run goes on.
* ``duplicate_key``: a trace object repeats a key (readers differ on which value counts). A row carries it, the
  key named in the message; ``errors.json`` alone lists it when the repeated key is ``case_id`` or ``trial``.

The set only grows: a kind, once written, keeps its meaning, so readers of older rows and documents still read
them (:func:`split_error` reads a kind it does not know as ``other``)."""

ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)
"""The closed set of ``error_kind`` values, in the order :data:`ErrorKind` lists them."""

GateVerdictValue = Literal["pass", "fail", "waived", "quarantined"]
"""The release gate's verdict of one row (column ``gate_verdict``), under the run's gate.toml as of the day the run
was published (waivers are checked against that day):

* ``pass``: no blocking rule fires (under ``row_outcome = "match"`` the calls also match the reference).
* ``fail``: a blocking rule that no active waiver covers fires: a recorded violation with the gate's severity
  (``[severity]``, ``[tool_schema] blocking_tools``, ``accept_name_only``), ``reference_mismatch`` under the row
  outcome ``match``, or ``row_error`` for a row that could not be scored. The row is one of the gate's
  ``blocking_rows``.
* ``waived``: blocking rules fire, and active waivers cover every one of them: the gate passes the row.
* ``quarantined``: the case is quarantined: the row is out of the gate's totals and of every pass rate, whatever
  its rules.

Not the row column ``blocking``, which says only that the scorer recorded a violation of severity ``blocking``
(before gate.toml's ``[severity]``, waivers, quarantine and ``reference_mismatch``)."""

GATE_VERDICTS: tuple[str, ...] = get_args(GateVerdictValue)
"""The closed set of ``gate_verdict`` values."""

GATE_PASSES: tuple[str, ...] = ("pass", "waived")
"""The ``gate_verdict`` values of a row the gate lets pass (pass rates count these as passes; ``quarantined``
rows count in no pass rate)."""


def split_error(text: str | None) -> tuple[str | None, str | None]:
    """``(error_kind, error_message)`` of an error text ``"<kind>: <message>"`` (rows before version 4, envelope and
    generation records).

    Args:
        text: The error text, or ``None``.

    Returns:
        ``(None, None)`` for ``None``; otherwise the text before the first ``:`` as the kind (``other`` when that is
        not one of :data:`ERROR_KINDS`, the message then being the whole text) and what follows ``": "`` (or ``":"``)
        as the message. :func:`join_error` of the result gives ``text`` back for every text whose kind is known.
    """
    if text is None:
        return None, None
    kind, colon, rest = text.partition(":")
    if not colon or kind not in ERROR_KINDS or kind == "other":
        return "other", text
    return kind, rest[1:] if rest.startswith(" ") else rest


def join_error(kind: str | None, message: str | None) -> str | None:
    """The one-line text of a row's error, ``"<kind>: <message>"`` (``None`` when the row has none); the inverse of
    :func:`split_error` (an ``other`` error is its message alone)."""
    if kind is None:
        return None
    if kind == "other":
        return message or ""
    return f"{kind}: {message or ''}"


def _column(type_: pa.DataType, doc: str) -> Any:
    """A :class:`Row` field: null by default, with its Arrow type and meaning as metadata."""
    return field(default=None, metadata={"arrow": type_, "doc": doc})


_CALLS = pa.list_(CALL_TYPE)


@dataclass(slots=True)
class Row:
    """One row per (case, trial) (docs/design.md "Row columns"); every field is a column of :data:`ROW_SCHEMA`, null
    unless set. Ratios are unrounded, in [0, 1]; call lists hold ``CALL_TYPE`` dicts with canonical argument text."""

    dataset_revision: str | None = _column(pa.string(), "partition: stamped by the publication")
    run_id: str | None = _column(pa.string(), "partition: stamped by the publication")
    case_id: str | None = _column(pa.string(), "the case, any string")
    trial: int | None = _column(pa.int32(), "trial index, 0..2**31 - 1 (tooleval.models.TRIAL_MAX)")
    slice: str | None = _column(pa.string(), "the case's slice")
    row_schema_version: int | None = _column(pa.int32(), "ROW_SCHEMA_VERSION at writing")
    scorer_version: str | None = _column(pa.string(), "digest of the scoring package's sources")
    ragas_version: str | None = _column(pa.string(), "installed ragas version")
    agent_name: str | None = _column(pa.string(), "the agent's name")
    agent_version: str | None = _column(pa.string(), "the agent's version")
    expected_calls: list | None = _column(_CALLS, "the case's reference calls (redacted like the trace)")
    observed_calls: list | None = _column(_CALLS, "the calls the model made; null when nothing could be read")
    missing_calls: list | None = _column(_CALLS, "expected calls no observed call matched")
    extra_calls: list | None = _column(_CALLS, "observed calls that matched no expected call")
    wrong_args: list | None = _column(pa.list_(WRONG_ARGS_TYPE), "same-tool pairs with differing argument paths")
    duplicate_calls: int | None = _column(pa.int32(), "sum over keys of max(0, observed - max(expected, 1))")
    malformed_calls: int | None = _column(pa.int32(), "observed calls whose argument text is not a JSON object")
    tp: int | None = _column(pa.int32(), "multiset intersection of expected and observed keys")
    fp: int | None = _column(pa.int32(), "observed - tp")
    fn: int | None = _column(pa.int32(), "expected - tp")
    precision: float | None = _column(pa.float64(), "tp / observed; null when nothing was observed")
    recall: float | None = _column(pa.float64(), "tp / expected; null when nothing was expected")
    f1: float | None = _column(pa.float64(), "2tp / (2tp + fp + fn); 1.0 when both lists are empty")
    ragas_tool_call_f1: float | None = _column(pa.float64(), "ragas ToolCallF1 of the row (set F1, 4 decimals)")
    exact_match: bool | None = _column(pa.bool_(), "fp = 0 and fn = 0, every argument compared (false when "
                                       "name_only)")
    mismatch_categories: list | None = _column(pa.list_(pa.string()),
                                               "missing | extra | wrong_args | duplicate | malformed | schema")
    recorded_reward: float | None = _column(pa.float64(), "the trace's metadata.reward, when recorded")
    request_id: str | None = _column(pa.string(), "the generation request's id")
    response_id: str | None = _column(pa.string(), "the model response's id")
    trace_digest: str | None = _column(pa.string(), "sha256 of the envelope's canonical content")
    error_kind: str | None = _column(pa.string(), "null when the row scored cleanly, else one of ERROR_KINDS")
    error_message: str | None = _column(pa.string(), "what went wrong, when error_kind is set")
    provenance_status: str | None = _column(pa.string(), "ok | missing | mismatch")
    provenance_detail: str | None = _column(pa.string(), "why the join check did not pass")
    first_divergent_boundary: str | None = _column(pa.string(), "null | adapter | executor")
    failure_owner: str | None = _column(pa.string(), "null | agent | adapter | executor | evaluation_platform")
    tool_schema_version: str | None = _column(pa.string(), "version of the tool schemas the trace was made with")
    violations: list | None = _column(pa.list_(VIOLATION_TYPE), "policy rules the row broke")
    blocking: bool | None = _column(pa.bool_(), "some recorded violation has the scorer's severity blocking "
                                    "(before gate.toml's [severity], waivers, quarantine and reference_mismatch): "
                                    "not the gate's verdict, which is gate_verdict")
    coercions: list | None = _column(pa.list_(COERCION_TYPE), "argument coercions that declared rules applied")
    chosen_plan: int | None = _column(pa.int32(), "0: expected_calls; i > 0: accepted plan i - 1")
    reference_calls: list | None = _column(_CALLS, "the chosen plan's calls")
    tool_families: list | None = _column(pa.list_(pa.string()), "sorted families of the tools involved")
    schema_findings: list | None = _column(pa.list_(SCHEMA_FINDING_TYPE),
                                           "[] when checked and clean, null when not checked")
    match_mode: str | None = _column(pa.string(), "unordered | strict | subset | superset | subset_ordered | "
                                     "superset_ordered: the case's match mode")
    calls_match: bool | None = _column(pa.bool_(), "the calls match the reference under match_mode (any "
                                       "accepted plan); null when the row could not be scored")
    name_only: bool | None = _column(pa.bool_(), "some observed call's arguments were not captured (content "
                                     "capture off): matched by name only, so tp/fp/fn/f1 are name-level for it "
                                     "and exact_match is false; null when the row could not be scored")
    gate_verdict: str | None = _column(pa.string(), "pass | fail | waived | quarantined: the release gate's verdict "
                                       "of the row (GATE_VERDICTS), set when the run is published; null in the "
                                       "scoring stage's rows and in rows published before row schema 7")
    gate_rules: list | None = _column(pa.list_(pa.string()), "the blocking rules behind gate_verdict, sorted: for "
                                      "fail those no waiver covers, for waived the waived ones, for quarantined "
                                      "those it would fail; [] for pass; null where gate_verdict is null")

    def record(self) -> dict[str, Any]:
        """The row as a dict keyed by column name, in schema order (what ``pa.Table.from_pylist`` takes)."""
        return {name: getattr(self, name) for name in ROW_COLUMNS}

    @property
    def error(self) -> str | None:
        """The row's error as one line, ``"<kind>: <message>"`` (:func:`join_error`); ``None`` when it has none."""
        return join_error(self.error_kind, self.error_message)

    def set_error(self, text: str | None) -> None:
        """Set ``error_kind`` and ``error_message`` from an error text ``"<kind>: <message>"`` (:func:`split_error`)."""
        self.error_kind, self.error_message = split_error(text)


ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row))
"""The row's column names, in schema order."""

ROW_SCHEMA = pa.schema([(f.name, f.metadata["arrow"]) for f in fields(Row)])
"""One row per (case, trial) under ``rows/``, derived from :class:`Row` (docs/design.md "Row columns")."""
