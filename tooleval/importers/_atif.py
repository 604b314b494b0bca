"""Import Harbor's ATIF trajectories (Agent Trajectory Interchange Format, ``ATIF-v1.0`` to ``ATIF-v1.7``).

ATIF is what Harbor exports for the agents it runs (Claude Code, OpenHands, Codex, Gemini CLI...): one JSON
document per trajectory, ``{"schema_version", "session_id", "trajectory_id"?, "agent": {"name", "version",
"model_name"?}, "steps": [...], "subagent_trajectories"?: [...]}``.

**Source.** A trajectory file (Harbor writes ``<trial>/agent/trajectory.json``), a JSON-lines file of
trajectories, or a folder: its ``*.json`` files, and below it every ``trajectory*.json`` and ``*.atif.json``
(so a Harbor job folder is read without its ``result.json`` and ``config.json``), and ``*.jsonl`` files. Files are
read one at a time; a trajectory is one record.

**One trajectory is one case's trace.** Steps become chat-completions messages: ``system`` and ``user`` steps
their ``message`` (text, or content parts whose text parts are joined); an ``agent`` step an assistant message
whose ``tool_calls`` are the step's ``tool_calls`` (``tool_call_id``, ``function_name``, ``arguments`` as an object
written as JSON text, as text copied as written; a call without ``arguments`` is marked ``arguments_captured:
false``, never ``{}``), followed by one ``tool`` message per ``observation.results`` item (``source_call_id`` as
the id). Steps marked ``is_copied_context`` repeat an earlier context and are left out (their calls were made
before), and counted in ``metadata.copied_steps``.

**Sub-agents** (``subagent_trajectories``, embedded since v1.7): each embedded trajectory's messages are placed
right after the tool result whose ``subagent_trajectory_ref`` names it (by ``trajectory_id``, else
``session_id``), else at the end, and each of its tool calls carries ``"agent": {"name", "trajectory_id"}`` of
the sub-agent that made it (nested sub-agents likewise). A reference to a trajectory not embedded in the document
is kept in ``metadata.subagent_refs`` unresolved.

**Case and provenance.** The case id is ``session_id`` (else ``trajectory_id``, else the file's stem); ``--agent``
or the trajectory's ``agent.name`` names the agent, ``agent.model_name`` its model. ``metadata.atif`` keeps the
schema version, session, trajectory and step ids. Harbor keeps the verifier's reward beside the trajectory, in
the trial's ``result.json`` (``verifier_result.rewards.reward``): when that file is there, the reward becomes
``metadata.reward`` (the row's ``recorded_reward``). References come from ``--references`` (case lines keyed by
case id) or an ``expected_calls`` key in the trajectory's ``extra``.

**Skipped with the reason and place:** a document that is not an object with ``steps``, an unknown schema version
(the reason names it), a step that is not an object or has an unknown ``source``, a tool call without a
``function_name``; and what every conversation import skips. A truncated or invalid JSON file stops the import
when it is the only file (the error names the line), else it is skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.importers._common import check_revision, json_bytes, load_json
from tooleval.importers._conversations import Converted, _load_references, _Writer
from tooleval.importers._stream import DatasetStage, ImportReport, SkipLine, iter_source_lines, new_digest

__all__ = ["SCHEMA_VERSIONS", "import_atif"]

SCHEMA_VERSIONS = tuple(f"ATIF-v1.{minor}" for minor in range(8))
"""The ATIF schema versions read (Harbor's v1.0 to v1.7)."""

_VERSION = re.compile(r"ATIF-v(\d+)\.(\d+)")


def _text(message: Any) -> str | None:
    if message is None or isinstance(message, str):
        return message
    if isinstance(message, list):
        parts = [p.get("text") for p in message if isinstance(p, dict) and p.get("type", "text") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str)) or None
    return json.dumps(message, ensure_ascii=False)


def _call(call: Any, agent: dict[str, Any] | None) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("function_name"), str):
        raise SkipLine("a tool call has no function_name")
    out: dict[str, Any] = {"id": call.get("tool_call_id"), "type": "function",
                           "function": {"name": call["function_name"]}}
    if "arguments" not in call:
        out["arguments_captured"] = False
    else:
        given = call["arguments"]
        out["function"]["arguments"] = given if isinstance(given, str) or given is None else json.dumps(
            given, ensure_ascii=False)
    if agent is not None:
        out["agent"] = agent
    return out


def _check_version(document: dict[str, Any]) -> None:
    version = document.get("schema_version")
    match = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if match is None or int(match[1]) != 1 or int(match[2]) > 7:
        raise SkipLine(f"unknown ATIF schema version {version!r} (read: ATIF-v1.0 to ATIF-v1.7)")


class _Trajectory:
    """Turns one ATIF document (and its embedded sub-agents) into chat messages."""

    def __init__(self) -> None:
        self.copied = 0
        self.unresolved: list[dict[str, Any]] = []
        self.subagents: list[dict[str, Any]] = []

    def messages(self, document: Any, agent: dict[str, Any] | None, depth: int = 0) -> list[dict[str, Any]]:
        if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
            raise SkipLine("not an ATIF trajectory (no steps list)")
        if depth == 0 or "schema_version" in document:
            _check_version(document)
        children = [c for c in document.get("subagent_trajectories") or [] if isinstance(c, dict)]
        by_key = {}
        for child in children:
            for key in (child.get("trajectory_id"), child.get("session_id")):
                if isinstance(key, str):
                    by_key.setdefault(key, child)
        placed: set[int] = set()
        out: list[dict[str, Any]] = []
        for step in document["steps"]:
            if not isinstance(step, dict):
                raise SkipLine("a step is not a JSON object")
            if step.get("is_copied_context"):
                self.copied += 1
                continue
            source = step.get("source")
            if source in ("system", "user"):
                out.append({"role": source, "content": _text(step.get("message"))})
            elif source == "agent":
                message: dict[str, Any] = {"role": "assistant", "content": _text(step.get("message"))}
                calls = [_call(c, agent) for c in step.get("tool_calls") or []]
                if calls:
                    message["tool_calls"] = calls
                out.append(message)
            else:
                raise SkipLine(f"a step's source is {source!r}, not system, user or agent")
            observation = step.get("observation")
            for result in (observation or {}).get("results") or [] if isinstance(observation, dict) else []:
                if not isinstance(result, dict):
                    continue
                out.append({"role": "tool", "tool_call_id": result.get("source_call_id"),
                            "content": _text(result.get("content"))})
                for ref in result.get("subagent_trajectory_ref") or []:
                    key = next((ref.get(k) for k in ("trajectory_id", "session_id")
                                if isinstance(ref, dict) and isinstance(ref.get(k), str)), None)
                    child = by_key.get(key) if key is not None else None
                    if child is None:
                        self.unresolved.append(ref)
                        continue
                    if id(child) in placed:
                        continue
                    placed.add(id(child))
                    out.extend(self._subagent(child, depth))
        for child in children:
            if id(child) not in placed:
                out.extend(self._subagent(child, depth))
        return out

    def _subagent(self, child: dict[str, Any], depth: int) -> list[dict[str, Any]]:
        name = (child.get("agent") or {}).get("name") if isinstance(child.get("agent"), dict) else None
        who = {"name": name or "subagent", "trajectory_id": child.get("trajectory_id") or child.get("session_id")}
        # the sub-agent's task prompt (its user step) stays a user turn: the main agent's calls are only the
        # assistant messages, and the sub-agent's are told apart by the agent on each of its calls
        messages = self.messages(child, who, depth + 1)
        self.subagents.append({**who, "depth": depth + 1,
                               "calls": sum(len(m.get("tool_calls") or []) for m in messages)})
        return messages


def _reward(path: Path) -> float | None:
    """Harbor's verifier reward in the trial's ``result.json`` beside ``agent/trajectory.json``, if any."""
    result = path.parent.parent / "result.json" if path.parent.name == "agent" else path.parent / "result.json"
    if not result.is_file():
        return None
    try:
        value = json.loads(result.read_text(encoding="utf-8"))
        reward = value["verifier_result"]["rewards"]["reward"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return reward if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None


def _convert(document: Any, path: Path) -> Converted:
    if not isinstance(document, dict):
        raise SkipLine("not an ATIF trajectory (not a JSON object)")
    agent = document.get("agent") if isinstance(document.get("agent"), dict) else {}
    reader = _Trajectory()
    messages = reader.messages(document, None)
    case_id = document.get("session_id") or document.get("trajectory_id") or path.name.split(".")[0]
    fields: dict[str, Any] = {"case_id": case_id}
    extra = document.get("extra") if isinstance(document.get("extra"), dict) else {}
    if "expected_calls" in extra:
        fields["expected_calls"] = extra["expected_calls"]
    if isinstance(agent.get("name"), str):
        fields["agent"] = {"name": agent["name"], **({"model": agent["model_name"]}
                                                     if isinstance(agent.get("model_name"), str) else {})}
    reward = _reward(path)
    if reward is not None:
        fields["reward"] = reward
    atif = {"schema_version": document.get("schema_version"), "session_id": document.get("session_id"),
            "trajectory_id": document.get("trajectory_id"),
            "step_ids": [s.get("step_id") for s in document["steps"] if isinstance(s, dict)]}
    metadata: dict[str, Any] = {"atif": atif}
    if reader.subagents:
        metadata["subagents"] = reader.subagents
    if reader.unresolved:
        metadata["subagent_refs"] = reader.unresolved
    if reader.copied:
        metadata["copied_steps"] = reader.copied
    return Converted(messages, fields, metadata)


def _files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise InputFileError(src, None, "source not found.", "pass an ATIF trajectory file or a folder of them.")
    found = {*src.glob("*.json"), *src.rglob("trajectory*.json"), *src.rglob("*.atif.json"), *src.rglob("*.jsonl")}
    files = sorted(p for p in found if p.is_file())
    if not files:
        raise InputFileError(src, None, "no ATIF trajectory in the folder (*.json, trajectory*.json, *.jsonl).",
                             "pass the trajectory file, or Harbor's job folder.")
    return files


def _documents(files: list[Path], digest: Any):
    """``(document, path, where)`` for each trajectory; a file that is not JSON is skipped (or raised, alone)."""
    for path in files:
        if path.name.endswith(".jsonl"):
            for line in iter_source_lines([path], digest):
                if line.error == "blank":
                    continue
                yield (SkipLine(line.error) if line.error else line.value), path, line.where
            continue
        try:
            document, raw = load_json(path)
        except InputFileError as exc:
            if len(files) == 1:
                raise
            where = f"{path.name}:{exc.line}" if exc.line else path.name
            yield SkipLine(exc.problem.split(":")[0] if exc.line else exc.problem.rstrip(".")), path, where
            continue
        digest.update(path.name.encode() + b"\0" + raw)
        yield document, path, path.name


def import_atif(
    src: Path,
    out: Path,
    *,
    name: str | None = None,
    revision: str | None = None,
    references: Path | None = None,
    agent: str | None = None,
) -> ImportReport:
    """Import ATIF trajectories as one dataset folder (shapes and rules: this module's docstring).

    Args:
        src: A trajectory file (``.json``), a JSON-lines file of trajectories, or a folder (Harbor's job folder).
        out: The dataset folder to write (``dataset.json``, ``cases.jsonl``, ``traces.jsonl.gz``).
        name: Dataset name; default: the folder name of ``out``.
        revision: Dataset revision; default ``"src-"`` + 12 hex digits of the SHA-256 of the bytes read.
        references: Case lines keyed by case id (the trajectories' ``session_id``).
        agent: Agent name of every trace; default: each trajectory's ``agent.name``.

    Returns:
        The counts: ``read`` = trajectories (documents and lines), skips by reason with places.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: The source is missing, the only file is truncated or not JSON, or no case could be
            imported (nothing is written then).
    """
    if revision is not None:
        check_revision(revision)
    report = ImportReport()
    digest = new_digest()
    files = _files(Path(src))
    known = _load_references(Path(references), report, digest) if references is not None else None
    with DatasetStage(Path(out)) as stage:
        writer = _Writer(stage, known, agent or "atif")
        for document, path, where in _documents(files, digest):
            report.read += 1
            try:
                if isinstance(document, SkipLine):
                    raise document
                converted = _convert(document, path)
                if agent:
                    converted.fields.pop("agent", None)
                writer.add(converted, where, report.read, report)
            except SkipLine as skip:
                report.skip(skip.reason, where)
                continue
            report.converted += 1
        if known is not None:
            writer.write_referenced_cases(stage)
        if not writer.case_count or not report.converted:
            reasons = "; ".join(f"{reason} ({n})" for reason, n in report.skipped.most_common(3)) or "no trajectory"
            raise InputFileError(files[0], None, f"no case could be imported: {reasons}.",
                                 "pass ATIF-v1.0 to v1.7 trajectories (Harbor's agent/trajectory.json), with "
                                 "--references keyed by their session_id or expected_calls in their extra.")
        manifest = {
            "name": name or Path(out).resolve().name,
            "revision": revision or "src-" + digest.hexdigest()[:12],
            "schema_version": 1,
            "description": "Harbor ATIF trajectories imported by tooleval (atif).",
            "license": None,
            "source": "atif: " + ", ".join(p.name for p in files[:20]) + (" ..." if len(files) > 20 else ""),
        }
        stage.write_bytes("dataset.json", json_bytes(manifest))
        report.datasets.append(stage.commit())
    return report
