"""Commands for scale work: ``synth`` (synthetic corpora) and ``bench`` (throughput against the peers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tooleval.cli._app import app, console, err_console

BENCH_MODULES = ("psutil", "agentic_evals")
"""What ``tooleval bench`` imports from the ``bench`` extra (pyproject.toml)."""


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


@app.command()
def bench(
    rows: Annotated[int, typer.Option(min=1, help="Rows of the synthetic corpus.")],
    profile: Annotated[str, typer.Option(help="bfcl or tau (see tooleval synth).")] = "bfcl",
    seed: Annotated[int, typer.Option(help="Corpus seed.")] = 0,
    workers: Annotated[Optional[int], typer.Option(min=1, help="Run workers (default: the cores).")] = None,
    shard_size: Annotated[Optional[int], typer.Option(min=1, help="Rows per shard (default: tooleval's).")] = None,
    workdir: Annotated[Optional[Path], typer.Option(
        help="Keep the corpus and runs here (reused if present); default: a temporary folder, removed after.")] = None,
    peer_rows: Annotated[int, typer.Option(min=1, help="Time the ragas loop and agentic-evals on the corpus's "
                                           "first N rows.")] = 100_000,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Benchmark tooleval against the floor, the ragas loop and agentic-evals on one synthetic corpus."""
    import json

    from rich.table import Table

    from tooleval.synth import PROFILES

    if profile not in PROFILES:
        err_console.print(f"[bold red]error:[/] unknown --profile {profile!r}; use {' or '.join(PROFILES)}.")
        raise typer.Exit(2)
    # the bench extra's modules are imported deep inside the run (the process tree's sampler, the agentic-evals
    # peer): look for them first, so that a missing one stops the command before the corpus is written
    from importlib.util import find_spec

    missing = [name for name in BENCH_MODULES if find_spec(name) is None]
    if missing:
        err_console.print(f"[bold red]error:[/] the benchmark needs {', '.join(missing)}, which the bench extra "
                          "installs: pip install -e '.\\[bench]'")  # the backslash: '[bench]' is not rich markup
        raise typer.Exit(2)
    from tooleval.bench import BenchRuns, run_bench
    from tooleval.cli._app import LocalPrefect

    result = run_bench(rows, profile, seed=seed, workdir=workdir, runs=BenchRuns(workers, shard_size),
                       peer_rows=peer_rows, log=lambda line: err_console.print(line, highlight=False),
                       prefect=LocalPrefect())
    if json_:
        typer.echo(json.dumps(result))
        return
    table = Table("figure", "value")
    for key, value in result.items():
        table.add_row(key, f"{value:,}" if isinstance(value, (int, float)) else str(value))
    console.print(table)
