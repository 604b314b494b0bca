"""Where the tests find the checkout and the data they read."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The checkout's root."""
SHARED_DATA = REPO.parent / "shared" / "data"
"""The public source data, in the folder ``shared/`` beside the checkout."""
GOLDEN = REPO / "tests" / "golden"
"""Golden files: persisted shapes of every version, and a copy of the handed cases."""
BUNDLED = REPO / "datasets" / "tau-bench-airline"
"""The bundled dataset."""
USER_CACHE = Path(tempfile.mkdtemp(prefix="tooleval-test-cache-"))
"""``XDG_CACHE_HOME`` for the commands of tests that run without any Prefect setting (as a new user would): the
user's Prefect home, and its local server, then live here, never in the real user's cache. One per test process."""
atexit.register(shutil.rmtree, USER_CACHE, ignore_errors=True)
