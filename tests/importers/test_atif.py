"""atif importer: Harbor ATIF trajectories built to the published schema (v1.4 in Harbor's trial layout with the
verifier's reward beside it; v1.7 with an embedded sub-agent), each checked first by arize-phoenix-client's ATIF
validator (written after Harbor's reference models), imported, scored, and run from the command line; malformed
files refused with the file, the place and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from phoenix.client.helpers.atif._validate import _validate_atif_trajectory
from typer.testing import CliRunner

from tests.support.importers import read_jsonl, score
from tooleval.cli import app
from tooleval.errors import InputFileError
from tooleval.importers import import_atif

ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}
REFUND = {"name": "refund", "args": {"order_id": "A-104", "amount": 5}}


def _v14(session: str, order_id: str) -> dict:
    return {"schema_version": "ATIF-v1.4", "session_id": session,
            "agent": {"name": "claude-code", "version": "2.0.1", "model_name": "claude-sonnet-4-5"},
            "steps": [{"step_id": 1, "source": "system", "message": "You are a support agent."},
                      {"step_id": 2, "source": "user", "message": "Where is A-104?"},
                      {"step_id": 3, "source": "agent", "message": "Looking it up.",
                       "tool_calls": [{"tool_call_id": "c1", "function_name": "get_order",
                                       "arguments": {"order_id": order_id}}],
                       "observation": {"results": [{"source_call_id": "c1", "content": "shipped"}]}},
                      {"step_id": 4, "source": "agent", "message": "It shipped."}],
            "extra": {"expected_calls": [ORDER]}}


def _v17() -> dict:
    child = {"schema_version": "ATIF-v1.7", "trajectory_id": "sub-1",
             "agent": {"name": "refund-helper", "version": "1"},
             "steps": [{"step_id": 1, "source": "user", "message": "Refund 5 on A-104."},
                       {"step_id": 2, "source": "agent", "message": "",
                        "tool_calls": [{"tool_call_id": "r1", "function_name": "refund",
                                        "arguments": {"order_id": "A-104", "amount": 5}}],
                        "observation": {"results": [{"source_call_id": "r1", "content": "done"}]}}]}
    return {"schema_version": "ATIF-v1.7", "session_id": "run-17", "trajectory_id": "main",
            "agent": {"name": "orchestrator", "version": "1", "model_name": "gpt-5"},
            "steps": [{"step_id": 1, "source": "user", "message": [{"type": "text", "text": "Refund A-104."}]},
                      {"step_id": 2, "source": "agent", "message": "Delegating.", "is_copied_context": True},
                      {"step_id": 3, "source": "agent", "message": "Checking, then delegating.",
                       "tool_calls": [{"tool_call_id": "c1", "function_name": "get_order",
                                       "arguments": {"order_id": "A-104"}},
                                      {"tool_call_id": "c2", "function_name": "delegate",
                                       "arguments": {"task": "refund"}}],
                       "observation": {"results": [
                           {"source_call_id": "c1", "content": "shipped"},
                           {"source_call_id": "c2", "content": "refunded",
                            "subagent_trajectory_ref": [{"trajectory_id": "sub-1"}]}]}},
                      {"step_id": 4, "source": "agent", "message": "Refunded."}],
            "subagent_trajectories": [child]}


def _harbor_trial(root: Path, name: str, trajectory: dict, reward: float | None) -> Path:
    _validate_atif_trajectory(trajectory)  # the fixture follows the schema
    path = root / name / "agent" / "trajectory.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(trajectory, indent=2))
    (root / name / "config.json").write_text("{}")
    if reward is not None:
        (root / name / "result.json").write_text(json.dumps({"trial_name": name, "verifier_result": {
            "rewards": {"reward": reward}}}))
    return path


def test_a_harbor_job_folder_of_v14_trials(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _harbor_trial(job, "t-right", _v14("s-right", "A-104"), 1.0)
    _harbor_trial(job, "t-wrong", _v14("s-wrong", "B-7"), 0.0)
    report = import_atif(job, tmp_path / "out")
    assert (report.read, report.converted, report.skipped_total, report.calls) == (2, 2, 0, 2)
    traces = {t["case_id"]: t for t in read_jsonl(tmp_path / "out" / "traces.jsonl.gz")}
    right = traces["s-right"]
    assert [m["role"] for m in right["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert right["agent"] == {"name": "claude-code", "model": "claude-sonnet-4-5"}
    assert right["metadata"]["atif"]["step_ids"] == [1, 2, 3, 4] and right["metadata"]["reward"] == 1.0
    rows = {r["case_id"]: r for r in score(tmp_path / "out")}
    assert (rows["s-right"]["exact_match"], rows["s-right"]["recorded_reward"]) == (True, 1.0)
    assert (rows["s-wrong"]["exact_match"], rows["s-wrong"]["recorded_reward"]) == (False, 0.0)


def test_a_v17_embedded_subagent_has_its_calls_attributed_to_it(tmp_path: Path) -> None:
    trajectory = _v17()
    _validate_atif_trajectory(trajectory)
    src = tmp_path / "trajectory.json"
    src.write_text(json.dumps(trajectory))
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"case_id": "run-17", "input": "Refund A-104.",
                                "expected_calls": [ORDER, {"name": "delegate", "args": {"task": "refund"}}, REFUND]}))
    report = import_atif(src, tmp_path / "out", references=refs)
    assert (report.read, report.converted, report.calls) == (1, 1, 3)
    (trace,) = read_jsonl(tmp_path / "out" / "traces.jsonl.gz")
    calls = [c for m in trace["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert [(c["function"]["name"], c.get("agent")) for c in calls] == [
        ("get_order", None), ("delegate", None), ("refund", {"name": "refund-helper", "trajectory_id": "sub-1"})]
    # the sub-agent's turn sits right after the delegate call's result, before the main agent's last reply
    roles = [m["role"] for m in trace["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant", "tool", "assistant"]
    assert trace["metadata"]["subagents"] == [{"name": "refund-helper", "trajectory_id": "sub-1", "depth": 1,
                                               "calls": 1}]
    assert trace["metadata"]["copied_steps"] == 1
    (row,) = score(tmp_path / "out")
    assert row["exact_match"] is True


def test_malformed_files_are_refused_with_file_place_and_fix(tmp_path: Path) -> None:
    truncated = tmp_path / "cut.json"
    truncated.write_text(json.dumps(_v14("s", "A-104"), indent=2)[:-40])
    with pytest.raises(InputFileError) as info:
        import_atif(truncated, tmp_path / "out")
    assert info.value.path == str(truncated) and info.value.line is not None and info.value.fix
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**_v14("s", "A-104"), "schema_version": "ATIF-v2.0"}))
    with pytest.raises(InputFileError, match="unknown ATIF schema version 'ATIF-v2.0'") as info:
        import_atif(future, tmp_path / "out")
    assert "ATIF-v1.0 to v1.7" in info.value.fix
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps({"schema_version": "ATIF-v1.4", "trajectory": []}))
    with pytest.raises(InputFileError, match="no steps list"):
        import_atif(shape, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_in_a_folder_one_bad_file_is_skipped_and_the_cli_counts_it(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _harbor_trial(job, "t1", _v14("s1", "A-104"), 1.0)
    broken = job / "t2" / "agent" / "trajectory.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"schema_version": "ATIF-v1.4", "steps": [')
    runner = CliRunner()
    result = runner.invoke(app, ["import", "atif", str(job), "--out", str(tmp_path / "ds")], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "read 2, converted 1, skipped 1; 1 tool calls written" in result.output
    assert "trajectory.json:1" in result.output
    result = runner.invoke(app, ["run", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "res"),
                                 "--run-id", "atif"], env={"COLUMNS": "200"})
    assert result.exit_code in (0, 1), result.output
    summary = json.loads((tmp_path / "res" / "runs" / "atif" / "summary.json").read_text())
    assert (summary["rows"], summary["exact_match_rows"]) == (1, 1)
