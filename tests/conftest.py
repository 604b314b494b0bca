"""Shared fixtures. Prefect settings are fixed here, before anything imports Prefect (PREFECT.md)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="tooleval-test-prefect-"))
os.environ.setdefault("PREFECT_HOME", str(_PREFECT_HOME))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS", "4")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"
BUNDLED = REPO / "datasets" / "tau-bench-airline"


def handed_cases(kind: str) -> list[dict]:
    """The handed cases (a copy of ../shared/cases/handed.jsonl) of one kind."""
    with (GOLDEN / "handed.jsonl").open() as handle:
        return [case for case in map(json.loads, handle) if case["kind"] == kind]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
