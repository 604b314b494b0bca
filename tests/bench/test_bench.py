"""``tooleval bench``: one JSON object with exactly the keys issue 9 lists, measured on a real (small) corpus;
the peers timed warm and the memory of the runs sampled apart from theirs. No figure's speed is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from tooleval.bench import BENCH_KEYS, BenchRuns, run_bench
from tooleval.cli import LocalPrefect
from tooleval.bench._rss import TreeRss
from tooleval.bench._run import ReferenceRead, time_warm
from tooleval.cli import app

pytestmark = pytest.mark.slow  # the benchmark


@pytest.mark.usefixtures("prefect_harness")
def test_bench_measures_every_figure(tmp_path):
    lines: list[str] = []
    result = run_bench(70, "bfcl", seed=1, workdir=tmp_path, runs=BenchRuns(workers=1), peer_rows=30,
                       log=lines.append, prefect=LocalPrefect())
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

    # the peers were timed warm, after an untimed pass over the whole 30-row sample, and the output says so
    assert result["peers_timed"] == "warm" and result["peer_warmup_rows"] == 30
    for peer in ("ragas loop", "agentic-evals evaluate_suite"):
        warmup = lines.index(f"bench: {peer} warm-up (30 rows, untimed) ...")
        assert lines[warmup + 1] == f"bench: {peer} (30 rows, warm) ..."
    ratios = [line for line in lines if line.startswith("bench: a/b = ")]
    assert ratios == [f"bench: a/b = {result['a_over_b_warm']}, a'/b = {result['a_prime_over_b_warm']} "
                      "(peers timed warm: after their imports and an untimed pass over 30 rows)"]
    b = result["ragas_loop_rows_per_s"]
    assert result["a_over_b_warm"] == pytest.approx(result["tooleval_rows_per_s"] / b, rel=0.1)
    assert result["a_prime_over_b_warm"] == pytest.approx(result["run_rows_per_s"] / b, rel=0.1)

    # the runs' memory: sampled during (a) and (a') only, so never above the whole benchmark's peak
    assert 0 < result["run_rss_mb"] <= result["peak_rss_mb"]

    # run (a)'s own wall time and its shard phase: the shard phase is the one summary.json of (a) holds
    summary = json.loads((tmp_path / "row-path" / "runs" / "bench-a" / "summary.json").read_text())
    assert result["stages_wall_s"] == round(summary["timing"]["stages_wall_s"], 2)
    assert 0 < result["stages_wall_s"] <= result["flow_wall_s"]
    assert 0 <= result["outside_shards_share"] < 1
    assert result["outside_shards_share"] == pytest.approx(1 - result["stages_wall_s"] / result["flow_wall_s"],
                                                           abs=0.01)
    # measured inside the flow's body, so within (a) as the bench timed it around the call (its rate rounded)
    assert result["flow_wall_s"] <= 70 / (result["tooleval_rows_per_s"] - 0.5)


def test_peers_are_timed_after_an_untimed_warmup_pass(tmp_path):
    now, calls = [0.0], []

    def loop(dataset, limit):
        calls.append(limit)
        now[0] += 100.0 if len(calls) == 1 else 2.5  # the first pass pays the imports
        return limit

    assert time_warm(loop, tmp_path, 40, 7, "peer", clock=lambda: now[0]) == 2.5
    assert calls == [7, 40]


def test_a_peer_that_stops_short_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="did 39 rows of the 40"):
        time_warm(lambda dataset, limit: min(limit, 39), tmp_path, 40, 7, "peer")


def test_an_rss_window_counts_descendants_and_only_its_own_samples():
    megabytes = 2**20
    holder = "import sys; held = b'x' * (80 * 2**20); print('ready', flush=True); sys.stdin.read()"
    with TreeRss(interval=3600) as rss:  # one sample as it starts; the test takes the others
        with rss.window() as window:
            before = rss.sample()
            with subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE) as child:  # closing its stdin ends it
                assert child.stdout.readline() == b"ready\n"
                during = rss.sample()
        ballast = b"y" * (200 * megabytes)  # after the window: the peers' memory, in the bench
        after = rss.sample()
        del ballast
    assert during - before > 60  # the child's 80 MB are in the tree's sum
    assert window.peak_mb >= during
    assert window.peak_mb < after - 60  # the ballast is in the whole's peak, not in the window's
    assert rss.peak_mb >= after


def test_the_sampling_thread_walks_the_tree_only_every_rescan_seconds():
    # walking the tree reads every process on the machine; the thread's samples between two walks read the RSS of
    # the processes the last walk found, so a child started since counts from the next walk on. Measured in a fresh
    # process, whose tree is itself and that child alone: the test process's own tree holds what earlier tests left
    # running (a local Prefect server's memory moves by tens of MB while it settles).
    holder = "import sys; held = b'x' * (80 * 2**20); print('ready', flush=True); sys.stdin.read()"
    measure = f"""
import json, subprocess, sys
from tooleval.bench._rss import TreeRss
with TreeRss(interval=3600, rescan=3600) as rss:
    before = rss.sample()
    with subprocess.Popen([sys.executable, "-c", {holder!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        assert child.stdout.readline() == b"ready\\n"
        between_walks = rss.sample(walk=False)
        walked = rss.sample()
        after_walk = rss.sample(walk=False)
print(json.dumps([before, between_walks, walked, after_walk]))
"""
    done = subprocess.run([sys.executable, "-c", measure], capture_output=True, text=True, timeout=120, check=True)
    before, between_walks, walked, after_walk = json.loads(done.stdout)
    assert between_walks - before < 40  # the child is not known yet
    assert walked - before > 60 and after_walk - before > 60  # its 80 MB count once the tree is walked


def test_a_tracked_process_outside_the_tree_counts_only_while_tracked(tmp_path):
    # tooleval's Prefect server is a daemon: no descendant of the bench, yet the runs' memory includes it
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    holder = (f"import pathlib, time; held = b'x' * (80 * 2**20); pathlib.Path({str(ready)!r}).touch()\n"
              f"while not pathlib.Path({str(stop)!r}).exists(): time.sleep(0.05)")
    starter = (f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {holder!r}], "
               "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL).pid)")
    pid = int(subprocess.run([sys.executable, "-c", starter], capture_output=True, check=True).stdout)
    try:
        while not ready.exists():
            time.sleep(0.05)
        with TreeRss(interval=3600) as rss:
            alone = rss.sample()  # the holder's parent has exited: it is not in this process's tree
            with rss.tracking(pid):
                tracked = rss.sample()
            after = rss.sample()
            with rss.tracking(None):  # nothing to track: no error
                rss.sample()
        assert tracked - alone > 60 and tracked - after > 60
    finally:
        stop.touch()


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


def test_a_peer_is_timed_in_its_own_process_and_its_failure_is_named(tmp_path):
    from tooleval.bench._run import _time_warm_fresh

    lines: list[str] = []
    # an empty folder: the child's loop fails, and the error quotes what the child said last
    with pytest.raises(RuntimeError, match=r"ragas loop failed in its own process: FileNotFoundError: .*cases\.jsonl"):
        _time_warm_fresh("ragas_loop", tmp_path, 5, 2, "ragas loop", lines.append)
    assert lines == ["bench: ragas loop warm-up (2 rows, untimed) ..."]  # the child's progress line, passed on


def test_the_timed_rows_are_read_once_between_the_warmup_and_the_timed_pass(tmp_path, monkeypatch):
    # so that the timed pass reads them from the page cache, as the runs read their traces
    from tooleval.bench import _run

    calls: list = []
    monkeypatch.setattr(_run, "_read_once", lambda path, lines: calls.append((path.name, lines)))
    time_warm(lambda dataset, limit: calls.append(limit) or limit, tmp_path, 40, 7, "peer")
    assert calls == [7, ("traces.jsonl", 40), 40]
    (tmp_path / "traces.jsonl").write_text("a\nb\n")
    monkeypatch.undo()
    _run._read_once(tmp_path / "traces.jsonl", 5)  # fewer lines than asked: no error
    _run._read_once(tmp_path / "missing.jsonl", 5)


def test_a_peers_reference_read_is_charged_to_the_corpus_rows_pro_rata(tmp_path):
    # a peer reads its references once per corpus: 40 timed rows of a 1,000-row corpus carry 40 / 1,000 of the
    # read, here 0.04 x 50 s = 2 s on top of the loop's 2.5 s; charged whole (no corpus size), all 50 s
    now, calls = [0.0], []

    def loop(dataset, limit):
        calls.append(limit)
        now[0] += 100.0 if len(calls) == 1 else 2.5
        return limit

    def load(dataset):
        calls.append("load")
        now[0] += 50.0

    assert time_warm(loop, tmp_path, 40, 7, "peer", clock=lambda: now[0],
                     references=ReferenceRead(load, corpus_rows=1_000)) == 4.5
    assert calls == [7, 40, "load"]
    assert time_warm(loop, tmp_path, 40, 7, "peer", clock=lambda: now[0], references=ReferenceRead(load)) == 52.5


def test_the_peers_read_their_references_once_per_dataset(tmp_path):
    from tooleval.bench import _peers
    from tooleval.synth import write_synth

    data = write_synth(30, 0, "bfcl", tmp_path / "data").path
    first = _peers._cases(data)
    assert _peers._cases(data) is first  # kept: the timed pass does not read them again
    assert _peers.read_references(data) == first and _peers.read_references(data) is not first
    assert len(first) == len((data / "cases.jsonl").read_text().splitlines())


# Argument texts the traces' format gives a meaning (empty, whitespace and ``null`` mean ``{}``; anything but one
# representable JSON object is a malformed call), each beside a reference it would match when read as ``{}``.
_ARGUMENT_TEXTS = ["null", " null ", "", "   ", "{}", '{"q": 1}', '{"q": 1.0}', "[1]", '"text"', "7", "nul",
                   '{"q": 1, "q": 1}', '{"q": NaN}', '{"q": Infinity}', '{"q": 1e999}', '{"q": "\\ud800"}',
                   '{"q": ' * 201 + "1" + "}" * 201, '{"q": 1}  ', "\ufeff{}"]


def test_the_ragas_loop_reads_argument_text_as_the_product_does(tmp_path):
    # b and the ragas column score the same rows: on every row the peer's ragas value is the product's
    import json as _json
    from datetime import datetime, timezone

    from tooleval.bench._peers import ragas_loop
    from tooleval.capture.envelope import build_envelope
    from tooleval.models import Case, RecordedTrace
    from tooleval.scoring.rows import score_envelopes

    cases, traces = [], []
    for number, text in enumerate(_ARGUMENT_TEXTS):
        for reference in ({}, {"q": 1}):
            case_id = f"c{number}-{len(reference)}"
            cases.append({"case_id": case_id, "input": [{"role": "user", "content": "go"}],
                          "expected_calls": [{"name": "look", "args": reference}]})
            traces.append({"case_id": case_id, "trial": 0, "agent": {"name": "a", "version": "1"},
                           "messages": [{"role": "user", "content": "go"},
                                        {"role": "assistant", "content": None, "tool_calls": [
                                            {"id": "t0", "type": "function",
                                             "function": {"name": "look", "arguments": text}}]}]})
    (tmp_path / "cases.jsonl").write_text("".join(_json.dumps(c) + "\n" for c in cases))
    (tmp_path / "traces.jsonl").write_text("".join(_json.dumps(t) + "\n" for t in traces))

    peer: list[float] = []
    assert ragas_loop(tmp_path, scores=peer) == len(traces)
    at = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rows = score_envelopes({c["case_id"]: Case.model_validate(c) for c in cases},
                           [build_envelope(RecordedTrace.model_validate(t), "r", at) for t in traces])
    product = [r["ragas_tool_call_f1"] for r in rows]
    differing = [(t["case_id"], _ARGUMENT_TEXTS[i // 2][:20], p, q)
                 for i, (t, p, q) in enumerate(zip(traces, peer, product)) if p != q]
    assert differing == []
    # "null" and blank text are {} (a match for the empty reference), "[1]" is malformed (no match): both seen
    by_case = dict(zip((t["case_id"] for t in traces), peer))
    assert by_case["c0-0"] == by_case["c2-0"] == by_case["c3-0"] == 1.0
    assert by_case["c7-0"] == 0.0 and by_case["c5-1"] == 1.0
