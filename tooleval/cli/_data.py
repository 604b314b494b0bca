"""Commands over data: ``import`` (benchmarks into dataset folders) and ``sql`` (DuckDB over the results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tooleval.errors import InputFileError

from tooleval.cli._app import OutOption, app, console, err_console, fail, fmt, open_results


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
    query: Annotated[str, typer.Argument(help="SQL over the views rows, traces and legacy_scalars.")],
    out: OutOption = Path("results"),
    format_: Annotated[str, typer.Option("--format", help="table (rounded for reading), csv or jsonl (exact).")]
    = "table",
) -> None:
    """Query the results with DuckDB (views ``rows``, ``traces``, ``legacy_scalars``; partition columns stay
    strings). Exit 2 on a missing results folder or a bad query."""
    import sys

    import duckdb

    from tooleval.storage import connect

    if format_ not in ("table", "csv", "jsonl"):
        err_console.print(f"[bold red]error:[/] unknown --format {format_!r}; use table, csv or jsonl.")
        raise typer.Exit(2)
    if not out.is_dir():
        fail(InputFileError(out, None, "no results folder here.", "pass --out with the folder `tooleval run` wrote."))
    try:
        open_results(out)
        con = connect(out)
    except InputFileError as exc:
        fail(exc)
    try:
        cursor = con.execute(query)
    except duckdb.Error as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2)
    names = [column[0] for column in cursor.description]
    records = cursor.fetchall()
    if format_ == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(names)
        writer.writerows(records)
        return
    if format_ == "jsonl":
        for record in records:
            sys.stdout.write(json.dumps(dict(zip(names, record)), default=str, ensure_ascii=False) + "\n")
        return
    table = Table()
    for name in names:
        table.add_column(name)
    for record in records:
        table.add_row(*(fmt(v) for v in record))
    console.print(table)
