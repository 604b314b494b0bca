"""Shared fixtures. Prefect settings are fixed here, before anything imports Prefect (PREFECT.md)."""

from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import tempfile
from pathlib import Path

_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="tooleval-test-prefect-"))
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)  # the harness's database and results go too
os.environ.setdefault("PREFECT_HOME", str(_PREFECT_HOME))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
# The commands tests start wait for their local server as long as the product does by default (300 s; the
# setting's own tests set it themselves): a test may wait longer on a slow machine, never fail for it.
os.environ.setdefault("PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS", "4")
# Every `tooleval run` a test starts runs cold, in its own process: a warm runner per test's results folder would
# outlive the test by its idle time. tests/test_warm_runner.py turns it on for its own commands.
os.environ.setdefault("TOOLEVAL_WARM_RUNNER", "0")

import pytest  # noqa: E402
from _pytest.mark.expression import Expression  # noqa: E402  (how `-m` itself reads a mark expression)
from tooleval.runs.spec import RunSpec
from hypothesis import settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"
BUNDLED = REPO / "datasets" / "tau-bench-airline"


SLOW_FIXTURES = {"prefect_harness"}
"""Fixtures that start a process of their own: Prefect's test server (``bundled_pair`` and the flow fixtures use
it). A test that needs one is ``slow``."""

SLOW_MODULES = {
    "test_prefect_server.py": "a real `prefect server start`, a work pool and a worker",
    "test_shared_server.py": "tooleval's shared local Prefect server, killed and restarted",
    "test_cli_kill.py": "`tooleval run` processes with their Prefect server, killed mid-run",
    "test_cache.py": "`tooleval run` in separate processes",
    "test_scale_flow.py": "runs on a process pool of Prefect workers",
    "test_cluster.py": "a Dask scheduler, two workers and moto's S3 server",
    "test_s3.py": "moto's S3 server",
    "test_lease_race.py": "moto's S3 server and writer processes racing for a lease",
    "test_bench.py": "the benchmark",
    "test_report_page.py": "Chromium",
    "test_view_page.py": "Chromium over the viewer's pages",
    "test_pytest_plugin.py": "pytest in subprocesses, each scoring the bundled run",
    "test_warm_runner.py": "`tooleval run` processes, their warm runner and Prefect server",
    "test_pool_signals.py": "`tooleval run` and `tooleval bench` on a process pool, signalled and killed",
    "test_fresh_machine.py": "`tooleval run` processes with a fresh Prefect home or a server that never answers",
}
"""Test modules whose tests start a Prefect server, a browser, an S3 or Dask process or the benchmark (the README's
"Tests" section lists them): every test in them is ``slow``."""

SLOW_TESTS = {
    "test_redaction_scan.py::test_no_secret_under_out_or_in_printed_lines": "`tooleval run` and its Prefect server, "
                                                                            "per generated dataset",
    "test_concurrent_runs.py::test_two_runs_started_together_on_a_new_out_both_publish": "two `tooleval run` "
                                                                                         "processes and their server",
    # measurements in the benchmark's manner: the peak memory of fresh processes over large generated inputs
    "test_cli_import.py::test_streaming_peak_memory_does_not_grow_with_the_input": "peak memory of two imports",
    "test_cli_faults.py::test_gzip_bomb_of_1_gb_stays_small_in_memory": "peak memory over a 1 GiB gzip bomb",
    # a real Inspect AI eval in a child process (inspect_ai's import alone takes seconds), then `tooleval run`
    "test_inspect.py::test_a_log_inspect_ai_wrote_is_imported_and_run_end_to_end": "inspect_ai's eval() and "
                                                                                    "`tooleval run`",
    # like test_pytest_plugin.py: pytest in a subprocess, here over a copy of the whole checkout
    "test_cli_faults.py::test_read_only_out_from_a_checkout_in_a_private_home": "a checkout copied and tested again",
}
"""Single tests (``file::name``) of otherwise fast modules that start such a process."""


def pytest_collection_modifyitems(config, items) -> None:
    """Mark ``slow`` what :data:`SLOW_FIXTURES` and :data:`SLOW_MODULES` name, so ``pytest -m "not slow"`` runs
    the fast core alone."""
    for item in items:
        if (item.path.name in SLOW_MODULES or f"{item.path.name}::{item.originalname}" in SLOW_TESTS
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)


FAST_CORE_PROFILE = "fast-core"
"""The hypothesis profile of ``pytest -m "not slow"``: half of each property test's examples (the default
profile's 100 become 50), so the fast core stays a quick check while the full run (CI's ``pytest``) keeps them all."""

# No per-example deadline in either profile: an example's time says how busy the machine is, not whether the
# code is right (a loaded 2-core runner took 276 ms over hypothesis' default 200 ms); speed is the benchmarks'.
settings.register_profile(FULL_PROFILE := "full", deadline=None)
settings.register_profile(FAST_CORE_PROFILE, max_examples=50, deadline=None)
settings.load_profile(FULL_PROFILE)


def examples(full: int) -> int:
    """``max_examples`` for a property test that draws ``full`` examples in a full run: ``full`` scaled as the
    loaded hypothesis profile scales the default 100 (``full`` under the default profile, half under
    :data:`FAST_CORE_PROFILE`), never fewer than 10 (nor than ``full`` when that is fewer)."""
    scaled = full * settings.default.max_examples // settings.get_profile("default").max_examples
    return max(min(full, 10), scaled)


def pytest_configure(config) -> None:
    """Load :data:`FAST_CORE_PROFILE` when the mark expression deselects the slow tests (``-m "not slow"``),
    unless ``--hypothesis-profile`` names one. Runs before collection imports the test modules, whose
    ``@settings(max_examples=examples(...))`` read it."""
    expression = config.option.markexpr
    if expression and config.getoption("hypothesis_profile", None) is None:
        if not Expression.compile(expression).evaluate(lambda name, **_: name == "slow"):
            settings.load_profile(FAST_CORE_PROFILE)


def pytest_collection_finish(session) -> None:
    """Take what exists after collection (the imported modules of Prefect, pydantic, pyarrow, scipy... and the
    collected tests, all alive until the process ends) out of the garbage collector's view: every full collection
    would walk them again (dozens of them in a run, each longer than a second on a busy machine), and so would the
    interpreter's last collection at exit (~2 s). Objects the tests create are collected as before."""
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """After a module's last test (its fixtures torn down): collect its garbage, then freeze what is left (the
    modules its tests imported, such as ragas or openai, and the session's fixtures), as after collection."""
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


def pytest_terminal_summary(terminalreporter) -> None:
    """Name the cause once when ``../shared`` is missing: the tests that read the public data fail on it."""
    if not SHARED_DATA.parent.is_dir():
        terminalreporter.write_line(
            f"tooleval: {SHARED_DATA.parent} is missing, so the tests that read it fail (importers, tau-bench and "
            "seed-example rules, `tooleval import` CLI tests): clone the repository beside shared/ "
            "(README, 'The two commands').", red=True)


def load_chat_server():
    """tests/agents/chat_server.py, loaded by path (independent of sys.path and of pytest's import mode): the
    scripted chat-completions server on 127.0.0.1 that the live-agent tests talk to."""
    import importlib.util
    import sys

    name = "tooleval_tests_chat_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "agents" / "chat_server.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def handed_cases(kind: str) -> list[dict]:
    """The handed cases (a copy of ../shared/cases/handed.jsonl) of one kind."""
    with (GOLDEN / "handed.jsonl").open() as handle:
        return [case for case in map(json.loads, handle) if case["kind"] == kind]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


def write_dataset(
    folder: Path,
    cases: list[dict],
    traces: list[dict] | None,
    *,
    revision: str = "r1",
    name: str = "tiny",
) -> Path:
    """Write a dataset folder (dataset.json, cases.jsonl, traces.jsonl) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "revision": revision, "schema_version": 1, "description": None, "license": None,
                "source": None}
    (folder / "dataset.json").write_text(json.dumps(manifest))
    (folder / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    if traces is not None:
        (folder / "traces.jsonl").write_text("".join(json.dumps(trace) + "\n" for trace in traces))
    return folder


def tool_call(name: str, arguments: str) -> dict:
    """An OpenAI chat-completions tool call with argument text."""
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def trace(case_id: str, trial: int, calls: list[dict], reward: float | None = None) -> dict:
    """A recorded trace line whose assistant made ``calls``."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    line = {"case_id": case_id, "trial": trial, "agent": {"name": "test-agent", "version": "1", "model": "m"},
            "messages": messages}
    if reward is not None:
        line["metadata"] = {"reward": reward}
    return line


TINY_CASES = [
    {"case_id": "A", "input": "refund A", "expected_calls": [{"name": "get_order", "args": {"id": "A"}},
                                                            {"name": "refund", "args": {"id": "A", "cents": 9800}}]},
    {"case_id": "B", "input": "look up B", "expected_calls": [{"name": "get_order", "args": {"id": "B"}}]},
    {"case_id": "C", "input": "say hi", "expected_calls": []},
]

TINY_TRACES = [
    # A: exact (250.0 style integral float equals int)
    trace("A", 0, [tool_call("get_order", '{"id": "A"}'), tool_call("refund", '{"cents": 9800.0, "id": "A"}')], 1.0),
    # A trial 1: wrong amount -> tp 1, fp 1, fn 1, wrong_args [cents]
    trace("A", 1, [tool_call("get_order", '{"id": "A"}'), tool_call("refund", '{"id": "A", "cents": 8900}')], 0.0),
    # B: malformed argument text, kept raw
    trace("B", 0, [tool_call("get_order", '{"id": "B"')], 0.0),
    # C: correct abstention
    trace("C", 0, [], 1.0),
]


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    """Three cases, four traces: an exact row, a wrong-argument row, a malformed call, an abstention."""
    return write_dataset(tmp_path / "tiny", TINY_CASES, TINY_TRACES)


def run_small(**parameters):
    """:func:`flows.evaluate.run_evaluate` as ``tooleval run`` calls it on a dataset of a few rows: with a rows hint
    below ``PROCESS_POOL_MIN_ROWS`` the shards run on one thread of this process. Without a hint, ``run_evaluate``
    spawns a process pool of ``os.cpu_count()`` workers (~5 s a run on 2 cores) that these tests are not about;
    tests/test_scale_flow.py covers the pool. Returns ``(RunResult, drift_failed)``."""
    from flows.evaluate import run_evaluate

    return run_evaluate(RunSpec(**parameters), rows_hint=SMALL_RUN_ROWS)


SMALL_RUN_ROWS = 100
"""The rows hint of :func:`run_small`: at least the rows of every dataset it runs (they hold at most a few dozen)."""


HARNESS_STARTUP_S = 900
"""Seconds the Prefect test harness's server may take to answer (13 s on the quiet machine)."""


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test harness for the whole session (each costs ~13 s), heartbeats off (PREFECT.md). Its
    server may take :data:`HARNESS_STARTUP_S` to answer: at 90 s, a 2-core machine at a load of 10-20 timed out
    and every test of the session that used the harness errored."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=HARNESS_STARTUP_S):
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


CHANGED_CASE = ("2", 0)
"""The (case_id, trial) whose recorded trace differs between the bundled runs ``base`` and ``head``."""


def bundled_traces_with_exact_case(folder: Path, case_id: str, trial: int) -> Path:
    """A copy of the bundled traces in which ``case_id``'s trial ``trial`` makes exactly the expected calls."""
    import gzip

    cases = {c["case_id"]: c for c in map(json.loads, (BUNDLED / "cases.jsonl").read_text().splitlines())}
    lines = []
    with gzip.open(BUNDLED / "traces.jsonl.gz", "rt") as handle:
        for line in map(json.loads, handle):
            if (line["case_id"], line["trial"]) == (case_id, trial):
                calls = [tool_call(c["name"], json.dumps(c["args"])) for c in cases[case_id]["expected_calls"]]
                first_user = next(m for m in line["messages"] if m["role"] == "user")
                line["messages"] = [first_user, {"role": "assistant", "content": "", "tool_calls": calls}]
            lines.append(json.dumps(line))
    path = folder / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def bundled_pair(prefect_harness, tmp_path_factory) -> Path:
    """One results folder with two runs of the bundled dataset: ``base`` (its recorded traces) and ``head``
    (the same, but :data:`CHANGED_CASE` makes exactly its expected calls). Returns the results folder."""
    from flows.evaluate import evaluate

    root = tmp_path_factory.mktemp("bundled-pair")
    out = root / "results"
    evaluate(RunSpec(dataset=str(BUNDLED), out=str(out), run_id="base"))
    traces = bundled_traces_with_exact_case(root, *CHANGED_CASE)
    evaluate(RunSpec(dataset=str(BUNDLED), traces=str(traces), out=str(out), run_id="head"))
    return out
