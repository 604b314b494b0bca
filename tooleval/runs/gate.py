"""Running the release gate over a run's rows (issue 3): the config a run uses, the verdict, ``junit.xml``.

The gate config is ``--config FILE`` or the dataset's own ``gate.toml`` (defaults when it has none: every
blocking violation blocks, F1 is advisory). The verdict is computed with today's UTC date (an expired waiver
fails the gate).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tooleval.rules import GateConfig, GateVerdict, evaluate_gate, load_gate_config, write_junit

__all__ = ["gate_config_for", "run_gate", "write_junit"]


def gate_config_for(dataset_path: str | Path, config: str | Path | None = None) -> GateConfig:
    """The gate config of a run: ``config`` when given, else ``<dataset>/gate.toml``, else the defaults.

    Raises:
        tooleval.errors.InputFileError: unreadable TOML, unknown keys or invalid values (file and line named).
    """
    if config is not None:
        return load_gate_config(Path(config))
    own = Path(dataset_path) / "gate.toml"
    return load_gate_config(own) if own.is_file() else GateConfig()


def run_gate(rows: list[dict[str, Any]], config: GateConfig) -> GateVerdict:
    """The gate verdict of ``rows`` (row dicts with the row columns) under ``config``, as of today (UTC)."""
    return evaluate_gate(rows, config, today=datetime.now(timezone.utc).date())
