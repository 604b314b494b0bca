"""What scoring derives once from a case or a call, kept for a shard's rows: a case's references redacted as its
traces were (expected calls, accepted plans, argument rules' values, expected outputs, the input), the case-input
map the join check reads, each distinct call of the shard with an integer id (:class:`CallRegistry`), and what a
shard's batches share (:class:`ShardMemo`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping

import orjson
import pyarrow as pa

from tooleval.canonical import loads_text
from tooleval.capture.provenance import input_key
from tooleval.capture.redaction import MARKER_KEY, Redactor
from tooleval.models import ArgumentRule, Call, Case, ToolSpec, with_rules
from tooleval.rules import (ANY_ITEM, ANY_KEY, UNORDERED, KeywordConfirmation, MatchMode, case_rules, parse_pattern,
                            trajectory_case)
from tooleval.scoring.ragas_f1 import _hashable
from tooleval.scoring.ragas_metric import ragas_args
from tooleval.storage import CALL_TYPE

__all__ = ["CallRegistry", "ShardMemo", "reference_calls", "case_inputs", "redacted_case", "redacted_rules",
           "trace_reference_secrets"]


class CallRegistry:
    """The distinct calls of a shard, each with an integer id: its :class:`~tooleval.models.Call`, its row record
    and the id of what ragas compares of it (``(name, arguments)`` as ragas hashes them). The trials of a case, and
    the cases of a tool, repeat their calls (a tau shard holds each call about eleven times): each is read, keyed
    and recorded once."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}
        self.calls: list[Call] = []
        self.records: list[dict[str, Any]] = []
        self.ragas: list[int] = []
        self.not_captured: list[bool] = []
        self.malformed: list[bool] = []
        self._ragas_ids: dict[Any, int] = {}
        self._array: pa.StructArray | None = None

    def add(self, call: Call) -> int:
        """The id of ``call`` (by its key: equal keys are the same call for every column a row carries)."""
        key = call.key
        found = self.ids.get(key)
        if found is not None:
            return found
        return self._new(call, key, call.to_record(), not call.args_captured, call.malformed, ragas_args(call))

    def _new(self, call: Call, key: tuple[str, str], record: dict[str, Any], not_captured: bool, malformed: bool,
             ragas: dict[str, Any]) -> int:
        """Register ``call``, not held yet, under ``key`` (its :attr:`~tooleval.models.Call.key`), with its
        record, flags and the argument object ragas is given (:func:`tooleval.scoring.ragas_metric.ragas_args`)."""
        found = self.ids[key] = len(self.calls)
        self.calls.append(call)
        self.records.append(record)
        self.not_captured.append(not_captured)
        self.malformed.append(malformed)
        ragas_key = (call.name, _hashable(ragas))
        self.ragas.append(self._ragas_ids.setdefault(ragas_key, len(self._ragas_ids)))
        return found

    def record_array(self) -> pa.StructArray:
        """:attr:`records` as one Arrow array of :data:`tooleval.storage.CALL_TYPE` (index = call id), extended
        by the calls added since it was last asked for."""
        have = 0 if self._array is None else len(self._array)
        if have < len(self.records):
            added = pa.array(self.records[have:], CALL_TYPE)
            self._array = added if self._array is None else pa.concat_arrays([self._array, added])
        return self._array if self._array is not None else pa.array([], CALL_TYPE)

    @property
    def ragas_keys(self) -> int:
        """How many distinct ragas keys the registry's calls have (their ids are ``0..ragas_keys - 1``)."""
        return len(self._ragas_ids)

    def reference(self, call: Call) -> int:
        """The id of a reference call's key. A reference call may carry its own argument rules, which an observed
        call of the same key must not take over: the registry keeps the call without them."""
        if call.argument_rules is not None and call.key not in self.ids:
            call = call.model_copy(update={"argument_rules": None})
        return self.add(call)

    def canonical(self, name: str, args_json: str) -> int:
        """The id of a well-formed call from canonical argument text this package wrote (a verified envelope's
        ``args_json``): read once per distinct call of the shard."""
        # a well-formed call's key is its name and canonical text: a call the shard already holds (most observed
        # calls are their case's reference calls, registered with the case) is found without reading its text
        key = (name, args_json)
        found = self.ids.get(key)
        if found is None:  # what add() reads of the call, known here: well-formed, its text is its record's
            call = Call.from_canonical(name, args_json)
            found = self._new(call, key, {"name": name, "args_json": args_json, "args_raw": None, "parse_error": None},
                              False, False, call.args)
        return found


def reference_calls(calls: list[Call], redactor: Redactor | None, extra: dict[str, str] | None = None) -> list[Call]:
    """Reference calls (a case's ``expected_calls`` or an accepted plan), redacted as the traces were when
    redaction is on (``extra``: the trace's own secrets in the references, :func:`trace_reference_secrets`)."""
    if redactor is None:
        return list(calls)
    # a reference call's own argument rules stay with it: they are how it is compared. Its arguments were read
    # and checked with its case (no non-finite number, lone surrogate or excess nesting), and redaction only puts
    # tokens in place of values: they are made canonical without that walk again
    return [with_rules(Call.from_plain_args(c.name, redactor.redact_args(c.args or {}, extra)),
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


def redacted_case(case: Case, redactor: Redactor | None, extra: dict[str, str] | None = None,
                  parts: dict[bytes, Any] | None = None) -> Case:
    """``case`` with its references (expected calls, accepted plans, expected outputs, input) redacted as its
    trace was, so that every rule compares like with like and no detail quotes a raw secret (``case`` itself when
    redaction provably changes none of them). ``parts``: input messages redacted before, by orjson's writing of
    them (a shard's cases repeat their system prompt), added to here; used without ``extra`` only."""
    if redactor is None:
        return case
    if not extra:
        return _redacted_base(case, redactor, {} if parts is None else parts)
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


def _redacted_base(case: Case, redactor: Redactor, parts: dict[bytes, Any]) -> Case:
    """:func:`redacted_case` with the base secrets only: each part (the calls' arguments, the outputs, the input,
    else each input message) whose writing shows that redaction leaves it as it is
    (:meth:`~tooleval.capture.redaction.Redactor.untouched_text`, the test capture applies to a trace's parts)
    is kept as it is, without the walk and without building its calls again; the others are redacted as
    :func:`redacted_case` redacts them. Most cases hold no secret: their references are the case's own, and so
    is the case."""
    update: dict[str, Any] = {}
    if _lists_values(case.argument_rules) or \
            any(_lists_values(call.argument_rules) for plan in case.plans for call in plan) or \
            not _untouched(redactor, _written([[call.args for call in plan] for plan in case.plans])):
        plans = [reference_calls(plan, redactor) for plan in case.plans]
        update["expected_calls"] = plans[0]
        update["accepted_plans"] = plans[1:] if case.accepted_plans is not None else None
        if case.argument_rules is not None:
            update["argument_rules"] = {tool: redacted_rules(rules, redactor)
                                        for tool, rules in case.argument_rules.items()}
    if case.expected_outputs is not None and not _untouched(redactor, _written(case.expected_outputs)):
        update["expected_outputs"] = [redactor.redact_reference(text) for text in case.expected_outputs]
    if type(case.input) is list:
        # a list is redacted item by item, each from the same place (the top): the untouched messages (the user's
        # turns) are kept, and a message redacted before (a system prompt that names a field) is looked up
        messages = [_redacted_message(message, redactor, parts) for message in case.input]
        if any(new is not old for new, old in zip(messages, case.input)):
            update["input"] = messages
    elif not _untouched(redactor, _written(case.input)):
        update["input"] = redactor.redact_messages(case.input)
    return case.model_copy(update=update) if update else case


def _redacted_message(message: Any, redactor: Redactor, parts: dict[bytes, Any]) -> Any:
    """One input message redacted with the base secrets: itself when untouched, else the one redacted before from
    the same writing (kept in ``parts``), else walked."""
    written = _written(message)
    if written is None:
        return redactor.redact_messages(message)
    found = parts.get(written)
    if found is None:
        found = message if _untouched(redactor, written) else redactor.redact_messages(message)
        if found is not message:
            parts[written] = found
    return found


def _lists_values(rules: Mapping[str, Any] | None) -> bool:
    """Whether some argument rule of ``rules`` (``{path: rule}``, or ``{tool: {path: rule}}``) lists acceptable
    values (``one_of``), which redaction reads at the rule's path (:func:`redacted_rules`)."""
    return bool(rules) and any(_lists_values(rule) if isinstance(rule, dict) else bool(rule.one_of)
                               for rule in rules.values())


def _written(value: Any) -> bytes | None:
    """orjson's writing of a JSON value; ``None`` for a value it cannot write (a lone surrogate, an integer
    beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return None


def _untouched(redactor: Redactor, written: bytes | None) -> bool:
    """Whether redaction with the base secrets provably leaves the value whose writing is ``written``
    (:func:`_written`) as it is (not proven without a writing)."""
    return written is not None and redactor.untouched_text(written)


def case_inputs(cases: dict[str, Case], redactor: Redactor | None) -> dict[str, list[str]]:
    """:func:`tooleval.capture.provenance.input_key` of every case input (redacted like requests) -> case ids."""
    inputs: dict[str, list[str]] = defaultdict(list)
    for case_id, case in cases.items():
        value = case.input if redactor is None else redactor.redact_messages(case.input)
        inputs[input_key(value) or ""].append(case_id)
    return dict(inputs)


@dataclass
class _CaseEntry:
    """What scoring derives from one case alone (its references redacted with the base secrets only, or with a
    trace's own secrets too: ``extra``), kept for the case's other rows."""

    case: Case
    rules: Any
    expected: list[Call]
    expected_ids: tuple[int, ...]
    """The expected calls' ids in the shard's :class:`CallRegistry`."""
    ragas_ids: frozenset
    """The ragas keys of the expected calls, as the registry numbers them (ragas compares sets)."""
    input_key: str
    mode: MatchMode
    plain: bool
    """One plan, no argument rules, the plain unordered mode, references redacted with the base secrets: the
    row's counts are the batch's multiset counts, and no rule-aware matching is needed."""
    extra: bool
    quiet: bool = False
    """Plain, and no tool specs of its own: a row of it is matched from the batch's counts and checked against the
    dataset's tools, with what the rules find of each call alone kept per distinct call."""
    ruled: bool = False
    """The case sets a rule key a policy rule reads the trajectory or the counts for
    (:func:`tooleval.rules.trajectory_case`)."""
    families: frozenset = frozenset()
    """The tool families of the expected calls."""


class ShardMemo:
    """What :func:`score_rows` derives from a case alone (its redacted references, resolved argument rules,
    reference records and ragas set, its input's key) and every distinct call (:attr:`registry`), kept across the
    batches of one shard: a shard is scored a batch at a time, and the trials of a case fall in different batches.
    Valid for one (cases, redactor, tools, policy) only: make one per shard (or per :func:`score_rows` call). It
    grows with the shard's distinct cases and calls; the scoring stage replaces it by :meth:`fresh` between two
    batches once it holds too many (``tasks.scoring.MEMO_ENTRIES``)."""

    def __init__(self) -> None:
        self.confirmation: KeywordConfirmation | None = None
        """The policy's confirmation detector (it caches its verdict per reply text), made by the first batch."""
        self.cases: dict[str, _CaseEntry] = {}
        self.registry = CallRegistry()
        """The shard's distinct calls (observed and referenced), each read and keyed once."""
        self.pairs: dict[tuple, Any] = {}
        """The wrong-argument pairing and write violations of a row's leftover calls, by their ids
        ``(missing, extra)``: the scorer's, filled on first need."""
        self.facts: dict[int, Any] = {}
        """What the rules find of one call alone (its schema findings, its tool's family, whether a policy rule
        reads its tool), by registry id: the scorer's, filled on first need."""
        self.parts: dict[bytes, Any] = {}
        """Case input messages that redaction changes, redacted, by orjson's writing of them (the shard's cases
        repeat one system prompt: :func:`redacted_case`)."""

    def size(self) -> int:
        """The entries held: case entries plus distinct calls (what the memo's memory grows with, ~2 KB each)."""
        return len(self.cases) + len(self.registry.calls) + len(self.parts)

    def fresh(self) -> "ShardMemo":
        """An empty memo that keeps this one's confirmation detector (its verdicts are per reply text, valid for
        the whole shard): what the next batches use once this one holds more than a bounded number of entries."""
        memo = ShardMemo()
        memo.confirmation = self.confirmation
        return memo

    def entry(self, case: Case, redactor: Redactor | None, tools: Mapping[str, ToolSpec],
              extra: dict[str, str] | None = None) -> _CaseEntry:
        """``case``'s entry: kept per case, unless the trace carries its own secrets into the references
        (``extra``), which makes an entry for that row alone."""
        if not extra:
            found = self.cases.get(case.case_id)
            if found is None:
                found = self.cases[case.case_id] = _case_entry(case, redactor, tools, self.registry, parts=self.parts)
            return found
        return _case_entry(case, redactor, tools, self.registry, extra)


def _case_entry(case: Case, redactor: Redactor | None, tools: Mapping[str, ToolSpec], registry: CallRegistry,
                extra: dict[str, str] | None = None, parts: dict[bytes, Any] | None = None) -> _CaseEntry:
    case = redacted_case(case, redactor, extra, parts)
    expected = case.plans[0]
    rules = case_rules(case, tools) if not extra else None
    ids = tuple(registry.reference(call) for call in expected)
    mode = MatchMode.of_case(case)
    plain = not extra and rules is None and len(case.plans) == 1 and mode == UNORDERED
    families = frozenset(spec.family for call in expected
                         if (spec := tools.get(call.name)) is not None and spec.family)
    return _CaseEntry(case, rules, list(expected), ids,
                      frozenset(registry.ragas[i] for i in ids), input_key(case.input) or "", mode, plain,
                      bool(extra), plain and not case.tools, trajectory_case(case), families)
