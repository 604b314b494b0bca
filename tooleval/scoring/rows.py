"""Scoring: one row per (case, trial) from a trace envelope and its case (docs/design.md "Stages").

:func:`score_envelopes` is the whole stage as a plain function: the Prefect task in ``tasks/scoring.py`` only
reads the envelopes, calls it and writes the rows. The ragas column comes from tooleval's own
implementation of ragas 0.4.3's set-F1 (:mod:`tooleval.scoring.ragas_f1`, proven equal to ragas by tests and
re-proven per row on every run by the legacy path and the drift check). Each row also carries its provenance (join
check, first divergent boundary, failure owner: :mod:`tooleval.capture.provenance`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tooleval.canonical import loads_text
from tooleval.capture.envelope import boundary_calls, digest_ok, envelope_calls
from tooleval.models import ArgumentRule, Call, Case, ToolSpec, with_rules
from tooleval.capture.provenance import failure_owner, first_divergent_boundary, input_key, join_check
from tooleval.scoring.ragas_f1 import ragas_call_set, ragas_set_f1_of_sets
from tooleval.scoring.ragas_metric import ragas_args, ragas_version
from tooleval.capture.redaction import MARKER_KEY, Redactor
from tooleval.rules import MatchMode, PolicyConfig, evaluate_row
from tooleval.rules import KeywordConfirmation
from tooleval.rules import case_rules
from tooleval.rules import ANY_ITEM, ANY_KEY, parse_pattern
from tooleval.storage import ROW_SCHEMA_VERSION, Row
from tooleval.versions import scorer_version

__all__ = ["score_envelopes", "score_rows", "ShardMemo", "row_skeleton", "reference_calls", "case_inputs", "redacted_case",
           "redacted_rules", "trace_reference_secrets"]


def _metadata(envelope: dict[str, Any]) -> Any:
    """The envelope's decoded ``metadata_json`` (``{}`` when it has none)."""
    return loads_text(envelope.get("metadata_json") or "{}")


def _recorded_reward(metadata: Any) -> float | None:
    reward = metadata.get("reward") if isinstance(metadata, dict) else None
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return None
    return float(reward)


def reference_calls(calls: list[Call], redactor: Redactor | None, extra: dict[str, str] | None = None) -> list[Call]:
    """Reference calls (a case's ``expected_calls`` or an accepted plan), redacted as the traces were when
    redaction is on (``extra``: the trace's own secrets in the references, :func:`trace_reference_secrets`)."""
    if redactor is None:
        return list(calls)
    # a reference call's own argument rules stay with it: they are how it is compared
    return [with_rules(Call.from_raw(c.name, redactor.redact_args(c.args or {}, extra)),
                       redacted_rules(c.argument_rules, redactor, extra))
            for c in calls]


def redacted_rules(rules: Mapping[str, ArgumentRule] | None, redactor: Redactor,
                   extra: dict[str, str] | None = None) -> Mapping[str, ArgumentRule] | None:
    """Argument rules (``{path: rule}``) whose acceptable values (``one_of``) are redacted as a value at the
    rule's path is in the arguments (under a redacted field name: its token), so that a listed value still
    equals the redacted observed value it equalled raw; the same rules when none lists values."""
    if not rules or not any(rule.one_of for rule in rules.values()):
        return rules
    return {path: rule.model_copy(update={"one_of": [_redacted_at(parse_pattern(path), value, redactor, extra)
                                                      for value in rule.one_of]}) if rule.one_of else rule
            for path, rule in rules.items()}


def _redacted_at(segments: tuple, value: Any, redactor: Redactor, extra: dict[str, str] | None) -> Any:
    """``value`` redacted as it would be at the argument path ``segments`` (keys, list items, wildcards): it is
    placed there in an otherwise empty argument object, redacted, and read back. When a key above it is
    redacted, the whole object there is one token and no rule compares inside it: the value stays as it is."""
    wrapped = value
    for segment in reversed(segments):
        is_key = isinstance(segment, str) and segment != ANY_ITEM
        wrapped = {("" if segment == ANY_KEY else segment): wrapped} if is_key else [wrapped]
    redacted = redactor.redact_reference(wrapped, extra)
    for segment in segments:
        if isinstance(redacted, dict):
            redacted = redacted[next(iter(redacted))]
        elif isinstance(redacted, list):
            redacted = redacted[0]
        else:
            return value
    return redacted


def trace_reference_secrets(redactor: Redactor | None, case: Case, envelope: dict[str, Any],
                            metadata: Any = None) -> dict[str, str]:
    """The trace's own secrets that occur in ``case``'s references (from the markers its redaction left in
    ``metadata_json``; :meth:`tooleval.capture.redaction.Redactor.reference_secrets`). ``metadata``: the
    envelope's ``metadata_json`` already decoded, when the caller has it."""
    if redactor is None or not envelope.get("metadata_json"):
        return {}
    if metadata is None:
        metadata = loads_text(envelope["metadata_json"])
    marker = metadata.get(MARKER_KEY) if isinstance(metadata, dict) else None
    return redactor.reference_secrets(case, marker.get("reference_secrets") if isinstance(marker, dict) else None)


def redacted_case(case: Case, redactor: Redactor | None, extra: dict[str, str] | None = None) -> Case:
    """``case`` with its references (expected calls, accepted plans, expected outputs, input) redacted as its
    trace was, so that every rule compares like with like and no detail quotes a raw secret."""
    if redactor is None:
        return case
    plans = [reference_calls(plan, redactor, extra) for plan in case.plans]
    return case.model_copy(update={
        "expected_calls": plans[0],
        "argument_rules": None if case.argument_rules is None else
        {tool: redacted_rules(rules, redactor, extra) for tool, rules in case.argument_rules.items()},
        "accepted_plans": plans[1:] if case.accepted_plans is not None else None,
        "expected_outputs": None if case.expected_outputs is None else
        [redactor.redact_reference(text, extra) for text in case.expected_outputs],
        "input": redactor.redact_messages(case.input, extra),
    })


def case_inputs(cases: dict[str, Case], redactor: Redactor | None) -> dict[str, list[str]]:
    """:func:`tooleval.capture.provenance.input_key` of every case input (redacted like requests) -> case ids."""
    inputs: dict[str, list[str]] = defaultdict(list)
    for case_id, case in cases.items():
        value = case.input if redactor is None else redactor.redact_messages(case.input)
        inputs[input_key(value) or ""].append(case_id)
    return dict(inputs)


def row_skeleton(case: Case, envelope: dict[str, Any], expected: list[Call] | None = None,
                 metadata: Any = None, expected_records: list[dict] | None = None) -> Row:
    """The identifying and descriptive columns of a row (the envelope's error, if any, split into kind and
    message); the metric columns stay null. ``metadata``: the envelope's decoded ``metadata_json``, when the
    caller has it; ``expected_records``: ``expected``'s records (:meth:`Call.to_record`), when the caller keeps
    them across the rows of a case."""
    expected = case.expected_calls if expected is None else expected
    row = Row(
        dataset_revision=envelope["dataset_revision"],
        case_id=case.case_id,
        trial=envelope["trial"],
        slice=case.slice,
        row_schema_version=ROW_SCHEMA_VERSION,
        scorer_version=scorer_version(),
        ragas_version=ragas_version(),
        agent_name=envelope.get("agent_name"),
        agent_version=envelope.get("agent_version"),
        expected_calls=[call.to_record() for call in expected] if expected_records is None else expected_records,
        observed_calls=envelope.get("model_calls") or None,  # what could be read; null when nothing
        recorded_reward=_recorded_reward(_metadata(envelope) if metadata is None else metadata),
        request_id=envelope.get("request_id"),
        response_id=envelope.get("response_id"),
        trace_digest=envelope.get("trace_digest"),
        tool_schema_version=envelope.get("tool_schema_version"),
        match_mode=MatchMode.of_case(case).label,  # known even when the row cannot be scored
    )
    row.set_error(envelope.get("error"))
    return row


class _Owners:
    """The case-input map :func:`tooleval.capture.provenance.join_check` reads for one row, without the whole
    dataset's map on the common path: a request whose :func:`input_key` is the row's own case input's is owned
    by the row's case, which is all the check asks then; any other key is looked up in the whole map (``full``,
    built on first need). Equal to the whole map for the check, since the row's case is among the owners of its
    own input's key and the check only asks whether it is."""

    __slots__ = ("key", "case_id", "full")

    def __init__(self, key: str, case_id: str, full: Callable[[], Mapping[str, list[str]]]) -> None:
        self.key, self.case_id, self.full = key, case_id, full

    def get(self, key: str, default: Any = None) -> Any:
        if key == self.key:
            return [self.case_id]
        return self.full().get(key, default)


@dataclass
class _CaseEntry:
    """What scoring derives from one case alone (its references redacted with the base secrets only), kept for
    the case's other rows."""

    case: Case
    rules: Any
    expected_records: list[dict]
    ragas_reference: frozenset
    input_key: str


class ShardMemo:
    """What :func:`score_rows` derives from a case alone (its redacted references, resolved argument rules,
    reference records and ragas set, its input's key), kept across the batches of one shard: a shard is scored a
    batch at a time, and the trials of a case fall in different batches. Valid for one (cases, redactor, tools, policy)
    only: make one per shard (or per :func:`score_rows` call)."""

    def __init__(self) -> None:
        self.confirmation: KeywordConfirmation | None = None
        """The policy's confirmation detector (it caches its verdict per reply text), made by the first batch."""
        self.cases: dict[str, _CaseEntry] = {}
        self.calls: dict[tuple[str, str], Call] = {}
        """Observed well-formed calls by (name, canonical argument text): the trials of a case, and the cases of a
        tool, repeat their calls (tau: each call eleven times in a shard), and a call (frozen) is read once."""

    def observed_calls(self, envelope: dict[str, Any], verified: bool) -> list[Call]:
        """:func:`tooleval.capture.envelope.envelope_calls` of ``envelope`` (``written_here=verified``), each
        well-formed call of a verified envelope read once per shard (:attr:`calls`)."""
        if not verified:
            return envelope_calls(envelope)
        calls = []
        for record in envelope.get("model_calls") or []:
            text = record.get("args_json")
            if record.get("parse_error") is not None or text is None:
                calls.append(Call.from_record(record))
                continue
            key = (record["name"], text)
            call = self.calls.get(key)
            if call is None:
                call = self.calls[key] = Call.from_canonical(*key)
            calls.append(call)
        return calls


def _case_entry(case: Case, redactor: Redactor | None, tools: Mapping[str, ToolSpec],
                extra: dict[str, str] | None = None) -> _CaseEntry:
    case = redacted_case(case, redactor, extra)
    expected = case.plans[0]
    return _CaseEntry(case, case_rules(case, tools) if not extra else None,
                      [call.to_record() for call in expected],
                      ragas_call_set([{"name": c.name, "args": ragas_args(c)} for c in expected]),
                      input_key(case.input) or "")


def _provenance(row: Row, envelope: dict, inputs: Mapping[str, list[str]], observed: list[Call],
                verified: bool = False) -> None:
    request = envelope.get("request_messages_json")
    status, detail = join_check(
        row.case_id,
        None if request is None else loads_text(request),
        envelope.get("request_id"),
        envelope.get("response_id"),
        envelope.get("trace_digest") is not None if verified else digest_ok(envelope),
        inputs,
    )
    adapter, executor = boundary_calls(envelope)
    boundary = first_divergent_boundary(observed, adapter, executor)
    row.provenance_status = status
    row.provenance_detail = detail
    row.first_divergent_boundary = boundary
    # a name-only row is never an exact match, yet calls matched by name are no failure of the agent's
    matched = row.exact_match if not row.name_only else (row.fp == 0 and row.fn == 0)
    row.failure_owner = failure_owner(status, boundary, matched)


def score_envelopes(cases: dict[str, Case], envelopes: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
    """:func:`score_rows` as record dicts keyed by column name (:meth:`tooleval.storage.Row.record`), in input
    order; ``options`` are :func:`score_rows`' keyword arguments."""
    return [row.record() for row in score_rows(cases, envelopes, **options)]


def score_rows(
    cases: dict[str, Case],
    envelopes: list[dict[str, Any]],
    *,
    redactor: Redactor | None = None,
    inputs: Mapping[str, list[str]] | Callable[[], Mapping[str, list[str]]] | None = None,
    tools: dict[str, ToolSpec] | None = None,
    policy: PolicyConfig | None = None,
    digests_verified: bool = False,
    memo: ShardMemo | None = None,
) -> list[Row]:
    """Score a shard of envelopes.

    Args:
        cases: The dataset's cases by ``case_id``; every envelope's case must be present (the flow routes
            traces of unknown cases to ``errors.json`` before scoring).
        envelopes: Envelope records (see :mod:`tooleval.capture.envelope`).
        redactor: When the traces were redacted, the same redactor: reference calls and case inputs are
            redacted alike so that matching and the join check see comparable values.
        inputs: Precomputed :func:`case_inputs`, or a function returning them (called only for a row whose
            recorded request is not its own case's input: most shards never need the whole dataset's map);
            ``None``: computed here when needed.
        tools: The dataset's tool specs by name (side effects, confirmation, argument rules, families).
        policy: The dataset's ``[policy]`` from its gate.toml (:func:`tooleval.rules.load_policy`).
        digests_verified: The envelopes are exactly what :func:`tooleval.capture.envelope.build_envelope` wrote
            (their capture stage file's sha256 was checked against its ref), so each stored ``trace_digest`` is the
            digest of its content and is not recomputed (hashing every message again would cost as much as
            capture did). ``False``: every digest is recomputed for the join check.
        memo: A :class:`ShardMemo` kept across the calls that score one shard's batches (same ``cases``,
            ``redactor``, ``tools`` and ``policy``); a fresh one when ``None``.

    Returns:
        One :class:`tooleval.storage.Row` per envelope, in input order, with ``run_id`` ``None``. An envelope
        carrying an ``error`` yields a row with that error (``error_kind``, ``error_message``) and null metrics.
    """
    if inputs is None or callable(inputs):
        lazy = inputs
        whole: list[Mapping[str, list[str]]] = []

        def full() -> Mapping[str, list[str]]:
            if not whole:
                whole.append(case_inputs(cases, redactor) if lazy is None else lazy())
            return whole[0]
    else:
        given = inputs
        full = None  # a given map is read as it is (it may not be the dataset's own)
    rows: list[Row] = []
    tools = tools or {}
    memo = memo or ShardMemo()
    if memo.confirmation is None:  # its verdicts per reply text are kept with the memo, across batches
        memo.confirmation = KeywordConfirmation((policy or PolicyConfig()).confirmation)
    detector = memo.confirmation
    known = memo.cases  # case id -> what its rows share (references redacted with the base secrets)
    for envelope in envelopes:
        metadata = _metadata(envelope)
        case_id = envelope["case_id"]
        extra = trace_reference_secrets(redactor, cases[case_id], envelope, metadata)
        if extra:
            entry = _case_entry(cases[case_id], redactor, tools, extra)
        else:
            entry = known.get(case_id)
            if entry is None:
                entry = known[case_id] = _case_entry(cases[case_id], redactor, tools)
        case = entry.case
        plans = case.plans
        expected = plans[0]
        row = row_skeleton(case, envelope, expected, metadata, entry.expected_records)
        if full is not None:
            row_inputs: Mapping[str, list[str]] = _Owners(entry.input_key, case.case_id, full)
        else:
            row_inputs = given if not extra else {**given, entry.input_key: [case.case_id]}
        rows.append(row)
        if row.error_kind is not None:
            _provenance(row, envelope, row_inputs, [], digests_verified)
            continue
        observed = memo.observed_calls(envelope, digests_verified)
        messages = loads_text(envelope["messages_json"]) if envelope.get("messages_json") else None
        try:
            rules = evaluate_row(case, tools, messages, observed, policy=policy, rules=entry.rules,
                                 confirmation=detector)
        except ValueError as exc:  # the stored calls are not the messages' calls: the envelope is inconsistent
            row.error_kind, row.error_message = "scoring_error", str(exc)
            _provenance(row, envelope, row_inputs, observed, digests_verified)
            continue
        row.observed_calls = [call.to_record() for call in observed]
        rules.apply(row)
        _provenance(row, envelope, row_inputs, observed, digests_verified)
        row.ragas_tool_call_f1 = ragas_set_f1_of_sets(
            entry.ragas_reference,
            ragas_call_set([{"name": c.name, "args": ragas_args(c)} for c in observed]),
        )
    return rows
