"""tau-bench importer and the bundled ``datasets/tau-bench-airline``.

Expected figures are the ones measured independently on the source (``../shared/data/README.md``), or are
recomputed here from the source file itself, never from the importer's output.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from tooleval.errors import InputFileError, UnsafeRevisionError
from tooleval.importers import import_tau_bench

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "tau-bench"
SOURCE = DATA / "historical_trajectories" / "gpt-4o-airline.json"
TOOLS = DATA / "tools" / "airline_tools.json"
TASKS = DATA / "tasks" / "airline_tasks_test.json"
BUNDLED = REPO / "datasets" / "tau-bench-airline"
WRITTEN = ("dataset.json", "cases.jsonl", "tools.json", "traces.jsonl.gz")
WRITES = {
    "book_reservation",
    "cancel_reservation",
    "update_reservation_flights",
    "update_reservation_baggages",
    "update_reservation_passengers",
    "send_certificate",
}


def _bundled_import(out: Path) -> Path:
    return import_tau_bench(SOURCE, out, name="tau-bench-airline", revision="gpt-4o-airline-v1", tools=TOOLS)


def _read_jsonl(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundled_import(tmp_path_factory.mktemp("import") / "tau-bench-airline")


@pytest.fixture(scope="module")
def cases(imported: Path) -> dict[str, dict]:
    rows = _read_jsonl((imported / "cases.jsonl").read_bytes())
    return {row["case_id"]: row for row in rows}


@pytest.fixture(scope="module")
def traces(imported: Path) -> list[dict]:
    return _read_jsonl(gzip.decompress((imported / "traces.jsonl.gz").read_bytes()))


@pytest.fixture(scope="module")
def source_runs() -> list[dict]:
    return json.loads(SOURCE.read_text(encoding="utf-8"))


def _tool_calls(trace: dict) -> int:
    return sum(len(m.get("tool_calls") or []) for m in trace["messages"] if m["role"] == "assistant")


def test_writes_the_dataset_files(imported: Path) -> None:
    assert sorted(p.name for p in imported.iterdir()) == sorted(WRITTEN)
    manifest = json.loads((imported / "dataset.json").read_text(encoding="utf-8"))
    description = manifest.pop("description")
    assert "50 tasks" in description and "200 recorded gpt-4o runs" in description
    assert manifest == {
        "name": "tau-bench-airline",
        "revision": "gpt-4o-airline-v1",
        "schema_version": 1,
        "license": "MIT",
        "source": "sierra-research/tau-bench historical_trajectories/gpt-4o-airline.json",
    }


def test_one_case_per_task_in_task_order(imported: Path, cases: dict[str, dict]) -> None:
    order = [row["case_id"] for row in _read_jsonl((imported / "cases.jsonl").read_bytes())]
    assert order == [str(i) for i in range(50)]
    assert {c["slice"] for c in cases.values()} == {"airline"}


def test_expected_calls_equal_the_separately_extracted_tasks(cases: dict[str, dict]) -> None:
    tasks = json.loads(TASKS.read_text(encoding="utf-8"))["tasks"]
    assert len(tasks) == len(cases) == 50
    for task_id, task in enumerate(tasks):
        case = cases[str(task_id)]
        assert case["expected_calls"] == [{"name": a["name"], "args": a["args"]} for a in task["actions"]]
        assert case["expected_outputs"] == task["outputs"]
        # The trajectories were recorded with an older opening of the instructions: tasks 0-36 say "You are
        # <user>" (task 12 "You <user>", task 18 with two spaces) where the tasks module at the same commit says
        # "Your user id is <user>"; the rest is identical. The case keeps what the simulated user was given.
        opening = re.compile(r"^(You are|You|Your user id is)\s+")
        assert opening.sub("", case["metadata"]["instruction"]) == opening.sub("", task["instruction"])
        assert (case["metadata"]["instruction"] == task["instruction"]) is (task_id > 36)
        assert case["metadata"]["user_id"] == task["user_id"]
        assert case["metadata"]["source_task_id"] == task_id


def test_case_input_is_the_opening_of_the_lowest_trial(cases: dict[str, dict], source_runs: list[dict]) -> None:
    trial0 = {run["task_id"]: run for run in source_runs if run["trial"] == 0}
    for case_id, case in cases.items():
        assert [m["role"] for m in case["input"]] == ["system", "user"]
        assert case["input"] == trial0[int(case_id)]["traj"][:2]
        assert case["metadata"]["instruction"] == trial0[int(case_id)]["info"]["task"]["instruction"]


def test_traces_one_line_per_run_sorted(traces: list[dict], source_runs: list[dict]) -> None:
    assert len(traces) == 200
    keys = [(int(t["case_id"]), t["trial"]) for t in traces]
    assert keys == sorted(keys) == sorted((r["task_id"], r["trial"]) for r in source_runs)
    by_key = {(r["task_id"], r["trial"]): r for r in source_runs}
    for trace in traces:
        assert trace["agent"] == {"name": "tau-bench-tool-calling", "version": "59a200c6", "model": "gpt-4o"}
        assert trace["messages"] == by_key[(int(trace["case_id"]), trace["trial"])]["traj"]
        assert "request_id" not in trace and "response_id" not in trace


def test_call_counts_match_the_measured_figures(cases: dict[str, dict], traces: list[dict]) -> None:
    assert sum(len(cases[t["case_id"]]["expected_calls"]) for t in traces) == 632
    assert sum(_tool_calls(t) for t in traces) == 1164
    assert sum(not cases[t["case_id"]]["expected_calls"] for t in traces) == 28
    assert sum(_tool_calls(t) == 0 for t in traces) == 18


def test_rewards_are_carried(traces: list[dict], source_runs: list[dict]) -> None:
    passed = sum(run["reward"] == 1.0 for run in source_runs)
    assert passed == 84
    assert sum(t["metadata"]["reward"] for t in traces) == passed
    assert passed / len(traces) == pytest.approx(0.42)
    assert {t["metadata"]["source"] for t in traces} == {"tau-bench"}
    # 5 runs ended abnormally (info.reward_info is null).
    missing = {(t["case_id"], t["trial"]) for t in traces if t["metadata"]["reward_info_missing"]}
    assert missing == {("33", 0), ("2", 1), ("9", 2), ("9", 3), ("46", 3)}
    assert all(t["metadata"]["reward"] == 0.0 for t in traces if t["metadata"]["reward_info_missing"])


def test_tools_have_side_effects(imported: Path, cases: dict[str, dict]) -> None:
    tools = json.loads((imported / "tools.json").read_text(encoding="utf-8"))
    assert len(tools) == 14
    assert {t["name"] for t in tools if t["side_effect"] == "write"} == WRITES
    for tool in tools:
        write = tool["name"] in WRITES
        assert tool["side_effect"] == ("write" if write else "read")
        assert tool["idempotent"] is (not write)
        assert tool["requires_confirmation"] is write
        assert tool["family"] == "airline"
        assert tool["parameters"]["type"] == "object"
    for name in ("transfer_to_human_agents", "think", "calculate"):
        assert next(t for t in tools if t["name"] == name)["side_effect"] == "read"
    referenced = {call["name"] for case in cases.values() for call in case["expected_calls"]}
    assert referenced <= {t["name"] for t in tools}


def test_bundled_dataset_equals_a_fresh_import(imported: Path) -> None:
    for name in WRITTEN:
        if name.endswith(".gz"):
            assert gzip.decompress((BUNDLED / name).read_bytes()) == gzip.decompress((imported / name).read_bytes())
        assert (BUNDLED / name).read_bytes() == (imported / name).read_bytes(), name
    assert (BUNDLED / "LICENSE").read_bytes() == (DATA / "LICENSE").read_bytes()


def test_import_is_deterministic(tmp_path: Path, imported: Path) -> None:
    again = _bundled_import(tmp_path / "again")
    for name in WRITTEN:
        assert (again / name).read_bytes() == (imported / name).read_bytes(), name


def test_reimport_replaces_only_its_files(tmp_path: Path, imported: Path) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    (out / "LICENSE").write_text("kept\n")
    (out / "cases.jsonl").write_text("stale\n")
    _bundled_import(out)
    assert (out / "LICENSE").read_text() == "kept\n"
    assert sorted(p.name for p in out.iterdir()) == sorted([*WRITTEN, "LICENSE"])
    for name in WRITTEN:
        assert (out / name).read_bytes() == (imported / name).read_bytes(), name


def test_defaults_name_and_revision(tmp_path: Path) -> None:
    out = import_tau_bench(SOURCE, tmp_path / "my-set")
    manifest = json.loads((out / "dataset.json").read_text(encoding="utf-8"))
    assert manifest["name"] == "my-set"
    assert manifest["revision"] == "src-" + hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    assert not (out / "tools.json").exists()


def test_source_may_be_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tau-bench"
    (folder / "historical_trajectories").mkdir(parents=True)
    shutil.copy(SOURCE, folder / "historical_trajectories" / SOURCE.name)
    out = import_tau_bench(folder, tmp_path / "out")
    assert len((out / "cases.jsonl").read_text(encoding="utf-8").splitlines()) == 50

    shutil.copy(SOURCE, folder / "gpt-4o-retail.json")
    with pytest.raises(InputFileError, match="exactly one"):
        import_tau_bench(folder, tmp_path / "out2")


@pytest.mark.parametrize("revision", ["../x", "", ".", "..", "a/b", "a b", "é", "-x", "x" * 65, "x\n"])
def test_unsafe_revision_is_refused(tmp_path: Path, revision: str) -> None:
    with pytest.raises(UnsafeRevisionError):
        import_tau_bench(SOURCE, tmp_path / "out", revision=revision)
    assert not (tmp_path / "out").exists()


def test_broken_json_names_the_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "gpt-4o-airline.json"
    broken.write_text('[\n  {"task_id": 0,\n  oops}\n]\n', encoding="utf-8")
    with pytest.raises(InputFileError) as info:
        import_tau_bench(broken, tmp_path / "out")
    assert str(broken) in str(info.value)
    assert info.value.line == 3
    assert "line 3" in str(info.value) and "Fix:" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_run_missing_a_key_is_named(tmp_path: Path, source_runs: list[dict]) -> None:
    runs = json.loads(json.dumps(source_runs[:5]))
    del runs[3]["traj"]
    src = tmp_path / "gpt-4o-airline.json"
    src.write_text(json.dumps(runs), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"run 3: missing key traj"):
        import_tau_bench(src, tmp_path / "out")

    runs = json.loads(json.dumps(source_runs[:5]))
    del runs[2]["info"]["task"]["actions"][0]["kwargs"]
    src.write_text(json.dumps(runs), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"run 2: missing key info\.task\.actions\[0\]\.kwargs"):
        import_tau_bench(src, tmp_path / "out")


def test_runs_disagreeing_on_actions_are_refused(tmp_path: Path, source_runs: list[dict]) -> None:
    runs = json.loads(json.dumps([r for r in source_runs if r["task_id"] == 7]))
    runs[-1]["info"]["task"]["actions"] = []
    src = tmp_path / "gpt-4o-airline.json"
    src.write_text(json.dumps(runs), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"task 7: .* disagree on info\.task\.actions"):
        import_tau_bench(src, tmp_path / "out")


def test_model_and_domain_come_from_the_file_name(tmp_path: Path) -> None:
    renamed = tmp_path / "trajectories.json"
    shutil.copy(SOURCE, renamed)
    with pytest.raises(InputFileError, match="<model>-<domain>.json"):
        import_tau_bench(renamed, tmp_path / "out")

    retail = tmp_path / "gpt-4o-retail.json"
    shutil.copy(SOURCE, retail)
    with pytest.raises(InputFileError, match="no known write tools"):
        import_tau_bench(retail, tmp_path / "out", tools=TOOLS)
    assert not (tmp_path / "out").exists()
