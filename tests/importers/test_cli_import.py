"""``tooleval import`` from the command line: the format list in --help, counts and skip reasons, exit codes,
an imported LangChain file through ``tooleval run``, and streaming (peak memory does not grow with the input)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.paths import SHARED_DATA
from tests.support.importers import write_lines
from tooleval.cli import app

runner = CliRunner()
FORMATS = ["openai-chat", "openai-responses", "langchain", "anthropic", "gemini", "atif", "inspect", "tau-bench", "tau2", "bfcl",
           "otlp", "openinference", "mlflow"]
ORDER = {"name": "get_order", "args": {"order_id": "A-104"}}


def _chat(case_id: str, arguments: str) -> dict:
    return {"case_id": case_id, "expected_calls": [ORDER], "messages": [
        {"role": "user", "content": "where is A-104?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "get_order", "arguments": arguments}}]}]}


def test_help_lists_every_format_on_one_line() -> None:
    result = runner.invoke(app, ["import", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    for fmt in FORMATS:
        (line,) = [line for line in lines if line.strip().startswith(fmt + " ")]
        assert len(line.strip().split(None, 1)[1]) > 20  # a description on the same line


def test_counts_and_skip_reasons_exit_1(tmp_path: Path) -> None:
    src = write_lines(tmp_path / "c.jsonl", [_chat("a", '{"order_id": "A-104"}'), "oops", _chat("b", "{\"x")])
    result = runner.invoke(app, ["import", "openai-chat", str(src), "--out", str(tmp_path / "ds")],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "read 3, converted 2, skipped 1; 2 tool calls written (1 with malformed arguments, kept raw)" in result.output
    assert "not valid JSON (Expecting value)" in result.output and "c.jsonl:2" in result.output


def test_usage_errors_exit_2_and_write_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", "bfcl", str(SHARED_DATA / "bfcl"), "--out", str(tmp_path / "o"),
                                 "--references", str(tmp_path)])
    assert result.exit_code == 2 and "--references does not apply to bfcl" in result.output
    result = runner.invoke(app, ["import", "langchain", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "source not found" in result.output
    assert not (tmp_path / "o").exists()


def test_tau2_folder_exit_0(tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", "tau2", str(SHARED_DATA / "tau2-bench"), "--out", str(tmp_path / "t"),
                                 "--revision", "r1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "read 280, converted 280, skipped 0; 2964 tool calls written" in result.output
    # Per dataset: 122 + 372 + 76 + 324 = 894 agent references checked by tau2, 82 + 325 + 57 + 283 = 747 matched.
    assert ("telecom: tau2 checked 76 of the agent's reference calls (matched 57); tooleval agrees on 76; 217 "
            "user-side checks are not scored.") in result.output
    assert "retail: tau2 checked 372 of the agent's reference calls (matched 325); tooleval agrees on 372" in result.output
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["airline", "retail", "telecom", "telecom-no-user"]


def test_tau_bench_prints_its_counts(tmp_path: Path) -> None:
    # The importer returns the folder it wrote (it refuses a bad run rather than skipping it); the counts are read
    # back from what it wrote. 200 runs (50 tasks x 4 trials) with 1,164 assistant tool calls, all valid JSON
    # objects (../shared/data/README.md, tau-bench).
    source = SHARED_DATA / "tau-bench"
    result = runner.invoke(app, ["import", "tau-bench", str(source / "historical_trajectories" / "gpt-4o-airline.json"),
                                 "--out", str(tmp_path / "a"), "--tools", str(source / "tools" / "airline_tools.json")],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "read 200, converted 200, skipped 0; 1164 tool calls written (0 with malformed arguments, kept raw)" \
        in result.output


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.usefixtures("prefect_harness")
def test_an_imported_langchain_file_runs(tmp_path: Path) -> None:
    ai = {"type": "ai", "content": "", "tool_calls": [{"name": "get_order", "args": {"order_id": "A-104"}, "id": "1"}]}
    src = write_lines(tmp_path / "lc.jsonl", [
        {"case_id": "one", "expected_calls": [ORDER], "messages": [{"type": "human", "content": "hi"}, ai]},
        {"case_id": "two", "expected_calls": [ORDER, ORDER], "messages": [{"type": "human", "content": "hi"}, ai]},
        {"case_id": "three", "expected_calls": [], "messages": [{"type": "human", "content": "hi"},
                                                                {"type": "ai", "content": "Hello."}]}])
    result = runner.invoke(app, ["import", "langchain", str(src), "--out", str(tmp_path / "ds"), "--revision", "lc1"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["run", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "res"),
                                 "--run-id", "lc-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "res" / "runs" / "lc-run" / "summary.json").read_text())
    # one: exact; two: tp 1 fn 1; three: correct abstention.
    assert (summary["rows"], summary["exact_match_rows"], summary["tp"], summary["fn"]) == (3, 2, 2, 1)


# Peak RSS of the new process: VmHWM (kB) starts afresh at exec, unlike ru_maxrss, which keeps the forking
# parent's (pytest's) peak on Linux.
STREAM = """
import json, re, sys
from pathlib import Path
from tooleval.importers import import_openai_chat
report = import_openai_chat(sys.argv[1], sys.argv[2])
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1])
print(json.dumps([report.converted, peak]))
"""


def _peak_kb(tmp_path: Path, lines: int) -> tuple[int, int]:
    src = tmp_path / f"big-{lines}.jsonl"
    filler = "x" * 4000
    with src.open("w") as handle:
        for i in range(lines):
            handle.write(json.dumps({**_chat(f"c{i % 50}", '{"order_id": "A-104"}'), "note": filler}) + "\n")
    out = subprocess.run([sys.executable, "-c", STREAM, str(src), str(tmp_path / f"out-{lines}")],
                         capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout))


@pytest.mark.slow  # the peak memory of two imports in fresh processes
def test_streaming_peak_memory_does_not_grow_with_the_input(tmp_path: Path) -> None:
    small = _peak_kb(tmp_path, 500)  # ~2 MB
    large = _peak_kb(tmp_path, 8000)  # ~34 MB: loading it whole would add well over 34 MB of Python objects
    assert (small[0], large[0]) == (500, 8000)
    assert large[1] - small[1] < 16_000, (small, large)  # kB
