"""Commands for scale work: ``synth`` (synthetic corpora) and ``bench`` (throughput against the peers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tooleval.cli._app import app, console, err_console


@app.command()
def synth(
    rows: Annotated[int, typer.Option(min=1, help="Rows (case, trial) to write.")],
    out: Annotated[Path, typer.Option("--out", help="Dataset folder to write.")],
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same bytes).")] = 0,
    profile: Annotated[str, typer.Option(help="bfcl (short function-calling rows) or tau (long airline traces).")]
    = "bfcl",
) -> None:
    """Write a synthetic dataset with recorded traces (cases.jsonl, tools.json, traces.jsonl, dataset.json)."""
    from tooleval.synth import PROFILES, write_synth

    if profile not in PROFILES:
        err_console.print(f"[bold red]error:[/] unknown --profile {profile!r}; use {' or '.join(PROFILES)}.")
        raise typer.Exit(2)
    result = write_synth(rows, seed, profile, out)
    console.print(f"wrote {result.rows:,} rows of {result.cases:,} cases to {result.path} "
                  f"(traces {result.traces_bytes / 1e6:,.1f} MB)", highlight=False)
