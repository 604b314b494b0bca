"""Checking one trajectory in a test: capture it and score it exactly as a run does, in-process.

:func:`check_tool_calls` builds the case from the reference (and the rule keys given), turns ``observed`` into a
recorded trace (:mod:`tooleval.testing._observed`), redacts it when a key is given, captures it with the capture
stage's own function (:func:`tooleval.capture.envelope.generation_envelope`) and scores it with the scoring stage's
own :func:`tooleval.scoring.rows.score_rows`: the same matching, argument rules, match modes and policy rules as
``tooleval run``, and the same row. Nothing starts Prefect and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from pydantic import ValidationError

from tooleval.canonical import MAX_DEPTH, json_value_problem

from tooleval.capture.envelope import generation_envelope
from tooleval.capture.recorded import TraceLine, trace_line_problem
from tooleval.capture.redaction import DEFAULT_FIELDS, RedactionConfig, Redactor, case_reference_values
from tooleval.dataset import Dataset, load_dataset_cached, tool_schema_version
from tooleval.models import Call, Case, RecordedTrace, ToolSpec
from tooleval.rules import MatchMode, PolicyConfig, ToolTable, load_policy
from tooleval.scoring.rows import case_inputs, score_rows
from tooleval.storage import Row
from tooleval.testing._explain import explain
from tooleval.testing._observed import is_envelope, observed_trace

__all__ = ["RedactionKey", "ToolCallCheck", "ToolCallMismatch", "check_tool_calls", "assert_tool_calls", "RULE_KEYS"]

RULE_KEYS = frozenset(Case.model_fields) - {"case_id", "expected_calls"}
"""The case keys ``rules=`` accepts (docs/design.md "Cases", docs/rules.md "Case keys"): ``forbidden_tools``,
``allowed_tools``, ``no_repeated_calls``, ``sequence_rules``, ``argument_rules``, ``max_calls``,
``expected_outputs``, ``accepted_plans``, ``match_mode``, ``ordered``, ``input``..."""

@dataclass(frozen=True)
class RedactionKey:
    """A redaction key with field names redacted besides the defaults (``tooleval run --redact-field``), for
    :func:`check_tool_calls`' ``redaction_key`` when the default fields are not enough.

    Example: ``check_tool_calls(messages, expected, redaction_key=RedactionKey(key, fields=["thought"]))``.
    """

    key: str | bytes
    """``$TOOLEVAL_REDACTION_KEY``'s text, or the bytes of a results folder's ``redaction.key``; not empty."""
    fields: Iterable[str] | str = ()
    """Field names redacted besides the defaults; one name may be given alone, as a string."""


class ToolCallMismatch(AssertionError):
    """Raised by :func:`assert_tool_calls`; its text is :meth:`ToolCallCheck.explain` and ``check`` the result."""

    def __init__(self, check: "ToolCallCheck") -> None:
        super().__init__(check.explain())
        self.check = check

    def __reduce__(self):  # pickles across processes (pytest-xdist) with its check
        return (type(self), (self.check,))


@dataclass(frozen=True)
class ToolCallCheck:
    """The result of :func:`check_tool_calls`: the scored row and the verdict read from it.

    A trajectory **passes** when it could be scored, its calls match the reference under the match mode
    (``calls_match``) and no policy rule with severity ``blocking`` was violated.
    """

    row: Row
    """The row ``tooleval run`` writes for this trajectory (``run_id`` null; see :class:`tooleval.storage.Row`)."""
    case: Case
    """The case it was scored against (the reference, the rules and the match mode)."""

    @property
    def passed(self) -> bool:
        return self.row.error_kind is None and bool(self.row.calls_match) and not self.blocking_violations

    @property
    def calls_match(self) -> bool | None:
        """The row's ``calls_match``: the calls match under :attr:`mode` (``None`` when it could not be scored)."""
        return self.row.calls_match

    @property
    def mode(self) -> str:
        """The row's ``match_mode`` (``unordered``, ``strict``, ``subset``, ``superset``, ``subset_ordered``,
        ``superset_ordered``)."""
        return self.row.match_mode or MatchMode.of_case(self.case).label

    @property
    def violations(self) -> list[dict[str, Any]]:
        """Every violation ``{rule, severity, tool, detail}`` (docs/rules.md "Violations")."""
        return list(self.row.violations or [])

    @property
    def blocking_violations(self) -> list[dict[str, Any]]:
        return [v for v in self.violations if v["severity"] == "blocking"]

    def explain(self) -> str:
        """The verdict as a few lines: what is missing, extra, given wrong arguments (each differing path with
        both values) or out of order, and the blocking rules violated, by name (:mod:`tooleval.testing._explain`)."""
        return explain(self.row, self.mode, self.blocking_violations)

    def __str__(self) -> str:
        return self.explain()


def _tool_table(tools: Any, dataset: Dataset | None) -> ToolTable:
    if tools is None:
        return ToolTable(dataset.tools if dataset is not None else [])
    specs = tools.values() if isinstance(tools, Mapping) else tools
    return ToolTable(spec if isinstance(spec, ToolSpec) else ToolSpec.model_validate(spec) for spec in specs)


def _policy(policy: Any, dataset: Dataset | None) -> PolicyConfig:
    if policy is None:
        return load_policy(dataset.path) if dataset is not None else PolicyConfig()
    return policy if isinstance(policy, PolicyConfig) else PolicyConfig.model_validate(policy)


def _rule_keys(rules: Mapping[str, Any] | None) -> dict[str, Any]:
    rules = dict(rules or {})
    unknown = sorted(set(rules) - RULE_KEYS)
    if unknown:
        raise ValueError(f"unknown rule key(s) {unknown}; rules= takes case keys: {', '.join(sorted(RULE_KEYS))}")
    return rules


_OBSERVED_DEPTH = 2 * MAX_DEPTH
"""Deepest nesting of a trajectory given as Python values: argument objects nest inside the messages (in a run,
argument text is read with its own cap of :data:`MAX_DEPTH`, below the line's), and every reader after this
check recurses into the value."""


def _nesting_problem(value: Any, max_depth: int) -> str | None:
    """``"<path>: nested deeper than N levels"`` when the dicts and lists of ``value`` nest deeper than
    ``max_depth`` (a value that contains itself does), found without recursion; ``None`` otherwise. Other
    objects (a LangChain message) are not looked into."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            children = [(child, f"{path}.{key}" if path else str(key)) for key, child in item.items()]
        elif isinstance(item, (list, tuple)):
            children = [(child, f"{path}[{i}]") for i, child in enumerate(item)]
        else:
            continue
        if depth > max_depth:
            where = path if len(path) <= 60 else path[:60] + "..."
            return f"{where or '(top level)'}: nested deeper than {max_depth} levels (or it contains itself)"
        stack.extend((child, where, depth + 1) for child, where in children)
    return None


def _check_expected(expected: Any) -> None:
    """Refuse a reference no run could hold: argument values that are not JSON (``NaN``, ``Infinity``, a lone
    surrogate), nest deeper than :data:`MAX_DEPTH` or contain themselves."""
    if expected is None or isinstance(expected, (str, Case)):
        return
    for i, call in enumerate(expected):
        args = call.args if isinstance(call, Call) else call.get("args") if isinstance(call, Mapping) else None
        problem = _nesting_problem(args, MAX_DEPTH) or json_value_problem(args, where="args")
        if problem is not None:
            raise ValueError(f"expected call #{i} cannot be a reference: {problem}; a reference holds JSON values "
                             "only (no NaN or Infinity, no lone surrogate, no object inside itself)")


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        key = key.encode()
    elif isinstance(key, (bytes, bytearray, memoryview)):
        key = bytes(key)
    else:
        raise TypeError(f"redaction_key must be str or bytes (or a RedactionKey holding them), not "
                        f"{type(key).__name__}")
    if not key:
        raise ValueError("redaction_key is empty: tokens under an empty key can be recomputed by anyone; pass the "
                         "run's key (the text of $TOOLEVAL_REDACTION_KEY or the bytes of redaction.key)")
    return key


def _field_names(fields: Any) -> tuple[str, ...]:
    names = [fields] if isinstance(fields, str) else list(fields)  # one name given alone is that name
    wrong = [name for name in names if not isinstance(name, str) or not name]
    if wrong:
        raise TypeError(f"RedactionKey.fields takes field names (non-empty strings), not {wrong[0]!r}")
    return tuple(sorted(set(names)))


def _case(expected: Any, case_id: str, rules: dict[str, Any], mode: str | None, dataset: Dataset | None) -> Case:
    """The case to score against: ``expected`` (calls, a :class:`Case` or, with a dataset, a case id) with the rule
    keys and the mode laid over it."""
    if expected is None or isinstance(expected, str):
        if dataset is None:
            raise ValueError("expected is a case id (or missing): pass dataset= to look the case up, or the "
                             "expected calls themselves")
        wanted = case_id if expected is None else expected
        if wanted not in dataset.cases:
            raise ValueError(f"case {wanted!r} is not in {dataset.path / 'cases.jsonl'}")
        base: dict[str, Any] | Case = dataset.cases[wanted]
    elif isinstance(expected, Case):
        base = expected
    else:
        calls = list(expected)
        base = {"case_id": case_id, "input": "", "expected_calls": [
            {"name": c.name, "args": c.args} if isinstance(c, Call) else c for c in calls]}
    if mode is not None:
        chosen = MatchMode.from_label(mode)
        rules = {**rules, "match_mode": chosen.name, "ordered": chosen.ordered}
    if isinstance(base, Case) and not rules:
        return base
    data = base.model_dump() if isinstance(base, Case) else base
    try:
        return Case.model_validate({**data, **rules})
    except ValidationError as exc:
        raise ValueError(f"the reference or rules are not a valid case: {exc.errors()[0]['msg']} "
                         f"(at {'.'.join(map(str, exc.errors()[0]['loc'])) or 'the top level'})") from None


def _redactor(key: str | bytes, fields: Iterable[str], seeds: list[Any]) -> Redactor:
    key = _key_bytes(key)
    config = RedactionConfig(fields=sorted(set(DEFAULT_FIELDS) | set(fields)),
                             key_digest=hashlib.sha256(key).hexdigest())
    redactor = Redactor(config, key)
    redactor.seed(seeds)
    return redactor


@lru_cache(maxsize=4)
def _dataset_redaction(path: str, content_digest: str, key: bytes, fields: tuple[str, ...]):
    """A dataset's redactor (seeded with every case, as a run's is) and its case-input index, built once."""
    cases = load_dataset_cached(path).cases
    redactor = _redactor(key, fields, [v for case in cases.values() for v in case_reference_values(case)])
    return redactor, case_inputs(cases, redactor)


@lru_cache(maxsize=4)
def _dataset_inputs(path: str, content_digest: str) -> dict[str, list[str]]:
    return case_inputs(load_dataset_cached(path).cases, None)


def _load(dataset: str | Path | Dataset | None) -> Dataset | None:
    if dataset is None or isinstance(dataset, Dataset):
        return dataset
    return load_dataset_cached(dataset)


def check_tool_calls(
    observed: Any,
    expected: Any = None,
    *,
    mode: str | None = None,
    tools: Any = None,
    rules: Mapping[str, Any] | None = None,
    policy: Any = None,
    dataset: str | Path | Dataset | None = None,
    redaction_key: str | bytes | RedactionKey | None = None,
) -> ToolCallCheck:
    """Score one trajectory against its reference, as ``tooleval run`` would, and return the verdict.

    Args:
        observed: The agent's trajectory: OpenAI chat messages or Responses output items, LangChain messages, a
            list of ``{"name", "args"}`` calls, a recorded trace line or a tooleval trace envelope (every shape:
            :mod:`tooleval.testing._observed`).
        expected: The reference: a list of ``{"name", "args"}`` calls (or :class:`~tooleval.models.Call`), a
            :class:`~tooleval.models.Case`, or with ``dataset`` a case id; ``None`` with ``dataset`` takes the
            case that ``observed`` (a recorded trace or an envelope) names.
        mode: The match mode, overriding the case's: ``unordered`` (default), ``strict``, ``subset``,
            ``superset``, or ``subset_ordered`` / ``superset_ordered`` (docs/rules.md "Match modes"). To make the
            case's own ``subset`` or ``superset`` mode ordered without naming it, pass ``rules={"ordered": True}``.
        tools: Tool specs (tools.json entries as dicts or :class:`~tooleval.models.ToolSpec`, a list or a
            mapping by name): side effects, confirmation, argument rules, schemas. Default: the dataset's, or none.
        rules: Case keys laid over the reference (:data:`RULE_KEYS`: ``forbidden_tools``, ``allowed_tools``,
            ``no_repeated_calls``, ``sequence_rules``, ``argument_rules``, ``max_calls``, ``expected_outputs``,
            ``accepted_plans``...; docs/rules.md "Case keys").
        policy: gate.toml's ``[policy]`` (a dict or :class:`~tooleval.rules.PolicyConfig`). Default: the
            dataset's, or the defaults.
        dataset: A dataset folder (or a loaded :class:`~tooleval.dataset.Dataset`): its cases, tools and policy,
            and with a redaction key the redactor a run of it uses (seeded with every case).
        redaction_key: Redact the trajectory and the reference with this key (``$TOOLEVAL_REDACTION_KEY``'s text,
            or the bytes of a results folder's ``redaction.key``; not empty), or with a :class:`RedactionKey` that
            also names fields to redact besides the defaults; ``None``: no redaction. No key file is written.

    Returns:
        A :class:`ToolCallCheck`; ``.row`` equals, column for column but ``run_id``, the row ``tooleval run``
        writes for the same trace, dataset and redaction key (a test holds the two paths to it on the bundled
        data). ``dataset_revision`` is the envelope's, else the dataset's revision, else null.

    Raises:
        TypeError: ``observed`` is none of the accepted shapes; the redaction key is not ``str`` or ``bytes``; a
            redaction field is not a non-empty string.
        ValueError: an unreadable call or message; ``observed`` nesting deeper than 400 levels (or containing
            itself); a reference whose arguments are not JSON values (``NaN``, ``Infinity``, a lone surrogate),
            nest deeper than :data:`tooleval.canonical.MAX_DEPTH` or contain themselves; an invalid rule key, an
            unknown mode or case id; an empty ``redaction_key``.
    """
    if redaction_key is None or isinstance(redaction_key, RedactionKey):
        redaction = redaction_key
    else:
        redaction = RedactionKey(redaction_key)
    key = None if redaction is None else _key_bytes(redaction.key)
    fields = () if redaction is None else _field_names(redaction.fields)
    _check_expected(expected)
    problem = _nesting_problem(observed, _OBSERVED_DEPTH)
    if problem is not None:
        raise ValueError(f"observed cannot be read as a trajectory: {problem}")
    loaded = _load(dataset)
    rule_keys = _rule_keys(rules)
    if is_envelope(observed):
        envelope, trace = dict(observed), None
        case_id = str(envelope["case_id"])
    else:
        trace = observed_trace(observed)
        case_id = str(trace.get("case_id", expected if isinstance(expected, str) else "check"))
    case = _case(expected, case_id, rule_keys, mode, loaded)
    redactor, inputs = None, None
    if key is not None and loaded is not None:
        redactor, inputs = _dataset_redaction(str(loaded.path), loaded.content_digest, key, fields)
    elif key is not None:
        redactor = _redactor(key, fields, case_reference_values(case))
    elif loaded is not None:
        inputs = _dataset_inputs(str(loaded.path), loaded.content_digest)
    if trace is not None:
        trace = {"case_id": case.case_id, "trial": 0, **trace}  # a bare trajectory is trial 0 of the case
        envelope = _capture(trace, case, redactor, tool_schema_version(loaded.path) if loaded else None)
    tool_table = _tool_table(tools, loaded)
    (row,) = score_rows({envelope["case_id"]: case}, [envelope], redactor=redactor, inputs=inputs,
                        tools=tool_table, policy=_policy(policy, loaded))
    if row.dataset_revision is None and loaded is not None:
        row.dataset_revision = loaded.revision
    return ToolCallCheck(row, case)


def _capture(trace: dict[str, Any], case: Case, redactor: Redactor | None, tools_version: str | None) -> dict:
    """The envelope of a recorded-trace dict, as the generation and capture stages make it (redaction first)."""
    problem = trace_line_problem(TraceLine(0, trace))
    try:
        RecordedTrace.model_validate(trace)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"observed is not a trajectory tooleval can read: {'.'.join(map(str, err['loc']))}: "
                         f"{err['msg']}") from None
    if problem is not None:  # a value no row can keep (NaN, a lone surrogate): an error row, as in a run
        record = {"case_id": trace["case_id"], "trial": trace["trial"], "payload_json": None,
                  "error": f"bad_trace: {problem}"}
    else:
        payload = redactor.redact_trace(trace, case) if redactor is not None else trace
        record = {"case_id": trace["case_id"], "trial": trace["trial"],
                  "payload_json": json.dumps(payload, ensure_ascii=False), "error": None}
    return generation_envelope(record, datetime.now(timezone.utc), tools_version)


def assert_tool_calls(observed: Any, expected: Any = None, **options: Any) -> ToolCallCheck:
    """:func:`check_tool_calls`, raising when the trajectory does not pass.

    Args:
        observed: As :func:`check_tool_calls`.
        expected: As :func:`check_tool_calls`.
        **options: :func:`check_tool_calls`' keyword arguments (``mode``, ``tools``, ``rules``, ``policy``,
            ``dataset``, ``redaction_key``).

    Returns:
        The :class:`ToolCallCheck` of a passing trajectory.

    Raises:
        ToolCallMismatch: (an ``AssertionError``) the calls do not match under the mode, a blocking rule was
            violated, or the trajectory could not be scored; its message is :meth:`ToolCallCheck.explain`.
    """
    __tracebackhide__ = True  # pytest shows the test's own line, not this one
    check = check_tool_calls(observed, expected, **options)
    if not check.passed:
        raise ToolCallMismatch(check)
    return check
