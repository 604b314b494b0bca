"""The command line as a newcomer types it: global options after the subcommand, flags shown as flags in --help,
no Prefect telemetry notice, and ``--traces`` naming a file of the dataset's ``traces/`` folder."""

from __future__ import annotations

import json
import os
import re

import pytest
from typer.testing import CliRunner

from tooleval.runs.spec import RunSpec
from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tooleval.cli import app
from tooleval.errors import InputFileError

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")


def test_quiet_after_the_subcommand_is_the_same_as_before_it(tmp_path):
    (tmp_path / "results").mkdir()
    before = runner.invoke(app, ["-q", "runs", "--out", str(tmp_path / "results")])
    after = runner.invoke(app, ["runs", "--out", str(tmp_path / "results"), "-q"])
    long_after = runner.invoke(app, ["runs", "--quiet", "--out", str(tmp_path / "results")])
    loud = runner.invoke(app, ["runs", "--out", str(tmp_path / "results")])
    assert before.exit_code == after.exit_code == long_after.exit_code == loud.exit_code == 0, after.output
    assert before.output == after.output == long_after.output == ""  # --quiet prints only errors
    assert loud.output != ""  # ... and without it the command does print


def test_a_global_flag_is_moved_only_where_the_subcommand_reads_an_option():
    from typer.main import get_command

    group = get_command(app)
    ctx = group.make_context("tooleval", ["runs"], resilient_parsing=True)
    # the value of an option that takes one stays its value; nothing after "--" moves
    assert group.global_flags_first(ctx, ["gate", "--run-id", "-q", "--out", "r"]) == ["gate", "--run-id", "-q",
                                                                                       "--out", "r"]
    assert group.global_flags_first(ctx, ["sql", "--", "-q"]) == ["sql", "--", "-q"]
    assert group.global_flags_first(ctx, ["runs", "-q", "--out", "r"]) == ["-q", "runs", "--out", "r"]
    assert group.global_flags_first(ctx, ["--version"]) == ["--version"]


@pytest.mark.parametrize("command", [[], ["run"], ["gate"], ["import"]])
def test_help_shows_flags_without_a_value_type(command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    if command == ["run"]:
        # --gate is a flag; an option that takes a value still names its type
        assert re.search(r"--gate\s+Exit with", result.output) and re.search(r"--run-id\s+<str>", result.output)


def test_prefect_environment_turns_the_client_telemetry_off(tmp_path, monkeypatch):
    from tooleval.cli._app import prefect_environment

    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    for key in [k for k in os.environ if k.startswith("PREFECT_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("TOOLEVAL_PREFECT_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    applied = prefect_environment(tmp_path / "out")
    # Prefect prints its telemetry notice unless the client's own switch is set (the server setting is not read)
    assert applied["DO_NOT_TRACK"] == os.environ["DO_NOT_TRACK"] == "1"
    from prefect._internal.analytics.enabled import is_telemetry_enabled

    assert is_telemetry_enabled() is False


def test_prefect_home_is_the_users_and_cached_results_stay_with_each_folder(tmp_path, monkeypatch):
    from tooleval.cli._app import prefect_environment

    for key in [k for k in os.environ if k.startswith("PREFECT_")]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("TOOLEVAL_PREFECT_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("DO_NOT_TRACK", "1")  # set by the calls below: restored after the test
    home = str(tmp_path / "cache" / "tooleval" / "prefect")
    # one home (database, local server, warm runner) for every folder; each folder's task results in its own
    for folder in ("a", "b"):
        applied = prefect_environment(tmp_path / folder)
        storage = str(tmp_path / folder / ".tooleval" / "prefect" / "storage")
        assert (applied["PREFECT_HOME"], applied["PREFECT_LOCAL_STORAGE_PATH"]) == (home, storage)
        assert (os.environ["PREFECT_HOME"], os.environ["PREFECT_LOCAL_STORAGE_PATH"]) == (home, storage)
    # a home the user set: Prefect keeps its results in it, as before
    monkeypatch.setenv("TOOLEVAL_PREFECT_HOME", str(tmp_path / "mine"))
    applied = prefect_environment(tmp_path / "a")
    assert applied["PREFECT_HOME"] == str(tmp_path / "mine") and "PREFECT_LOCAL_STORAGE_PATH" not in os.environ
    # a storage folder the user exported wins
    monkeypatch.delenv("TOOLEVAL_PREFECT_HOME")
    monkeypatch.setenv("PREFECT_LOCAL_STORAGE_PATH", str(tmp_path / "exported"))
    prefect_environment(tmp_path / "b")
    assert os.environ["PREFECT_LOCAL_STORAGE_PATH"] == str(tmp_path / "exported")


class TestTracesByName:
    def _dataset(self, tmp_path):
        folder = write_dataset(tmp_path / "ds", TINY_CASES, None)
        (folder / "traces").mkdir()
        (folder / "traces" / "agent-a.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TINY_TRACES))
        (folder / "traces" / "agent-b.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TINY_TRACES[:2]))
        return folder

    def test_several_agents_error_names_the_bare_choices(self, tmp_path):
        from tooleval.dataset import find_traces_file

        with pytest.raises(InputFileError) as error:
            find_traces_file(self._dataset(tmp_path))
        assert "agent-a.jsonl, agent-b.jsonl" in str(error.value) and "--traces NAME" in str(error.value)

    @pytest.mark.parametrize("name", ["agent-b", "agent-b.jsonl"])
    def test_a_bare_name_is_looked_up_in_the_dataset_traces_folder(self, tmp_path, monkeypatch, name):
        from tooleval.runs.plan import plan_run

        folder = self._dataset(tmp_path)
        monkeypatch.chdir(tmp_path)  # no file of that name here: the name means the dataset's traces/ file
        plan = plan_run(RunSpec(dataset=folder, traces=name, out=tmp_path / "out", run_id="r1"))
        assert plan.agent.traces_path == str(folder / "traces" / "agent-b.jsonl")
        assert plan.index.rows == 2  # agent-b's 2 lines (case A, trials 0 and 1); agent-a holds 4

    def test_an_unknown_name_is_a_usage_error(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        result = runner.invoke(app, ["run", "--dataset", str(self._dataset(tmp_path)), "--traces", "agent-c",
                                     "--out", str(tmp_path / "out")])
        assert result.exit_code == 2 and "traces file not found" in result.output
        assert "traces/ folder" in result.output
        assert not (tmp_path / "out" / "runs").exists()
