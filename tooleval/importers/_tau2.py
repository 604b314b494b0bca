"""Import tau2-bench results files (sierra-research/tau2-bench, MIT) as tooleval datasets.

Source: ``results/*.json``, one JSON document per run of one agent on one domain: ``{timestamp, info, tasks,
simulations}`` (``../shared/data/README.md`` "tau2-bench"). ``info.environment_info.domain_name`` names the
domain; the mode is ``no-user`` when the agent ran solo (``info.agent_info.implementation ==
"llm_agent_solo"`` or ``info.user_info.implementation == "dummy_user"``), else ``default``.

Decisions:

* One dataset per (domain, mode): ``DIR/<domain>/`` and ``DIR/<domain>-no-user/``; ``case_id`` = tau2's task
  id; one recorded-traces file per results file, ``traces/<results file stem>.jsonl.gz`` (one agent each).
* References are ``evaluation_criteria.actions``. With a simulated user, the user makes the actions whose
  ``requestor`` is ``user`` (in telecom, on the user's own device): those are not the agent's to make, so
  ``expected_calls`` holds the assistant's actions and ``metadata.user_actions`` the user's. In ``no-user`` mode
  there is no user: every action is the agent's, so all are expected. ``metadata.reference_action_ids`` lists
  the expected calls' ``action_id`` in order.
* An agent action identical to an earlier one (name, arguments and ``compare_args``) is not a second expected
  call: tau2 checks each reference against *any* call, so it never asks for the repeat (retail task 32 reads
  ``#W9373487`` as ``32_3`` and again as ``32_7``). ``metadata.repeated_reference_actions`` maps each dropped
  ``action_id`` to the one kept (9 of the 894 agent references in the shared files).
* ``compare_args`` becomes argument rules: ``null`` compares all arguments (no rule), ``[]`` compares the
  name only (``"*": "ignore"``), a list compares those arguments only (``"*": "ignore"`` plus a plain rule on
  each listed name, which wins as the more specific pattern). Rules are per tool in a case; if two actions of
  one tool in one task compared different arguments, the tool gets no rule (all arguments) and the import says
  so in its notes.
* Messages become OpenAI chat messages: each ``tool_calls`` entry ``{id, name, arguments: {...}, requestor}``
  becomes ``{id, type: "function", function: {name, arguments: "<JSON text>"}, requestor}``; tool messages gain
  ``tool_call_id``. Every other key is kept. The user's calls stay in ``role: "user"`` messages: kept in the
  trace, not scored as the agent's (the scorer reads assistant calls only).
* tau2's ``reward_info`` (``reward``, ``action_checks``...) is kept in the trace's ``metadata``; ``reward`` is
  the row's ``recorded_reward``.
* Two results files of one (domain, mode) that disagree on a task's reference actions stop the import with an
  error naming both files and the task.
* A simulation whose own reward info does not fit the task its ``task_id`` names (a results file whose
  simulations were joined to the wrong tasks) is refused: skipped with its file and simulation id, a note counting
  them per file and one naming each (exit 1), never scored against a reference that is not its task's. Every
  signal tau2 records is read (:func:`misalignment`): checked actions the task does not have, "No actions to
  evaluate" or fewer checks for a task with reference actions, another reward basis, other communicated
  information, other natural-language or environment assertions.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from tooleval.canonical import canonical_json
from tooleval.errors import InputFileError
from tooleval.importers._common import check_revision, json_bytes, load_json
from tooleval.importers._stream import DatasetStage, ImportReport

__all__ = ["import_tau2", "compare_args_rules"]

LICENSE = "MIT"


def _mode(info: dict[str, Any]) -> str:
    agent = (info.get("agent_info") or {}).get("implementation")
    user = (info.get("user_info") or {}).get("implementation")
    return "no-user" if agent == "llm_agent_solo" or user == "dummy_user" else "default"


def compare_args_rules(actions: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Argument rules for a case's reference actions, from tau2's ``compare_args``.

    Args:
        actions: tau2 actions ``{name, arguments, compare_args}``.

    Returns:
        ``({tool: {path: rule}}, conflicting tool names)``; tools whose actions all compare every argument get
        no entry.
    """
    by_tool: dict[str, set[str]] = defaultdict(set)
    for action in actions:
        by_tool[action["name"]].add(json.dumps(action.get("compare_args")))
    rules: dict[str, dict[str, Any]] = {}
    conflicts = sorted(name for name, kinds in by_tool.items() if len(kinds) > 1)
    for name, kinds in sorted(by_tool.items()):
        compare = json.loads(next(iter(kinds)))
        if len(kinds) > 1 or compare is None:
            continue
        rules[name] = {"*": "ignore", **{arg: {} for arg in compare}}
    return rules, conflicts


def _collapse_repeats(actions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Drop an action identical (name, arguments, compare_args) to an earlier one; map its id to the kept id.

    tau2 checks each reference on its own against *any* call, so a repeated identical reference never asks for
    a second call; kept as two expected calls it would (multiset matching), which is not what tau2 meant.
    """
    kept: dict[str, dict[str, Any]] = {}
    repeats: dict[str, str] = {}
    for action in actions:
        key = canonical_json([action["name"], action.get("arguments") or {}, action.get("compare_args")])
        if key in kept:
            repeats[str(action.get("action_id"))] = str(kept[key].get("action_id"))
        else:
            kept[key] = action
    return list(kept.values()), repeats


def _call(call: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in call.items() if k not in ("name", "arguments")}
    arguments = call.get("arguments")
    text = arguments if isinstance(arguments, str) or arguments is None else json.dumps(arguments, ensure_ascii=False)
    out.update({"type": "function", "function": {"name": call.get("name"), "arguments": text}})
    return out


def _messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [_call(call) for call in message["tool_calls"]]
        if message.get("role") == "tool" and "tool_call_id" not in message:
            message["tool_call_id"] = message.get("id")
        converted.append(message)
    return converted


def _case(task: dict[str, Any], domain: str, mode: str, notes: list[str]) -> dict[str, Any]:
    actions = (task.get("evaluation_criteria") or {}).get("actions") or []
    agent, repeats = _collapse_repeats(actions if mode == "no-user" else [a for a in actions if a.get("requestor") != "user"])
    rules, conflicts = compare_args_rules(agent)
    for name in conflicts:
        notes.append(f"{domain}/{task['id']}: actions of {name} compare different arguments; all are compared.")
    opening = task.get("ticket") if mode == "no-user" else (task.get("user_scenario") or {}).get("instructions")
    metadata = {k: v for k, v in task.items() if k not in ("id", "evaluation_criteria")}
    metadata["evaluation_criteria"] = {
        k: v for k, v in (task.get("evaluation_criteria") or {}).items() if k != "actions"
    }
    metadata["reference_action_ids"] = [a.get("action_id") for a in agent]
    if repeats:
        metadata["repeated_reference_actions"] = repeats
    if mode != "no-user":
        metadata["user_actions"] = [a for a in actions if a.get("requestor") == "user"]
    case = {
        "case_id": str(task["id"]),
        "input": opening if isinstance(opening, str) else json.dumps(opening, ensure_ascii=False),
        "expected_calls": [{"name": a["name"], "args": a.get("arguments") or {}} for a in agent],
        "slice": domain,
        "metadata": metadata,
    }
    if rules:
        case["argument_rules"] = rules
    return case


def _trace(simulation: dict[str, Any], agent: dict[str, Any]) -> dict[str, Any]:
    reward_info = simulation.get("reward_info")
    metadata = {k: v for k, v in simulation.items() if k not in ("messages", "task_id", "trial")}
    if isinstance(reward_info, dict) and reward_info.get("reward") is not None:
        metadata["reward"] = reward_info["reward"]
    metadata["source"] = "tau2-bench"
    return {
        "case_id": str(simulation["task_id"]),
        "trial": simulation.get("trial") or 0,
        "agent": agent,
        "messages": _messages(simulation.get("messages") or []),
        "metadata": metadata,
    }


MISALIGNED = "tau2 evaluated it against another task than its own (a misaligned export)"
"""Skip reason of a simulation whose own reward info does not fit the task its ``task_id`` names
(:func:`misalignment`)."""


def foreign_checks(simulation: dict[str, Any], task: dict[str, Any]) -> list[str]:
    """Action ids that tau2 checked for ``simulation`` and that cannot be its task's references: an id the
    task's ``evaluation_criteria.actions`` lack, or one with another name or other arguments there. ``[]`` when
    nothing was checked."""
    actions = {str(a.get("action_id")): a for a in _criteria(task).get("actions") or []}
    foreign = []
    for check in _reward_info(simulation).get("action_checks") or []:
        action = check.get("action") if isinstance(check, dict) else None
        if not isinstance(action, dict):
            continue
        own = actions.get(str(action.get("action_id")))
        if own is None or own.get("name") != action.get("name") or \
                canonical_json(own.get("arguments") or {}) != canonical_json(action.get("arguments") or {}):
            foreign.append(str(action.get("action_id")))
    return foreign


def _criteria(task: dict[str, Any]) -> dict[str, Any]:
    criteria = task.get("evaluation_criteria")
    return criteria if isinstance(criteria, dict) else {}


def _reward_info(simulation: dict[str, Any]) -> dict[str, Any]:
    info = simulation.get("reward_info")
    return info if isinstance(info, dict) else {}


def _words(text: Any) -> str:
    """An assertion's text compared loosely: tau2's task files were edited between releases (``"that the.
    agent"``, trailing spaces) while the reward info keeps the text it was judged on."""
    return "".join(ch for ch in str(text).lower() if ch.isalnum())


def misalignment(simulation: dict[str, Any], task: dict[str, Any]) -> list[str]:
    """Why ``simulation``'s own reward info cannot be an evaluation of ``task`` (the task its ``task_id`` names),
    in words; ``[]`` when everything it recorded fits.

    tau2 evaluates a finished simulation against its task's ``evaluation_criteria`` and records what it read:
    one ``action_checks`` entry per reference action (or the note "No actions to evaluate" when the task has
    none), the task's ``reward_basis``, one ``communicate_checks`` entry per ``communicate_info`` (or "No
    communicate_info to evaluate"), one ``nl_assertions`` entry per assertion, one ``env_assertions`` entry per
    environment assertion. A results file whose simulations were joined to the wrong tasks shows in any of them;
    a simulation tau2 did not evaluate (it ended otherwise than by the agent or the user stopping) records
    nothing to compare.
    """
    info = _reward_info(simulation)
    criteria = _criteria(task)
    reasons = []
    foreign = foreign_checks(simulation, task)
    if foreign:
        reasons.append(f"tau2 checked action(s) {', '.join(foreign[:3])}, which the task does not have")
    if not _evaluated(simulation, info):  # tau2 wrote no criteria of any task
        return reasons
    notes = {k: (v.get("note") if isinstance(v, dict) else None) for k, v in (info.get("info") or {}).items()} \
        if isinstance(info.get("info"), dict) else {}
    actions = criteria.get("actions") or []
    checks = info.get("action_checks") or []
    if actions and notes.get("action") == "No actions to evaluate":
        reasons.append(f"tau2 found no reference actions to check, and task {task.get('id')} has {len(actions)}")
    elif not foreign and actions and checks and len(checks) != len(actions):
        reasons.append(f"tau2 checked {len(checks)} reference actions, and task {task.get('id')} has {len(actions)}")
    basis = criteria.get("reward_basis")
    if basis is not None and sorted(map(str, info["reward_basis"])) != sorted(map(str, basis)):
        reasons.append(f"its reward basis {info['reward_basis']} is not the task's {basis}")
    communicate = criteria.get("communicate_info") or []
    if communicate and notes.get("communicate") == "No communicate_info to evaluate":
        reasons.append("tau2 found no information to check it communicated, and the task lists some")
    told = [c.get("info") for c in info.get("communicate_checks") or [] if isinstance(c, dict)]
    if told and sorted(map(_words, told)) != sorted(map(_words, communicate)):
        reasons.append("the information tau2 checked it communicated is not the task's")
    judged = [c.get("nl_assertion") for c in info.get("nl_assertions") or [] if isinstance(c, dict)]
    if judged and sorted(map(_words, judged)) != sorted(map(_words, criteria.get("nl_assertions") or [])):
        reasons.append("the assertions tau2 judged are not the task's")
    asserted = [c.get("env_assertion") for c in info.get("env_assertions") or [] if isinstance(c, dict)]
    own = criteria.get("env_assertions") or []
    if asserted and sorted(map(_assertion, asserted)) != sorted(map(_assertion, own)):
        reasons.append("the environment assertions tau2 checked are not the task's")
    return reasons


_EVALUATED_ENDS = ("agent_stop", "user_stop")
"""The termination reasons after which tau2 evaluates a simulation (``evaluate_simulation``); after any other it
records reward 0 with a default reward basis and no checks."""


def _evaluated(simulation: dict[str, Any], info: dict[str, Any]) -> bool:
    note = info.get("info").get("note") if isinstance(info.get("info"), dict) else None
    if isinstance(note, str) and note.startswith("Simulation terminated prematurely"):
        return False
    ended = simulation.get("termination_reason")
    return info.get("reward_basis") is not None and (ended is None or str(ended) in _EVALUATED_ENDS)


def _assertion(value: Any) -> str:
    if not isinstance(value, dict):
        return canonical_json(value) if value is not None else "null"
    return canonical_json({k: value.get(k) for k in ("env_type", "func_name", "arguments", "assert_value")})


def _source_files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise InputFileError(src, None, "source not found.", "pass a tau2-bench results file or folder.")
    found = sorted({*src.glob("*.json"), *(src / "results").glob("*.json")})
    if not found:
        raise InputFileError(src, None, "no *.json results file here or in results/.", "pass the results folder.")
    return found


def _check_results(path: Path, data: Any) -> tuple[str, str]:
    if not isinstance(data, dict) or not all(k in data for k in ("info", "tasks", "simulations")):
        raise InputFileError(path, None, "not a tau2-bench results file ({info, tasks, simulations}).",
                             "pass the JSON written by `tau2 run`.")
    domain = ((data["info"].get("environment_info") or {}).get("domain_name"))
    if not isinstance(domain, str) or not domain:
        raise InputFileError(path, None, "info.environment_info.domain_name is missing.", "pass an unmodified file.")
    return domain, _mode(data["info"])


def import_tau2(src: Path, out: Path, *, name: str | None = None, revision: str | None = None) -> ImportReport:
    """Import tau2-bench results files: one dataset per (domain, mode) under ``out``.

    Args:
        src: A results file, or a folder holding them (directly or under ``results/``).
        out: Parent folder: datasets go to ``out/<domain>/`` and ``out/<domain>-no-user/``.
        name: Dataset name prefix (``<name>-<domain>``); default: just the folder name (``airline``).
        revision: Revision of every dataset; default ``"src-"`` + 12 hex digits of the SHA-256 of the group's
            results files.

    Returns:
        The counts: simulations read and converted, tool calls (the agent's) written, and notes: per dataset,
        how many of the agent's reference calls tau2 checked and matched and on how many tooleval's verdict agrees,
        then every disagreement with its reason.

    Raises:
        UnsafeRevisionError: ``revision`` is unsafe.
        InputFileError: a file is not valid JSON or not a results file, or two files disagree on a task's
            reference actions.
    """
    if revision is not None:
        check_revision(revision)
    report = ImportReport()
    groups: dict[tuple[str, str], list[tuple[Path, dict[str, Any], bytes]]] = defaultdict(list)
    for path in _source_files(Path(src)):
        data, raw = load_json(path)
        groups[_check_results(path, data)].append((path, data, raw))
    planned = {key: _group_cases(key, members, report.notes) for key, members in sorted(groups.items())}
    for (domain, mode), members in sorted(groups.items()):
        report.datasets.append(_write_group(Path(out), (domain, mode), members, planned[domain, mode], name,
                                            revision, report))
    for dataset in report.datasets:
        report.notes += _cross_check(dataset)
    return report


def _cross_check(dataset: Path) -> list[str]:
    """One note per dataset comparing tau2's ``action_checks`` with tooleval's verdicts, and one per
    disagreement with its reason (:func:`tooleval.importers._tau2_checks.compare_action_checks`)."""
    from tooleval.importers._tau2_checks import compare_action_checks

    verdicts = [v for traces in sorted((dataset / "traces").glob("*.jsonl.gz"))
                for v in compare_action_checks(dataset, traces)]
    agent = [v for v in verdicts if v.side == "agent"]
    differ = [v for v in agent if v.tau2_match != v.tooleval_match]
    notes = [f"{dataset.name}: tau2 checked {len(agent)} of the agent's reference calls (matched {sum(v.tau2_match for v in agent)}); "
             f"tooleval agrees on {len(agent) - len(differ)}; {len(verdicts) - len(agent)} user-side checks are not scored."]
    notes += [f"{dataset.name}: task {v.case_id} action {v.action_id}: tau2 {'matched' if v.tau2_match else 'did not match'}, "
              f"tooleval {'did' if v.tooleval_match else 'did not'}: {v.reason}." for v in differ]
    return notes


def _group_cases(key: tuple[str, str], members, notes: list[str]) -> dict[str, dict[str, Any]]:
    """The cases of one (domain, mode), checking that its files agree on every task's reference actions."""
    domain, mode = key
    cases: dict[str, dict[str, Any]] = {}
    first: dict[str, tuple[Path, str]] = {}
    for path, data, _ in members:
        for task in data["tasks"]:
            actions = json.dumps((task.get("evaluation_criteria") or {}).get("actions"), sort_keys=True)
            task_id = str(task["id"])
            if task_id in first and first[task_id][1] != actions:
                raise InputFileError(
                    path, None,
                    f"task {task_id!r} has other reference actions than in {first[task_id][0].name}.",
                    "import the two results files separately (different --out); they are not one dataset.",
                )
            if task_id not in first:
                first[task_id] = (path, actions)
                cases[task_id] = _case(task, domain, mode, notes)
    return cases


def _write_group(parent: Path, key: tuple[str, str], members, cases, name, revision, report: ImportReport) -> Path:
    """Write the dataset of one (domain, mode) group to ``parent/<domain>`` (``parent/<domain>-<mode>`` for a
    mode other than the default) and return its folder."""
    domain, mode = key
    folder = domain if mode == "default" else f"{domain}-{mode}"
    digest = hashlib.sha256()
    with DatasetStage(parent / folder) as stage:
        for path, data, raw in members:
            digest.update(path.name.encode() + b"\0" + raw)
            info = data["info"]
            agent = {"name": path.stem, "version": str(info.get("git_commit") or "")[:8] or None,
                     "model": (info.get("agent_info") or {}).get("llm")}
            traces = stage.jsonl(f"traces/{path.stem}.jsonl.gz")
            seen: set[tuple[str, Any]] = set()
            tasks = {str(task["id"]): task for task in data["tasks"]}
            misaligned: list[str] = []
            for simulation in data["simulations"]:
                report.read += 1
                key = (str(simulation.get("task_id")), simulation.get("trial"))
                if key[0] not in tasks or key in seen:
                    reason = "repeats a (task, trial)" if key in seen else "simulation of a task not in the file"
                    report.skip(reason, f"{path.name}:{simulation.get('id')}")
                    continue
                reasons = misalignment(simulation, tasks[key[0]])
                if reasons:
                    # never scored against a reference that is not its task's: refused, named, counted
                    report.skip(MISALIGNED, f"{path.name}:{simulation.get('id')}")
                    misaligned.append(f"{path.name}: simulation {simulation.get('id')} (task {key[0]}) is not its "
                                      f"task's: {'; '.join(reasons)}")
                    continue
                seen.add(key)
                trace = _trace(simulation, agent)
                traces.write(trace)
                report.converted += 1
                report.calls += sum(len(m.get("tool_calls") or []) for m in trace["messages"]
                                    if m.get("role") == "assistant")
            if misaligned:
                report.notes.append(f"{path.name}: {len(misaligned)} simulations refused: what tau2 recorded of "
                                    "their evaluation does not fit the task their task_id names.")
            report.notes += misaligned[:10]
            if len(misaligned) > 10:
                report.notes.append(f"{path.name}: {len(misaligned) - 10} more simulations refused the same way.")
        lines = stage.jsonl("cases.jsonl")
        for case in cases.values():
            lines.write(case)
        manifest = {
            "name": f"{name}-{folder}" if name else folder,
            "revision": revision or "src-" + digest.hexdigest()[:12],
            "schema_version": 1,
            "description": (
                f"tau2-bench {domain} ({'no user: the agent makes every call' if mode == 'no-user' else 'simulated user'}"
                f"): {len(cases)} tasks, traces of {len(members)} results file(s)."
            ),
            "license": LICENSE,
            "source": "sierra-research/tau2-bench results/" + ", ".join(p.name for p, _, _ in members),
        }
        stage.write_bytes("dataset.json", json_bytes(manifest))
        return stage.commit()
