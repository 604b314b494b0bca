"""The replay agent reads each planned line at its offset and validates it there, once (the plan read only its key):
valid lines give their records, a line orjson cannot read to the same values takes the strict way, a line with a
problem keeps its row with the error, and a line changed since the plan is judged anew."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

from tooleval.runs.spec import RunSpec
from tooleval.agents import replay_generate
from tooleval.runs.plan import plan_run
from tooleval.runs.shards import scan_lines

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "datasets" / "tau-bench-airline"


def _unzipped_copy(tmp_path: Path) -> Path:
    """The bundled tau-bench dataset with its traces as plain text (a gzip file has no offsets to seek to)."""
    folder = tmp_path / "tau"
    shutil.copytree(BUNDLED, folder)
    with gzip.open(folder / "traces.jsonl.gz", "rb") as packed:
        (folder / "traces.jsonl").write_bytes(packed.read())
    (folder / "traces.jsonl.gz").unlink()
    dataset = json.loads((folder / "dataset.json").read_text())
    if dataset.get("traces"):
        dataset["traces"] = "traces.jsonl"
        (folder / "dataset.json").write_text(json.dumps(dataset))
    return folder


def _records(plan, sequential: bool = False) -> list[dict]:
    """Every record of the plan, read at the plan's offsets (``sequential``: from the file's start, as a gzip file
    is read)."""
    records = []
    for shard in plan.index.shards():
        items, offsets = plan.shard_items(shard)
        records += list(replay_generate(plan.agent, items, None if sequential else offsets))
    return records


def test_every_bundled_line_read_at_its_offset_gives_the_records_of_a_sequential_read(tmp_path):
    folder = _unzipped_copy(tmp_path)
    plan = plan_run(RunSpec(dataset=folder, traces=folder / "traces.jsonl", out=tmp_path / "out", run_id="r1", redaction=False))
    # the bundled file: 200 lines, every one a valid recorded trace (data README: 200 rows, no row errors)
    assert plan.index.rows == 200
    placed, sequential = _records(plan), _records(plan, sequential=True)
    assert len(placed) == 200 and all(r["error"] is None for r in placed)
    assert placed == sequential


def _line(case_id: str, trial: int, extra: str = "") -> str:
    return ('{"case_id": "%s", "trial": %d, "messages": [{"role": "user", "content": "hi"}, '
            '{"role": "assistant", "content": "done"}]%s}' % (case_id, trial, extra))


def _small_dataset(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "small"
    folder.mkdir()
    cases = [{"case_id": f"c{i}", "input": [{"role": "user", "content": "hi"}], "expected_calls": []}
             for i in range(len(lines))]
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (folder / "dataset.json").write_text(json.dumps({"name": "small", "revision": "r1", "schema_version": 1}))
    (folder / "traces.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def test_a_line_orjson_cannot_read_and_a_line_with_a_problem_go_the_strict_way(tmp_path):
    lines = [
        _line("c0", 0),
        _line("c1", 0, ', "metadata": {"big": %d}' % (2 ** 70)),  # valid, beyond orjson's 64-bit integers
        _line("c2", 0, ', "metadata": {"a": 1, "a": 2}'),  # a repeated key: a row error, never the fast read
    ]
    folder = _small_dataset(tmp_path, lines)
    plan = plan_run(RunSpec(dataset=folder, traces=folder / "traces.jsonl", out=tmp_path / "out", run_id="r1", redaction=False))
    fast, sequential = _records(plan), _records(plan, sequential=True)
    assert fast == sequential
    assert json.loads(fast[1]["payload_json"])["metadata"]["big"] == 2 ** 70
    assert fast[2]["payload_json"] is None and "repeats the key 'a'" in fast[2]["error"]


def test_a_line_changed_after_the_plan_is_read_and_judged_again(tmp_path):
    folder = _small_dataset(tmp_path, [_line("c0", 0), _line("c1", 0)])
    plan = plan_run(RunSpec(dataset=folder, traces=folder / "traces.jsonl", out=tmp_path / "out", run_id="r1", redaction=False))
    # same key, now with a repeated key: the line is judged as it now stands
    changed = [_line("c0", 0), _line("c1", 0, ', "metadata": {"a": 1, "a": 2}')]
    (folder / "traces.jsonl").write_text("".join(line + "\n" for line in changed))
    records = _records(plan)
    assert records[0]["error"] is None
    assert records[1]["payload_json"] is None and "repeats the key 'a'" in records[1]["error"]


def test_the_one_read_of_the_plan_finds_the_offsets_and_digests_a_second_scan_finds(tmp_path):
    # CRLF and LF line ends, a blank line and an unreadable line before the last trace: each line's byte offset
    # and digest (without its line end) as scan_lines finds them reading the file again, and the file's digest
    folder = _small_dataset(tmp_path, [_line("c0", 0)])
    raw = (_line("c0", 0) + "\r\n\n" + "not json\n" + _line("c1", 0) + "\n" + _line("c2", 0)).encode()
    (folder / "traces.jsonl").write_bytes(raw)
    cases = [{"case_id": f"c{i}", "input": "hi", "expected_calls": []} for i in range(3)]
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    plan = plan_run(RunSpec(dataset=folder, traces=folder / "traces.jsonl", out=tmp_path / "out", run_id="r1", redaction=False))
    table = plan.index.table
    keys = list(zip(table["case_id"].to_pylist(), table["trial"].to_pylist()))
    assert keys == [("c0", 0), ("c1", 0), ("c2", 0)]
    # by hand: line 1 at 0, line 4 after line 1 + CRLF, the blank line and "not json\n"; line 5 after line 4's LF
    first = len(_line("c0", 0))
    assert table["offset"].to_pylist() == [0, first + 2 + 1 + 9, first + 2 + 1 + 9 + len(_line("c1", 0)) + 1]
    assert table["line"].to_pylist() == [1, 4, 5]
    offsets, digests = scan_lines(folder / "traces.jsonl", dict(zip([1, 4, 5], keys)))
    assert table["offset"].to_pylist() == [offsets[k][0] for k in keys]
    assert table["line_digest"].to_pylist() == [digests[k] for k in keys]
    assert table["line_digest"].to_pylist()[0] == hashlib.sha256(_line("c0", 0).encode()).hexdigest()[:32]
    assert plan.agent.traces_digest == hashlib.sha256(raw).hexdigest()
    assert [r["error"] for r in _records(plan)] == [None, None, None]


def test_an_integer_beyond_64_bits_keeps_its_value_through_generation_and_capture(tmp_path):
    # orjson reads 2**70 as the float 1.1805916207174113e+21; the stage files are JSON text read back by each
    # stage, so the envelope's metadata and its tool call arguments must still hold the integer itself
    from tasks import ReplayedLines, capture_shard, generate_shard
    from tooleval.runs.shards import run_scopes
    from tooleval.storage.stages import read_stage_table, stage_dir
    from tooleval.versions import scorer_version

    wide = 2 ** 70 + 1  # not a float: the nearest double is 2**70
    line = ('{"case_id": "c0", "trial": 0, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
            '"content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "pay", '
            '"arguments": {"account": %d}}}]}], "metadata": {"ledger_id": %d}}' % (wide, wide))
    folder = _small_dataset(tmp_path, [line])
    plan = plan_run(RunSpec(dataset=folder, traces=folder / "traces.jsonl", out=tmp_path / "out", run_id="r1", redaction=False))
    gscope, _ = run_scopes(plan)
    dirs = {name: stage_dir(plan.out, name) for name in ("generation", "capture")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    shard = next(plan.index.shards())
    items, offsets = plan.shard_items(shard)
    generated = generate_shard.fn(plan.agent, items, plan.dataset, plan.redaction, plan.out,
                                  str(dirs["generation"]), plan.executor, scope=gscope)
    captured = capture_shard.fn(generated, plan.dataset.tool_schema_version, scorer_version(), str(dirs["capture"]),
                                plan.redaction, gscope,
                                replay=ReplayedLines(plan.agent, items, offsets, plan.dataset, str(plan.out)))
    envelope = read_stage_table(captured).to_pylist()[0]
    assert envelope["error"] is None
    assert json.loads(envelope["metadata_json"])["ledger_id"] == wide
    messages = json.loads(envelope["messages_json"])
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"account": wide}
    assert type(json.loads(envelope["metadata_json"])["ledger_id"]) is int
