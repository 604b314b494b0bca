"""Import tau-bench historical trajectories (sierra-research/tau-bench, MIT) as a tooleval dataset.

Source shape (``historical_trajectories/<model>-<domain>.json``, e.g. ``gpt-4o-airline.json``): a JSON list of
runs ``{task_id: int, trial: int, reward: float, info: {task: {user_id, actions: [{name, kwargs}], instruction,
outputs}, reward_info: {...} | null, ...}, traj: [OpenAI chat messages]}``; every task appears once per trial.

Decisions:

* One case per ``task_id``. Its ``input`` is the conversation before the agent's first reply (the system policy
  and the user's first message), taken from the run with the **lowest trial index**. The user is simulated by
  an LLM, so each trial opens with a different first message; the lowest trial is a stable, documented pick.
  The full conversation of every trial is kept, unchanged, in the traces.
* ``expected_calls`` are ``info.task.actions`` in order (``kwargs`` become ``args``). Runs of one task must carry
  the same task definition (actions, outputs, instruction, user id); otherwise the import stops.
* ``info.reward_info`` is null for runs that ended abnormally: their reward is kept as recorded (0.0) and
  ``metadata.reward_info_missing`` is true.
* Tool side effects (``tools.json``) follow the airline policy, which requires explicit user confirmation
  before any action that updates the booking database: the six writes in :data:`WRITE_TOOLS` are non-idempotent
  and require confirmation; every other tool (``transfer_to_human_agents``, ``think`` and ``calculate``
  included) is a read.
* Tool call ids are not unique within a run in the source: messages are copied unchanged and consumers must key
  calls by position.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tooleval.errors import InputFileError
from tooleval.importers._common import (
    check_revision,
    derive_revision,
    find_source_file,
    gzip_bytes,
    json_bytes,
    jsonl_bytes,
    load_json,
    write_dataset,
)

__all__ = ["WRITE_TOOLS", "import_tau_bench"]

AGENT_NAME = "tau-bench-tool-calling"
AGENT_VERSION = "59a200c6"  # sierra-research/tau-bench commit the trajectories were published at
LICENSE = "MIT"

# Per domain: the tools that update the database (from the domain's policy and tool code).
WRITE_TOOLS: Mapping[str, frozenset[str]] = {
    "airline": frozenset(
        {
            "book_reservation",
            "cancel_reservation",
            "update_reservation_flights",
            "update_reservation_baggages",
            "update_reservation_passengers",
            "send_certificate",
        }
    ),
}

_FILE_NAME = re.compile(r"(?P<model>.+)-(?P<domain>[a-z]+)\.json")
_RUN_KEYS = ("task_id", "trial", "reward", "info", "traj")
_TASK_KEYS = ("user_id", "actions", "instruction", "outputs")


def import_tau_bench(
    src: Path,
    out: Path,
    *,
    name: str | None = None,
    revision: str | None = None,
    tools: Path | None = None,
) -> Path:
    """Import a tau-bench historical trajectories file as a dataset folder.

    Args:
        src: The trajectories file (``<model>-<domain>.json``, the model and domain are read from the name), or a
            folder holding exactly one ``*.json`` file, directly or under ``historical_trajectories/``.
        out: The dataset folder to write.
        name: Dataset name; defaults to the name of ``out``.
        revision: Dataset revision; defaults to ``"src-"`` + the first 12 hex digits of the SHA-256 of the
            source file.
        tools: Optional tool file ``{repo, commit, note, tools: [{"type": "function", "function": {name,
            description, parameters}}]}`` (or the bare list); written as ``tools.json`` with side effects.

    Returns:
        ``out``, holding ``dataset.json``, ``cases.jsonl``, ``traces.jsonl.gz`` and, with ``tools``,
        ``tools.json``. Files already in ``out`` that the importer does not write are left alone.

    Raises:
        UnsafeRevisionError: ``revision`` is not a safe revision name.
        InputFileError: The source is missing, ambiguous, not valid JSON (the message names the line and
            column), not ``<model>-<domain>.json``, a run lacks a required key (named with the run's index),
            two runs share a (task, trial), runs of one task disagree on the task definition, or the tool file
            is malformed or its domain has no known write tools.
    """
    if revision is not None:
        check_revision(revision)
    path = find_source_file(Path(src), subdir="historical_trajectories")
    model, domain = _model_and_domain(path)
    runs, raw = load_json(path)
    runs = _check_runs(path, runs)

    cases = _cases(path, runs, domain)
    traces = [_trace(run, model) for run in sorted(runs, key=lambda r: (r["task_id"], r["trial"]))]
    manifest = {
        "name": name or Path(out).resolve().name,
        "revision": revision or derive_revision(raw),
        "schema_version": 1,
        "description": (
            f"tau-bench {domain}: {len(cases)} tasks with reference tool calls, and {len(traces)} recorded "
            f"{model} runs (tool-calling agent, LLM-simulated user)."
        ),
        "license": LICENSE,
        "source": f"sierra-research/tau-bench historical_trajectories/{path.name}",
    }
    files = {
        "dataset.json": json_bytes(manifest),
        "cases.jsonl": jsonl_bytes(cases),
        "traces.jsonl.gz": gzip_bytes(jsonl_bytes(traces)),
    }
    if tools is not None:
        files["tools.json"] = json_bytes(_tool_specs(Path(tools), domain))
    return write_dataset(Path(out), files)


def _model_and_domain(path: Path) -> tuple[str, str]:
    match = _FILE_NAME.fullmatch(path.name)
    if match is None:
        raise InputFileError(
            path,
            None,
            "cannot tell the model and the domain from the file name.",
            "keep tau-bench's file name <model>-<domain>.json, e.g. gpt-4o-airline.json.",
        )
    return match["model"], match["domain"]


def _check_runs(path: Path, runs: Any) -> list[dict[str, Any]]:
    """Check the shape of every run; return the runs."""
    if not isinstance(runs, list):
        raise InputFileError(path, None, "expected a JSON list of runs.", "pass a tau-bench trajectories file.")
    seen: set[tuple[int, int]] = set()
    for index, run in enumerate(runs):
        _require(path, index, run, _RUN_KEYS, "")
        _require(path, index, run["info"], ("task",), "info.")
        _require(path, index, run["info"]["task"], _TASK_KEYS, "info.task.")
        for key in ("task_id", "trial"):
            if not isinstance(run[key], int) or isinstance(run[key], bool):
                _bad(path, index, f"{key} is {run[key]!r}, not an integer")
        if not isinstance(run["reward"], (int, float)) or isinstance(run["reward"], bool):
            _bad(path, index, f"reward is {run['reward']!r}, not a number")
        if not isinstance(run["traj"], list):
            _bad(path, index, "traj is not a list of messages")
        actions = run["info"]["task"]["actions"]
        if not isinstance(actions, list):
            _bad(path, index, "info.task.actions is not a list")
        for number, action in enumerate(actions):
            _require(path, index, action, ("name", "kwargs"), f"info.task.actions[{number}].")
        key = (run["task_id"], run["trial"])
        if key in seen:
            _bad(path, index, f"task {key[0]} trial {key[1]} appears twice")
        seen.add(key)
    return runs


def _require(path: Path, index: int, obj: Any, keys: tuple[str, ...], prefix: str) -> None:
    if not isinstance(obj, dict):
        _bad(path, index, f"{prefix.rstrip('.') or 'the run'} is not a JSON object")
    for key in keys:
        if key not in obj:
            _bad(path, index, f"missing key {prefix}{key}")


def _bad(path: Path, index: int, problem: str) -> None:
    raise InputFileError(path, None, f"run {index}: {problem}.", "pass an unmodified tau-bench trajectories file.")


def _cases(path: Path, runs: list[dict[str, Any]], domain: str) -> list[dict[str, Any]]:
    """Build one case per task from the run with the lowest trial; check that all runs agree on the task."""
    first: dict[int, dict[str, Any]] = {}
    for run in runs:
        task_id = run["task_id"]
        if task_id in first:
            _check_same_task(path, first[task_id], run)
        if task_id not in first or run["trial"] < first[task_id]["trial"]:
            first[task_id] = run
    return [_case(first[task_id], domain) for task_id in sorted(first)]


def _check_same_task(path: Path, a: dict[str, Any], b: dict[str, Any]) -> None:
    task_a, task_b = a["info"]["task"], b["info"]["task"]
    for key in _TASK_KEYS:
        if task_a[key] != task_b[key]:
            raise InputFileError(
                path,
                None,
                f"task {a['task_id']}: trials {a['trial']} and {b['trial']} disagree on info.task.{key}.",
                "every run of a task must carry the same task definition; pass an unmodified file.",
            )


def _case(run: dict[str, Any], domain: str) -> dict[str, Any]:
    task = run["info"]["task"]
    traj = run["traj"]
    first_reply = next((i for i, m in enumerate(traj) if isinstance(m, dict) and m.get("role") == "assistant"), None)
    return {
        "case_id": str(run["task_id"]),
        "input": traj[:first_reply],
        "expected_calls": [{"name": a["name"], "args": a["kwargs"]} for a in task["actions"]],
        "expected_outputs": task["outputs"],
        "slice": domain,
        "metadata": {
            "instruction": task["instruction"],
            "user_id": task["user_id"],
            "source_task_id": run["task_id"],
        },
    }


def _trace(run: dict[str, Any], model: str) -> dict[str, Any]:
    return {
        "case_id": str(run["task_id"]),
        "trial": run["trial"],
        "agent": {"name": AGENT_NAME, "version": AGENT_VERSION, "model": model},
        "messages": run["traj"],
        "metadata": {
            "reward": float(run["reward"]),
            "reward_info_missing": run["info"].get("reward_info") is None,
            "source": "tau-bench",
        },
    }


def _tool_specs(path: Path, domain: str) -> list[dict[str, Any]]:
    """Turn OpenAI function-tool objects into tooleval tool specs with side effects."""
    if domain not in WRITE_TOOLS:
        raise InputFileError(
            path,
            None,
            f"no known write tools for the tau-bench domain {domain!r} (known: {', '.join(sorted(WRITE_TOOLS))}).",
            "import without a tool file, or add the domain's write tools to WRITE_TOOLS.",
        )
    data, _ = load_json(path)
    tools = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tools, list):
        raise InputFileError(path, None, "expected a list of tools or {tools: [...]}.", "pass a tool file.")
    writes = WRITE_TOOLS[domain]
    specs = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or "name" not in function or "parameters" not in function:
            raise InputFileError(
                path,
                None,
                f"tool {index} is not an OpenAI function tool with a name and parameters.",
                'each tool must be {"type": "function", "function": {"name", "description", "parameters"}}.',
            )
        write = function["name"] in writes
        specs.append(
            {
                "name": function["name"],
                "description": function.get("description"),
                "parameters": function["parameters"],
                "side_effect": "write" if write else "read",
                "idempotent": not write,
                "requires_confirmation": write,
                "family": domain,
            }
        )
    return specs
