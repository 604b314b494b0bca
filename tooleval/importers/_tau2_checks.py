"""tooleval's per-reference-call verdicts beside tau2-bench's own ``action_checks``, for an imported dataset.

tau2 checks each reference action on its own: it matches when **any** call in the conversation (the agent's or
the user's) has its name and, on the compared arguments, its values (``Action.compare_with_tool_call``;
``compare_args: null`` compares the arguments the *call* carries, so a call that omits an argument still
matches). tooleval pairs each of the agent's calls with at most one reference (maximum matching under the
imported argument rules) and, with ``compare_args: null``, compares every argument of both sides. The importer
drops repeated identical references (tau2 never asks for the repeat), so the verdicts can still differ when the
agent omitted an argument, or when one call answered two references that differ only in arguments tau2 does not
compare: :func:`compare_action_checks` lists every reference with both verdicts and, where they differ, why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tooleval.canonical import canonical_value
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import load_dataset
from tooleval.models import Call, RecordedTrace, calls_from_messages

__all__ = ["ActionVerdict", "compare_action_checks"]


@dataclass(frozen=True)
class ActionVerdict:
    """One reference action of one simulation, with tau2's and tooleval's verdicts."""

    case_id: str
    trial: int
    action_id: str
    name: str
    side: Literal["agent", "user"]
    """``agent``: scored as the agent's (an expected call); ``user``: a simulated user's action, not scored."""
    tau2_match: bool
    tooleval_match: bool | None
    """``None`` for user-side actions (tooleval does not score them)."""
    reason: str | None = None
    """Why the verdicts differ; ``None`` when they agree (or for user-side actions)."""


def _tau2_equal(action: dict[str, Any], call: Call) -> bool:
    """tau2's ``Action.compare_with_tool_call`` (tau2-bench ``src/tau2/data_model/tasks.py``)."""
    if call.malformed or call.name != action["name"]:
        return False
    compare = action.get("compare_args")
    keys = list(call.args) if compare is None else compare
    expected = canonical_value(action.get("arguments") or {})
    return {k: v for k, v in call.args.items() if k in keys} == {k: v for k, v in expected.items() if k in keys}


def _reason(action: dict[str, Any], observed: list[Call], tooleval_match: bool) -> str:
    if tooleval_match:
        return "tooleval matched a call that tau2 did not accept"
    candidates = [c for c in observed if _tau2_equal(action, c)]
    if not candidates:
        return "tau2 matched a call that is not the agent's"
    expected = canonical_value(action.get("arguments") or {})
    omitted = sorted(set(expected) - set(candidates[0].args))
    if action.get("compare_args") is None and omitted:
        return (f"the agent omitted {', '.join(omitted)}; tau2 (compare_args null) compares only the arguments "
                "the call carries")
    return "one call answered two equal references in tau2; tooleval pairs each call with one reference"


def compare_action_checks(dataset: Path, traces: Path) -> list[ActionVerdict]:
    """Compare tau2's ``action_checks`` (kept in each trace's ``metadata.reward_info``) with tooleval's verdicts.

    Args:
        dataset: A dataset folder written by :func:`tooleval.importers.import_tau2`.
        traces: One of its ``traces/*.jsonl.gz`` files.

    Returns:
        One :class:`ActionVerdict` per action check tau2 recorded, in trace and check order. Simulations
        without ``action_checks`` (tau2 did not evaluate actions) contribute nothing.

    Raises:
        InputFileError: the dataset or traces file cannot be read.
        KeyError: a trace's case is not in the dataset.
    """
    from tooleval.rules import ArgumentRules, match_with_rules  # numpy and scipy: only when comparing

    loaded = load_dataset(dataset)
    tools = {tool.name: tool for tool in loaded.tools}
    verdicts: list[ActionVerdict] = []
    for line in iter_trace_lines(Path(traces)):
        trace = RecordedTrace.model_validate(line.data)
        checks = ((trace.metadata or {}).get("reward_info") or {}).get("action_checks") or []
        if not checks:
            continue
        case = loaded.cases[trace.case_id]
        ids = (case.metadata or {}).get("reference_action_ids") or []
        observed = calls_from_messages(trace.messages)
        result = match_with_rules(case.expected_calls, observed, ArgumentRules.for_case(case, tools))
        missing = {id(call) for call in result.missing_calls}
        matched = {ids[i]: id(call) not in missing for i, call in enumerate(case.expected_calls)}
        for dropped, kept in ((case.metadata or {}).get("repeated_reference_actions") or {}).items():
            matched[dropped] = matched[kept]
        for check in checks:
            action = check["action"]
            tau2 = bool(check["action_match"])
            if action["action_id"] not in matched:
                verdicts.append(ActionVerdict(case.case_id, trace.trial, action["action_id"], action["name"],
                                              "user", tau2, None))
                continue
            ours = matched[action["action_id"]]
            reason = None if ours == tau2 else _reason(action, observed, ours)
            verdicts.append(ActionVerdict(case.case_id, trace.trial, action["action_id"], action["name"],
                                          "agent", tau2, ours, reason))
    return verdicts
