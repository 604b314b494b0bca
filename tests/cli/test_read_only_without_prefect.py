"""Commands that only read published results never start, import or call Prefect: with ``PREFECT_API_URL``
naming a port where nothing listens they answer as usual, and the process never imports ``prefect``."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.support.datasets import CHANGED_CASE
from tests.support.paths import REPO

pytestmark = pytest.mark.slow  # the Prefect test harness's server

UNREACHABLE = "http://127.0.0.1:9/api"  # the discard port: nothing listens, a connection is refused at once

_CHECKED = ("import atexit, sys\n"
            "atexit.register(lambda: 'prefect' in sys.modules and sys.stderr.write('PREFECT IMPORTED\\n'))\n"
            "from tooleval.cli import main\n"
            "sys.argv = ['tooleval', *sys.argv[1:]]\n"
            "main()\n")


def _tooleval(*args: str) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "PREFECT_API_URL": UNREACHABLE, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", _CHECKED, *args], env=env, cwd=REPO, text=True,
                          capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def results(bundled_pair, tmp_path_factory):
    out = tmp_path_factory.mktemp("read-only") / "results"
    shutil.copytree(bundled_pair, out)  # gate, drift and report rewrite documents: the shared runs stay
    return out


@pytest.mark.parametrize("args, code, says", [
    (("runs",), 0, "base"),
    (("gate", "--run-id", "base"), 1, "gate FAIL for run base: 117 of 200 rows fail"),
    (("report", "--run-id", "base"), 0, "report.html"),
    (("compare", "base", "head"), 0, "200 paired rows"),
    (("sql", "SELECT count(*) AS n FROM rows WHERE run_id = 'base'", "--format", "csv"), 0, "200"),
    (("handoff", "--run-id", "head", "--case", CHANGED_CASE[0]), 0, "written:"),
    (("drift", "--run-id", "base"), 0, "drift check: ok"),
])
def test_answers_with_an_unreachable_prefect_api(results, args, code, says):
    result = _tooleval(*args, "--out", str(results))
    assert result.returncode == code, result.stdout + result.stderr
    assert says in result.stdout
    assert "PREFECT IMPORTED" not in result.stderr and "Traceback" not in result.stderr
