"""Two runs with distinct run ids started together on one new ``--out`` both publish, side by side, as each would
alone.

They share the results folder's Prefect server (one started, the other finds it) and its redaction key. The key
was the race: each run planned a new key, and the later write replaced the first, so the other run stopped with
exit 2 ("the redaction key is not the one these traces were redacted with") in about one try in three on the
bundled data. The key file is now created only if missing, and a run adopts the key that won.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from tests.support.paths import BUNDLED, REPO, USER_CACHE
from tests.support.prefect_home import seeded_home
from tooleval.capture.keys import PlannedKey, persist_key, plan_key


def test_a_key_planned_new_adopts_the_key_another_run_created_meanwhile(tmp_path):
    out = tmp_path / "results"
    first, second = plan_key(out), plan_key(out)  # both planned before either wrote: two different new keys
    assert (first.source, second.source) == ("new", "new") and first.key != second.key
    assert persist_key(out, first) is first
    adopted = persist_key(out, second)
    assert adopted == PlannedKey(first.key, "file")  # the folder's one key, not the second run's own
    assert (out / "redaction.key").read_bytes() == first.key
    assert [p.name for p in out.iterdir()] == ["redaction.key"]  # no temporary file left behind
    assert (out / "redaction.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow  # two `tooleval run` processes and their server
def test_two_runs_started_together_on_a_new_out_both_publish(tmp_path):
    out = tmp_path / "results"
    # The user's Prefect home (no Prefect setting): seeded when no earlier test of this process made its database.
    # The race is over the results folder's key, which both runs plan once the shared server answers, however
    # long it took to start; a new home's database would only cost this test its time.
    if not (USER_CACHE / "tooleval" / "prefect" / "prefect.db").exists():
        seeded_home(USER_CACHE / "tooleval" / "prefect")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="250", PREFECT_SERVER_ANALYTICS_ENABLED="false", TOOLEVAL_PREFECT_SERVER_IDLE_S="0",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", XDG_CACHE_HOME=str(USER_CACHE))
    runs = {run_id: subprocess.Popen([sys.executable, "-m", "tooleval.cli", "run", "--dataset", str(BUNDLED),
                                      "--out", str(out), "--run-id", run_id], env=env, cwd=REPO, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for run_id in ("a", "b")}
    printed = {run_id: process.communicate(timeout=900)[0] for run_id, process in runs.items()}
    for run_id, process in runs.items():
        # as a single run of the bundled data ends: exit 0, the gate's verdict and where to read it
        assert process.returncode == 0, printed[run_id][-3000:]
        assert printed[run_id].rstrip().splitlines()[-1].strip() == f"details: tooleval gate --run-id {run_id} " \
            f"--out {out}"
    key_digest = hashlib.sha256((out / "redaction.key").read_bytes()).hexdigest()
    for run_id in ("a", "b"):
        summary = json.loads((out / "runs" / run_id / "summary.json").read_text())
        # the bundled figures, as one run alone (tests/flows/test_flow_evaluate.py); both runs under the folder's key
        assert (summary["rows"], summary["exact_match_rows"], summary["expected_calls"], summary["observed_calls"],
                round(summary["mean_f1"], 4), summary["errors"]) == (200, 12, 632, 1164, 0.3538, 0)
        assert summary["redaction"]["key_digest"] == key_digest
        assert (out / "runs" / run_id / "commit.json").is_file()
