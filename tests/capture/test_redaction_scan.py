"""Issue 11 section 1, property 2: no value seen under a redacted field name appears raw anywhere.

Secrets are planted (hypothesis: ``planted_datasets``) under redacted keys in any letter case and with JSON escapes,
in references and expected outputs, in tool results, in user and assistant text, in malformed argument text and as
numbers repeated in text, and credentials known by their shape alone (AWS access key ids, JWTs, OpenAI keys, bearer
tokens) in user text, tool results and JSON encoded in a string inside argument JSON, twice; then every column of the redacted envelopes and rows, the gate verdict and its JUnit
XML are scanned (many examples), and one end-to-end run scans every file under ``--out`` — Prefect's database
and stored results included — and every line printed by ``run``, ``gate``, ``drift``, ``rescore``, ``handoff``
and ``sql``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.support import figures
from tests.support.prefect_home import seeded_home
from tests.support.profiles import examples
from tests.support.redaction import KEPT, leaked, planted_datasets, score_both
from tooleval.rules import write_junit



@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(planted_datasets())
def test_no_secret_in_envelopes_rows_verdict_or_junit(tmp_path_factory, data):
    cases, traces, tools, secrets = data
    plain, redacted, _, verdict, envelopes = score_both(cases, traces, tools)
    junit = write_junit(verdict, tmp_path_factory.mktemp("junit") / "junit.xml")
    text = json.dumps([envelopes, redacted, verdict.to_dict()], default=str, ensure_ascii=False)
    text += junit.read_text(encoding="utf-8")
    assert leaked(text, secrets) == []
    assert KEPT in text  # values under other keys are kept
    assert leaked(json.dumps(plain, default=str, ensure_ascii=False), secrets)  # the unredacted rows do hold them
    figures.add("scan_datasets")  # both printed at the session's end
    figures.add("scan_secrets", len(secrets))


def _write(folder: Path, cases, traces, tools) -> Path:
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps({"name": "planted", "revision": "p1", "schema_version": 1,
                                                     "description": None, "license": None, "source": None}))
    (folder / "cases.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in cases.values()))
    (folder / "tools.json").write_text(json.dumps([t.model_dump(mode="json") for t in tools.values()]))
    (folder / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    return folder


def _tooleval(*args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "tooleval.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout + done.stderr


def _server_stopped(home: Path, patience_s: float = 120.0) -> bool:
    """Wait until the Prefect server of ``home`` (its pid in ``server.json``) is gone: it stops on its own once no
    command uses it and no idle time holds it. One still running after ``patience_s`` is killed (``False``)."""
    try:
        pid = json.loads((home / "server.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return True
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)  # its own session: nothing of the test outlives it
    except OSError:
        pass
    return False


@pytest.mark.slow  # `tooleval run` and its Prefect server, per generated dataset
@settings(max_examples=1, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(planted_datasets())
def test_no_secret_under_out_or_in_printed_lines(tmp_path, data):
    cases, traces, tools, secrets = data
    root = tmp_path / f"e2e{len(list(tmp_path.iterdir()))}"
    dataset = _write(root / "dataset", cases, traces, tools)
    out = root / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    # the user's Prefect home (its database and its run records) lives in the user's cache folder: this one,
    # seeded with an already migrated database (this run's records are written into it and scanned all the same)
    cache = root / "cache"
    home = seeded_home(cache / "tooleval" / "prefect")
    env.update(COLUMNS="250", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90", XDG_CACHE_HOME=str(cache))
    # `run` and `rescore` are the commands that use the Prefect server: the server `run` starts waits for
    # `rescore` (as it does for a user), which stops it as it ends, so one server start serves both; an idle time
    # that runs out on a slow machine only makes `rescore` start another
    lingering = {**env, "TOOLEVAL_PREFECT_SERVER_IDLE_S": "120"}
    env["TOOLEVAL_PREFECT_SERVER_IDLE_S"] = "0"
    try:
        printed = _tooleval("run", "--dataset", str(dataset), "--out", str(out), "--run-id", "s1", env=lingering)
        printed += _tooleval("gate", "--run-id", "s1", "--out", str(out), env=env)
        printed += _tooleval("drift", "--run-id", "s1", "--out", str(out), env=env)
        printed += _tooleval("rescore", "--run-id", "s1", "--out", str(out), "--to-run-id", "s2", env=env)
    except BaseException:
        _server_stopped(home, patience_s=0)  # a failed command leaves no server waiting for the next one
        raise
    assert _server_stopped(home)  # what the server writes as it stops is in the files scanned below
    printed += _tooleval("handoff", "--run-id", "s1", "--out", str(out), "--case", sorted(cases)[0], env=env)
    printed += _tooleval("sql", "--out", str(out), "--format", "jsonl", "select * from rows", env=env)
    printed += _tooleval("sql", "--out", str(out), "--format", "jsonl", "select * from traces", env=env)
    assert leaked(printed, secrets) == []
    files = [p for p in [*out.rglob("*"), *cache.rglob("*")] if p.is_file() and p.name != "redaction.key"]
    assert any(p.suffix == ".db" for p in files)  # Prefect's database is scanned
    assert any(".tooleval" in p.relative_to(root).parts for p in files)  # and the run's cached task results
    found = {str(p.relative_to(root)): leaked(p.read_bytes().decode("utf-8", "replace"), secrets) for p in files}
    assert {path: hits for path, hits in found.items() if hits} == {}
    assert KEPT in "".join(p.read_bytes().decode("utf-8", "replace") for p in files if p.suffix == ".parquet")

