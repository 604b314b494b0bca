"""Commands over data: ``import`` (benchmarks into dataset folders) and ``sql`` (DuckDB over the results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tooleval.errors import InputFileError

from tooleval.cli._app import OutOption, app, console, err_console, fail, fmt


@app.command("import")
def import_(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="Source format: tau-bench.")],
    src: Annotated[Path, typer.Argument(help="Source file or folder.")],
    out: Annotated[Path, typer.Option("--out", help="Dataset folder to write.")],
    name: Annotated[Optional[str], typer.Option(help="Dataset name (default: the folder name).")] = None,
    revision: Annotated[Optional[str], typer.Option(help="Revision (default: from the source's digest).")] = None,
    tools: Annotated[Optional[Path], typer.Option(help="Tool schemas (tau-bench airline_tools.json).")] = None,
) -> None:
    """Import a benchmark's trajectories as a tooleval dataset folder."""
    from tooleval.importers import import_tau_bench

    importers = {"tau-bench": import_tau_bench}
    if fmt not in importers:
        err_console.print(f"[bold red]error:[/] unknown format {fmt!r}; known: {', '.join(importers)}.")
        raise typer.Exit(2)
    try:
        written = importers[fmt](src, out, name=name, revision=revision, tools=tools)
    except InputFileError as exc:
        fail(exc)
    manifest = json.loads((written / "dataset.json").read_text())
    console.print(f"wrote dataset {manifest['name']!r} revision {manifest['revision']!r} to {written}")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views rows and traces.")],
    out: OutOption = Path("results"),
) -> None:
    """Query the results with DuckDB (views ``rows`` and ``traces``; partition columns stay strings)."""
    import duckdb

    from tooleval.storage import connect

    con = connect(out)
    try:
        cursor = con.execute(query)
    except duckdb.Error as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2)
    table = Table()
    for column in cursor.description:
        table.add_column(column[0])
    for record in cursor.fetchall():
        table.add_row(*(fmt(v) for v in record))
    console.print(table)
