"""The streaming pipeline behind the conversation formats (openai-chat, openai-responses, langchain).

Each format module only turns one source record into OpenAI chat-completions messages plus the record's other
top-level keys (:class:`Converted`). This module does the rest, one JSON line at a time:

* Keys of a record: ``case_id`` (text or integer; default ``line-<n>``), ``trial`` (integer >= 0; default: the
  number of earlier records of that case), any case field of docs/design.md "Cases" (``expected_calls``,
  ``slice``, ``accepted_plans``, ``argument_rules``, ``metadata``, ``input``...; ``input`` defaults to the
  messages before the first assistant reply), and trace fields: ``agent`` (an object or a name),
  ``request_id``, ``response_id``, ``reward`` (kept as ``metadata.reward``, the row's ``recorded_reward``) and
  ``trace_metadata``. Any other key is kept in the trace's ``metadata``.
* References come from the records' ``expected_calls``, or from ``--references FILE``: case lines keyed by
  ``case_id`` (read whole; they are small). A record whose case has no reference is skipped, with that reason.
* Every tool call is kept. Argument text is copied unchanged, so text that is not a JSON object reaches the
  scorer as written and becomes a malformed call there (:func:`tooleval.canonical.parse_arguments`).
* Two records of one case that disagree on a case field (anything but ``input``), or that repeat a
  ``(case_id, trial)``, are skipped with the reason; nothing is silently overwritten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tooleval.canonical import canonical_json
from tooleval.errors import InputFileError
from tooleval.models import Case, RecordedTrace, calls_from_messages
from tooleval.importers._common import check_revision, json_bytes
from tooleval.importers._stream import (
    DatasetStage,
    ImportReport,
    SkipLine,
    iter_source_lines,
    new_digest,
    source_files,
)

__all__ = ["CASE_FIELDS", "Converted", "ImportOptions", "conversation_importer", "import_conversations", "split_fields"]

CASE_FIELDS = frozenset(Case.model_fields) - {"case_id"}
TRACE_FIELDS = frozenset({"agent", "request_id", "response_id", "reward", "trace_metadata", "trial", "case_id"})
TRACES_FILE = "traces.jsonl.gz"


@dataclass
class Converted:
    """One source record in OpenAI chat-completions form."""

    messages: list[dict[str, Any]]
    fields: dict[str, Any] = field(default_factory=dict)
    """The record's other top-level keys (case and trace fields, anything else)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """What the format module kept aside (items it could not place in a message), for the trace's metadata."""
    trace_fields: dict[str, Any] = field(default_factory=dict)
    """Recorded-trace keys the format knows directly (``request``, ``executor_calls``), copied to the trace."""


def split_fields(record: dict[str, Any], message_keys: frozenset[str]) -> dict[str, Any]:
    """The keys of ``record`` that are not the format's message keys."""
    return {k: v for k, v in record.items() if k not in message_keys}


def _first_reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    end = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
    return messages[:end]


def _load_references(path: Path, report: ImportReport, digest: Any) -> dict[str, dict[str, Any]]:
    references: dict[str, dict[str, Any]] = {}
    for line in iter_source_lines(source_files(path), digest):
        if line.error is not None:
            if line.error != "blank":
                report.skip(f"reference line {line.error}", line.where)
            continue
        case = _valid_case(line.value, None)
        if isinstance(case, str):
            report.skip(f"reference line {case}", line.where)
        elif case["case_id"] in references:
            report.skip("reference line repeats a case_id", line.where)
        else:
            references[case["case_id"]] = case
    return references


def _valid_case(value: Any, default_input: Any) -> dict[str, Any] | str:
    """The case as a JSON object (validated by :class:`~tooleval.models.Case`), or why it is not one."""
    if not isinstance(value, dict):
        return "is not a JSON object"
    case_id = value.get("case_id")
    if isinstance(case_id, int) and not isinstance(case_id, bool):
        case_id = str(case_id)
    case = {"case_id": case_id, "input": value.get("input", default_input)}
    case.update((k, v) for k, v in value.items() if k in CASE_FIELDS and k != "input")
    try:
        Case.model_validate(case)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        return f"has an invalid case field ({where}: {error['msg']})"
    return case


def _digests(case: dict[str, Any]) -> dict[str, str]:
    """A digest of each case field but ``input`` (trials of one case may open differently)."""
    return {k: hashlib.sha256(canonical_json(v).encode("utf-8")).hexdigest() for k, v in case.items() if k != "input"}


def _differs(carried: dict[str, Any], first: dict[str, str]) -> bool:
    """Whether a record repeats a case field with another value than the case has (or one it lacks)."""
    return any(first.get(k) != digest for k, digest in _digests(carried).items())


class _Writer:
    """Routes converted records to cases and traces, checking case agreement and (case, trial) uniqueness."""

    def __init__(self, stage: DatasetStage, references: dict[str, dict[str, Any]] | None, agent: str) -> None:
        self.references = references
        self.agent = agent
        self.cases = stage.jsonl("cases.jsonl") if references is None else None
        self.traces = stage.jsonl(TRACES_FILE)
        self.identity: dict[str, dict[str, str]] = {}  # case_id -> field -> digest, from the case's first record
        self.trials: dict[str, int] = {}
        self.seen: set[tuple[str, int]] = set()
        self.inputs: dict[str, Any] = {}
        self.case_count = 0

    def add(self, converted: Converted, where: str, number: int, report: ImportReport) -> None:
        fields = converted.fields
        case_id = fields.get("case_id", f"line-{number}")
        if isinstance(case_id, int) and not isinstance(case_id, bool):
            case_id = str(case_id)
        if not isinstance(case_id, str) or not case_id:
            raise SkipLine("case_id is not a non-empty string")
        trial = fields.get("trial", self.trials.get(case_id, 0))
        if not isinstance(trial, int) or isinstance(trial, bool) or trial < 0:
            raise SkipLine("trial is not an integer >= 0")
        if (case_id, trial) in self.seen:
            raise SkipLine("repeats a (case_id, trial)")
        try:
            calls = calls_from_messages(converted.messages)
        except ValueError as exc:
            raise SkipLine("a tool call has no name") from exc
        case = self._case(case_id, fields, converted.messages)
        trace = self._trace(case_id, trial, converted, where)
        if case is not None:
            self.cases.write(case)
            self.case_count += 1
        self.traces.write(trace)
        self.seen.add((case_id, trial))
        self.trials[case_id] = max(self.trials.get(case_id, 0), trial + 1)
        report.calls += len(calls)
        report.malformed_calls += sum(call.malformed for call in calls)

    def _case(self, case_id: str, fields: dict[str, Any], messages: list[dict]) -> dict[str, Any] | None:
        """The case to write now (first record of a case, without --references), else None; SkipLine on conflict."""
        carried = {k: v for k, v in fields.items() if k in CASE_FIELDS and k != "input"}
        if self.references is not None:
            reference = self.references.get(case_id)
            if reference is None:
                raise SkipLine("case_id not in --references")
            if _differs(carried, _digests(reference)):
                raise SkipLine("case fields differ from --references")
            self.inputs.setdefault(case_id, fields.get("input", _first_reply(messages)))
            return None
        if case_id in self.identity:
            if _differs(carried, self.identity[case_id]):
                raise SkipLine("case fields differ from the case's first record")
            return None
        if "expected_calls" not in carried:
            raise SkipLine("no reference (no expected_calls and no --references)")
        case = _valid_case({**carried, "case_id": case_id}, fields.get("input", _first_reply(messages)))
        if isinstance(case, str):
            raise SkipLine(case)
        self.identity[case_id] = _digests(case)
        return case

    def _trace(self, case_id: str, trial: int, converted: Converted, where: str) -> dict[str, Any]:
        fields = converted.fields
        if not isinstance(fields.get("trace_metadata") or {}, dict):
            raise SkipLine("trace_metadata is not a JSON object")
        metadata = dict(fields.get("trace_metadata") or {})
        metadata.update(converted.metadata)
        metadata.update({k: v for k, v in fields.items() if k not in CASE_FIELDS and k not in TRACE_FIELDS})
        if "reward" in fields:
            metadata["reward"] = fields["reward"]
        metadata["source"] = where
        agent = fields.get("agent", self.agent)
        trace = {
            "case_id": case_id,
            "trial": trial,
            "agent": {"name": agent} if isinstance(agent, str) else agent,
            "messages": converted.messages,
            "metadata": metadata,
        }
        for key in ("request_id", "response_id"):
            if fields.get(key) is not None:
                trace[key] = fields[key]
        trace.update((k, v) for k, v in converted.trace_fields.items() if v is not None)
        try:
            RecordedTrace.model_validate(trace)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise SkipLine(f"not a recorded trace ({'.'.join(map(str, error['loc']))}: {error['msg']})") from exc
        return trace

    def write_referenced_cases(self, stage: DatasetStage) -> None:
        cases = stage.jsonl("cases.jsonl")
        for case_id, case in (self.references or {}).items():
            if case.get("input") is None and case_id in self.inputs:
                case = {**case, "input": self.inputs[case_id]}
            cases.write(case)
            self.case_count += 1


@dataclass(frozen=True)
class ImportOptions:
    """What the person importing says of the dataset an importer writes (``tooleval import``'s ``--name``,
    ``--revision``, ``--references`` and ``--agent``), the same for every conversation and span format."""

    name: str | None = None
    """Dataset name; default: the folder name of the dataset written."""
    revision: str | None = None
    """Dataset revision; default ``"src-"`` + 12 hex digits of the SHA-256 of the bytes read (references
    included)."""
    references: Path | None = None
    """Case lines keyed by ``case_id`` (docs/design.md "Cases"), instead of ``expected_calls`` on the records."""
    agent: str | None = None
    """Agent name of traces whose record names none; default: the format's (for conversations, the first source
    file's stem)."""


def import_conversations(
    src: Path,
    out: Path,
    *,
    fmt: str,
    convert: Callable[[Any], Converted],
    description: str,
    options: ImportOptions = ImportOptions(),
) -> ImportReport:
    """Stream a JSON-lines source of conversations into one dataset folder.

    Args:
        src: A JSON-lines file (``.gz`` allowed) or a folder of them (read in name order).
        out: The dataset folder to write (``dataset.json``, ``cases.jsonl``, ``traces.jsonl.gz``).
        fmt: The format's name (for ``dataset.json``'s ``source``).
        convert: The format's record converter; raises :class:`SkipLine` for a record it cannot convert.
        description: ``dataset.json``'s description.
        options: The dataset's name, revision, references and agent name (:class:`ImportOptions`).

    Returns:
        The counts. Skipped records are counted by reason; nothing is written when an error is raised.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: the source is missing or unreadable (a line that is not JSON is skipped, not an error),
            or no case at all could be imported (the message names the commonest skip reasons).
    """
    name, revision, references = options.name, options.revision, options.references
    if revision is not None:
        check_revision(revision)
    report = ImportReport()
    digest = new_digest()
    files = source_files(Path(src))
    known = _load_references(Path(references), report, digest) if references is not None else None
    agent_name = options.agent or files[0].name.split(".")[0]
    with DatasetStage(Path(out)) as stage:
        writer = _Writer(stage, known, agent_name)
        for line in iter_source_lines(files, digest):
            if line.error == "blank":
                continue
            report.read += 1
            try:
                if line.error is not None:
                    raise SkipLine(line.error)
                writer.add(convert(line.value), line.where, line.line, report)
            except SkipLine as skip:
                report.skip(skip.reason, line.where)
                continue
            report.converted += 1
        if known is not None:
            writer.write_referenced_cases(stage)
        if not writer.case_count or not report.converted:  # references alone are no dataset: no trace matched
            reasons = "; ".join(f"{reason} ({n})" for reason, n in report.skipped.most_common(3)) or "no records"
            raise InputFileError(files[0], None, f"no case could be imported: {reasons}.",
                                 "give each record expected_calls, or pass --references with case lines "
                                 "whose case_id the records carry.")
        manifest = {
            "name": name or Path(out).resolve().name,
            "revision": revision or "src-" + digest.hexdigest()[:12],
            "schema_version": 1,
            "description": description,
            "license": None,
            "source": f"{fmt}: " + ", ".join(p.name for p in files),
        }
        stage.write_bytes("dataset.json", json_bytes(manifest))
        report.datasets.append(stage.commit())
    return report


def conversation_importer(fmt: str, convert: Callable[[Any], Converted], what: str) -> Callable[..., ImportReport]:
    """The public ``import_<format>`` function of a conversation format.

    Args:
        fmt: The format's name (``openai-chat``).
        convert: Its record converter.
        what: What a source line holds, for the docstring and ``dataset.json`` (``"OpenAI chat-completions
            conversations"``).
    """

    def importer(
        src: Path,
        out: Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        references: Path | None = None,
        agent: str | None = None,
    ) -> ImportReport:
        return import_conversations(src, out, fmt=fmt, convert=convert,
                                    description=f"{what} imported by tooleval ({fmt}).",
                                    options=ImportOptions(name, revision, references, agent))

    importer.__name__ = importer.__qualname__ = "import_" + fmt.replace("-", "_")
    importer.__doc__ = (
        f"Import JSON lines of {what} (record shapes: this module's docstring).\n\n"
        "Args: ``src`` and ``out`` as :func:`tooleval.importers._conversations.import_conversations`, the others as "
        "the fields of :class:`tooleval.importers._conversations.ImportOptions`. Returns and errors: "
        ":func:`~tooleval.importers._conversations.import_conversations` (counts of records read, converted and "
        "skipped with reasons, and of the calls written)."
    )
    return importer
