"""Each trace is decoded once on the row path: the generation, trace capture and scoring stages run in this process
over a dataset with every JSON parser the code can reach counted (orjson, the standard library's decoder, pyarrow's
JSON reader, DuckDB's ``read_json``); a parse whose result is a whole trace counts for that trace's key, and one
whose result is a message list or a single chat message is a second decode of some trace's messages (capture
decodes a trace as its line, never its messages alone). Scoring reads what capture wrote beside each envelope (the
transcript view, the request's join key, the recorded reward, the redaction's markers) instead.

The legacy pass decodes the stored messages on purpose (the drift check stays independent of the row path), so it
is not run here; the plan reads each line's key only (an Arrow key projection), before the stages."""

from __future__ import annotations

import json
import traceback
from collections import Counter
from pathlib import Path

import duckdb
import orjson
import pyarrow.json as pj
import pytest

from tasks import ReplayedLines, cached_redactor, capture_shard, generate_shard, score_shard
from tests.support.datasets import tool_call, trace, write_dataset
from tests.support.paths import BUNDLED, REPO
from tooleval.dataset import load_dataset_cached
from tooleval.rules import ToolTable, confidential_tools, load_policy
from tooleval.runs.plan import plan_run
from tooleval.runs.shards import run_scopes, scoring_key
from tooleval.runs.spec import RunSpec
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.scoring import ScoringSources, score_table
from tooleval.storage import ENVELOPE_SCHEMA, VIEW_FIELDS, read_table_file
from tooleval.storage.stages import read_stage_table, stage_dir
from tooleval.versions import scorer_version

KEY = "tooleval-decode-once-test-key-0001"


class ParseLog:
    """Every parse the stages make, classified by what it returned."""

    def __init__(self) -> None:
        self.traces: Counter = Counter()
        self.messages = 0
        self.where: Counter = Counter()
        self.readers: list[str] = []

    def saw(self, value) -> None:
        if isinstance(value, dict) and "messages" in value and "case_id" in value:
            key = (value.get("case_id"), value.get("trial"))
            self.traces[key] += 1
            if self.traces[key] > 1:
                self._note()
        elif isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value) or \
                isinstance(value, dict) and "role" in value and ("content" in value or "tool_calls" in value):
            self.messages += 1
            self._note()

    def _note(self) -> None:
        """Where a trace or its messages were read again, for the failure's message."""
        frames = [f for f in traceback.extract_stack()[:-3] if "/tooleval/" in f.filename or "/tasks/" in
                  f.filename][-3:]
        self.where[" <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames))] += 1


@pytest.fixture
def parse_log(monkeypatch):
    log = ParseLog()
    loads, decode = orjson.loads, json.JSONDecoder.decode

    def counted_loads(data, *args, **kwargs):
        value = loads(data, *args, **kwargs)
        log.saw(value)
        return value

    def counted_decode(self, text, *args, **kwargs):
        value = decode(self, text, *args, **kwargs)
        log.saw(value)
        return value

    def reader(name, original):
        def read(*args, **kwargs):
            log.readers.append(name)
            return original(*args, **kwargs)
        return read

    monkeypatch.setattr(orjson, "loads", counted_loads)
    monkeypatch.setattr(json.JSONDecoder, "decode", counted_decode)
    monkeypatch.setattr(pj, "read_json", reader("pyarrow.json.read_json", pj.read_json))
    monkeypatch.setattr(duckdb, "read_json", reader("duckdb.read_json", duckdb.read_json))
    return log


def _run_stages(dataset: Path, out: Path, log: ParseLog | None = None) -> tuple[list, int]:
    """The run's plan, then the three row-path stages of every shard (as a worker runs them); returns the rows and
    the number of traces the capture stage wrote."""
    plan = plan_run(RunSpec(dataset=str(dataset), traces=None, out=str(out), run_id="decode-once", workers=1))
    generation_scope, scoring_scope = run_scopes(plan)
    loaded = load_dataset_cached(plan.dataset.path)
    kept = confidential_tools(loaded.tools, loaded.cases)
    dirs = {name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")}
    if log is not None:  # the plan read keys only; from here on every parse is the stages'
        log.traces.clear()
        log.messages = 0
        log.readers.clear()
    rows, captured = [], 0
    for shard in plan.index.shards():
        items, offsets = plan.shard_items(shard)
        generated = generate_shard.fn(plan.agent, items, plan.dataset, plan.redaction, plan.out,
                                      dirs["generation"], plan.executor, scope=generation_scope)
        replay = ReplayedLines(plan.agent, items, offsets, plan.dataset, plan.out)
        envelopes = capture_shard.fn(generated, plan.dataset.tool_schema_version, scorer_version(), dirs["capture"],
                                     plan.redaction, generation_scope, replay=replay, kept_results=kept)
        captured += envelopes.rows
        scored = score_shard.fn(envelopes, plan.dataset, plan.redaction, scorer_version(), ragas_version(),
                                plan.out, dirs["scoring"], scope=scoring_key(scoring_scope, items))
        rows += read_stage_table(scored).to_pylist()
    return rows, captured


@pytest.mark.parametrize("dataset", [BUNDLED, REPO / "datasets" / "examples" / "tool-contracts"],
                         ids=["bundled", "tool-contracts"])
def test_each_trace_is_decoded_once_by_the_stages(dataset, tmp_path, monkeypatch, parse_log):
    # the bundled tau-bench runs hold user turns, replies, tool results and protected writes (the confirmation
    # rule reads the user's replies); the tool-contracts example declares confidential fields (the leak rule
    # reads tool results) and argument rules; both run redacted, so the references are redacted by the markers
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    rows, captured = _run_stages(dataset, tmp_path / "out", parse_log)
    assert captured == len(rows) > 0
    assert parse_log.messages == 0, f"a trace's messages were decoded again: {parse_log.where.most_common(3)}"
    assert parse_log.readers == []
    assert set(parse_log.traces.values()) == {1}, f"a trace was decoded again: {parse_log.where.most_common(3)}"
    assert sum(parse_log.traces.values()) == captured


@pytest.mark.parametrize("dataset", [BUNDLED, REPO / "datasets" / "examples" / "tool-contracts"],
                         ids=["bundled", "tool-contracts"])
def test_rows_from_the_view_equal_rows_from_the_decoded_messages(dataset, tmp_path, monkeypatch):
    """The view is a faithful stand-in: every capture stage file of a run, scored from its view, gives the rows
    the scoring stage gives the same envelopes without it (as published envelopes are scored: from their
    messages), column for column."""
    _rows_with_and_without_view(dataset, tmp_path, monkeypatch)


def test_rows_scored_in_bulk_equal_rows_scored_one_by_one_on_a_bfcl_corpus(tmp_path, monkeypatch):
    """A bfcl corpus's rows are nearly all scored in bulk from the view (their wrong-argument pairs found over the
    batch, their write rules per row), and the same envelopes without the view go one by one through the rule-aware
    matcher and :func:`tooleval.rules.evaluate_row`: the rows are equal, column for column. The corpus holds both
    shapes of leftover calls: at most one missing and one extra call of a tool (paired over the batch), and more
    of one tool on one side (left to the optimal assignment)."""
    from tooleval.synth import write_synth

    synth = write_synth(1_400, 3, "bfcl", tmp_path / "bfcl")
    rows = _rows_with_and_without_view(synth.path, tmp_path, monkeypatch)
    shapes = Counter()
    for row in rows:
        missing = Counter(call["name"] for call in row["missing_calls"] or ())
        extra = Counter(call["name"] for call in row["extra_calls"] or () if call["parse_error"] is None)
        both = [(missing[name], extra[name]) for name in missing if extra[name]]
        if both:
            shapes["alone" if all(shape == (1, 1) for shape in both) else "several"] += 1
    assert shapes["alone"] > 100 and shapes["several"] > 0, shapes
    assert sum(1 for row in rows if row["wrong_args"]) >= shapes["alone"]
    assert any(row["blocking"] for row in rows)  # a missing write: the write rules ran


def _rows_with_and_without_view(dataset: Path, tmp_path: Path, monkeypatch) -> list[dict]:
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    rows, _ = _run_stages(dataset, tmp_path / "out")
    plan = plan_run(RunSpec(dataset=str(dataset), traces=None, out=str(tmp_path / "out"), run_id="x", workers=1))
    loaded = load_dataset_cached(plan.dataset.path)
    redactor = cached_redactor(plan.out, plan.redaction, plan.dataset)
    stages = sorted(Path(stage_dir(tmp_path / "out", "capture")).glob("*.arrow"))
    assert stages
    with_view, without = [], []
    for stage in stages:
        table = read_table_file(str(stage))
        assert set(VIEW_FIELDS.names) <= set(table.schema.names)
        for kept, into in ((table, with_view), (table.select(ENVELOPE_SCHEMA.names), without)):
            sources = ScoringSources(loaded.cases, redactor=redactor, tools=ToolTable(loaded.tools),
                                     policy=load_policy(loaded.path), digests_verified=True)
            into += score_table(kept, sources).to_pylist()
    assert with_view == without
    assert len(with_view) == len(rows)
    assert any(row["violations"] for row in with_view)  # the rules had something to find
    return with_view


def test_calls_without_arguments_are_matched_by_name_through_the_stages(tmp_path, monkeypatch):
    """A trace whose calls carry no arguments (content capture off) is scored through capture's view as the
    rule-aware matcher scores it: by name, apart from the argument-level figures. Worked by hand: case n1 expects
    get_order(A-9) and the agent called get_order without arguments: matched by name, tp 1, f1 1.0, name_only,
    not exact (the arguments are unknown); case n2 expects get_order and refund and got only get_order by name:
    tp 1, fn 1, f1 2/3. The trace with captured arguments beside them stays argument-level: wrong arguments, f1 0."""
    monkeypatch.setenv("TOOLEVAL_REDACTION_KEY", KEY)
    unrecorded = {"id": "c", "type": "function", "function": {"name": "get_order"}, "arguments_captured": False}
    cases = [{"case_id": "n1", "input": "n1", "expected_calls": [{"name": "get_order", "args": {"order_id": "A-9"}}]},
             {"case_id": "n2", "input": "n2", "expected_calls": [{"name": "get_order", "args": {"order_id": "A-2"}},
                                                                {"name": "refund", "args": {"order_id": "A-2"}}]}]
    traces = [trace("n1", 0, [unrecorded]), trace("n2", 0, [unrecorded]),
              trace("n1", 1, [tool_call("get_order", '{"order_id": "A-1"}')])]
    dataset = write_dataset(tmp_path / "names", cases, traces)
    rows, _ = _run_stages(dataset, tmp_path / "out")
    got = {(r["case_id"], r["trial"]): (r["name_only"], r["tp"], r["fn"], round(r["f1"], 4), r["exact_match"])
           for r in rows}
    assert got == {("n1", 0): (True, 1, 0, 1.0, False), ("n2", 0): (True, 1, 1, 0.6667, False),
                   ("n1", 1): (False, 0, 1, 0.0, False)}
