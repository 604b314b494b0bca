"""Commands over data: ``import`` (benchmarks into dataset folders) and ``sql`` (DuckDB over the results)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tooleval.errors import InputFileError

from tooleval.cli._app import (OutOption, UrlOutOption, app, console, err_console, fail, fmt, input_location,
                               open_results)
from tooleval.cli._group import ToolevalGroup


FORMATS = {
    "openai-chat": "chat-completions conversations, JSON lines",
    "openai-responses": "Responses API output items, JSON lines",
    "langchain": "LangChain message dicts, JSON lines",
    "anthropic": "Anthropic Messages API (tool_use / tool_result blocks), JSON lines",
    "gemini": "Google Gemini API (functionCall / functionResponse parts), JSON lines",
    "tau-bench": "tau-bench trajectories file (--tools: tools.json)",
    "tau2": "tau2-bench results: DIR/<domain>[-no-user]/",
    "bfcl": "BFCL questions + answers (--results): DIR/<category>/",
    "inspect": "Inspect AI .eval logs (zip; samples streamed), a file or logs/ folder",
    "atif": "Harbor ATIF trajectories v1.0-v1.7 (file, JSON lines or job folder)",
    "otlp": "OpenTelemetry GenAI spans, OTLP JSON lines or document",
    "openinference": "OpenInference spans (Phoenix): OTLP JSON, span exports or Parquet",
    "mlflow": "MLflow traces: SQLite store (mlflow.db) or ./mlruns file store",
}
"""``tooleval import`` formats, one line each (shown by ``tooleval import --help``)."""

_OPTIONS = {  # which format takes which option
    "tools": {"tau-bench"},
    "references": {"openai-chat", "openai-responses", "langchain", "anthropic", "gemini", "atif", "inspect",
                   "otlp", "openinference", "mlflow"},
    "results": {"bfcl"},
    "agent": {"openai-chat", "openai-responses", "langchain", "anthropic", "gemini", "atif", "inspect", "bfcl",
              "otlp", "openinference", "mlflow"},
    "case_attribute": {"otlp", "openinference", "mlflow"},
}


def _formats_help() -> str:
    width = max(map(len, FORMATS))
    return "\n".join(f"  {name.ljust(width)}  {line}" for name, line in FORMATS.items())


def _run_importer(fmt: str, src: Path, out: Path, options: dict):
    import tooleval.importers as importers

    given = {key: value for key, value in options.items() if value and key in _OPTIONS}
    for key in given:
        if fmt not in _OPTIONS[key]:
            raise InputFileError(None, None, f"--{key.replace('_', '-')} does not apply to {fmt}.",
                                 f"use it with {', '.join(sorted(_OPTIONS[key]))}.")
    function = getattr(importers, "import_" + fmt.replace("-", "_"))
    result = function(src, out, **given, **{k: v for k, v in options.items() if k in ("name", "revision")})
    return result if isinstance(result, importers.ImportReport) else _report_of_folder(result)


def _report_of_folder(folder: Path):
    """The counts of an importer that returns the folder it wrote (tau-bench: it refuses a bad run rather than
    skipping it, so every run read was converted): its trace lines, and the tool calls in them."""
    import gzip

    from tooleval.dataset import find_traces_file
    from tooleval.importers import ImportReport

    report = ImportReport(datasets=[folder])
    path = find_traces_file(folder)
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")) as lines:
        for line in lines:
            if not line.strip():
                continue
            report.read += 1
            report.converted += 1
            for message in json.loads(line).get("messages") or []:
                for call in message.get("tool_calls") or []:
                    report.calls += 1
                    report.malformed_calls += 0 if _json_object(call.get("function", call).get("arguments")) else 1
    return report


def _json_object(arguments) -> bool:
    """Argument text (or an already parsed value) that reads as a JSON object; empty text and null count as {}
    (the scoring contract)."""
    if arguments is None or isinstance(arguments, dict) or arguments == "":
        return True
    try:
        return isinstance(json.loads(arguments), dict)
    except (TypeError, ValueError):
        return False


def _print_report(report) -> None:
    for folder in report.datasets:
        manifest = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
        console.print(f"wrote dataset {manifest['name']!r} revision {manifest['revision']!r} to {folder}")
    if report.read:
        console.print(f"read {report.read}, converted {report.converted}, skipped {report.skipped_total}; "
                      f"{report.calls} tool calls written ({report.malformed_calls} with malformed arguments, "
                      "kept raw)")
    if report.skipped:
        table = Table(title="Skipped")
        for column in ("reason", "records", "first places"):
            table.add_column(column)
        for reason, count in report.skipped.most_common():
            table.add_row(reason, str(count), ", ".join(report.examples.get(reason, [])))
        err_console.print(table)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)


@app.command("import", help=(
    "Import what an agent framework or benchmark already wrote as tooleval dataset folders.\n\n"
    "Prints what was read, converted and skipped (with the reason for each skip). Exit 0 when nothing was "
    "skipped, 1 when some records were skipped (the rest is written), 2 for a file or usage error (nothing "
    "written).\n\n\b\nFormats (FORMAT):\n" + _formats_help()
))
def import_(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="Source format (listed above).")],
    src: Annotated[Path, typer.Argument(help="Source file or folder.")],
    out: Annotated[Path, typer.Option("--out", help="Dataset folder to write (parent folder for tau2, bfcl).")],
    name: Annotated[Optional[str], typer.Option(help="Dataset name (default: the folder name).")] = None,
    revision: Annotated[Optional[str], typer.Option(help="Revision (default: from the source's digest).")] = None,
    tools: Annotated[Optional[Path], typer.Option(help="tau-bench: tool schemas (airline_tools.json).")] = None,
    references: Annotated[Optional[Path], typer.Option(
        help="openai-chat, openai-responses, langchain, anthropic, gemini, atif, inspect, otlp, openinference, "
             "mlflow: case lines keyed by case_id.")] = None,
    results: Annotated[Optional[list[Path]], typer.Option(
        help="bfcl: result files or folders (BFCL_v4_<category>_result.json); repeatable.")] = None,
    agent: Annotated[Optional[str], typer.Option(help="Agent name of the traces (default: from the file).")] = None,
    case_attribute: Annotated[Optional[str], typer.Option(
        help="otlp, openinference, mlflow: span (or MLflow trace tag) attribute naming a trace's case "
             "(default: tooleval.case_id, session.id, gen_ai.conversation.id, else the trace id).")] = None,
) -> None:
    if fmt not in FORMATS:
        err_console.print(f"[bold red]error:[/] unknown format {fmt!r}; known: {', '.join(FORMATS)}.")
        raise typer.Exit(2)
    options = {"name": name, "revision": revision, "tools": tools, "references": references,
               "results": results, "agent": agent, "case_attribute": case_attribute}
    try:
        report = _run_importer(fmt, src, out, options)
    except InputFileError as exc:
        fail(exc)
    _print_report(report)
    if report.skipped:
        raise typer.Exit(1)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the views rows, traces and legacy_scalars.")],
    out: Annotated[str, typer.Option("--out", help="Results folder, or an fsspec URL (s3://bucket/prefix).")]
    = "results",
    format_: Annotated[str, typer.Option("--format", help="table (rounded for reading), csv or jsonl (exact).")]
    = "table",
) -> None:
    """Query the results with DuckDB (views rows, traces and legacy_scalars; partition columns stay strings).

    Exit 2 on a missing results folder or a bad query.
    """
    import sys

    import duckdb

    from tooleval.storage import as_location, connect

    if format_ not in ("table", "csv", "jsonl"):
        err_console.print(f"[bold red]error:[/] unknown --format {format_!r}; use table, csv or jsonl.")
        raise typer.Exit(2)
    location = as_location(out)
    if isinstance(location, Path) and not location.is_dir():
        fail(InputFileError(location, None, "no results folder here.",
                            "pass --out with the folder `tooleval run` wrote."))
    try:
        if isinstance(location, Path):
            open_results(location)  # a remote --out is read as its commit markers say, never repaired by a reader
        con = connect(location)
    except InputFileError as exc:
        fail(exc)
    except (OSError, ImportError, ValueError) as exc:  # no bucket, no credentials, no s3fs
        fail(InputFileError(None, None, f"cannot read {out} ({type(exc).__name__}: {exc}).",
                            "check the URL, the credentials in the environment (AWS_ACCESS_KEY_ID, ...), and that "
                            "the [dask] extra (s3fs) is installed."))
    if not query.strip():
        err_console.print("[bold red]error:[/] the query is empty; pass one, e.g. tooleval sql \"select count(*) "
                          "from rows\".", highlight=False)
        raise typer.Exit(2)
    try:
        cursor = con.execute(query)  # only comments: no statement, and DuckDB returns None
        if cursor is None or cursor.description is None:  # only comments, or a statement without a result (SET, CREATE VIEW...)
            err_console.print("[bold red]error:[/] the query returns no result set (it holds only comments, or a "
                              "statement that returns no rows); pass a SELECT, DESCRIBE or SHOW.", highlight=False)
            raise typer.Exit(2)
        names = [column[0] for column in cursor.description]
        records = cursor.fetchall()  # a damaged Parquet file may only be found while the rows are read
    except duckdb.Error as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        if isinstance(exc, duckdb.CatalogException):
            err_console.print("tooleval's views are rows, traces and legacy_scalars (DESCRIBE rows lists the "
                              "columns).", highlight=False)
        raise typer.Exit(2)
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


export_app = typer.Typer(cls=ToolevalGroup, add_completion=False, no_args_is_help=True,
                         help="Write a published run's results in another tool's format.")
app.add_typer(export_app, name="export")


@export_app.command("otel")
def export_otel_(
    run_id: Annotated[str, typer.Option("--run-id", help="The run to export.")],
    to: Annotated[Path, typer.Option("--to", help="The OTLP JSON-lines file to write.")],
    out: UrlOutOption = Path("results"),
    config: Annotated[Optional[Path], typer.Option(help="Gate config for the verdicts (default: the dataset's "
                                                         "gate.toml).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
) -> None:
    """Write the run's verdicts as OpenTelemetry spans (OTLP JSON lines): one gen_ai.evaluation.result event per
    row with its gate verdict, F1, failing rules and failure owner, attached to the source's own trace and span
    when the row's trace was imported from spans (otlp, openinference, mlflow), else on a span of its own
    (docs/importers.md "Verdicts back onto the spans").

    Exit 0: written; 2: usage or input error (nothing written).
    """
    import os
    import tempfile

    from tooleval.runs.otel import export_otel
    from tooleval.runs.published import open_run

    try:
        run_ = open_run(open_results(out, remote=True, writes=False), run_id, input_location(dataset))
        target = to.resolve()
        if target.is_dir():
            raise InputFileError(target, None, "--to names a folder.", "pass a file path, e.g. --to verdicts.jsonl.")
        if not target.parent.is_dir():
            raise InputFileError(target.parent, None, "the folder of --to does not exist.",
                                 "create it first, or pass a path in an existing folder.")
        # written beside the target and renamed at the end: an error leaves no half-written file
        fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                counts = export_otel(run_, handle, config=config)
            os.replace(partial, target)
        except BaseException:
            os.unlink(partial)
            raise
    except InputFileError as exc:
        fail(exc)
    console.print(f"wrote {counts['rows']} gen_ai.evaluation.result events to {target} ({counts['attached']} on "
                  f"the source's spans, {counts['own_spans']} on spans of their own; {counts['lines']} OTLP JSON "
                  "line(s))", highlight=False)
