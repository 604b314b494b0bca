"""Commands over the runs of a results folder: ``report``, ``runs`` (list, ``--delete``), ``gc`` and ``compare``.

``report`` and ``compare`` also take an fsspec URL as ``--out`` (``s3://bucket/prefix``): they read the runs through
their commit markers, DuckDB over the committed Parquet files through the URL's filesystem; ``report`` publishes
``report.html`` into the results behind the run's commit marker, as in a folder. ``runs`` and ``gc`` work on a local
folder only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tooleval.errors import InputFileError

from tooleval.cli._app import (OutOption, RunIdOption, UrlOutOption, app, chosen_run, console, err_console, fail,
                               fmt, open_results, results_location)


@app.command()
def report(
    run_id: RunIdOption,
    out: UrlOutOption = Path("results"),
) -> None:
    """Write runs/RUN/report.html again from the run's published files (every run writes it already); on object
    storage it is published into the results behind the run's commit marker, as in a folder."""
    from tooleval.runs.report import report_for_run
    from tooleval.storage import Publication, join

    try:
        location = open_results(out, remote=True)
        location = location.absolute() if isinstance(location, Path) else location
        run_id = chosen_run(location, run_id)
        html = report_for_run(location, run_id)
        with Publication(location) as publication:
            publication.add_text(f"runs/{run_id}/report.html", html)
    except InputFileError as exc:
        fail(exc)
    console.print(f"written: {join(location, f'runs/{run_id}/report.html')}")


@app.command()
def runs(
    out: OutOption = Path("results"),
    delete: Annotated[Optional[str], typer.Option("--delete", metavar="RUN",
                                                  help="Delete this run's partitions and files, nothing else.")]
    = None,
    format_: Annotated[str, typer.Option("--format", help="table or jsonl.")] = "table",
) -> None:
    """List the runs, newest first: run id, revision, date, rows, mean f1, gate verdict, drift check."""
    from tooleval.runs.catalog import delete_run, list_runs

    try:
        open_results(out, remote=True)
    except InputFileError as exc:
        fail(exc)
    location = results_location(out)  # on object storage the runs come from its run catalog, one read
    if delete is not None:
        try:
            freed = delete_run(location, delete)
        except InputFileError as exc:
            fail(exc)
        console.print(f"deleted run {delete} ({freed / 1e6:.2f} MB)")
        return
    if format_ not in ("table", "jsonl"):
        err_console.print(f"[bold red]error:[/] unknown --format {format_!r}; use table or jsonl.")
        raise typer.Exit(2)
    infos = list_runs(location)
    if format_ == "jsonl":
        for info in infos:
            sys.stdout.write(json.dumps(info.__dict__) + "\n")
        return
    table = Table(title=f"Runs under {location}")
    for column in ("run id", "revision", "completed (UTC)", "rows", "mean f1", "gate", "drift"):
        table.add_column(column, justify="right" if column in ("rows", "mean f1") else "left", no_wrap=True)
    for info in infos:
        table.add_row(info.run_id, info.dataset_revision, (info.completed_at or "-")[:19], fmt(info.rows),
                      fmt(info.mean_f1), fmt(info.gate), fmt(info.drift))
    console.print(table)


@app.command()
def gc(
    out: OutOption = Path("results"),
    keep: Annotated[Optional[int], typer.Option(min=0, help="Keep the N newest runs and delete the others.")]
    = None,
) -> None:
    """Remove stage files and Prefect stored results that no kept run needs (a cached rerun of a kept run stays
    cached); with --keep N, delete all but the N newest runs first. Prints what it freed."""
    from tooleval.runs.catalog import collect_garbage

    try:
        open_results(out, remote=True)
        result = collect_garbage(results_location(out), keep)
    except InputFileError as exc:
        fail(exc)
    for run_id in result.deleted_runs:
        console.print(f"deleted run {run_id}")
    if result.run_in_progress:
        console.print("kept every stage file: a run is in progress on these results (on object storage: on any "
                      "machine) and may read any of them; run gc again after it ends.")
    elif result.kept_all_stage_files:
        console.print("kept every stage file: a kept run was published before runs/<run>/stages.json existed, "
                      "so which stage files it needs is not known.")
    console.print(f"freed {result.bytes_freed / 1e6:.2f} MB: {len(result.deleted_runs)} run(s), "
                  f"{result.stage_files} stage file(s), {result.result_records} Prefect result record(s)")


def _interval(figure: dict) -> str:
    if figure["delta"] is None:
        return "-"
    low, high = figure["ci95"]
    return f"{figure['delta']:+.4f} [{low:+.4f}, {high:+.4f}]"


def _print_groups(title: str, groups: dict[str, dict]) -> None:
    from tooleval.runs.compare import METRICS

    table = Table(title=title)
    table.add_column("group", no_wrap=True)
    for metric in METRICS:
        table.add_column(f"{metric} delta [95% CI]", justify="right", no_wrap=True)
    for name, figures in groups.items():
        table.add_row(name, *(_interval(figures[m]) for m in METRICS))
    console.print(table)


def _verdict_text(verdict: str | None, rules: list[str] | None) -> str:
    """``fail (reference_mismatch)``: a changed row's verdict with the rules it fails, ``-`` when absent."""
    if verdict is None:
        return "-"
    return f"{verdict} ({', '.join(rules)})" if rules else verdict


@app.command()
def compare(
    base: Annotated[str, typer.Argument(help="The base run id (e.g. last night's).")],
    head: Annotated[str, typer.Argument(help="The run compared with it.")],
    out: UrlOutOption = Path("results"),
    json_: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    fail_on: Annotated[Optional[str], typer.Option(
        "--fail-on", metavar="METRIC:DELTA",
        help="Exit 1 when HEAD is worse by at least DELTA and the 95% interval excludes 0, e.g. f1:0.02 "
             "(metrics: f1, ragas_f1, exact_match, pass_rate; comma-separated).")] = None,
) -> None:
    """Metric deltas HEAD - BASE (overall, per slice, per tool family) with 95% bootstrap intervals over cases,
    rows whose verdict or F1 changed, and newly failing rules. Pairs are matched by (case_id, trial).

    Exit 0: no --fail-on condition holds; 1: one holds; 2: usage or input error.
    """
    from tooleval.runs.compare import compare_runs, failed_thresholds, parse_fail_on

    try:
        conditions = parse_fail_on(fail_on or "")
    except ValueError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2)
    try:
        comparison = compare_runs(open_results(out, remote=True, writes=False), base, head)
    except InputFileError as exc:
        fail(exc)
    failures = failed_thresholds(comparison, conditions)
    comparison["fail_on"] = {"conditions": [c.__dict__ for c in conditions], "failed": failures}
    if json_:
        sys.stdout.write(json.dumps(comparison, default=str) + "\n")
        raise typer.Exit(1 if failures else 0)
    console.print(f"compare {head} (head) with {base} (base): {comparison['pairs']} paired rows; "
                  f"{comparison['only_base_count']} only in base, {comparison['only_head_count']} only in head")
    if comparison["base_revision"] != comparison["head_revision"]:
        err_console.print(f"[yellow]warning:[/] the runs score different dataset revisions "
                          f"({comparison['base_revision']} and {comparison['head_revision']}): deltas cover the "
                          f"{comparison['pairs']} (case, trial) pairs both hold, whose references may differ.")
    outcomes = comparison["row_outcome"]
    if outcomes["base"] != outcomes["head"]:
        err_console.print(f"[yellow]warning:[/] the runs judge a row differently (base: {outcomes['base']}, head: "
                          f"{outcomes['head']}; gate.toml row_outcome): verdicts and pass_rate follow each run's own.")
    _print_groups("Overall", {"all rows": comparison["overall"]})
    _print_groups("By slice", comparison["by_slice"])
    _print_groups("By tool family", comparison["by_family"])
    changed = Table(title=f"Rows whose verdict or F1 changed ({comparison['changed_count']})")
    for column in ("case", "trial", "base f1", "head f1", "base verdict", "head verdict"):
        changed.add_column(column, no_wrap=True)
    for row in comparison["changed_rows"]:
        changed.add_row(str(row["case_id"]), str(row["trial"]), fmt(row["base_f1"]), fmt(row["head_f1"]),
                        _verdict_text(row["base_verdict"], row.get("base_rules")),
                        _verdict_text(row["head_verdict"], row.get("head_rules")))
    console.print(changed)
    for rule, keys in comparison["new_failing_rules"].items():
        total = comparison["new_failing_rules_count"][rule]
        console.print(f"newly failing rule {rule}: " + ", ".join(f"{c}#{t}" for c, t in keys[:20])
                      + (f" and {total - 20} more" if total > 20 else ""), highlight=False)
    for message in failures:
        err_console.print(f"[bold red]fail-on:[/] {message}", highlight=False)
    raise typer.Exit(1 if failures else 0)
