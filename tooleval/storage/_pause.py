"""A deterministic pause point inside publication, for kill tests only.

When ``$TOOLEVAL_TEST_PUBLISH_PAUSE`` names a point (``written``: every new file written, marker not yet;
``committed``: marker written, documents not yet copied; ``rolling``: the first document copied), the process
writes its pid to ``$TOOLEVAL_TEST_PUBLISH_PAUSE_FILE`` and sleeps there until it is killed. Nothing sets these
variables except the tests, which then kill the process at exactly that point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tooleval.settings import PAUSE_ENV, PAUSE_FILE_ENV, PAUSE_POINTS

__all__ = ["PAUSE_ENV", "PAUSE_FILE_ENV", "POINTS", "pause_point"]

POINTS = PAUSE_POINTS


def pause_point(point: str) -> None:
    """Sleep forever at ``point`` when the test variables ask for it; otherwise return at once."""
    if os.environ.get(PAUSE_ENV) != point:
        return
    flag = os.environ.get(PAUSE_FILE_ENV)
    if flag:
        Path(flag).write_text(str(os.getpid()))
    while True:
        time.sleep(3600)
