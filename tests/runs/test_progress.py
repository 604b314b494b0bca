"""Live progress of a run's fused stages (tooleval.runs.progress): each stage counts what it has finished, noted by
the worker that ran it (another process), with its own rate and ETA; a shard's return never counts twice."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time

from tooleval.runs.progress import StageProgress, note_stage

STAGES = ["generation", "trace-capture", "scoring", "legacy-scalar"]


def _wait_for(bar: StageProgress, stage: str, rows: int) -> None:
    deadline = time.monotonic() + 10
    while bar.done[stage] != rows and time.monotonic() < deadline:
        time.sleep(0.05)
    assert bar.done[stage] == rows, bar.done


def test_each_stage_counts_what_a_worker_process_noted():
    stream = io.StringIO()
    with StageProgress(STAGES, 100, stream=stream, interval=0.0) as bar:
        assert bar.channel is not None and os.path.isdir(bar.channel)
        # a worker process: shard "s1" (60 rows) finished generation and capture, not yet scoring or legacy
        code = ("import sys; from tooleval.runs.progress import note_stage as n; "
                "n(sys.argv[1], 'generation', 's1', 60); n(sys.argv[1], 'trace-capture', 's1', 60)")
        subprocess.run([sys.executable, "-c", code, bar.channel], check=True, env=os.environ.copy())
        _wait_for(bar, "trace-capture", 60)
        assert bar.done == {"generation": 60, "trace-capture": 60, "scoring": 0, "legacy-scalar": 0}
        last = stream.getvalue().splitlines()[-1]
        # 60 of 100 rows in t seconds: 40 rows to go at 60/t rows/s, an ETA of 2t/3; never ETA for a stage at 0 rows
        assert re.match(r"progress: generation 60/100 \([\d,]+ rows/s, ETA \d:\d\d:\d\d\); trace-capture 60/100 ", last)
        assert "scoring 0/100 (0 rows/s, ETA -:--:--)" in last
        # the shard returns to the flow: its four stages are done; the two noted ones are not counted again
        bar.shard_done("s1", STAGES, 60)
        assert bar.done == dict.fromkeys(STAGES, 60)
        note_stage(bar.channel, "generation", "s2", 40)  # the flow's own thread (one worker): the same channel
        _wait_for(bar, "generation", 100)
        channel = bar.channel
    assert not os.path.exists(channel)  # the channel goes with the run
    final = stream.getvalue().splitlines()[-1]
    assert final.startswith("done: generation 100/100 (") and "trace-capture 60/100" in final
    assert "ETA" not in final


def test_a_worker_elsewhere_notes_nothing_and_its_shard_counts_on_return():
    # a Dask worker on another machine has no such folder: nothing is written, the return counts every stage
    note_stage("/nonexistent/tooleval-progress", "generation", "s1", 10)
    assert not os.path.exists("/nonexistent/tooleval-progress")
    stream = io.StringIO()
    with StageProgress(STAGES, 10, stream=stream, interval=3600.0) as bar:
        bar.shard_done("s1", STAGES, 10)
        bar.shard_done("s1", STAGES, 10)  # reported twice: still 10
    assert stream.getvalue() == "done: 10/10 rows (" + stream.getvalue().split("(")[1].split(")")[0] + \
        ") through generation -> trace-capture -> scoring -> legacy-scalar\n"


def test_disabled_progress_opens_no_channel():
    with StageProgress(STAGES, 1, stream=io.StringIO(), enabled=False) as bar:
        assert bar.channel is None
        note_stage(bar.channel, "generation", "s1", 1)  # a no-op
        bar.shard_done("s1", STAGES, 1)
    assert bar.done == dict.fromkeys(STAGES, 1)
