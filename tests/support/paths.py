"""Where the tests find the checkout and the data they read."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The checkout's root."""
SHARED_DATA = REPO.parent / "shared" / "data"
"""The public source data, in the folder ``shared/`` beside the checkout."""
GOLDEN = REPO / "tests" / "golden"
"""Golden files: persisted shapes of every version, and a copy of the handed cases."""
BUNDLED = REPO / "datasets" / "tau-bench-airline"
"""The bundled dataset."""
