"""Cache behaviour of the stage tasks: handed cases H18 (helper-module change), H19 (sets across processes),
H20 (cached pydantic results restore as their class), and a run in separate processes end to end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tooleval.runs.spec import RunSpec
from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO
from tests.support.pace import PATIENT_S
from tooleval import versions
from tooleval.runs.plan import plan_run
from tooleval.storage.stages import StageRef, stage_dir
from tests.support.prefect_home import seeded_home

pytestmark = pytest.mark.slow  # `tooleval run` in separate processes


class TestScorerVersion:
    def test_covers_helper_modules(self, tmp_path):
        copy = tmp_path / "tooleval"
        shutil.copytree(REPO / "tooleval", copy, ignore=shutil.ignore_patterns("__pycache__"))
        before = versions.source_digest(copy)
        assert before == versions.source_digest(REPO / "tooleval")
        helper = copy / "canonical.py"  # called by scoring through matching, never by the task directly
        helper.write_text(helper.read_text().replace("return [] if same_scalar", "return [] if (same_scalar"
                                                     ).replace("else [prefix]\n", "else [prefix])\n", 1), )
        assert versions.source_digest(copy) != before

    def test_is_recorded_with_the_package_version(self):
        assert versions.scorer_version().startswith(versions.tooleval_version() + "+")


def test_h19_set_valued_input_hashes_alike_in_every_process():
    """Prefect's INPUTS key of a DatasetRef built from a set is the same whatever PYTHONHASHSEED is; the control
    (a model that keeps the set) differs, which shows the check can fail."""
    script = textwrap.dedent(
        """
        from pydantic import BaseModel
        from prefect.utilities.hashing import hash_objects
        from tooleval.runs.plan import DatasetRef
        names = {"book_reservation", "cancel_reservation", "get_user_details", "think", "calculate", "search"}
        ref = DatasetRef(path="/d", name="n", revision="r", content_digest="x", tool_names=names)
        class Raw(BaseModel):
            names: set[str]
        print(hash_objects(ref), hash_objects(Raw(names=names)))
        """
    )
    keys = set()
    controls = set()
    # the four processes are independent: started together, their imports of Prefect overlap
    processes = [subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ, PYTHONHASHSEED=seed),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed in ("1", "2", "3", "4")]
    for process in processes:
        stdout, stderr = process.communicate(timeout=PATIENT_S)
        assert process.returncode == 0, stderr
        key, control = stdout.split()
        keys.add(key)
        controls.add(control)
    assert len(keys) == 1
    assert len(controls) > 1


@pytest.mark.usefixtures("prefect_harness")
def test_h18_h20_scoring_reruns_on_a_new_scorer_version_and_cached_refs_restore(tmp_path):
    from prefect import flow

    from tasks import ReplayedLines, capture_shard, generate_shard, score_shard
    from tooleval.scoring.ragas_metric import ragas_version

    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    plan = plan_run(RunSpec(dataset=dataset, traces=None, out=tmp_path / "results", run_id="x"))
    dirs = {s: str(stage_dir(plan.out, s)) for s in ("generation", "capture", "scoring")}

    @flow
    def stages(scorer: str):
        generated = generate_shard(plan.agent, plan.items, plan.dataset, plan.redaction, plan.out,
                                   dirs["generation"], return_state=True)
        # a replayed trace is read from its line by capture (the generation stage file names the line)
        captured = capture_shard(generated.result(), None, "code", dirs["capture"], plan.redaction,
                                 replay=ReplayedLines(plan.agent, plan.items, None, plan.dataset, plan.out),
                                 return_state=True)
        scored = score_shard(captured.result(), plan.dataset, plan.redaction, scorer, ragas_version(), plan.out,
                             dirs["scoring"], return_state=True)
        return generated, captured, scored

    first = stages("scorer-1")
    again = stages("scorer-1")
    changed = stages("scorer-2")
    assert [s.name for s in first] == ["Completed"] * 3
    assert [s.name for s in again] == ["Cached"] * 3
    assert [s.name for s in changed] == ["Cached", "Cached", "Completed"]
    for state in again:
        assert isinstance(state.result(), StageRef)  # H20: restored as the class, not a dict
    assert again[2].result() == first[2].result()


def _run_cli(cwd: Path, dataset: Path, out: Path, run_id: str, seed: str, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PYTHONHASHSEED=seed, TOOLEVAL_PREFECT_HOME=str(home), COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(dataset), "--out", str(out), "--run-id",
         run_id],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=PATIENT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _states(stdout: str) -> dict[str, str]:
    states = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0] in {"generation", "trace-capture", "scoring", "aggregation"}:
            states[cells[0]] = cells[1]
    return states


def test_cache_across_processes_and_helper_change(tmp_path):
    """Three processes over a copy of the code: a first run computes, a second (other hash seed) takes every stage
    from the cache (H19, H20), and after a change to a helper module the scoring task reaches (matching.py),
    scoring runs again while generation stays cached (H18)."""
    src = tmp_path / "src"
    for package in ("tooleval", "tasks", "flows"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
    out, home = tmp_path / "results", seeded_home(tmp_path / "prefect-home")
    first = _states(_run_cli(src, dataset, out, "p1", "1", home))
    assert first == dict.fromkeys(("generation", "trace-capture", "scoring", "aggregation"), "Completed")
    second = _states(_run_cli(src, dataset, out, "p2", "2", home))
    assert second == dict.fromkeys(("generation", "trace-capture", "scoring", "aggregation"), "Cached")
    matching = src / "tooleval" / "matching.py"
    matching.write_text(matching.read_text().replace(
        "    denominator = 2 * tp + fp + fn\n", "    denominator = (2 * tp) + fp + fn  # same value\n"))
    third = _states(_run_cli(src, dataset, out, "p3", "3", home))
    assert third["generation"] == "Cached"
    assert third["scoring"] == "Completed"
