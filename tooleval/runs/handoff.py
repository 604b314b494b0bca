"""Handoff: one folder with everything the owner of a failing row needs ("A handoff should contain the case and
dataset revisions, request and response identifiers, raw and normalized calls, tool schema version, the first boundary
where values differ, and a one-case replay command or fixture").

Rows and envelopes are selected by (case id, trial) — never by position — so a handoff link opens the named
case's evidence even when failed generations were filtered out of the run.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.scoring.rows import trace_reference_secrets
from tooleval.runs.published import PublishedRun, matching
from tooleval.storage import Publication, encode_name, read_versioned

__all__ = ["write_handoff", "rescore_command"]


def rescore_command(run: PublishedRun, case_id: str, trial: int) -> str:
    """The one-line command that rescores exactly this row into a new run."""
    return (f"tooleval rescore --out {shlex.quote(str(run.out))} --run-id {shlex.quote(run.run_id)} "
            f"--case={shlex.quote(case_id)} --trial {trial}")


def _select(run: PublishedRun, kind: str, case_id: str, trial: int | None) -> list[dict]:
    """The records of one case (and trial) of the run's ``kind`` partition, filtered file by file in Arrow: only
    that case's rows become Python objects, whatever the size of the run."""
    records: list[dict] = []
    for path in run.files(kind):
        records += matching(read_versioned(path, kind), case_id, trial).to_pylist()
    return records


def _raw_model_calls(messages_json: str | None) -> list[dict]:
    calls = []
    for message in json.loads(messages_json or "[]"):
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                body = call.get("function", call)
                calls.append({"name": body.get("name"), "arguments": body.get("arguments", body.get("args"))})
    return calls


def _json_ready(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def write_handoff(run: PublishedRun, case_id: str, trial: int | None = None) -> list[Path | str]:
    """Write ``runs/<run>/handoff/<encoded case>/trial-<t>/`` (the case id percent-encoded as one folder name:
    :func:`tooleval.storage.encode_name`) (``handoff.json``, ``case.json``, ``README.md``) for
    every trial of ``case_id`` in the run (or only ``trial``).

    The files are one publication of the run (:class:`tooleval.storage.Publication`): in a folder or on object
    storage (``s3://…``) alike, they appear together when the run's commit marker names them, under the run's
    lease. The run's rows and envelopes are read one committed part file at a time.

    Returns:
        The folders written: paths in a folder, URLs on object storage.

    Raises:
        InputFileError: the run has no row for that case (and trial).
    """
    rows = _select(run, "rows", case_id, trial)
    if not rows:
        raise InputFileError(run.location("rows"), None, f"run {run.run_id!r} has no row for case {case_id!r}"
                             + ("" if trial is None else f" trial {trial}") + ".", "check --case/--trial.")
    envelopes = {(e["case_id"], e["trial"]): e for e in _select(run, "traces", case_id, trial)}
    case = run.dataset.cases[case_id].model_dump(mode="json")
    redactor = run.redactor()
    if redactor is not None:  # as the references were redacted for these rows (their traces' own secrets too)
        extra: dict[str, str] = {}
        for envelope in envelopes.values():
            extra.update(trace_reference_secrets(redactor, run.dataset.cases[case_id], envelope))
        case = redactor.redact_reference(case, extra)
    folders = []
    with Publication(run.out) as publication:
        for row in sorted(rows, key=lambda r: r["trial"]):
            envelope = envelopes.get((row["case_id"], row["trial"]), {})
            command = rescore_command(run, case_id, row["trial"])
            handoff = {
                "case_id": row["case_id"],
                "trial": row["trial"],
                "dataset_revision": run.revision,
                "run_id": run.run_id,
                "request_id": row["request_id"],
                "response_id": row["response_id"],
                "trace_digest": row["trace_digest"],
                "tool_schema_version": row["tool_schema_version"],
                "provenance": {"status": row["provenance_status"], "detail": row["provenance_detail"]},
                "first_divergent_boundary": row["first_divergent_boundary"],
                "failure_owner": row["failure_owner"],
                "calls": {
                    "model_raw": _raw_model_calls(envelope.get("messages_json")),
                    "model_normalized": row["observed_calls"],
                    "adapter": envelope.get("adapter_calls"),
                    "executor": envelope.get("executor_calls"),
                },
                "expected_calls": row["expected_calls"],
                "mismatch": {key: row[key] for key in ("missing_calls", "extra_calls", "wrong_args",
                                                       "duplicate_calls", "malformed_calls", "mismatch_categories")},
                "scores": {key: row[key] for key in ("tp", "fp", "fn", "f1", "ragas_tool_call_f1", "exact_match")},
                "error_kind": row["error_kind"],
                "error_message": row["error_message"],
                "rescore_command": command,
            }
            folder = f"runs/{run.run_id}/handoff/{encode_name(case_id)}/trial-{row['trial']}"
            publication.add_json(f"{folder}/handoff.json", _json_ready(handoff))
            publication.add_json(f"{folder}/case.json", case)
            publication.add_text(f"{folder}/README.md", _readme(handoff))
            folders.append(run.location(folder))
    return folders


def _readme(handoff: dict) -> str:
    return (
        f"# Handoff: case {handoff['case_id']} trial {handoff['trial']}\n\n"
        f"- dataset revision: {handoff['dataset_revision']}; run: {handoff['run_id']}\n"
        f"- request: {handoff['request_id']}; response: {handoff['response_id']}\n"
        f"- provenance: {handoff['provenance']['status']} — {handoff['provenance']['detail']}\n"
        f"- first divergent boundary: {handoff['first_divergent_boundary']}; owner: {handoff['failure_owner']}\n"
        f"- tool schema version: {handoff['tool_schema_version']}\n"
        f"- f1 {handoff['scores']['f1']}, ragas ToolCallF1 {handoff['scores']['ragas_tool_call_f1']}\n\n"
        "Raw and normalized calls at each boundary and the mismatch objects are in `handoff.json`; the case is in "
        "`case.json`.\n\nReproduce this row:\n\n"
        f"```bash\n{handoff['rescore_command']}\n```\n"
    )
