"""Terminal manners: --version, no wrapping when output is not a terminal, --quiet, the top-20 failures-by-tool
table, no empty metric table for a legacy-only run, the gate line after rescore, help without RST markup."""

from __future__ import annotations

import shutil
from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from tests.support.datasets import CHANGED_CASE
from flows._publish import RunResult
from tooleval.cli import app
from tooleval.cli._app import _setup_consoles
from tooleval.cli._report import print_run

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"tooleval {version('tooleval')}\n"


def test_ctrl_c_interrupts_even_when_started_with_sigint_ignored(monkeypatch, capsys):
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python keeps that: a Ctrl-C in
    # the first seconds (before the run installs its own handler) was lost and the run published anyway.
    import signal

    from tooleval.cli import main

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    monkeypatch.setattr("sys.argv", ["tooleval", "--version"])
    try:
        with pytest.raises(SystemExit) as exited:
            main()
        assert exited.value.code == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().out.startswith("tooleval ")


@pytest.mark.slow  # the Prefect test harness's server
def test_long_paths_are_not_wrapped_when_not_a_terminal(bundled_pair, tmp_path):
    long_out = tmp_path / ("a-rather-long-results-folder-name-" * 4)
    long_out.symlink_to(bundled_pair, target_is_directory=True)
    result = runner.invoke(app, ["report", "--run-id", "base", "--out", str(long_out)])
    assert result.exit_code == 0, result.output
    expected = f"written: {long_out / 'runs' / 'base' / 'report.html'}"
    assert len(expected) > 160 and expected in result.output.splitlines()


@pytest.mark.slow  # the Prefect test harness's server
def test_quiet_prints_nothing(bundled_pair):
    result = runner.invoke(app, ["--quiet", "runs", "--out", str(bundled_pair)])
    assert result.exit_code == 0 and result.output == ""


@pytest.mark.slow  # the Prefect test harness's server
def test_quiet_still_says_why_it_exits_1(bundled_pair):
    # The bundled run has blocking rows (README: gate FAIL, 117 blocking rows): exit 1 and exactly one line, on
    # stderr, that says so; the failing rows' details stay quiet.
    result = runner.invoke(app, ["--quiet", "gate", "--run-id", "base", "--out", str(bundled_pair)])
    assert result.exit_code == 1
    assert result.stdout == "" and result.stderr.splitlines() == [
        "gate FAIL for run base: 117 of 200 rows fail (12 exact; row outcome no_blocking)"]


def _result(rows_path, summary) -> RunResult:
    return RunResult(run_id="r", dataset_revision="v1", out="/o", rows_path=rows_path, traces_path="/o/t",
                     run_path="/o/runs/r", stage_states={}, summary=summary, errors=[], drift=None)


def test_failures_by_tool_shows_the_top_20_in_full_and_counts_the_rest(capsys):
    _setup_consoles(quiet=False)
    # 25 tools whose names share a 45-character prefix (a narrow table once cut them into the same text);
    # tool_i has i + 1 missing calls, so the top 20 are tool 24 down to tool 5.
    prefix = "a_very_long_shared_prefix_for_generated_tools_"
    tools = {f"{prefix}{i:02d}": {"missing": i + 1, "extra": 0, "wrong_args": 0} for i in range(25)}
    print_run(_result("/o/rows", {"failures_by_tool": tools}))
    out = capsys.readouterr().out
    listed = [line.split()[1] for line in out.splitlines() if prefix in line and "│" in line]
    assert listed == [f"{prefix}{i:02d}" for i in range(24, 4, -1)]
    # the rest: tools 0-4 with 1 + 2 + 3 + 4 + 5 = 15 failed calls
    assert "... and 5 more tools with 15 failed calls" in out
    assert "Failures by tool (top 20 of 25)" in out


def test_legacy_only_run_prints_no_metric_table(capsys):
    _setup_consoles(quiet=False)
    print_run(_result(None, {"legacy": {"value": 0.5, "rows": 4}}))
    out = capsys.readouterr().out
    assert "mean f1" not in out and "Failures by tool" not in out
    assert "legacy:  tool_call_f1 = 0.5000 over 4 rows" in out


@pytest.mark.slow  # the Prefect test harness's server
def test_rescore_prints_the_gate_line(bundled_pair, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(bundled_pair, out)  # the shared runs stay as the other tests expect them
    case, trial = CHANGED_CASE
    result = runner.invoke(app, ["rescore", "--run-id", "head", "--out", str(out), "--case", case,
                                 "--trial", str(trial), "--to-run-id", "rescored-one"])
    assert result.exit_code == 0, result.output
    gate_lines = [line for line in result.output.splitlines() if line.startswith("gate: ")]
    assert len(gate_lines) == 1
    # the command to see the details stands whole on its own line, to be copied
    assert f"  details: tooleval gate --run-id rescored-one --out {out}" in result.output.splitlines()


@pytest.mark.parametrize("command", ["sql", "run", "compare", "runs", "gc", "report", "rescore", "gate"])
def test_help_has_no_rst_markup(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "``" not in result.output and ":func:" not in result.output and ":class:" not in result.output
