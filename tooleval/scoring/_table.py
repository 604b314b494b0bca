"""Scoring a batch of envelopes as columns: one Arrow table of rows from one Arrow table of envelopes.

The envelope columns a row repeats (its key, agent, ids, digest, versions) are taken over as columns. A verified
batch's observed calls are keyed at once (names and canonical argument texts dictionary-encoded) and each distinct
call of a shard is read once and given an integer id (:class:`CallRegistry`), each case's references once
(:class:`tooleval.scoring._cases.ShardMemo`), and the counts every row carries — tp, fp, fn, precision, recall, f1,
exact match, duplicate and malformed calls, which calls are left over, and the ragas set-F1 column — are computed
over the whole batch at once with numpy on those ids. The call-list columns are taken from one Arrow array of the
registry's records by id. What the rules find of one call alone (its schema findings, its tool's family, whether a
rule reads the trajectory around it) is found once per distinct call (:class:`_CallFacts`).

Python runs per row only for what needs a value. The rows of a plain case (one plan, no argument rules,
unordered, no tool specs of its own) with every call's arguments captured are scored in bulk (:class:`_Bulk`):
their columns are computed over the batch at once, and Python runs for a row only to pair its leftover calls of
one tool by optimal assignment, to apply the write rules when a reference write is missing, to list its calls'
schema findings, and to run the policy rules over its transcript view when its case sets a rule key or one of its
calls' tools has a property a rule reads. The other rows (argument rules, accepted plans, another match mode,
calls matched by name only, a case with tool specs of its own, stored calls that are not the messages' calls,
envelopes read back without capture's view) go through the rule-aware matcher and
:func:`tooleval.rules.evaluate_row`. Provenance is one pass over the batch's columns.

The rows are the ones :func:`tooleval.scoring.rows.score_rows` defines column for column: that function is this
one applied to envelope dicts.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tooleval.canonical import loads_text
from tooleval.capture.envelope import boundary_calls, digest_ok, envelope_calls
from tooleval.capture.transcript import Transcript
from tooleval.dataset import Cases
from tooleval.capture.provenance import failure_owner, first_divergent_boundary, input_key, join_check_key
from tooleval.capture.redaction import MARKER_KEY, Redactor
from tooleval.matching import (MatchResult, WrongArgs, call_diff_paths, f1_score, match_evidence,
                               pair_wrong_args)
from tooleval.models import Call, Case, ToolSpec
from tooleval.rules import (SCHEMA_RULE, KeywordConfirmation, PolicyConfig, RuleMatch, check_policies, evaluate_row,
                            schema_findings, schema_violations, trajectory_tool, write_violations)
from tooleval.scoring._cases import CallRegistry, ShardMemo, case_inputs, trace_reference_secrets
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.storage import ROW_SCHEMA, ROW_SCHEMA_VERSION, VIEW_FIELDS, split_error
from tooleval.versions import scorer_version

__all__ = ["ScoringSources", "score_table"]

_TAKEN = ("dataset_revision", "case_id", "trial", "agent_name", "agent_version", "request_id", "response_id",
          "trace_digest", "tool_schema_version")
"""Row columns that are the envelope's own column of the same name."""


@dataclass
class ScoringSources:
    """What every batch of one shard is scored against.

    Attributes:
        cases: The dataset's cases by id; every envelope's case must be present.
        redactor: The redactor the traces went through (references are redacted alike); ``None``: off.
        inputs: :func:`tooleval.scoring._cases.case_inputs` (a mapping, or a function returning it, called only for a
            row whose recorded request is not its own case's input); ``None``: computed when first needed.
        tools: The dataset's tool specs by name.
        policy: The dataset's ``[policy]``; ``None``: the defaults.
        digests_verified: The envelopes are exactly what capture wrote (their stage file's sha256 was checked), so
            stored digests and canonical argument texts are trusted rather than recomputed.
        memo: What the shard's batches share (:class:`tooleval.scoring._cases.ShardMemo`).
    """

    cases: Mapping[str, Case]
    redactor: Redactor | None = None
    inputs: Mapping[str, list[str]] | Callable[[], Mapping[str, list[str]]] | None = None
    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    policy: PolicyConfig | None = None
    digests_verified: bool = False
    memo: Any = None

    def __post_init__(self) -> None:
        self.memo = self.memo or ShardMemo()
        if self.memo.confirmation is None:  # its verdicts per reply text are kept with the memo, across batches
            self.memo.confirmation = KeywordConfirmation((self.policy or PolicyConfig()).confirmation)
        self.tools = self.tools or {}
        if self.inputs is None or callable(self.inputs):
            # the closure holds what it reads, not ``self``: a cycle through it would keep the shard's memo (every
            # case entry and call of the shard) alive until the cyclic collector's next pass, which a worker pauses
            # for a shard and which then spent ~0.4 s a 28,000-row shard tracing it
            lazy, whole, cases, redactor = self.inputs, [], self.cases, self.redactor

            def full() -> Mapping[str, list[str]]:
                if not whole:
                    whole.append(case_inputs(cases, redactor) if lazy is None else lazy())
                return whole[0]

            self.full_inputs, self.given_inputs = full, None
        else:
            self.full_inputs, self.given_inputs = None, self.inputs  # a given map is read as it is


def _metadata(text: str | None) -> Any:
    """The envelope's decoded ``metadata_json`` where a row reads something of it (the recorded reward, the
    redaction's marker), else ``{}``: most traces' metadata hold neither, and a text that names neither key, even
    escaped, cannot hold them."""
    if not text or ("reward" not in text and MARKER_KEY not in text and "\\" not in text):
        return {}
    return loads_text(text)


def _reward(metadata: Any) -> float | None:
    reward = metadata.get("reward") if isinstance(metadata, dict) else None
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return None
    return float(reward)


class _Columns(dict):
    """The row columns being filled: column name -> one value per row (a list made on first use), for the columns
    that are not taken over from the envelopes; ``arrays``: columns given whole, as Arrow arrays."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.arrays: dict[str, pa.Array | pa.ChunkedArray] = {}

    def __missing__(self, name: str) -> list:
        column = self[name] = [None] * self.n
        return column


def score_table(envelopes: pa.Table, sources: ScoringSources) -> pa.Table:
    """Score a batch of envelopes.

    Args:
        envelopes: Envelope columns (:data:`tooleval.storage.ENVELOPE_SCHEMA`; ``captured_at`` may be left out),
            one row per (case, trial), every case in ``sources.cases``.
        sources: What the shard is scored against.

    Returns:
        A table of :data:`tooleval.storage.ROW_SCHEMA`, one row per envelope in input order, ``run_id`` null. An
        envelope carrying an ``error`` gives a row with that error (``error_kind``, ``error_message``) and null
        metrics; one whose stored calls are not its messages' calls gives a ``scoring_error`` row.
    """
    n = envelopes.num_rows
    names = set(envelopes.schema.names)

    def column(name: str) -> list:
        return envelopes.column(name).to_pylist() if name in names else [None] * n

    registry: CallRegistry = sources.memo.registry
    errors = column("error")
    out = _Columns(n)
    view = _View.of(envelopes) if sources.digests_verified else None
    entries = _Entries(envelopes, sources, out, view is not None)
    scored = np.fromiter((error is None for error in errors), bool, n)
    observed = _observed_ids(envelopes, scored, sources.digests_verified, registry)
    counts = _Counts(entries, scored, observed, registry)
    envelope_of = _EnvelopeRows(envelopes, column, view)
    facts = _CallFacts(sources) if view is not None else None
    bulk = _Bulk(sources, envelopes, view, entries, scored, counts, facts) if facts is not None else None
    rows = entries.rows
    for i in (range(n) if bulk is None else bulk.others):
        _score_row(i, rows[i], out, counts, observed.row(i), envelope_of, sources)
    _provenance(out, envelope_of, rows, observed, sources, bulk, envelopes)
    return _table(envelopes, out, names, registry, bulk)


class _Entries:
    """Each row's case entry (:meth:`ShardMemo.entry`): one per distinct case of the batch, and one per row whose
    trace carries its own secrets into the references. ``rows``: the entry of each row; ``distinct``: the
    distinct entries; ``index``: each row's position in ``distinct`` (numpy)."""

    def __init__(self, envelopes: pa.Table, sources: ScoringSources, out: _Columns, viewed: bool) -> None:
        n = envelopes.num_rows
        memo, redactor, cases, tools = sources.memo, sources.redactor, sources.cases, sources.tools
        case_column = envelopes.column("case_id")
        encoded = (case_column.combine_chunks() if isinstance(case_column, pa.ChunkedArray) else case_column) \
            .dictionary_encode()
        case_ids = encoded.dictionary.to_pylist()
        codes = np.asarray(encoded.indices, np.int64)
        if isinstance(cases, Cases):  # the batch's cases read in one pass, not one open file each
            cases.read_ahead(case_ids)
        distinct: list = []
        index = np.empty(n, np.int64)
        own: dict[int, Any] = {}  # the rows whose references take their trace's own secrets
        if viewed:  # what capture read of each trace's metadata, as columns
            out.arrays["recorded_reward"] = envelopes.column("recorded_reward")
            if redactor is not None and "reference_secrets_json" in envelopes.schema.names:
                secrets = envelopes.column("reference_secrets_json")
                for i in np.flatnonzero(np.asarray(secrets.is_valid())).tolist():
                    case = cases[case_ids[codes[i]]]
                    extra = redactor.reference_secrets(case, json.loads(secrets[i].as_py()))
                    if extra:
                        own[i] = memo.entry(case, redactor, tools, extra)
        else:
            metadata_texts = envelopes.column("metadata_json").to_pylist() if "metadata_json" in \
                envelopes.schema.names else [None] * n
            rewards = out["recorded_reward"]
            for i in range(n):
                meta = _metadata(metadata_texts[i])
                rewards[i] = _reward(meta)
                if redactor is not None and metadata_texts[i]:
                    case = cases[case_ids[codes[i]]]
                    extra = trace_reference_secrets(redactor, case, {"metadata_json": metadata_texts[i]}, meta)
                    if extra:
                        own[i] = memo.entry(case, redactor, tools, extra)
        for case_id in case_ids:
            distinct.append(memo.entry(cases[case_id], redactor, tools))
        index[:] = codes
        for i, entry in own.items():
            index[i] = len(distinct)
            distinct.append(entry)
        self.distinct, self.index = distinct, index
        self.rows = [distinct[k] for k in index.tolist()]

    def flat(self, attribute: str | list, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entries' integer sequences ``attribute`` (``expected_ids`` or ``ragas_ids``, or one sequence per
        distinct entry) of each row, empty where ``rows`` is false: ``(values, lengths)``, numpy, the values of
        row 0 first."""
        sequences = [getattr(entry, attribute) for entry in self.distinct] if isinstance(attribute, str) \
            else attribute
        lengths = np.fromiter((len(s) for s in sequences), np.int64, len(sequences))
        values = np.fromiter((k for s in sequences for k in s), np.int64, int(lengths.sum()))
        starts = np.concatenate(([0], np.cumsum(lengths)))
        row_lengths = lengths[self.index] * rows
        return values[_gather(starts[self.index], row_lengths)], row_lengths

    def attribute(self, name: str, kind: type) -> np.ndarray:
        """Attribute ``name`` of each row's entry, numpy of ``kind``."""
        return np.fromiter((getattr(entry, name) for entry in self.distinct), kind, len(self.distinct))[self.index]


def _gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[r] .. starts[r] + lengths[r] - 1`` of every ``r`` in turn, as one numpy array."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


class _Observed:
    """Each row's observed calls as registry ids, flat: ``ids`` (numpy), ``lengths`` per row, ``offsets``, and
    ``row(i)`` (``None`` for a row with an error)."""

    __slots__ = ("ids", "lengths", "offsets", "scored")

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, scored: np.ndarray) -> None:
        self.ids, self.lengths, self.scored = ids, lengths, scored
        self.offsets = np.concatenate(([0], np.cumsum(lengths)))

    def row(self, i: int) -> list | None:
        if not self.scored[i]:
            return None
        return self.ids[self.offsets[i]:self.offsets[i + 1]].tolist()


def _observed_ids(envelopes: pa.Table, scored: np.ndarray, verified: bool, registry: CallRegistry) -> _Observed:
    """Each row's observed calls as registry ids (none for a row with an error): from the envelope's
    ``model_calls``, or, unverified, as :func:`tooleval.capture.envelope.envelope_calls` reads them. A verified
    envelope's well-formed calls are keyed over the whole batch at once (name and canonical text dictionary-encoded
    into integer pairs), and each distinct pair is read once (:meth:`CallRegistry.canonical`)."""
    n = envelopes.num_rows
    if "model_calls" not in envelopes.schema.names:
        return _Observed(np.zeros(0, np.int64), np.zeros(n, np.int64), scored)
    if not verified:
        records = envelopes.column("model_calls").to_pylist()
        lists = [[registry.add(call) for call in envelope_calls({"model_calls": calls})] if keep else []
                 for keep, calls in zip(scored.tolist(), records)]
        lengths = np.fromiter((len(ids) for ids in lists), np.int64, n)
        return _Observed(np.fromiter((k for ids in lists for k in ids), np.int64, int(lengths.sum())), lengths,
                         scored)
    column = envelopes.column("model_calls")
    calls = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = np.asarray(calls.offsets, np.int64)
    flat = calls.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    keep = scored.copy()  # a row with an error has no observed calls
    if calls.null_count:
        keep &= np.asarray(calls.is_valid())
    taken = np.repeat(keep, np.diff(offsets))
    ids = np.full(len(flat), -1, np.int64)
    if taken.any():
        names, texts = flat.field("name").dictionary_encode(), flat.field("args_json").dictionary_encode()
        canonical = np.asarray(pc.and_(texts.is_valid(), flat.field("parse_error").is_null()).fill_null(False))
        wanted = canonical & taken
        width = max(len(texts.dictionary), 1)
        codes = np.asarray(names.indices.fill_null(0), np.int64) * width + \
            np.asarray(texts.indices.fill_null(0), np.int64)
        distinct, inverse = np.unique(codes[wanted], return_inverse=True)
        name_values, text_values = names.dictionary.to_pylist(), texts.dictionary.to_pylist()
        found = np.fromiter((registry.canonical(name_values[code // width], text_values[code % width])
                             for code in distinct.tolist()), np.int64, len(distinct))
        ids[wanted] = found[inverse]
        for j in np.flatnonzero(taken & ~canonical).tolist():  # malformed, or arguments never captured
            ids[j] = registry.add(Call.from_record(flat.slice(j, 1).to_pylist()[0]))
    return _Observed(ids[taken], np.diff(offsets) * keep, scored)


class _Counts:
    """The counts of every row of a batch at once: for each row, the multiset intersection of its expected and
    observed call ids (``tp``), ``fp``, ``fn``, ``duplicate_calls``, ``malformed_calls`` and the ragas set-F1,
    from integer codes ``row * ids + id`` (numpy ``unique`` and ``intersect1d``). ``missing`` and ``extra``: which
    of the flat expected (``e_ids``) and observed (``observed.ids``) calls the matching leaves over."""

    def __init__(self, entries: _Entries, scored: np.ndarray, observed: _Observed, registry: CallRegistry) -> None:
        n = len(scored)
        width = max(len(registry.calls), 1)
        self.e_ids, self.n_expected = entries.flat("expected_ids", scored)
        self.e_rows = np.repeat(np.arange(n, dtype=np.int64), self.n_expected)
        e_codes = self.e_rows * width + self.e_ids
        o_ids = self.o_ids = observed.ids
        self.n_observed = observed.lengths
        o_rows = self.o_rows = np.repeat(np.arange(n, dtype=np.int64), self.n_observed)
        o_codes = o_rows * width + o_ids
        e_keys, e_counts = np.unique(e_codes, return_counts=True)
        o_keys, o_counts = np.unique(o_codes, return_counts=True)
        _, e_at, o_at = np.intersect1d(e_keys, o_keys, assume_unique=True, return_indices=True)
        matched = np.minimum(e_counts[e_at], o_counts[o_at])
        self.tp = np.bincount(o_keys[o_at] // width, weights=matched, minlength=n).astype(np.int64)
        # which occurrences the matching leaves over: of each key, a row's first min(expected, observed)
        # occurrences match, in their order, and the rest are missing (expected) or extra (observed)
        e_matched = np.zeros(len(e_keys), np.int64)
        e_matched[e_at] = matched
        o_matched = np.zeros(len(o_keys), np.int64)
        o_matched[o_at] = matched
        self.missing = _ranks(e_codes) >= e_matched[np.searchsorted(e_keys, e_codes)]
        self.extra = _ranks(o_codes) >= o_matched[np.searchsorted(o_keys, o_codes)]
        self.e_start = np.concatenate(([0], np.cumsum(self.n_expected)))
        self.o_start = observed.offsets
        # duplicates: Σ max(0, observed(k) − max(expected(k), 1)) over keys whose arguments were captured
        expected_of = np.zeros(len(o_keys), np.int64)
        expected_of[o_at] = e_counts[e_at]
        extra_copies = np.maximum(0, o_counts - np.maximum(expected_of, 1))
        captured = ~np.asarray(registry.not_captured, dtype=bool)[o_keys % width] if len(o_keys) else \
            np.zeros(0, bool)
        self.duplicates = np.bincount(o_keys // width, weights=extra_copies * captured, minlength=n).astype(np.int64)
        malformed = np.asarray(registry.malformed, dtype=bool)[o_ids] if len(o_ids) else np.zeros(0, bool)
        self.malformed = np.bincount(o_rows[malformed], minlength=n).astype(np.int64)
        no_args = np.asarray(registry.not_captured, dtype=bool)[o_ids] if len(o_ids) else np.zeros(0, bool)
        self.name_only = np.bincount(o_rows[no_args], minlength=n) > 0
        self.ragas = self._ragas(entries, scored, o_rows, o_ids, registry, n)

    def left(self, i: int) -> tuple[list[int], list[int]]:
        """Row ``i``'s expected (missing) and observed (extra) call ids the matching leaves over, in order."""
        e0, e1, o0, o1 = self.e_start[i], self.e_start[i + 1], self.o_start[i], self.o_start[i + 1]
        return self.e_ids[e0:e1][self.missing[e0:e1]].tolist(), self.o_ids[o0:o1][self.extra[o0:o1]].tolist()

    def observed(self, i: int) -> list[int]:
        """Row ``i``'s observed call ids, in order."""
        return self.o_ids[self.o_start[i]:self.o_start[i + 1]].tolist()

    @staticmethod
    def _ragas(entries: _Entries, scored: np.ndarray, o_rows: np.ndarray, o_ids: np.ndarray,
               registry: CallRegistry, n: int) -> np.ndarray:
        """ragas 0.4.3's set-F1 of each row: its observed calls' ragas keys as a set against its reference's."""
        width = max(registry.ragas_keys, 1)
        r_ids, n_ref = entries.flat("ragas_ids", np.ones(n, bool))
        r_codes = np.repeat(np.arange(n, dtype=np.int64), n_ref) * width + r_ids
        ragas_ids = np.asarray(registry.ragas, dtype=np.int64)[o_ids] if len(o_ids) else np.zeros(0, np.int64)
        a_codes = np.unique(o_rows * width + ragas_ids)
        n_actual = np.bincount(a_codes // width, minlength=n)
        common = np.intersect1d(np.unique(r_codes), a_codes, assume_unique=True)
        tp = np.bincount(common // width, minlength=n)
        # each distinct (tp, actual, reference) once, with ragas' own arithmetic in its order, so that the float
        # is the same bit for bit
        side = int(max(n_actual.max(initial=0), n_ref.max(initial=0))) + 1
        triples, inverse = np.unique((tp * side + n_actual) * side + n_ref, return_inverse=True)
        values = []
        for code in triples.tolist():
            t, a, r = code // (side * side), code // side % side, code % side
            precision = t / a if a > 0 else 0.0
            recall = t / r if r > 0 else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
            values.append(round(f1, 4))
        return np.array(values, np.float64)[inverse.reshape(-1)]


_VIEW_NAMES = frozenset(VIEW_FIELDS.names)


class _Flat:
    """One list column of a batch read into Python once, as its flattened values and offsets: each row's list is
    a slice (``None`` for a null list), so a batch costs one conversion instead of one per row."""

    __slots__ = ("values", "offsets", "valid")

    def __init__(self, array: pa.ChunkedArray | pa.Array, values: Callable[[pa.Array], list] | None = None) -> None:
        array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
        offsets = array.offsets.to_pylist()  # a sliced array's offsets start where its values do
        first = offsets[0]
        self.offsets = [o - first for o in offsets] if first else offsets
        self.valid = array.is_valid().to_pylist() if array.null_count else None
        flat = array.values.slice(first, offsets[-1] - first)
        self.values = flat.to_pylist() if values is None else values(flat)

    def row(self, i: int) -> list | None:
        if self.valid is not None and not self.valid[i]:
            return None
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def length(self, i: int) -> int | None:
        """The length of row ``i``'s list (``None`` for a null list)."""
        if self.valid is not None and not self.valid[i]:
            return None
        return self.offsets[i + 1] - self.offsets[i]


class _Lazy:
    """A column of a batch converted on first use (the view columns only a configured rule reads)."""

    __slots__ = ("array", "values", "flat")

    def __init__(self, array: pa.ChunkedArray, values: Callable[[pa.Array], list] | None = None) -> None:
        self.array, self.values, self.flat = array, values, None

    def row(self, i: int) -> list | None:
        if self.flat is None:
            self.flat = _Flat(self.array, self.values)
        return self.flat.row(i)


def _tuples(flat: pa.StructArray) -> list:
    """A list column's struct values as tuples of their fields, in field order."""
    return list(zip(*(flat.field(k).to_pylist() for k in range(flat.type.num_fields))))


class _View:
    """The transcript view trace capture wrote beside a batch's envelopes (:data:`tooleval.storage.VIEW_FIELDS`),
    one :class:`tooleval.capture.Transcript` per row on demand. Each column is read into Python when first used:
    a batch whose rows are all scored in bulk reads none."""

    def __init__(self, envelopes: pa.Table) -> None:
        self.column = envelopes.column
        column = envelopes.column
        self.flags = _Lazy(column("user_flags"), _tuples)
        self.results = _Lazy(column("result_texts"))
        self.written = _Lazy(column("written_arguments"))

    @functools.cached_property
    def roles(self) -> list:
        return self.column("message_roles").to_pylist()

    @functools.cached_property
    def texts(self) -> _Flat:
        return _Flat(self.column("message_texts"))

    @functools.cached_property
    def steps(self) -> _Flat:
        return _Flat(self.column("steps"), _tuples)

    @functools.cached_property
    def errors(self) -> _Flat:
        return _Flat(self.column("error_messages"))

    @functools.cached_property
    def steps_error(self) -> list:
        return self.column("steps_error").to_pylist()

    @classmethod
    def of(cls, envelopes: pa.Table) -> "_View | None":
        """The batch's view, or ``None`` when its file holds none (envelopes read back from ``traces/``)."""
        return cls(envelopes) if _VIEW_NAMES <= set(envelopes.schema.names) else None

    def transcript(self, i: int, names: list[str]) -> Transcript | None:
        """Row ``i``'s transcript view (``names``: its observed calls' tool names); ``None`` when its envelope has
        no messages."""
        roles = self.roles[i]
        if roles is None:
            return None
        return Transcript(roles, self.texts.row(i), self.errors.row(i), _Deferred(self.flags, i), self.steps.row(i),
                          _Deferred(self.results, i), _Deferred(self.written, i), self.steps_error[i], names)


class _Deferred:
    """Row ``i`` of a :class:`_Lazy` column as a sequence, converted when first indexed (most rows never are)."""

    __slots__ = ("column", "i", "items")

    def __init__(self, column: _Lazy, i: int) -> None:
        self.column, self.i, self.items = column, i, None

    def _list(self) -> list:
        if self.items is None:
            self.items = self.column.row(self.i) or []
        return self.items

    def __getitem__(self, index: int):
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self):
        return iter(self._list())


class _EnvelopeRows:
    """One envelope as the dict the per-row helpers read (provenance, the rule-aware path), built on demand from
    the batch's columns: most rows need only a few of its values."""

    def __init__(self, envelopes: pa.Table, column: Callable[[str], list], view: "_View | None" = None) -> None:
        self.names = [name for name in envelopes.schema.names if name not in _VIEW_NAMES]
        self.column = column
        self.cache: dict[str, list] = {}
        self.view = view

    def values(self, name: str) -> list:
        """Column ``name`` as a list, read once."""
        values = self.cache.get(name)
        if values is None:
            values = self.cache[name] = self.column(name)
        return values

    def value(self, name: str, i: int) -> Any:
        return self.values(name)[i]

    def record(self, i: int) -> dict[str, Any]:
        return {name: self.value(name, i) for name in self.names}


def _score_row(i: int, entry: Any, out: _Columns, counts: _Counts, ids: list | None, envelope: _EnvelopeRows,
               sources: ScoringSources) -> None:
    """Fill row ``i``'s columns that need Python but its provenance: its error, or its evidence and rules."""
    case = entry.case
    out["slice"][i] = case.slice
    out["expected_calls"][i] = entry.expected_ids
    out["match_mode"][i] = entry.mode.label
    error = envelope.value("error", i)
    if error is not None:
        out["error_kind"][i], out["error_message"][i] = split_error(error)
        out["observed_calls"][i] = envelope.value("model_calls", i) or None
        return
    registry = sources.memo.registry
    observed = [registry.calls[k] for k in ids]
    out["observed_calls"][i] = ids
    transcript = messages = None
    if envelope.view is not None:  # capture's view of the trace: its messages are not decoded again
        transcript = envelope.view.transcript(i, [call.name for call in observed])
    else:
        text = envelope.value("messages_json", i)
        messages = loads_text(text) if text else None
    try:
        match = _plain_match(i, entry, observed, counts) if entry.plain and not counts.name_only[i] else None
        rules = evaluate_row(case, sources.tools, messages if transcript is None else transcript, observed,
                             policy=sources.policy, rules=entry.rules, confirmation=sources.memo.confirmation,
                             match=match)
        for name, value in rules.columns().items():
            out[name][i] = value
    except ValueError as exc:  # the stored calls are not the messages' calls: the envelope is inconsistent
        for name in _RULE_COLUMNS:
            out[name][i] = None
        out["observed_calls"][i] = envelope.value("model_calls", i) or None
        out["error_kind"][i], out["error_message"][i] = "scoring_error", str(exc)
        return
    out["ragas_tool_call_f1"][i] = float(counts.ragas[i])


_RULE_COLUMNS = ("missing_calls", "extra_calls", "wrong_args", "duplicate_calls", "malformed_calls", "tp", "fp", "fn",
                 "precision", "recall", "f1", "exact_match", "mismatch_categories", "violations", "blocking",
                 "coercions", "chosen_plan", "reference_calls", "tool_families", "schema_findings", "calls_match",
                 "name_only")
"""The columns the rules set on a scored row (null again when scoring the row failed)."""


_BROKEN = object()
"""A call's schema findings when its tool's schema is not a valid JSON Schema (the row is scored as an error)."""


class _CallFacts:
    """What the rules find of one call alone, found once per distinct call of the shard and kept in its memo
    (:attr:`ShardMemo.facts`): valid for the dataset's own tools (a case with tool specs of its own is checked
    against those, by the rules themselves)."""

    def __init__(self, sources: ScoringSources) -> None:
        self.tools = sources.tools
        self.policy = sources.policy or PolicyConfig()
        self.memo = sources.memo
        self.registry = sources.memo.registry

    def fact(self, k: int) -> tuple:
        """Call ``k``'s ``(trajectory, family, findings, what)``: whether a policy rule reads the trajectory
        around a call of its tool, its tool's family, its schema findings ``(kind, path, detail)``
        (:data:`_BROKEN` when its tool's schema is invalid) and the text of its ``tool_schema`` violation after
        ``call #n``."""
        found = self.memo.facts.get(k)
        if found is None:
            call, tools = self.registry.calls[k], self.tools
            spec = tools.get(call.name)
            findings: Any = ()
            what = None
            if tools:
                try:
                    checked = schema_findings([call], tools)
                except ValueError:
                    findings = _BROKEN
                else:
                    findings = tuple((f.kind, f.path, f.detail) for f in checked)
                    if checked:
                        what = schema_violations(checked, [call])[0].detail.split(" ", 2)[2]
            family = spec.family if spec is not None and spec.family else None
            found = self.memo.facts[k] = (trajectory_tool(spec, self.policy), family, findings, what)
        return found


class _Bulk:
    """The rows of a verified batch scored as columns: the rows of quiet cases
    (:attr:`tooleval.scoring._cases._CaseEntry.quiet`) whose calls' arguments were all captured, whose stored calls
    are their messages' calls and whose tools' schemas are valid. Their counts, ratios, call lists, categories,
    families and the ragas column are computed over the batch at once; Python runs only for a row with leftover
    calls on both sides (their wrong-argument pairing, once per distinct (missing, extra) pair of id lists of the
    shard), a missing write (the write rules, with it), a call with schema findings, or a case or tool a policy
    rule reads the trajectory for (the policy rules, over the row's transcript view; a row they find inconsistent
    goes to the general path, which says so). ``others``: the rows left to the per-row paths, in order."""

    def __init__(self, sources: ScoringSources, envelopes: pa.Table, view: _View, entries: _Entries,
                 scored: np.ndarray, counts: _Counts, facts: "_CallFacts") -> None:
        n = len(scored)
        memo, tools = sources.memo, sources.tools
        registry = memo.registry
        self.entries, self.counts, self.tools = entries, counts, tools
        o_ids, o_rows = counts.o_ids, counts.o_rows
        candidates = entries.attribute("quiet", bool) & scored & ~counts.name_only
        size = len(registry.calls)
        trajectory, broken, found = np.zeros(size, bool), np.zeros(size, bool), np.zeros(size, bool)
        self.family_names = sorted({spec.family for spec in tools.values() if spec.family})
        family_ids = {name: j for j, name in enumerate(self.family_names)}
        self.call_family = np.full(size, -1, np.int64)
        for k in np.unique(o_ids[candidates[o_rows]]).tolist():  # what the rules find of each distinct call
            fact = facts.fact(k)
            trajectory[k], broken[k] = fact[0], fact[2] is _BROKEN
            found[k] = bool(fact[2]) and not broken[k]
            if fact[1]:
                self.call_family[k] = family_ids[fact[1]]

        def any_call(flags: np.ndarray) -> np.ndarray:
            return np.bincount(o_rows[flags[o_ids]], minlength=n) > 0

        # the stored calls are not the messages' calls: the general path says so
        roles = envelopes.column("message_roles")
        mismatch = np.asarray(roles.is_valid()) & (
            np.asarray(envelopes.column("steps_error").is_valid())
            | (np.asarray(pc.list_value_length(envelopes.column("steps")).fill_null(-1)) != counts.n_observed))
        fast = candidates & ~any_call(broken) & ~mismatch
        ruled = fast & (entries.attribute("ruled", bool) | any_call(trajectory))
        self.exact = (counts.n_observed == counts.tp) & (counts.n_expected == counts.tp)
        # the rows that need a value from Python
        is_write = frozenset(name for name, spec in tools.items() if spec.side_effect == "write").__contains__
        writes = np.zeros(size, bool)
        e_ids, missing = counts.e_ids, counts.missing
        for k in np.unique(e_ids[missing]).tolist():
            writes[k] = is_write(registry.calls[k].name)
        missing_write = np.bincount(counts.e_rows[missing & writes[e_ids]], minlength=n) > 0
        both = (counts.n_observed > counts.tp) & (counts.n_expected > counts.tp)
        findings = any_call(found)
        self.wrong, self.violations, self.findings = {}, {}, {}
        self.pairs: dict[int, list] = {}  # the pairs found over the batch, as (expected id, observed id, paths)
        self.wrong_flag, self.blocking, self.schema = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        calls, pairs = registry.calls, memo.pairs
        paired = self._pair_alone(fast & both, registry)
        policies = _Policies(sources, view, entries, counts) if ruled.any() else None
        for i in np.flatnonzero(fast & ((both & ~paired) | missing_write | findings | ruled)).tolist():
            missing_ids, extra_ids = counts.left(i)
            if paired[i]:  # its pairs are found: the write rules read them
                wrong = [WrongArgs(calls[e].name, calls[e], calls[o], paths) for e, o, paths in self.pairs.get(i, ())]
                violations = []
                if missing_write[i] and not ruled[i]:
                    write = write_violations([calls[k] for k in missing_ids], wrong, is_write)
                    violations = [v.to_record() for v in write]
                    self.blocking[i] = any(v.severity == "blocking" for v in write)
            else:
                key = (tuple(missing_ids), tuple(extra_ids))
                got = pairs.get(key)
                if got is None:
                    left, over = [calls[k] for k in missing_ids], [calls[k] for k in extra_ids]
                    wrong = pair_wrong_args(left, over) if left and over else []
                    write = write_violations(left, wrong, is_write) if any(is_write(c.name) for c in left) else []
                    got = pairs[key] = ([pair.to_record() for pair in wrong], [v.to_record() for v in write],
                                        any(v.severity == "blocking" for v in write), wrong)
                self.wrong[i], violations, self.blocking[i], wrong = got
                self.wrong_flag[i] = bool(wrong)
            if ruled[i]:  # the policy rules read the row's trajectory and its match
                checked = policies.check(i, extra_ids, wrong)
                if checked is None:
                    fast[i] = False
                    continue
                violations, self.blocking[i] = checked
            if findings[i]:
                self.findings[i], violations = _schema_records(counts.observed(i), facts, calls, violations)
                self.schema[i] = True
            self.violations[i] = violations
        self.fast, self.rows = fast, np.flatnonzero(fast)
        self.others = np.flatnonzero(~fast).tolist()

    def _pair_alone(self, rows: np.ndarray, registry: CallRegistry) -> np.ndarray:
        """The wrong-argument pairs of the ``rows`` whose leftover calls of each tool are at most one missing and
        one extra (nearly every row with leftovers on both sides): such a pair is the optimal assignment itself
        (:func:`tooleval.matching.pair_wrong_args`), so the pairs are found over the batch at once and only
        their differing paths are read per pair. Which of ``rows`` were paired here (the others are left to
        :func:`tooleval.matching.pair_wrong_args`)."""
        counts, calls = self.counts, registry.calls
        names: dict[str, int] = {}
        tool = np.fromiter((names.setdefault(call.name, len(names)) for call in calls), np.int64, len(calls))
        known = ~(np.asarray(registry.malformed, bool) | np.asarray(registry.not_captured, bool))
        width = max(len(names), 1)
        left = counts.missing & rows[counts.e_rows]  # malformed calls and calls without arguments pair with none
        over = counts.extra & rows[counts.o_rows] & known[counts.o_ids]
        e_ids, o_ids = counts.e_ids[left], counts.o_ids[over]
        e_keys = counts.e_rows[left] * width + tool[e_ids]
        o_keys = counts.o_rows[over] * width + tool[o_ids]
        e_unique, e_count = np.unique(e_keys, return_counts=True)
        o_unique, o_count = np.unique(o_keys, return_counts=True)
        common, e_at, o_at = np.intersect1d(e_unique, o_unique, assume_unique=True, return_indices=True)
        alone = (e_count[e_at] == 1) & (o_count[o_at] == 1)
        done = rows.copy()
        done[common[~alone] // width] = False  # a tool with more leftovers on one side: the assignment decides
        keys = common[alone & done[common // width]]
        e_take, o_take = np.isin(e_keys, keys), np.isin(o_keys, keys)
        # each key once on either side: the observed call of the missing call at flat place j is the one whose
        # key has the same rank among the keys
        rank = np.empty(len(keys), np.int64)
        rank[np.argsort(e_keys[e_take], kind="stable")] = np.arange(len(keys))
        observed = o_ids[o_take][np.argsort(o_keys[o_take], kind="stable")][rank]
        pair_rows = (e_keys[e_take] // width).tolist()
        wrong, pairs = self.wrong, self.pairs
        for row, e, o in zip(pair_rows, e_ids[e_take].tolist(), observed.tolist()):  # in missing-call order
            paths = call_diff_paths(calls[e], calls[o])
            record = {"name": calls[e].name, "expected_args_json": calls[e].args_json,
                      "observed_args_json": calls[o].args_json, "paths": paths}
            found = wrong.get(row)
            if found is None:
                wrong[row], pairs[row] = [record], [(e, o, paths)]
            else:
                found.append(record)
                pairs[row].append((e, o, paths))
        self.wrong_flag[pair_rows] = True
        return done

    def columns(self, registry: CallRegistry) -> dict[str, pa.Array]:
        """The bulk rows' columns but their provenance, one value per row of :attr:`rows`."""
        rows, counts, entries = self.rows, self.counts, self.entries
        count = len(rows)
        records = registry.record_array()
        tp, n_observed, n_expected = counts.tp[rows], counts.n_observed[rows], counts.n_expected[rows]
        fp, fn = n_observed - tp, n_expected - tp
        duplicates, malformed = counts.duplicates[rows], counts.malformed[rows]
        exact = self.exact[rows]
        denominator = 2 * tp + fp + fn
        expected = _id_lists(counts.e_start, counts.e_ids, rows, records)
        distinct, index = entries.distinct, entries.index[rows]
        flags = (fn > 0, fp > 0, self.wrong_flag[rows], duplicates > 0, malformed > 0, self.schema[rows])
        codes = sum(flag.astype(np.int64) << bit for bit, flag in enumerate(flags))
        kinds, inverse = np.unique(codes, return_inverse=True)
        categories = pa.array([[name for bit, name in enumerate(_CATEGORIES) if code >> bit & 1]
                               for code in kinds.tolist()], _TYPES["mismatch_categories"])
        with np.errstate(divide="ignore", invalid="ignore"):
            return {
                "slice": pa.array([e.case.slice for e in distinct], pa.string()).take(index),
                "expected_calls": expected,
                "match_mode": pa.array([e.mode.label for e in distinct], pa.string()).take(index),
                "observed_calls": _id_lists(counts.o_start, counts.o_ids, rows, records),
                "missing_calls": _id_lists(_kept(counts.e_start, counts.missing), counts.e_ids[counts.missing], rows,
                                           records),
                "extra_calls": _id_lists(_kept(counts.o_start, counts.extra), counts.o_ids[counts.extra], rows, records),
                "wrong_args": _sparse(self.wrong, rows, "wrong_args"),
                "duplicate_calls": pa.array(duplicates, pa.int32()),
                "malformed_calls": pa.array(malformed, pa.int32()),
                "tp": pa.array(tp, pa.int32()),
                "fp": pa.array(fp, pa.int32()),
                "fn": pa.array(fn, pa.int32()),
                "precision": pa.array(tp / n_observed, pa.float64(), mask=n_observed == 0),
                "recall": pa.array(tp / n_expected, pa.float64(), mask=n_expected == 0),
                "f1": pa.array(np.where(denominator == 0, 1.0, 2 * tp / denominator), pa.float64()),
                "exact_match": pa.array(exact, pa.bool_()),
                "mismatch_categories": categories.take(pa.array(inverse.reshape(-1))),
                "violations": _sparse(self.violations, rows, "violations"),
                "blocking": pa.array(self.blocking[rows], pa.bool_()),
                "coercions": _empty_lists(count, "coercions"),
                "chosen_plan": pa.array(np.zeros(count, np.int32), pa.int32()),
                "reference_calls": expected,
                "tool_families": self._families(rows),
                "schema_findings": _sparse(self.findings, rows, "schema_findings") if self.tools else
                pa.nulls(count, _TYPES["schema_findings"]),
                "calls_match": pa.array(exact, pa.bool_()),
                "name_only": pa.array(np.zeros(count, bool), pa.bool_()),
                "ragas_tool_call_f1": pa.array(counts.ragas[rows], pa.float64()),
            }

    def _families(self, rows: np.ndarray) -> pa.Array:
        """Each bulk row's tool families: those of its case's expected calls and of its calls, sorted."""
        if not self.family_names:
            return _empty_lists(len(rows), "tool_families")
        counts, entries = self.counts, self.entries
        width, n = len(self.family_names), len(self.fast)
        local = np.full(n, -1, np.int64)
        local[rows] = np.arange(len(rows))
        ids = {name: j for j, name in enumerate(self.family_names)}
        of_entries = [sorted(ids[name] for name in entry.families) for entry in entries.distinct]
        values, lengths = entries.flat(of_entries, self.fast)
        families = self.call_family[counts.o_ids]
        taken = self.fast[counts.o_rows] & (families >= 0)
        codes = np.unique(np.concatenate((
            local[counts.o_rows[taken]] * width + families[taken],
            local[np.repeat(np.arange(n, dtype=np.int64), lengths)] * width + values)))
        offsets = np.concatenate(([0], np.cumsum(np.bincount(codes // width, minlength=len(rows)))))
        names = pa.array(self.family_names, pa.string()).take(pa.array(codes % width))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), names)

    def matched(self, i: int) -> bool:
        """Whether bulk row ``i``'s calls match (what the failure owner reads)."""
        return bool(self.exact[i])


class _Policies:
    """The policy rules of bulk rows whose case or calls a rule reads the trajectory for
    (:func:`tooleval.rules.check_policies` over the row's transcript view and its match)."""

    def __init__(self, sources: ScoringSources, view: _View, entries: _Entries, counts: _Counts) -> None:
        self.tools, self.policy, self.confirmation = sources.tools, sources.policy, sources.memo.confirmation
        self.view, self.entries, self.counts = view, entries, counts
        self.calls = sources.memo.registry.calls

    def check(self, i: int, extra_ids: list[int], wrong: list) -> tuple[list, bool] | None:
        """Row ``i``'s violations (records) and whether one blocks; ``None`` when the rules find the row
        inconsistent (the general path makes its scoring error)."""
        counts, entry, calls = self.counts, self.entries.rows[i], self.calls
        ids = counts.observed(i)
        observed = [calls[k] for k in ids]
        e0, e1 = counts.e_start[i], counts.e_start[i + 1]
        missing = [call for call, left in zip(entry.expected, counts.missing[e0:e1].tolist()) if left]
        extra = [calls[k] for k in extra_ids]
        tp, n_observed, n_expected = int(counts.tp[i]), len(ids), len(entry.expected)
        fp, fn = n_observed - tp, n_expected - tp
        duplicates, malformed = int(counts.duplicates[i]), int(counts.malformed[i])
        categories = [name for name, present in (("missing", fn > 0), ("extra", fp > 0), ("wrong_args", bool(wrong)),
                                                 ("duplicate", duplicates > 0), ("malformed", malformed > 0))
                      if present]
        match = _match_result(tp, fp, fn, tp / n_observed if n_observed else None,
                              tp / n_expected if n_expected else None, f1_score(tp, fp, fn), fp == 0 and fn == 0,
                              duplicates, malformed, missing, extra, list(wrong), categories)
        transcript = self.view.transcript(i, [call.name for call in observed])
        try:
            found = check_policies(entry.case, self.tools, transcript, observed, match, policy=self.policy,
                                   confirmation=self.confirmation, rules=entry.rules)
        except ValueError:
            return None
        return [v.to_record() for v in found], any(v.severity == "blocking" for v in found)


def _match_result(*values: Any) -> MatchResult:
    """``MatchResult(*values)``, its fields set at once: a frozen dataclass's ``__init__`` sets each of its thirteen
    fields through ``object.__setattr__`` (once per row the policy rules read). The same object: equality and repr
    read the same fields."""
    match = _new(MatchResult)
    match.__dict__.update(zip(_MATCH_FIELDS, values))
    return match


_new = object.__new__
_MATCH_FIELDS = tuple(item.name for item in fields(MatchResult))

_CATEGORIES = ("missing", "extra", "wrong_args", "duplicate", "malformed", "schema")
"""The mismatch categories, in the order a row lists them."""

_TYPES = {item.name: item.type for item in ROW_SCHEMA}


def _schema_records(ids: list[int], facts: "_CallFacts", calls: list[Call], violations: list) -> tuple[list, list]:
    """A row's schema findings and its violations with the ``tool_schema`` ones added (``ids``: its calls)."""
    findings, violations = [], list(violations)
    for index, k in enumerate(ids):
        fact = facts.fact(k)
        if fact[2]:
            name = calls[k].name
            findings += [{"call_index": index, "tool": name, "kind": kind, "path": path, "detail": detail}
                         for kind, path, detail in fact[2]]
            violations.append({"rule": SCHEMA_RULE, "severity": "advisory", "tool": name,
                               "detail": f"call #{index + 1} {fact[3]}"})
    return findings, violations


def _kept(starts: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The offsets of each row's kept elements in ``flat[kept]``, from the offsets of its rows in ``flat``."""
    return np.concatenate(([0], np.cumsum(kept)))[starts]


def _id_lists(starts: np.ndarray, ids: np.ndarray, rows: np.ndarray, records: pa.StructArray) -> pa.ListArray:
    """The call lists of ``rows`` as records, from a flat array of call ids and the offsets of every row's ids."""
    lengths = (starts[1:] - starts[:-1])[rows]
    taken = ids[_gather(starts[:-1][rows], lengths)]
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), records.take(pa.array(taken, pa.int64())))


def _sparse(values: dict, rows: np.ndarray, name: str) -> pa.Array:
    """A list column of ``rows`` from the values of the few rows that have one (the others' lists are empty)."""
    if not values:
        return _empty_lists(len(rows), name)
    # only the rows that have values are read in Python: the others' lists are empty offsets
    keys = np.fromiter(values, np.int64, len(values))
    keys.sort()
    local = np.searchsorted(rows, keys)
    keys = keys[(local < len(rows)) & (rows[np.minimum(local, len(rows) - 1)] == keys)] if len(rows) else keys[:0]
    lengths = np.zeros(len(rows), np.int64)
    listed = [values[k] for k in keys.tolist()]
    lengths[np.searchsorted(rows, keys)] = np.fromiter(map(len, listed), np.int64, len(listed))
    flat = [item for items in listed for item in items]
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, _TYPES[name].value_type))


def _empty_lists(count: int, name: str) -> pa.Array:
    """``count`` empty lists of column ``name``'s type."""
    kind = _TYPES[name]
    return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, np.int32), pa.int32()),
                                    pa.array([], kind.value_type))




def _plain_match(i: int, entry: Any, observed: list[Call], counts: _Counts) -> RuleMatch:
    """The row's match when its case has one plan, no argument rules and the plain unordered mode, and every
    observed call's arguments were captured: the batch's counts and leftover calls, with the wrong-argument
    pairing of the leftovers (what :func:`tooleval.matching.match_calls_evidence` gives for the row, field for
    field, and the rule-aware matcher for such a case)."""
    expected = entry.expected
    tp = int(counts.tp[i])
    duplicates = int(counts.duplicates[i])
    if tp == len(expected) and tp == len(observed):
        missing, extra, wrong = [], [], []
    else:
        e0, o0 = counts.e_start[i], counts.o_start[i]
        left = counts.missing
        missing = [call for k, call in enumerate(expected) if left[e0 + k]]
        left = counts.extra
        extra = [call for k, call in enumerate(observed) if left[o0 + k]]
        wrong = pair_wrong_args(missing, extra)
    evidence = match_evidence(expected, observed, tp, missing, extra, wrong, duplicates)
    return RuleMatch(**evidence, calls_match=evidence["fp"] == 0 and evidence["fn"] == 0)


def _ranks(codes: np.ndarray) -> np.ndarray:
    """Each element's occurrence number among the equal elements before it (0 for the first), in order."""
    if len(codes) == 0:
        return np.zeros(0, np.int64)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(codes)]))
    ranks = np.empty(len(codes), np.int64)
    ranks[order] = np.arange(len(codes)) - group_start
    return ranks


class _Owners:
    """The case-input map the join check reads for one row, without the whole dataset's map on the common path: a
    request whose input key is the row's own case input's is owned by the row's case, which is all the check asks
    then; any other key is looked up in the whole map (built on first need)."""

    __slots__ = ("key", "case_id", "full")

    def __init__(self, key: str, case_id: str, full: Callable[[], Mapping[str, list[str]]]) -> None:
        self.key, self.case_id, self.full = key, case_id, full

    def get(self, key: str, default: Any = None) -> Any:
        if key == self.key:
            return [self.case_id]
        return self.full().get(key, default)


def _row_inputs(entry: Any, sources: ScoringSources) -> Mapping[str, list[str]]:
    if sources.full_inputs is not None:
        return _Owners(entry.input_key, entry.case.case_id, sources.full_inputs)
    given = sources.given_inputs
    return given if not entry.extra else {**given, entry.input_key: [entry.case.case_id]}


def _provenance(out: _Columns, envelope: _EnvelopeRows, entries: list, observed: _Observed,
                sources: ScoringSources, bulk: "_Bulk | None", envelopes: pa.Table) -> None:
    """Every row's join check, first divergent boundary and failure owner (:mod:`tooleval.capture.provenance`),
    from the batch's columns read once: those of the common bulk rows (:func:`_plain_provenance`) as columns,
    the others row by row."""
    n = len(entries)
    plain = _plain_provenance(envelopes, bulk, sources) if bulk is not None else None
    if plain is None:
        rest = range(n)
    else:
        common = plain[0] | plain[1] | plain[2]
        rest = np.flatnonzero(~common).tolist()
        columns = {name: np.full(n, None, object) for name in ("provenance_status", "provenance_detail",
                                                                  "first_divergent_boundary", "failure_owner")}
        # the three verdicts such a row can get, worded by the check itself: no request recorded; its own case's
        # request with a response id; the same without one
        for rows, key, response in zip(plain, (None, "k", "k"), (None, "r", None)):
            status, detail = join_check_key("c", key, None, response, True, {"k": ["c"]})
            columns["provenance_status"][rows], columns["provenance_detail"][rows] = status, detail
            columns["failure_owner"][rows & ~bulk.exact] = failure_owner(status, None, False)
            columns["failure_owner"][rows & bulk.exact] = failure_owner(status, None, True)
    if len(rest):
        _provenance_rows(out, envelope, entries, observed, sources, bulk, rest)
    if plain is not None:
        for name, values in columns.items():
            if len(rest):
                taken = out[name]
                for i in rest:
                    values[i] = taken[i]
            out.arrays[name] = pa.array(values, pa.string())


def _plain_provenance(envelopes: pa.Table, bulk: "_Bulk", sources: ScoringSources
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The rows whose provenance the batch's columns decide alone: bulk rows of a verified batch whose digest is
    stored and that recorded neither adapter nor executor calls (no boundary to compare), and recorded either no
    request, or their own case's input as their request (the join check's owners of that key are the row's case
    alone, :class:`_Owners`). Three masks (numpy): no request; the case's request and a response id; the case's
    request and no response id. ``None`` when the batch has no such columns or the dataset's input map was
    given whole."""
    names = set(envelopes.schema.names)
    if sources.full_inputs is None or not sources.digests_verified or \
            not {"request_key", "trace_digest", "response_id", "adapter_calls", "executor_calls"} <= names:
        return None
    plain = bulk.fast & np.asarray(pc.and_(envelopes.column("trace_digest").is_valid(),
                                           pc.and_(envelopes.column("adapter_calls").is_null(),
                                                   envelopes.column("executor_calls").is_null())))
    keys = envelopes.column("request_key").combine_chunks()
    unrequested = plain & np.asarray(keys.is_null())
    if not (plain & ~unrequested).any():
        return unrequested, np.zeros_like(plain), np.zeros_like(plain)
    entries = bulk.entries
    own = pa.array([entry.input_key for entry in entries.distinct], pa.string()).take(pa.array(entries.index))
    requested = plain & np.asarray(pc.equal(keys, own).fill_null(False))
    response = envelopes.column("response_id")
    answered = np.asarray(pc.and_(response.is_valid(), pc.not_equal(response, "").fill_null(False)))
    return unrequested, requested & answered, requested & ~answered


def _provenance_rows(out: _Columns, envelope: _EnvelopeRows, entries: list, observed: _Observed,
                     sources: ScoringSources, bulk: "_Bulk | None", rows: Any) -> None:
    """:func:`_provenance` of ``rows``, one at a time."""
    values = envelope.values
    digests, case_ids = values("trace_digest"), values("case_id")
    request_ids, response_ids = values("request_id"), values("response_id")
    adapters, executors = values("adapter_calls"), values("executor_calls")
    verified = sources.digests_verified
    if envelope.view is not None:  # the request's join key, as capture computed it from the decoded request
        keys = values("request_key")
    else:
        keys = [None if request is None else input_key(loads_text(request)) or ""
                for request in values("request_messages_json")]
    calls = sources.memo.registry.calls
    exact, name_only, fp, fn = out["exact_match"], out["name_only"], out["fp"], out["fn"]
    statuses, details, boundaries, owners = (out[name] for name in ("provenance_status", "provenance_detail",
                                                                    "first_divergent_boundary", "failure_owner"))
    fast = bulk.fast.tolist() if bulk is not None else None
    bulk_exact = bulk.exact.tolist() if bulk is not None else None
    for i in rows:
        entry = entries[i]
        intact = digests[i] is not None if verified else digest_ok(envelope.record(i))
        status, detail = join_check_key(case_ids[i], keys[i], request_ids[i], response_ids[i], intact,
                                        _row_inputs(entry, sources))
        boundary = None
        if adapters[i] is not None or executors[i] is not None:
            adapter, executor = boundary_calls({"adapter_calls": adapters[i], "executor_calls": executors[i]})
            ids = observed.row(i)
            boundary = first_divergent_boundary([] if ids is None else [calls[k] for k in ids], adapter, executor)
        statuses[i], details[i], boundaries[i] = status, detail, boundary
        if fast is not None and fast[i]:
            matched = bool(bulk_exact[i])
        else:  # a name-only row is never an exact match, yet calls matched by name are no failure of the agent's
            matched = exact[i] if not name_only[i] else (fp[i] == 0 and fn[i] == 0)
        owners[i] = failure_owner(status, boundary, matched)


_CALL_COLUMNS = frozenset({"expected_calls", "observed_calls", "missing_calls", "extra_calls", "reference_calls"})
"""The row columns of call lists, whose values in :class:`_Columns` may be call ids (:func:`_call_column`)."""


def _call_column(values: list, registry: CallRegistry) -> pa.ListArray:
    """A list column of call records from one value per row: ``None`` (a null list), a sequence of registry ids,
    or a list of record dicts. Records of the registry's calls are taken from its array
    (:meth:`CallRegistry.record_array`), not converted from dicts again for every row that repeats them."""
    base = registry.record_array()
    width = len(base)
    offsets, flat, nulls, given = [0], [], [], []
    for value in values:
        if value is None:
            nulls.append(len(offsets) - 1)
        elif value and type(value[0]) is not int:  # records of calls the registry does not hold
            start = width + len(given)
            flat += range(start, start + len(value))
            given += value
        else:
            flat += value
        offsets.append(len(flat))
    records = base if not given else pa.concat_arrays([base, pa.array(given, base.type)])
    mask = None
    if nulls:
        null = np.zeros(len(values), bool)
        null[nulls] = True
        mask = pa.array(null)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), records.take(pa.array(flat, pa.int64())),
                                    mask=mask)


def _table(envelopes: pa.Table, out: _Columns, names: set, registry: CallRegistry, bulk: "_Bulk | None") -> pa.Table:
    """The rows as a table of :data:`ROW_SCHEMA`: the envelope's own columns taken over, constants repeated, the
    bulk rows' columns merged with the others' from ``out``, the rest from ``out``."""
    n = envelopes.num_rows
    constants = {"row_schema_version": ROW_SCHEMA_VERSION, "scorer_version": scorer_version(),
                 "ragas_version": ragas_version()}
    columns = bulk.columns(registry) if bulk is not None and len(bulk.rows) else {}
    others = bulk.others if columns else None
    order = None
    if columns and others:  # where each row is in the bulk rows' values followed by the others'
        order = np.empty(n, np.int64)
        order[bulk.rows] = np.arange(len(bulk.rows))
        order[others] = np.arange(len(bulk.rows), n)
        order = pa.array(order)
    arrays = []
    for item in ROW_SCHEMA:
        name = item.name
        if name in _TAKEN and name in names:
            arrays.append(envelopes.column(name).cast(item.type))
        elif name in constants:
            arrays.append(pa.array([constants[name]] * n, item.type))
        elif name in out.arrays:
            arrays.append(out.arrays[name].cast(item.type))
        elif name in columns:
            array = columns[name].cast(item.type)
            if others:
                values = out[name]
                rest = _array([values[i] for i in others], name, item.type, registry)
                array = pa.concat_arrays([array, rest]).take(order)
            arrays.append(array)
        elif name in out:
            arrays.append(_array(out[name], name, item.type, registry))
        else:
            arrays.append(pa.nulls(n, item.type))
    return pa.Table.from_arrays(arrays, schema=ROW_SCHEMA)


def _array(values: list, name: str, kind: pa.DataType, registry: CallRegistry) -> pa.Array:
    """Column ``name`` of ``kind`` from one Python value per row (call lists may hold registry ids)."""
    if name in _CALL_COLUMNS:
        return _call_column(values, registry).cast(kind)
    return pa.array(values, kind)
