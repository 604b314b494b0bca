"""The suite's fixtures and hooks. The helpers the tests share are in :mod:`tests.support`.

Prefect's settings are fixed here, before anything imports Prefect: each pytest process (each xdist worker) gets a
temporary Prefect home of its own, so that two workers never share a Prefect server or database."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
from pathlib import Path

_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="tooleval-test-prefect-"))
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)  # the harness's database and results go too
os.environ.setdefault("PREFECT_HOME", str(_PREFECT_HOME))
if "TOOLEVAL_TEST_TEMPLATE_DIR" not in os.environ:
    # the session's migrated Prefect database (tests/support/prefect_home.py): made by the process that starts the
    # session (the xdist controller, whose workers inherit the variable) and removed when that process ends
    _TEMPLATES = Path(tempfile.mkdtemp(prefix="tooleval-test-prefect-template-"))
    os.environ["TOOLEVAL_TEST_TEMPLATE_DIR"] = str(_TEMPLATES)
    atexit.register(shutil.rmtree, _TEMPLATES, ignore_errors=True)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
# The commands tests start wait for their local server as long as the product does by default (300 s; the
# setting's own tests set it themselves): a test may wait longer on a slow machine, never fail for it.
os.environ.setdefault("PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS", "4")
# Every `tooleval run` a test starts runs cold, in its own process: a warm runner would outlive the test by its
# idle time. tests/cli/test_warm_runner.py turns it on for its own commands.
os.environ.setdefault("TOOLEVAL_WARM_RUNNER", "0")

import pytest  # noqa: E402
from _pytest.mark.expression import Expression  # noqa: E402  (how `-m` itself reads a mark expression)
from hypothesis import settings  # noqa: E402

from tests.support import figures  # noqa: E402
from tests.support.datasets import (CHANGED_CASE, TINY_CASES, TINY_TRACES,  # noqa: E402
                                    bundled_traces_with_exact_case, write_dataset)
from tests.support.paths import BUNDLED, REPO, SHARED_DATA  # noqa: E402
from tests.support.profiles import FAST_CORE_PROFILE, FULL_PROFILE  # noqa: E402
from tooleval.runs.spec import RunSpec  # noqa: E402

settings.load_profile(FULL_PROFILE)

SLOW_FIXTURES = {"prefect_harness"}
"""Fixtures that start a process of their own: Prefect's test server (``bundled_pair`` and the flow fixtures use
it). A test that needs one is marked ``slow`` in its own file; collection stops when one is not."""


def pytest_collection_modifyitems(config, items) -> None:
    """Refuse a test that uses a fixture of :data:`SLOW_FIXTURES` without the ``slow`` mark (``pytestmark`` of its
    module, or its own): ``pytest -m "not slow"`` would start a Prefect server for it."""
    unmarked = [item.nodeid for item in items if SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
                and item.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError("these tests start the Prefect test harness but are not marked slow (add "
                                "@pytest.mark.slow, or pytestmark = pytest.mark.slow in the module): "
                                + ", ".join(unmarked[:10]) + (" ..." if len(unmarked) > 10 else ""))


def pytest_configure(config) -> None:
    """Load :data:`~tests.support.profiles.FAST_CORE_PROFILE` when the mark expression deselects the slow tests
    (``-m "not slow"``), unless ``--hypothesis-profile`` names one. Runs before collection imports the test
    modules, whose ``@settings(max_examples=examples(...))`` read it."""
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


def pytest_sessionfinish(session) -> None:
    """In a pytest-xdist worker: hand the figures its tests measured to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tooleval_figures"] = dict(figures.FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """In the pytest-xdist controller: add a finished worker's figures to the session's."""
    figures.FIGURES.update(getattr(node, "workeroutput", {}).get("tooleval_figures", {}))


def pytest_terminal_summary(terminalreporter) -> None:
    """The figures the tests measured (:mod:`tests.support.figures`), and the cause, named once, when
    ``../shared`` is missing: the tests that read the public data fail on it."""
    for line in figures.summary_lines(figures.FIGURES):
        terminalreporter.write_line(line)
    if not SHARED_DATA.parent.is_dir():
        terminalreporter.write_line(
            f"tooleval: {SHARED_DATA.parent} is missing, so the tests that read it fail (importers, tau-bench and "
            "seed-example rules, `tooleval import` CLI tests): clone the repository beside shared/ "
            "(README, 'The two commands').", red=True)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    """Three cases, four traces: an exact row, a wrong-argument row, a malformed call, an abstention
    (:data:`tests.support.datasets.TINY_CASES`, :data:`~tests.support.datasets.TINY_TRACES`)."""
    return write_dataset(tmp_path / "tiny", TINY_CASES, TINY_TRACES)


HARNESS_STARTUP_S = 900
"""Seconds the Prefect test harness's server may take to answer (13 s on the quiet machine)."""


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test harness for the whole session (each costs ~13 s), heartbeats off: a flow run's heartbeat
    events only load the test server. Its server may take :data:`HARNESS_STARTUP_S` to answer: at 90 s, a 2-core
    machine at a load of 10-20 timed out and every test of the session that used the harness errored."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=HARNESS_STARTUP_S):
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


@pytest.fixture(scope="session")
def bundled_pair(prefect_harness, tmp_path_factory) -> Path:
    """One results folder with two runs of the bundled dataset: ``base`` (its recorded traces) and ``head``
    (the same, but :data:`~tests.support.datasets.CHANGED_CASE` makes exactly its expected calls). Returns the
    results folder."""
    from flows.evaluate import evaluate

    root = tmp_path_factory.mktemp("bundled-pair")
    out = root / "results"
    evaluate(RunSpec(dataset=str(BUNDLED), out=str(out), run_id="base"))
    traces = bundled_traces_with_exact_case(root, *CHANGED_CASE)
    evaluate(RunSpec(dataset=str(BUNDLED), traces=str(traces), out=str(out), run_id="head"))
    return out
