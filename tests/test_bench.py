"""``tooleval bench``: one JSON object with exactly the keys issue 9 lists, measured on a real (small) corpus."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tooleval.bench import BENCH_KEYS, run_bench
from tooleval.cli import app


@pytest.mark.usefixtures("prefect_harness")
def test_bench_measures_every_figure(tmp_path):
    result = run_bench(70, "bfcl", seed=1, workdir=tmp_path, workers=1, peer_rows=30)
    assert tuple(result) == BENCH_KEYS
    assert result["rows"] == 70 and result["profile"] == "bfcl"
    assert result["peer_rows"] == 30  # the peers were timed on the first 30 rows
    assert 0.03 < result["input_mb"] < 0.2  # 70 lines of ~1 KB
    for key in ("floor_rows_per_s", "tooleval_rows_per_s", "run_rows_per_s", "ragas_loop_rows_per_s",
                "agentic_evals_rows_per_s", "peak_rss_mb"):
        assert result[key] > 0, key
    assert result["floor_rows_per_s"] > result["tooleval_rows_per_s"]  # decoding alone beats the whole row path
    assert -1 < result["prefect_overhead_share"] < 1
    # the two runs published their rows: the row path without legacy, the whole run with it
    assert not list((tmp_path / "row-path" / "legacy").glob("*/*/scalar.json"))
    assert len(list((tmp_path / "whole-run" / "legacy").glob("*/*/scalar.json"))) == 1
    json.dumps(result)


def test_peers_stop_at_their_row_limit(tmp_path):
    from tooleval.bench._peers import agentic_evals_loop, ragas_loop
    from tooleval.synth import write_synth

    write_synth(40, 2, "bfcl", tmp_path)
    assert ragas_loop(tmp_path, limit=25) == 25
    assert agentic_evals_loop(tmp_path, limit=7, batch=3) == 7
    assert ragas_loop(tmp_path) == 40  # no limit: every row


def test_bench_refuses_an_unknown_profile():
    result = CliRunner().invoke(app, ["bench", "--rows", "10", "--profile", "nope"])
    assert result.exit_code == 2 and "unknown --profile" in result.output
