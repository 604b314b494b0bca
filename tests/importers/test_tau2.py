"""tau2 importer on the 8 shared results files: the figures of ../shared/data/README.md and issue 13's Must-show
(280 rows; 2,964 agent calls scored, 902 user-side calls kept unscored; 1,111 action checks, 894 the agent's,
747 matched by tau2; tooleval's verdict equal to tau2's on >= 99 % of the 894), plus the layout and refusals."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DATA
from tests.support.importers import read_jsonl, score
from tooleval.errors import InputFileError
from tooleval.importers import compare_action_checks, import_tau2

RESULTS = SHARED_DATA / "tau2-bench" / "results"
GPT_AIRLINE = RESULTS / "gpt-4.1_airline_default_gpt-4.1_1trials.json"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("tau2")
    return out, import_tau2(RESULTS, out)


@pytest.fixture(scope="module")
def scored(imported) -> list[dict]:
    out, report = imported
    return [row for folder in report.datasets for traces in sorted((folder / "traces").glob("*.jsonl.gz"))
            for row in score(folder, traces)]


@pytest.fixture(scope="module")
def verdicts(imported):
    out, report = imported
    return [v for folder in report.datasets for traces in sorted((folder / "traces").glob("*.jsonl.gz"))
            for v in compare_action_checks(folder, traces)]


def test_one_dataset_per_domain_and_mode_one_traces_file_per_results_file(imported) -> None:
    out, report = imported
    assert sorted(p.name for p in out.iterdir()) == ["airline", "retail", "telecom", "telecom-no-user"]
    files = {folder.name: sorted(p.name for p in (folder / "traces").iterdir()) for folder in report.datasets}
    assert files["telecom-no-user"] == [
        "ft_gpt-4.1-2025-04-14_sierra_tau2-full-sft_BzrYdMNm_telecom_no-user_gpt-4.1_1trials.jsonl.gz",
        "gpt-4.1_telecom_no-user_gpt-4.1_1trials.jsonl.gz"]
    assert sum(len(names) for names in files.values()) == 8
    manifest = json.loads((out / "retail" / "dataset.json").read_text())
    assert manifest["name"] == "retail" and manifest["license"] == "MIT"
    assert (report.read, report.converted, report.skipped_total) == (280, 280, 0)


def test_rows_and_calls_match_the_measured_figures(scored: list[dict], imported) -> None:
    out, report = imported
    # README: 280 runs (airline 40, retail 80, telecom 160), 2,964 assistant calls, 902 user calls.
    assert len(scored) == 280
    assert Counter(row["slice"] for row in scored) == {"airline": 40, "retail": 80, "telecom": 160}
    assert sum(len(row["observed_calls"] or []) for row in scored) == 2964 == report.calls
    user_calls = sum(len(m.get("tool_calls") or []) for folder in report.datasets
                     for traces in (folder / "traces").glob("*.jsonl.gz") for t in read_jsonl(traces)
                     for m in t["messages"] if m["role"] == "user")
    assert user_calls == 902
    # README: rewards 193 runs 1.0, 87 runs 0.0, carried as recorded_reward.
    assert Counter(row["recorded_reward"] for row in scored) == {1.0: 193, 0.0: 87}


def test_per_reference_verdicts_equal_tau2s(verdicts) -> None:
    # Issue 13: 1,111 checks; 894 the agent's, 747 of them matched by tau2; 217 user-side, listed apart.
    agent = [v for v in verdicts if v.side == "agent"]
    user = [v for v in verdicts if v.side == "user"]
    assert (len(verdicts), len(agent), len(user)) == (1111, 894, 217)
    assert sum(v.tau2_match for v in agent) == 747
    assert all(v.tooleval_match is None for v in user)
    disagreements = [v for v in agent if v.tau2_match != v.tooleval_match]
    assert all(v.reason for v in disagreements)
    assert len(disagreements) <= 894 - 886  # >= 99 % agree (885.06 needed)
    assert disagreements == []  # measured: every verdict agrees once repeated identical references are one call


def test_user_actions_are_not_expected_with_a_user_but_are_without_one(imported) -> None:
    out, _ = imported
    task = "[mobile_data_issue]airplane_mode_on|bad_network_preference|data_mode_off|data_saver_mode_on[PERSONA:Hard]"
    source = json.loads((RESULTS / "gpt-4.1_telecom_default_gpt-4.1_1trials.json").read_text())
    actions = next(t for t in source["tasks"] if t["id"] == task)["evaluation_criteria"]["actions"]
    user_actions = [a for a in actions if a["requestor"] == "user"]
    with_user = {c["case_id"]: c for c in read_jsonl(out / "telecom" / "cases.jsonl")}[task]
    solo = {c["case_id"]: c for c in read_jsonl(out / "telecom-no-user" / "cases.jsonl")}[task]
    assert len(user_actions) == 4 and with_user["metadata"]["user_actions"] == user_actions
    assert all(c["name"] not in {a["name"] for a in user_actions} for c in with_user["expected_calls"])
    assert [c["name"] for c in solo["expected_calls"]] == [a["name"] for a in actions]


def test_compare_args_become_rules_and_repeats_are_one_call(imported) -> None:
    out, _ = imported
    cases = {c["case_id"]: c for c in read_jsonl(out / "retail" / "cases.jsonl")}
    # Retail task 32 reads #W9373487 twice (32_3, 32_7), #W5481803 (32_5, 32_9), #W7449508 (32_6, 32_11).
    assert cases["32"]["metadata"]["repeated_reference_actions"] == {"32_7": "32_3", "32_9": "32_5", "32_11": "32_6"}
    assert len(cases["32"]["expected_calls"]) == 13 - 3
    name_only = [c for c in cases.values() if c.get("argument_rules")]
    source = json.loads((RESULTS / "gpt-4.1_retail_defautl_gpt-4.1_1trials.json").read_text())
    empty = {t["id"] for t in source["tasks"] for a in t["evaluation_criteria"]["actions"] if a["compare_args"] == []}
    assert {c["case_id"] for c in name_only} == empty
    assert all(rule == {"*": "ignore"} for c in name_only for rule in c["argument_rules"].values())


def test_disagreeing_reference_actions_are_refused(tmp_path: Path) -> None:
    data = json.loads(GPT_AIRLINE.read_text())
    data["tasks"][0]["evaluation_criteria"]["actions"][0]["arguments"] = {"changed": True}
    shutil.copy(GPT_AIRLINE, tmp_path / GPT_AIRLINE.name)
    (tmp_path / "other_airline_default.json").write_text(json.dumps(data))
    with pytest.raises(InputFileError, match="other reference actions than in gpt-4.1_airline"):
        import_tau2(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_omitted_argument_disagreement_is_explained(tmp_path: Path) -> None:
    # tau2 (compare_args null) compares only the arguments the call carries; tooleval compares all of them.
    data = json.loads(GPT_AIRLINE.read_text())
    simulation = data["simulations"][0]
    task = next(t for t in data["tasks"] if t["id"] == simulation["task_id"])
    action = {"action_id": "x_0", "requestor": "assistant", "name": "get_user_details",
              "arguments": {"user_id": "u1", "verbose": True}, "info": None, "compare_args": None}
    task["evaluation_criteria"]["actions"] = [action]
    call = {"id": "k", "name": "get_user_details", "arguments": {"user_id": "u1"}, "requestor": "assistant"}
    simulation["messages"] = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    simulation["reward_info"]["action_checks"] = [{"action": action, "action_match": True, "action_reward": 1.0}]
    data["simulations"] = [simulation]
    (tmp_path / "one.json").write_text(json.dumps(data))
    report = import_tau2(tmp_path / "one.json", tmp_path / "out")
    (verdict,) = compare_action_checks(report.datasets[0], next((report.datasets[0] / "traces").iterdir()))
    assert (verdict.tau2_match, verdict.tooleval_match) == (True, False)
    assert verdict.reason.startswith("the agent omitted verbose")
    assert report.notes == [
        "airline: tau2 checked 1 of the agent's reference calls (matched 1); tooleval agrees on 0; 0 user-side checks "
        "are not scored.",
        f"airline: task {verdict.case_id} action x_0: tau2 matched, tooleval did not: {verdict.reason}.",
    ]


def test_a_simulation_checked_against_another_tasks_references_is_refused(tmp_path: Path) -> None:
    """A misaligned export: two simulations carry each other's task ids, so the references tau2 checked are not
    their task's. Each is refused by name (exit 1), never scored against the wrong reference."""
    from tooleval.importers._tau2 import MISALIGNED

    data = json.loads(GPT_AIRLINE.read_text())
    checked = [s for s in data["simulations"] if (s.get("reward_info") or {}).get("action_checks")]
    first, second = checked[0], checked[1]
    first["task_id"], second["task_id"] = second["task_id"], first["task_id"]
    (tmp_path / "misaligned.json").write_text(json.dumps(data))
    report = import_tau2(tmp_path / "misaligned.json", tmp_path / "out")
    assert report.skipped == {MISALIGNED: 2}  # skipped records: the import exits 1
    assert sorted(report.examples[MISALIGNED]) == sorted(f"misaligned.json:{s['id']}" for s in (first, second))
    assert any(f"simulation {first['id']} (task {first['task_id']})" in note for note in report.notes)
    rows = score(report.datasets[0], next((report.datasets[0] / "traces").iterdir()))
    assert len(rows) == len(data["simulations"]) - 2
    assert {(r["case_id"], r["trial"]) for r in rows}.isdisjoint(
        {(str(s["task_id"]), s.get("trial") or 0) for s in (first, second)})


def _swapped(path: Path, pick, *, drop_checks: bool = False) -> tuple[dict, dict, dict]:
    """The results file at ``path`` with the task ids of two of its simulations swapped (``pick(data)`` chooses
    them): a misaligned export, each simulation joined to the other's task. ``drop_checks`` empties both
    simulations' ``action_checks``, as an export that kept only the other parts of tau2's reward info."""
    data = json.loads(path.read_text())
    first, second = pick(data)
    first["task_id"], second["task_id"] = second["task_id"], first["task_id"]
    if drop_checks:
        for simulation in (first, second):
            simulation["reward_info"]["action_checks"] = []
    return data, first, second


def _tasks(data: dict) -> dict:
    return {str(t["id"]): t for t in data["tasks"]}


def test_a_simulation_without_action_checks_joined_to_a_task_with_actions_is_refused(tmp_path: Path) -> None:
    """The airline simulations of tasks without reference actions carry no action checks, only tau2's note "No
    actions to evaluate": joined to a task with actions (task ids swapped with a checked simulation), such a
    simulation would be scored fn > 0 beside its reward 1.0. Both simulations of the swap are refused."""
    from tooleval.importers._tau2 import MISALIGNED

    def pick(data):
        unchecked = next(s for s in data["simulations"]
                         if (s["reward_info"].get("info") or {}).get("action") == {"note": "No actions to evaluate"})
        checked = next(s for s in data["simulations"] if s["reward_info"].get("action_checks"))
        return unchecked, checked

    data, unchecked, checked = _swapped(GPT_AIRLINE, pick)
    assert not unchecked["reward_info"].get("action_checks")
    assert _tasks(data)[str(unchecked["task_id"])]["evaluation_criteria"]["actions"]  # now joined to actions
    (tmp_path / "misaligned.json").write_text(json.dumps(data))
    report = import_tau2(tmp_path / "misaligned.json", tmp_path / "out")
    assert report.skipped == {MISALIGNED: 2}
    assert sorted(report.examples[MISALIGNED]) == sorted(f"misaligned.json:{s['id']}" for s in (unchecked, checked))
    assert "misaligned.json: 2 simulations refused: what tau2 recorded of their evaluation does not fit the task " \
           "their task_id names." in report.notes
    named = next(n for n in report.notes if f"simulation {unchecked['id']}" in n)
    assert "tau2 found no reference actions to check, and task" in named
    rows = score(report.datasets[0], next((report.datasets[0] / "traces").iterdir()))
    assert len(rows) == len(data["simulations"]) - 2


@pytest.mark.parametrize("results, signal", [
    ("gpt-4.1_telecom_default_gpt-4.1_1trials.json", "the environment assertions tau2 checked are not the task's"),
    ("gpt-4.1_retail_defautl_gpt-4.1_1trials.json", "the information tau2 checked it communicated is not the task's"),
    ("gpt-4.1_airline_default_gpt-4.1_1trials.json", "the assertions tau2 judged are not the task's"),
])
def test_misalignment_shows_in_every_part_of_the_reward_info(tmp_path: Path, results: str, signal: str) -> None:
    """With the action checks gone, the other parts of tau2's reward info still tell a swapped simulation: its
    environment assertions (telecom), the information it was to communicate (retail), the natural-language
    assertions judged (airline)."""
    from tooleval.importers._tau2 import MISALIGNED

    key, criterion = {"the environment assertions": ("env_assertions", "env_assertions"),
                      "the information": ("communicate_checks", "communicate_info"),
                      "the assertions": ("nl_assertions", "nl_assertions")}[signal.split(" tau2")[0]]

    def pick(data):
        tasks = _tasks(data)
        have = [s for s in data["simulations"] if s["reward_info"].get(key)]
        for a in have:
            for b in have:
                if a is not b and tasks[str(a["task_id"])]["evaluation_criteria"][criterion] != \
                        tasks[str(b["task_id"])]["evaluation_criteria"][criterion]:
                    return a, b
        raise AssertionError(f"no two simulations with {key} of different tasks")

    data, first, second = _swapped(RESULTS / results, pick, drop_checks=True)
    (tmp_path / "r.json").write_text(json.dumps(data))
    report = import_tau2(tmp_path / "r.json", tmp_path / "out")
    assert report.skipped == {MISALIGNED: 2}
    for simulation in (first, second):
        assert signal in next(n for n in report.notes if f"simulation {simulation['id']}" in n)


def test_the_shared_results_files_import_without_a_refusal() -> None:
    """The 280 simulations of the shared files all fit their tasks, the 6 telecom ones that ended at max_steps or
    too_many_errors included (tau2 did not evaluate them: their default reward basis ['DB'] is no evidence)."""
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        report = import_tau2(RESULTS, Path(out))
    assert (report.read, report.converted, dict(report.skipped)) == (280, 280, {})
