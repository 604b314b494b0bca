"""Hypothesis fuzzing of every reader of user files (issue 12): the dataset manifest, cases.jsonl, tools.json,
recorded traces, gate.toml, the tool results file and a run's commit marker; and of what a traces line's key and
type may be (trial numbers of any size and type, top-level JSON values of every type) and of the TOOLEVAL_*
environment values.

Each example is a malformed (or occasionally valid) file; the reader must either accept it or refuse it with an
:class:`~tooleval.errors.InputFileError` naming that file — and its line, whenever the problem sits on a line —
never with another exception (RecursionError, UnicodeDecodeError, KeyError, ...).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.datasets import TINY_CASES, TINY_TRACES
from tests.support.profiles import examples
from tooleval.agents import read_tool_results
from tooleval.capture.recorded import index_traces
from tooleval.dataset import load_dataset
from tooleval.errors import InputFileError
from tooleval.rules import load_gate_config
from tooleval.storage import read_marker

EXAMPLES = 400  # per reader: 7 readers x 400 = 2,800 generated files per full run (half in the fast core)
FUZZ = settings(max_examples=examples(EXAMPLES), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _deep(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


@st.composite
def mutated(draw, valid: bytes) -> bytes:
    """``valid`` bytes broken in one of several ways a careless file is broken."""
    how = draw(st.sampled_from(["truncate", "insert", "flip", "deep", "json", "binary", "bad-utf8", "keep"]))
    if how == "truncate":
        return valid[: draw(st.integers(0, max(0, len(valid) - 1)))]
    if how == "insert":
        at = draw(st.integers(0, len(valid)))
        return valid[:at] + draw(st.binary(min_size=1, max_size=6)) + valid[at:]
    if how == "flip" and valid:
        at = draw(st.integers(0, len(valid) - 1))
        return valid[:at] + bytes([valid[at] ^ draw(st.integers(1, 255))]) + valid[at + 1:]
    if how == "deep":
        depth = draw(st.sampled_from([900, 5_000, 100_000]))
        return valid + _deep(depth, draw(st.sampled_from(["list", "dict"]))).encode() + b"\n"
    if how == "json":
        return (json.dumps(draw(json_values)) + "\n").encode()
    if how == "binary":
        return draw(st.binary(max_size=64))
    if how == "bad-utf8":
        at = draw(st.integers(0, len(valid)))
        return valid[:at] + b"\xff\xfe" + valid[at:]
    return valid


def refused_properly(exc: InputFileError, path: Path, *, line_required: bool) -> None:
    assert exc.path == str(path), exc
    file_level = any(text in exc.problem for text in ("readable gzip", "cannot read the file", "file not found",
                                                      "holds no case"))  # whole-file problems: no line to name
    if line_required and not file_level:
        assert isinstance(exc.line, int) and exc.line >= 1, exc
    assert "Fix:" in str(exc) and "DESIGN.md" not in str(exc)


def lines(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


MANIFEST = json.dumps({"name": "f", "revision": "r1", "schema_version": 1, "description": None,
                       "license": None, "source": None}, indent=1).encode()
TOOLS = json.dumps([{"name": "get_order", "parameters": {"type": "object"}, "side_effect": "read"},
                    {"name": "refund", "parameters": {"type": "object"}, "side_effect": "write"}], indent=1).encode()


def _dataset(folder: Path, manifest: bytes = MANIFEST, cases: bytes = lines(TINY_CASES), tools: bytes | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.json").write_bytes(manifest)
    (folder / "cases.jsonl").write_bytes(cases)
    if tools is not None:
        (folder / "tools.json").write_bytes(tools)
    return folder


@pytest.fixture
def box(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(data=mutated(MANIFEST))
def test_manifest(box, data):
    folder = _dataset(box / "d", manifest=data)
    try:
        load_dataset(folder)
    except InputFileError as exc:
        refused_properly(exc, folder / "dataset.json", line_required=True)


@FUZZ
@given(data=mutated(lines(TINY_CASES)))
def test_cases(box, data):
    folder = _dataset(box / "d", cases=data)
    try:
        load_dataset(folder)
    except InputFileError as exc:
        refused_properly(exc, folder / "cases.jsonl", line_required=True)


@FUZZ
@given(data=mutated(TOOLS))
def test_tools(box, data):
    folder = _dataset(box / "d", tools=data)
    try:
        load_dataset(folder)
    except InputFileError as exc:
        refused_properly(exc, folder / "tools.json", line_required=True)


@FUZZ
@given(data=mutated(lines(TINY_TRACES)), gz=st.booleans())
def test_traces(box, data, gz):
    path = box / ("traces.jsonl.gz" if gz else "traces.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        index = index_traces(path)
    except InputFileError as exc:
        refused_properly(exc, path, line_required=True)
    else:
        assert all(error.line is not None for error in index.errors)


GATE = (b'schema_version = 1\n\n[f1]\nmin_mean = 0.5\n\n[[waivers]]\ncase = "A"\nreason = "known"\nowner = "qa"\n'
        b'expires = 2030-01-01\n')


@FUZZ
@given(data=mutated(GATE))
def test_gate_toml(box, data):
    path = box / "gate.toml"
    path.write_bytes(data)
    try:
        load_gate_config(path)
    except InputFileError as exc:
        refused_properly(exc, path, line_required=False)


@FUZZ
@given(data=mutated(lines([{"name": "get_order", "args": {"id": "A"}, "result": {"status": "open"}},
                           {"name": "refund", "args": '{"id": "A"}', "result": "ok"}])))
def test_tool_results(box, data):
    path = box / "tool_results.jsonl"
    path.write_bytes(data)
    try:
        read_tool_results(path)
    except InputFileError as exc:
        refused_properly(exc, path, line_required=True)


MARKER = json.dumps({"format": 1, "run_id": "x", "dataset_revision": "r1", "publication": "0" * 32,
                     "state": "clean", "partitions": {}, "documents": {}}).encode()


@FUZZ
@given(data=mutated(MARKER))
def test_commit_marker(box, data):
    path = box / "runs" / "x" / "commit.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        read_marker(box, "x")
    except InputFileError as exc:
        refused_properly(exc, path, line_required=False)


def test_the_valid_inputs_are_accepted(box):
    """The unmutated seeds are read (so the fuzzing starts from files the readers accept)."""
    folder = _dataset(box / "ok", tools=TOOLS)
    assert sorted(load_dataset(folder).cases) == ["A", "B", "C"]
    (box / "gate.toml").write_bytes(GATE)
    assert load_gate_config(box / "gate.toml").waivers[0].case == "A"
    (box / "t.jsonl").write_bytes(lines(TINY_TRACES))
    assert len(index_traces(box / "t.jsonl").keys) == 4


trial_values = (st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([0, 2**31 - 1, 2**31, 2**63])
                | st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.none() | st.text(max_size=4))


@FUZZ
@given(trials=st.lists(trial_values, min_size=1, max_size=6))
def test_trace_trials(box, trials):
    """Any trial value: the line is a key exactly when the trial is an integer (not a boolean) in 0..2**31 - 1;
    otherwise an errors.json entry naming the file and the line. Nothing raises."""
    path = box / "traces.jsonl"
    path.write_bytes(lines([dict(TINY_TRACES[0], trial=trial) for trial in trials]))
    index = index_traces(path)
    usable = {}
    for number, trial in enumerate(trials, start=1):
        if type(trial) is int and 0 <= trial <= 2**31 - 1:
            usable.setdefault(("A", trial), number)
    assert index.keys == usable
    assert all(error.path == str(path) and error.line >= 1 for error in index.errors)
    assert len(index.keys) + len(index.errors) == len(trials)


@FUZZ
@given(values=st.lists(json_values, min_size=1, max_size=5), gz=st.booleans())
def test_trace_top_level_types(box, values, gz):
    """Lines of any JSON type among good lines: a line that is not an object is an ``unreadable_trace`` entry
    with its file and line, and the good lines around it keep their keys."""
    path = box / ("traces.jsonl.gz" if gz else "traces.jsonl")
    text = "".join(json.dumps(TINY_TRACES[i % 4]) + "\n" + json.dumps(value) + "\n" for i, value in enumerate(values))
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    index = index_traces(path)
    assert set(index.keys) >= {(TINY_TRACES[i % 4]["case_id"], TINY_TRACES[i % 4]["trial"]) for i in range(len(values))}
    unreadable = [error.line for error in index.errors if error.kind == "unreadable_trace"]
    assert unreadable == [2 * (i + 1) for i, value in enumerate(values) if not isinstance(value, dict)]


@FUZZ
@given(field=st.sampled_from(["messages", "agent", "metadata", "executor_calls", "adapter_calls", "request",
                              "generation_started_at", "request_id"]),
       value=json_values | st.sampled_from([2**31, 2**63, [{"name": "f", "args": {}, "executions": 2**40}],
                                            {"reward": "x"}, {"reward": True}]))
def test_trace_non_key_fields(box, field, value):
    """Any value in a field other than the key: the line keeps its key (no errors.json entry) and its record is
    either the trace or a ``bad_trace`` error naming the field, the file and the line. Nothing raises."""
    from pydantic import ValidationError

    from tooleval.agents import ReplayAgentConfig, WorkItem, replay_generate
    from tooleval.canonical import json_value_problem
    from tooleval.models import RecordedTrace

    path = box / "traces.jsonl"
    line = dict(TINY_TRACES[0], **{field: value})
    path.write_bytes(lines([line]))
    index = index_traces(path)
    assert (index.keys, index.errors) == ({("A", 0): 1}, [])
    (record,) = replay_generate(ReplayAgentConfig(traces_path=str(path), traces_digest=index.digest),
                                [WorkItem(case_id="A", case_digest="", trial=0, seed=0)])
    unkept = json_value_problem(line)  # NaN, a lone surrogate, too deep: no row can keep the value
    try:
        RecordedTrace.model_validate(line)
        invalid = False
    except ValidationError:
        invalid = True
    if unkept is None and not invalid:
        assert record["error"] is None and json.loads(record["payload_json"]) == line
        return
    assert record["payload_json"] is None
    assert record["error"].startswith("bad_trace: case 'A' trial 0: ")
    assert record["error"].endswith(f"(line 1 of {path})")
    if unkept is None:
        assert f"not a recorded trace: field {field}" in record["error"]


ENV_NAMES = ["TOOLEVAL_LOCK_TTL_S", "TOOLEVAL_MAX_LINE_BYTES", "TOOLEVAL_PREFECT_HOME", "TOOLEVAL_TEST_PUBLISH_PAUSE",
             "TOOLEVAL_PREFECT_SERVER_IDLE_S"]
env_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12) | \
    st.sampled_from(["1e999", "-5", "0", "nan", "inf", "120", "1024", str(2**31), "/proc/self/nope", "/dev/null/x",
                     "written", " 7 ", "0x10", "1_000"])


@FUZZ
@given(name=st.sampled_from(ENV_NAMES), value=env_texts)
def test_environment_values(name, value):
    """Any text in any variable: the check passes and the reader returns a value in the declared range, or it is
    refused with an EnvironmentValueError naming the variable and that range. Nothing else raises."""
    import math
    import os

    from tooleval.settings import (LOCK_TTL_RANGE, MAX_LINE_RANGE, SERVER_IDLE_RANGE, EnvironmentValueError,
                                   check_environment, lock_ttl_s, max_line_bytes, prefect_home,
                                   prefect_server_idle_s)

    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        try:
            check_environment()
        except EnvironmentValueError as exc:
            assert (exc.variable, exc.value, exc.path, exc.line) == (name, value, None, None)
            assert str(exc).startswith(f"environment variable {name}={value!r} is not ") and "Fix: set " in str(exc)
            return
        ttl, cap = lock_ttl_s(), max_line_bytes()
        assert math.isfinite(ttl) and LOCK_TTL_RANGE[0] <= ttl <= LOCK_TTL_RANGE[1]
        assert type(cap) is int and MAX_LINE_RANGE[0] <= cap <= MAX_LINE_RANGE[1]
        assert prefect_home() is None or value
        idle = prefect_server_idle_s()
        assert math.isfinite(idle) and SERVER_IDLE_RANGE[0] <= idle <= SERVER_IDLE_RANGE[1]
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
