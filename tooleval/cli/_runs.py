"""Commands over an existing run: ``legacy``, ``drift``, ``rescore``, ``handoff``, ``gate``.

Each takes ``--out`` as a folder or an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``file://…``): the run is read
through its commit marker one document or Parquet file at a time (:mod:`tooleval.runs.published`), and what a
command writes (``drift.json``, ``junit.xml`` and ``gate.json``, a handoff folder, the legacy scalar, a rescored run)
is published into the same results behind the run's commit marker, as in a folder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from tooleval.errors import InputFileError
from tooleval.runs.documents import drift_document

from tooleval.cli._app import (RunIdOption, UrlOutOption, app, chosen_run, console, fail, fmt, input_location,
                               open_results, prefect_session)
from tooleval.storage import check_out_folder
from tooleval.cli._report import print_drift, print_gate, print_gate_line, print_run


@app.command()
def legacy(
    run_id: RunIdOption,
    out: UrlOutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
) -> None:
    """Publish the legacy scalar (mean ragas ToolCallF1 and row count) of a run from its trace envelopes."""
    from tooleval.runs.published import open_run

    try:
        location = open_results(out, remote=True)
        source = input_location(dataset)
        run_id = chosen_run(location, run_id)
        open_run(location, run_id, source)
        if isinstance(location, Path):  # a bucket was checked by open_results; its writes are checked as made
            check_out_folder(location)  # it publishes: a read-only folder is refused before Prefect starts
    except InputFileError as exc:
        fail(exc)
    try:
        with prefect_session(out):
            from flows.legacy import legacy as legacy_flow

            result = legacy_flow(run_id=run_id, out=str(location), dataset=None if source is None else str(source))
    except InputFileError as exc:
        fail(exc)
    console.print(f"legacy {result.metric} = {fmt(result.value)} over {result.rows} rows "
                  f"(ragas {result.ragas_version})")


@app.command()
def drift(
    run_id: RunIdOption,
    out: UrlOutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
) -> None:
    """Compare the legacy scalar with the row-level path on the run's traces; write runs/<run>/drift.json.

    Exit 0: no drift; 1: drift; 2: file or usage error.
    """
    from tooleval.runs.drift import recheck_run
    from tooleval.runs.published import open_run
    from tooleval.storage import Publication

    try:
        location = open_results(out, remote=True)
        run_id = chosen_run(location, run_id)
        published = open_run(location, run_id, input_location(dataset))
        report = recheck_run(published)
        with Publication(published.out) as publication:
            publication.add_json(f"runs/{run_id}/drift.json", drift_document(report))
    except InputFileError as exc:
        fail(exc)
    print_drift(report)
    console.print(f"written: {published.location(f'runs/{run_id}/drift.json')}")
    raise typer.Exit(1 if report["verdict"] == "drift" else 0)


@app.command()
def rescore(
    run_id: Annotated[str, typer.Option("--run-id", help="The run whose trace envelopes are rescored, or latest (the "
                                                         "newest run with rows).")],
    out: UrlOutOption = Path("results"),
    case: Annotated[Optional[str], typer.Option(help="Only this case id.")] = None,
    trial: Annotated[Optional[int], typer.Option(help="Only this trial.")] = None,
    to_run_id: Annotated[Optional[str], typer.Option("--to-run-id", help="New run id (default: a new one).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
) -> None:
    """Rescore a run's immutable trace envelopes (new scorer or rules; no generation) into a new run id.

    A subset (--case/--trial) is a diagnostic run: its legacy scalar is not published.
    """
    from tooleval.dataset import check_name
    from tooleval.runs.plan import check_run_id
    from tooleval.runs.published import check_envelopes, open_run

    try:
        location = open_results(out, remote=True)
        given = input_location(dataset)
        run_id = chosen_run(location, run_id)
        source = open_run(location, run_id, given)
        check_envelopes(source, case, trial)
        if to_run_id is not None:
            check_run_id(source.out, check_name(to_run_id, what="run id"), source.revision)
        if isinstance(location, Path):  # a bucket was checked by open_results; its writes are checked as made
            check_out_folder(location)  # it publishes: a read-only folder is refused before Prefect starts
    except InputFileError as exc:
        fail(exc)
    with prefect_session(out):
        from flows.rescore import rescore as rescore_flow

        try:
            state = rescore_flow(run_id=run_id, out=str(location), to_run_id=to_run_id, case=case, trial=trial,
                                 dataset=None if given is None else str(given), return_state=True)
            result = state.result(raise_on_failure=False)
            if not hasattr(result, "summary"):
                state.result()
        except InputFileError as exc:
            fail(exc)
    print_run(result)
    if result.drift is not None:
        print_drift(result.drift)
    print_gate_line(result)
    raise typer.Exit(1 if result.errors or state.is_failed() else 0)


@app.command()
def handoff(
    run_id: Annotated[str, typer.Option("--run-id", help="The run.")],
    case: Annotated[str, typer.Option(help="The case id.")],
    trial: Annotated[Optional[int], typer.Option(help="Only this trial (default: every trial of the case).")] = None,
    out: UrlOutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
) -> None:
    """Write a handoff folder for a row's owner: revisions, ids, calls at each boundary, mismatch objects and
    the command that reproduces the row. It is published under runs/RUN/handoff/ of the results, behind the run's
    commit marker, on object storage as in a folder."""
    from tooleval.runs.handoff import write_handoff
    from tooleval.runs.published import open_run

    try:
        location = open_results(out, remote=True)
        folders = write_handoff(open_run(location, run_id, input_location(dataset)), case, trial)
    except InputFileError as exc:
        fail(exc)
    for folder in folders:
        console.print(f"written: {folder}")


@app.command()
def gate(
    run_id: Annotated[str, typer.Option("--run-id", help="The run to judge, or latest (the newest run with rows).")],
    out: UrlOutOption = Path("results"),
    config: Annotated[Optional[Path], typer.Option(help="Gate config (default: the dataset's gate.toml).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or URL (default: the run's).")] = None,
    listed_rows: Annotated[Optional[int], typer.Option(
        "--listed-rows", min=0, help="Rows listed one by one per list in gate.json and junit.xml (default: "
        "gate.toml listed_rows, 100).")] = None,
    show: Annotated[Optional[int], typer.Option(
        "--show", min=0, help="Failing rows printed, the worst first (default: as many as fit in 40 lines).")
    ] = None,
    format_: Annotated[str, typer.Option("--format", help="text (fits a screen) or json (the whole verdict, "
                                                          "as gate.json).")] = "text",
) -> None:
    """Judge a run with the release gate: print the verdict, the failing rows per rule and slice and the worst
    rows with what differs from their reference; write runs/<run>/junit.xml and gate.json (the --listed-rows
    worst rows with their call objects, the rest counted per slice and rule).

    Exit 0: pass; 1: a blocking failure; 2: usage or input error.
    """
    if format_ not in ("text", "json"):
        fail(InputFileError(None, None, f"unknown --format {format_!r}.", "use --format text or --format json."))
    from tooleval.runs.gate import (GATE_COLUMNS, gate_config_for, gate_config_source, gate_scope, judge_rows,
                                    write_junit)
    from tooleval.runs.published import open_run
    from tooleval.storage import Publication, read_versioned

    try:
        location = open_results(out, remote=True)
        run_id = chosen_run(location, run_id)
        run_ = open_run(location, run_id, input_location(dataset))
        cfg = gate_config_for(run_.dataset.path, config)
        listed = cfg.listed_rows if listed_rows is None else listed_rows
        # the verdict keeps the rows to print as well as those the files list; the files get their own number
        cfg = cfg.model_copy(update={"listed_rows": max(listed, show or 0)})
        files = run_.files("rows")
        if not files:
            raise InputFileError(run_.location("rows"), None, f"run {run_id!r} has no rows.",
                                 "run the row-level path first (tooleval run without --legacy-only).")
        origin = run_.summary.get("rescored_from") or {}
        subset = origin.get("case") is not None or origin.get("trial") is not None
        errors = run_.errors()
        # the gate's columns of one file (one shard) at a time, judged over the columns: never every row at once
        tables = (read_versioned(path, "rows", GATE_COLUMNS) for path in files)
        scope = None if subset else gate_scope(run_.dataset.cases, run_.summary.get("slices"))
        shown = judge_rows(tables, scope, errors, cfg)
        verdict = shown.limited(listed)
    except InputFileError as exc:
        fail(exc)
    try:
        with Publication(run_.out) as publication:
            # a local file either way: the committed copy in a folder, one PUT of a temporary file on a bucket
            with publication.document_file(f"runs/{run_id}/junit.xml") as junit:
                write_junit(verdict, junit, suite_name=run_.revision)
            publication.add_json(f"runs/{run_id}/gate.json", verdict.to_dict())
    except InputFileError as exc:
        fail(exc)
    if format_ == "json":
        sys.stdout.write(json.dumps(verdict.to_dict(), ensure_ascii=False) + "\n")
        raise typer.Exit(0 if verdict.passed else 1)
    written = [run_.location(f"runs/{run_id}/{name}") for name in ("junit.xml", "gate.json")]
    print_gate(shown, run_id, show=show, outcome_source=gate_config_source(run_.dataset.path, config),
               footer=[f"written: {path}" for path in written])
    raise typer.Exit(0 if verdict.passed else 1)
