"""``tooleval gate``'s text fits a screen at any corpus size: a verdict line, failing rows per rule and slice, the
worst rows with only the differing argument paths; at most 40 lines and 100 columns by default, commands and
paths never split; ``--show``, ``--listed-rows`` and ``--format json`` each do one thing."""

from __future__ import annotations

import json
from datetime import date

import pytest
from typer.testing import CliRunner

from tooleval.cli import app
from tooleval.cli._gate_view import MAX_LINES, gate_lines, row_lines, view_width, wrap_items
from tooleval.rules import GateConfig, evaluate_gate

runner = CliRunner()
TODAY = date(2026, 1, 1)
BIG = {"flights": [{"date": "2024-05-20", "flight_number": f"HAT{i:03d}"} for i in range(40)], "cabin": "economy",
       "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}] * 20}


def _call(name: str, args: dict) -> dict:
    return {"name": name, "args_json": json.dumps(args), "args_raw": None, "parse_error": None}


def _row(i: int, slice_: str) -> dict:
    """A failing row whose book_reservation differs from its reference in one nested path, plus reads."""
    observed = dict(BIG, cabin="business")
    return {"case_id": f"case-{i:05d}", "trial": i % 3, "slice": slice_, "f1": (i % 7) / 10, "exact_match": False,
            "fp": 3, "fn": 1, "error_kind": None, "tool_families": ["booking"],
            "violations": [{"rule": "wrong_write_arguments", "severity": "blocking", "tool": "book_reservation",
                            "detail": "x" * 5_000}],
            "missing_calls": [_call("book_reservation", BIG)],
            "extra_calls": [_call("book_reservation", observed), _call("get_user_details", {"user_id": "u"}),
                            _call("get_user_details", {"user_id": "v"})],
            "wrong_args": [{"name": "book_reservation", "expected_args_json": json.dumps(BIG),
                            "observed_args_json": json.dumps(observed), "paths": ["cabin"]}]}


@pytest.fixture(scope="module")
def big_verdict():
    rows = [_row(i, f"slice-{i % 12}") for i in range(3_000)]
    return evaluate_gate(rows, GateConfig(), today=TODAY)


class TestText:
    def test_fits_40_lines_and_100_columns_at_3000_failing_rows(self, big_verdict):
        lines = gate_lines(big_verdict, "nightly", width=100)
        assert len(lines) <= MAX_LINES and max(map(len, lines)) <= 100
        assert lines[0] == "gate FAIL for run nightly: 3000 of 3000 rows fail (0 exact; row outcome match)"
        # both rules on every row; every slice counted, the 8 with the most failing rows by name
        assert "failing rows by rule: reference_mismatch 3000, wrong_write_arguments 3000" in lines
        by_slice = next(i for i, line in enumerate(lines) if line.startswith("failing rows by slice"))
        assert "slice-0 250/250" in lines[by_slice] and "+4 more slices" in " ".join(lines[by_slice:by_slice + 3])

    def test_rows_show_the_differing_paths_never_the_argument_objects(self, big_verdict):
        text = "\n".join(gate_lines(big_verdict, "nightly", width=100))
        assert "      wrong args book_reservation: cabin" in text.splitlines()
        # the pair's calls are not repeated as missing and extra; the unpaired reads are named and counted
        assert "      extra: get_user_details x2" in text.splitlines()
        assert "missing:" not in text and "HAT001" not in text and "xxxxx" not in text
        # the worst first: F1 0.0 rows, by case id
        first = next(line for line in text.splitlines() if line.startswith("  case-"))
        assert first == "  case-00000#0  f1 0.0000  reference_mismatch, wrong_write_arguments"

    def test_show_n_prints_n_rows_and_says_how_many_more(self, big_verdict):
        lines = gate_lines(big_verdict, "nightly", width=100, show=60)
        assert sum(line.startswith("  case-") for line in lines) == 60
        assert "worst failing rows (60 of 3000; --show N for more; --format json for all):" in lines

    def test_a_narrow_terminal_narrows_every_line_but_keeps_paths_whole(self, big_verdict):
        footer = ["written: /a/very/long/results/folder/that/does/not/fit/in/forty/columns/runs/nightly/junit.xml"]
        lines = gate_lines(big_verdict, "nightly", width=40, footer=footer)
        assert lines[-1] == footer[0]  # whole, on its own line
        assert max(len(line) for line in lines[:-1]) <= 40 and len(lines) <= MAX_LINES

    def test_malformed_calls_and_unscored_rows_say_what_they_are(self):
        rows = [{"case_id": "m", "trial": 0, "slice": None, "f1": 0.0, "exact_match": False, "fp": 1, "fn": 0,
                 "error_kind": None, "violations": [], "wrong_args": [], "missing_calls": [],
                 "extra_calls": [{"name": "refund", "args_json": None, "args_raw": "{oops", "parse_error": "bad"}]}]
        verdict = evaluate_gate(rows + [{"case_id": "gone", "trial": None, "slice": None, "unscored": True,
                                         "error_kind": "missing_trace", "error_message": "no trace", "f1": None}],
                                GateConfig(), today=TODAY)
        lines = gate_lines(verdict, "r", width=100)
        assert "  gone#-  unscored  unscored" in lines and "      unscored: missing_trace: no trace" in lines
        assert "      extra: refund (malformed)" in lines

    def test_a_passing_gate_is_two_lines_and_the_files(self):
        rows = [{"case_id": "a", "trial": 0, "slice": "s", "f1": 1.0, "exact_match": True, "fp": 0, "fn": 0,
                 "error_kind": None, "violations": []}]
        lines = gate_lines(evaluate_gate(rows, GateConfig(), today=TODAY), "r", width=100, footer=["written: x"])
        assert lines == ["gate PASS for run r: 0 of 1 rows fail (1 exact; row outcome match)",
                         "failing rows by slice (failing/rows): s 0/1", "written: x"]


def test_wrap_items_splits_between_items_only():
    assert wrap_items("rules: ", ["aaaa 1", "bbbb 2", "cccc 3"], 16) == ["rules: aaaa 1,", "    bbbb 2,",
                                                                          "    cccc 3"]
    long = "tooleval gate --run-id r --out /a/long/path"
    assert wrap_items("run: ", [long], 10) == ["run:", f"    {long}"]  # too wide: a line of its own, whole


def test_row_lines_of_many_paths_count_the_rest():
    [o] = evaluate_gate([dict(_row(0, "s"), wrong_args=[{"name": "book_reservation", "paths": [
        f"flights[{i}].flight_number" for i in range(30)]}])], GateConfig(), today=TODAY).failing_rows
    line = row_lines(o, 100)[1]
    assert line.startswith("      wrong args book_reservation: flights[0].flight_number, ")
    assert line.endswith(" more") and len(line) <= 100


def test_view_width(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert (view_width(None), view_width(250), view_width(72)) == (100, 100, 72)
    monkeypatch.setenv("COLUMNS", "132")
    assert view_width(None) == 132


class TestCommand:
    """On the bundled run (117 failing rows of 200)."""

    @pytest.mark.slow  # the Prefect test harness's server
    def test_default_text_is_bounded(self, bundled_pair):
        # off a terminal with no COLUMNS: 100 columns
        result = runner.invoke(app, ["gate", "--run-id", "base", "--out", str(bundled_pair)], env={"COLUMNS": None})
        assert result.exit_code == 1
        lines = result.output.splitlines()
        assert len(lines) <= MAX_LINES and max(map(len, lines)) <= 100, result.output
        assert lines[0] == "gate FAIL for run base: 117 of 200 rows fail (12 exact; row outcome no_blocking)"
        assert "failing rows by slice (failing/rows): airline 117/200" in lines

    @pytest.mark.slow  # the Prefect test harness's server
    def test_listed_rows_is_for_the_files_and_show_for_the_screen(self, bundled_pair, tmp_path):
        import shutil

        out = tmp_path / "results"
        shutil.copytree(bundled_pair, out)  # gate.json and junit.xml are rewritten: the shared runs stay
        result = runner.invoke(app, ["gate", "--run-id", "base", "--out", str(out), "--listed-rows", "5",
                                     "--show", "30"])
        assert result.exit_code == 1
        assert sum(line.startswith("  ") and "  f1 " in line for line in result.output.splitlines()) == 30
        gate = json.loads((out / "runs" / "base" / "gate.json").read_text())
        assert gate["listed"] == 5 and len(gate["failing_rows"]) == 5 and gate["failing_rows_count"] == 117
        as_json = runner.invoke(app, ["gate", "--run-id", "base", "--out", str(out), "--format", "json"])
        assert as_json.exit_code == 1 and json.loads(as_json.stdout) == json.loads(
            (out / "runs" / "base" / "gate.json").read_text())
        assert len(json.loads(as_json.stdout)["failing_rows"]) == 100  # gate.toml's listed_rows: every row's evidence
        bad = runner.invoke(app, ["gate", "--run-id", "base", "--out", str(out), "--format", "yaml"])
        assert bad.exit_code == 2 and "--format text or --format json" in bad.output
