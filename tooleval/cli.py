"""The ``tooleval`` command line (typer). Flows are imported lazily inside the commands, after the Prefect
environment has been set, so that ``tooleval --help`` and ``tooleval import`` never start Prefect.

Exit codes (DESIGN.md "Bad input"): 0 every row scored; 1 the run completed but some rows or cases had errors;
2 a file or usage error, in which case nothing was written.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table

from tooleval.errors import InputFileError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Evaluate AI agents' tool calls.")
console = Console()
err_console = Console(stderr=True)

OutOption = Annotated[Path, typer.Option("--out", help="Results folder.")]


def _bundled_dataset() -> Path:
    return Path(__file__).resolve().parents[1] / "datasets" / "tau-bench-airline"


def prefect_environment(out: Path) -> dict[str, str]:
    """Set the Prefect environment for a command that runs flows, before Prefect is imported.

    Prefect's home (its SQLite database and cached results) goes to ``$TOOLEVAL_PREFECT_HOME`` or, by default,
    ``<out>/.tooleval/prefect``, so a run never touches the user's ``~/.prefect``. Settings the user already
    exported win. With ``PREFECT_API_URL`` set, runs go to that server instead of a temporary one.

    Returns:
        The variables this call set.
    """
    home = os.environ.get("TOOLEVAL_PREFECT_HOME") or str(out.resolve() / ".tooleval" / "prefect")
    wanted = {
        "PREFECT_HOME": home,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
        "PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS": "4",
    }
    Path(home).mkdir(parents=True, exist_ok=True)
    applied = {}
    for key, value in wanted.items():
        if key not in os.environ or (key == "PREFECT_HOME" and "TOOLEVAL_PREFECT_HOME" in os.environ):
            os.environ[key] = value
            applied[key] = value
    return applied


@contextmanager
def prefect_session(out: Path) -> Iterator[None]:
    """Run flows inside: tooleval's Prefect environment (:func:`prefect_environment`), heartbeats off (a
    synchronous flow call otherwise pays ~1 s on exit: PREFECT.md)."""
    prefect_environment(out)
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def _fail(exc: InputFileError) -> None:
    err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
    err_console.print("Nothing was written.")
    raise typer.Exit(2)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)


def print_run(result) -> None:
    """Print a run's stage states, summary figures, failures by tool, errors and file locations."""
    stages = Table(title="Stages", show_header=True)
    stages.add_column("stage")
    stages.add_column("final state")
    for name, counts in result.stage_states.items():
        states = sorted(counts)
        label = states[0] if len(states) == 1 else ", ".join(f"{s} x{counts[s]}" for s in states)
        stages.add_row(name, label or "-")
    console.print(stages)
    s = result.summary
    summary = Table(title=f"Run {result.run_id} (dataset revision {result.dataset_revision})")
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    for label, key in [
        ("rows", "rows"), ("exact-match rows", "exact_match_rows"), ("expected calls", "expected_calls"),
        ("observed calls", "observed_calls"), ("true positive calls (tp)", "tp"), ("extra calls (fp)", "fp"),
        ("missing calls (fn)", "fn"), ("rows with missing calls", "rows_with_missing"),
        ("rows with extra calls", "rows_with_extra"), ("rows with duplicates", "rows_with_duplicates"),
        ("rows with malformed calls", "rows_with_malformed"), ("rows without calls", "rows_without_calls"),
        ("mean f1", "mean_f1"), ("mean ragas_tool_call_f1", "mean_ragas_tool_call_f1"), ("errors", "errors"),
    ]:
        summary.add_row(label, _fmt(s.get(key)))
    provenance = s.get("provenance") or {}
    if provenance:
        summary.add_row("provenance ok / missing / mismatch",
                        f"{provenance['ok']} / {provenance['missing']} / {provenance['mismatch']}")
    console.print(summary)
    tools = Table(title="Failures by tool")
    for column in ("tool", "missing", "extra", "wrong args"):
        tools.add_column(column, justify="left" if column == "tool" else "right")
    for tool, counts in sorted(s.get("failures_by_tool", {}).items()):
        tools.add_row(tool, str(counts["missing"]), str(counts["extra"]), str(counts["wrong_args"]))
    console.print(tools)
    variability = s.get("variability")
    if variability:
        from tooleval.variability import format_variability

        console.print(f"Variability across trials (outcome: {variability.get('outcome')})", style="bold")
        console.print(format_variability(variability), highlight=False)
    if result.errors:
        errors = Table(title=f"Errors ({len(result.errors)}; details in errors.json)")
        for column in ("kind", "case", "trial", "message"):
            errors.add_column(column)
        for error in result.errors[:50]:
            errors.add_row(error["kind"], str(error["case_id"]), _fmt(error["trial"]), error["message"])
        console.print(errors)
    if result.rows_path is not None:
        console.print(f"rows:    {result.rows_path}")
    console.print(f"traces:  {result.traces_path}")
    console.print(f"summary: {Path(result.run_path) / 'summary.json'}")
    console.print(f"errors:  {Path(result.run_path) / 'errors.json'}")
    legacy = s.get("legacy") or {}
    console.print(f"legacy:  tool_call_f1 = {_fmt(legacy.get('value'))} over {_fmt(legacy.get('rows'))} rows "
                  f"({Path(result.out) / 'legacy' / f'dataset_revision={result.dataset_revision}' / f'run_id={result.run_id}'})")
    console.print(f"query:   tooleval sql --out {result.out} \"SELECT case_id, trial, f1 FROM rows WHERE run_id = "
                  f"'{result.run_id}' ORDER BY f1 LIMIT 10\"")


def _print_drift(drift: dict) -> None:
    style = "green" if drift["verdict"] == "ok" else "bold red"
    console.print(
        f"drift check: [{style}]{drift['verdict']}[/] (legacy scalar {_fmt(drift['legacy']['value'])}, row-level "
        f"mean {_fmt(drift['new']['value'])}; coverage {drift['coverage']['legacy']} / {drift['coverage']['new']})"
    )
    for reason in drift["reasons"]:
        console.print(f"  - {reason}", highlight=False)
    for row in drift["rows_differing"][:20]:
        console.print(f"    {row['case_id']}#{row['trial']}: legacy {row['legacy']} vs row-level {row['new']}")
    for side in ("only_legacy", "only_new", "duplicated_legacy", "duplicated_new"):
        keys = drift["coverage"][side]
        if keys:
            console.print(f"    {side}: " + ", ".join(f"{k['case_id']}#{k['trial']}" for k in keys[:20]))


@app.command()
def run(
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: bundled tau-bench airline).")] = None,
    traces: Annotated[Optional[Path], typer.Option(help="Recorded traces file for the replay agent.")] = None,
    out: OutOption = Path("results"),
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Run id (default: a new one).")] = None,
    shard_size: Annotated[int, typer.Option(min=1, help="Rows per shard task.")] = 50,
    slices: Annotated[Optional[str], typer.Option(help="Comma-separated slices: evaluate only their cases.")] = None,
    legacy_only: Annotated[bool, typer.Option("--legacy-only", help="Publish traces and the legacy scalar only.")] = False,
    agent: Annotated[str, typer.Option(help="replay (recorded traces) or openai (a live OpenAI-compatible server).")]
    = "replay",
    base_url: Annotated[Optional[str], typer.Option(help="Live agent: the server's base URL (…/v1).")] = None,
    model: Annotated[Optional[str], typer.Option(help="Live agent: model name.")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Live agent: trials per case (seed = trial index).")] = 1,
    temperature: Annotated[float, typer.Option(help="Live agent: sampling temperature.")] = 0.0,
    max_steps: Annotated[int, typer.Option(min=1, help="Live agent: model calls per trial with --tool-results.")]
    = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Live agent: parallel requests.")] = 4,
    request_timeout: Annotated[float, typer.Option(help="Live agent: seconds per request.")] = 60.0,
    max_retries: Annotated[int, typer.Option(min=0, help="Live agent: retries on 429, 5xx and timeouts.")] = 5,
    tool_results: Annotated[Optional[Path], typer.Option(help="Live agent: JSON lines {name, args, result}.")]
    = None,
    outcome: Annotated[str, typer.Option(help="Row outcome for pass@k: gate | exact | f1>=X | recorded_reward.")]
    = "gate",
    redact_field: Annotated[Optional[list[str]], typer.Option(
        "--redact-field", help="Field name to redact (repeatable; default: api_key, card_number, email, phone).")]
    = None,
    no_redaction: Annotated[bool, typer.Option("--no-redaction", help="Keep raw values (no redaction).")] = False,
    gate_: Annotated[bool, typer.Option("--gate", help="Exit with the release gate's verdict as well.")] = False,
    gate_config: Annotated[Optional[Path], typer.Option(help="Gate config (default: the dataset's gate.toml).")]
    = None,
) -> None:
    """Run the evaluation flow: generation, trace capture, scoring, aggregation, legacy scalar, drift check.

    Exit 0: every row scored and no drift; 1: row errors or drift; 2: file or usage error (nothing written).
    """
    from tooleval.plan import plan_run

    from tooleval.variability import outcome_from_spec

    dataset = dataset or _bundled_dataset()
    slice_list = None if slices is None else [s.strip() for s in slices.split(",") if s.strip()]
    live = None
    try:
        outcome_from_spec(outcome)
        if agent == "openai":
            from tooleval.agents import OpenAIAgentConfig

            if not base_url or not model:
                raise InputFileError(None, None, "--agent openai needs --base-url and --model.",
                                     "pass e.g. --base-url http://127.0.0.1:8000/v1 --model my-model.")
            live = OpenAIAgentConfig(base_url=base_url, model=model, temperature=temperature, max_steps=max_steps,
                                     concurrency=concurrency, request_timeout_s=request_timeout,
                                     max_retries=max_retries)
        elif agent != "replay":
            raise InputFileError(None, None, f"unknown agent {agent!r}.", "use --agent replay or --agent openai.")
        plan = plan_run(dataset, traces, out, run_id, slices=slice_list, agent=live, repeats=repeats,
                        tool_results=tool_results, redact_fields=redact_field, redaction=not no_redaction)
    except ValueError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2)
    except InputFileError as exc:
        _fail(exc)
    try:
        with prefect_session(out):
            from flows.evaluate import run_evaluate

            result, drifted = run_evaluate(
                dataset=str(dataset), traces=None if traces is None else str(traces), out=str(out),
                run_id=plan.run_id, shard_size=shard_size, slices=slice_list, legacy_only=legacy_only,
                agent=live, repeats=repeats, tool_results=None if tool_results is None else str(tool_results),
                outcome=outcome, redact_fields=redact_field, redaction=not no_redaction,
                gate_config=None if gate_config is None else str(gate_config),
            )
    except InputFileError as exc:
        _fail(exc)
    print_run(result)
    if result.drift is not None:
        _print_drift(result.drift)
    verdict = result.summary.get("gate")
    if verdict is not None:
        style = "green" if verdict["passed"] else "bold red"
        console.print(f"gate: [{style}]{'PASS' if verdict['passed'] else 'FAIL'}[/] "
                      f"({verdict['counts'].get('blocking_rows')} blocking rows; details: tooleval gate --run-id "
                      f"{result.run_id} --out {result.out})")
    gate_failed = gate_ and verdict is not None and not verdict["passed"]
    raise typer.Exit(1 if result.errors or drifted or gate_failed else 0)


@app.command()
def legacy(
    run_id: Annotated[str, typer.Option("--run-id", help="An existing run.")],
    out: OutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the run's).")] = None,
) -> None:
    """Publish the legacy scalar (mean ragas ToolCallF1 and row count) of a run from its trace envelopes."""
    from tooleval.runs import open_run

    try:
        open_run(out, run_id, dataset)
    except InputFileError as exc:
        _fail(exc)
    with prefect_session(out):
        from flows.legacy import legacy as legacy_flow

        result = legacy_flow(run_id=run_id, out=str(out), dataset=None if dataset is None else str(dataset))
    console.print(f"legacy {result.metric} = {_fmt(result.value)} over {result.rows} rows "
                  f"(ragas {result.ragas_version})")


@app.command()
def drift(
    run_id: Annotated[str, typer.Option("--run-id", help="An existing run.")],
    out: OutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the run's).")] = None,
) -> None:
    """Compare the legacy scalar with the row-level path on the run's traces; write runs/<run>/drift.json.

    Exit 0: no drift; 1: drift; 2: file or usage error.
    """
    from tooleval.drift import recheck_run
    from tooleval.runs import open_run
    from tooleval.storage import Publication

    try:
        published = open_run(out, run_id, dataset)
    except InputFileError as exc:
        _fail(exc)
    report = recheck_run(published)
    with Publication(published.out) as publication:
        publication.add_json(f"runs/{run_id}/drift.json", report)
    _print_drift(report)
    console.print(f"written: {published.out / 'runs' / run_id / 'drift.json'}")
    raise typer.Exit(1 if report["verdict"] == "drift" else 0)


@app.command()
def rescore(
    run_id: Annotated[str, typer.Option("--run-id", help="The run whose trace envelopes are rescored.")],
    out: OutOption = Path("results"),
    case: Annotated[Optional[str], typer.Option(help="Only this case id.")] = None,
    trial: Annotated[Optional[int], typer.Option(help="Only this trial.")] = None,
    to_run_id: Annotated[Optional[str], typer.Option("--to-run-id", help="New run id (default: a new one).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the run's).")] = None,
) -> None:
    """Rescore a run's immutable trace envelopes (new scorer or rules; no generation) into a new run id."""
    from tooleval.runs import open_run

    try:
        open_run(out, run_id, dataset)
    except InputFileError as exc:
        _fail(exc)
    with prefect_session(out):
        from flows.rescore import rescore as rescore_flow

        try:
            state = rescore_flow(run_id=run_id, out=str(out), to_run_id=to_run_id, case=case, trial=trial,
                                 dataset=None if dataset is None else str(dataset), return_state=True)
            result = state.result(raise_on_failure=False)
            if not hasattr(result, "summary"):
                state.result()
        except InputFileError as exc:
            _fail(exc)
    print_run(result)
    if result.drift is not None:
        _print_drift(result.drift)
    raise typer.Exit(1 if result.errors or state.is_failed() else 0)


@app.command()
def handoff(
    run_id: Annotated[str, typer.Option("--run-id", help="The run.")],
    case: Annotated[str, typer.Option(help="The case id.")],
    trial: Annotated[Optional[int], typer.Option(help="Only this trial (default: every trial of the case).")] = None,
    out: OutOption = Path("results"),
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the run's).")] = None,
) -> None:
    """Write a handoff folder for a row's owner: revisions, ids, calls at each boundary, mismatch objects and
    the command that reproduces the row."""
    from tooleval.handoff import write_handoff
    from tooleval.runs import open_run

    try:
        folders = write_handoff(open_run(out, run_id, dataset), case, trial)
    except InputFileError as exc:
        _fail(exc)
    for folder in folders:
        console.print(f"written: {folder}")


def _print_gate(verdict, run_id: str) -> None:
    style = "green" if verdict.passed else "bold red"
    console.print(f"gate for run {run_id}: [{style}]{'PASS' if verdict.passed else 'FAIL'}[/]")
    for reason in verdict.reasons:
        console.print(f"  - {reason}", highlight=False)
    for outcome in verdict.failing_rows:
        evidence = outcome.evidence()
        console.print(f"  {evidence['case_id']}#{evidence['trial']}: {', '.join(evidence['rules'])}", highlight=False)
        for key in ("missing_calls", "extra_calls", "wrong_args"):
            if evidence[key]:
                console.print(f"      {key}: {json.dumps(evidence[key], ensure_ascii=False)}", highlight=False)
    for outcome in verdict.waived:
        console.print(f"  waived: {outcome.case_id}#{outcome.trial} ({', '.join(outcome.waived_rules)})")
    for outcome in verdict.quarantined:
        console.print(f"  quarantined (not blocking): {outcome.case_id}#{outcome.trial} {', '.join(outcome.rules)}")


@app.command()
def gate(
    run_id: Annotated[str, typer.Option("--run-id", help="The run to judge.")],
    out: OutOption = Path("results"),
    config: Annotated[Optional[Path], typer.Option(help="Gate config (default: the dataset's gate.toml).")] = None,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the run's).")] = None,
) -> None:
    """Judge a run with the release gate: print each failing row, write runs/<run>/junit.xml.

    Exit 0: pass; 1: a blocking failure; 2: usage or input error.
    """
    import pyarrow as pa

    from tooleval.gate import gate_config_for, run_gate, write_junit
    from tooleval.runs import open_run
    from tooleval.storage import Publication, read_versioned

    try:
        run_ = open_run(out, run_id, dataset)
        cfg = gate_config_for(run_.dataset.path, config)
        tables = [read_versioned(path, "rows") for path in run_.files("rows")]
        if not tables:
            raise InputFileError(run_.out / "rows", None, f"run {run_id!r} has no rows.",
                                 "run the row-level path first (tooleval run without --legacy-only).")
    except InputFileError as exc:
        _fail(exc)
    rows = pa.concat_tables(tables).to_pylist()
    verdict = run_gate(rows, cfg)
    with Publication(run_.out) as publication:
        junit = publication.add_text(f"runs/{run_id}/junit.xml", "")
        write_junit(verdict, rows, junit, suite_name=run_.revision)
        publication.add_json(f"runs/{run_id}/gate.json", verdict.to_dict())
    _print_gate(verdict, run_id)
    console.print(f"written: {run_.out / 'runs' / run_id / 'junit.xml'}")
    raise typer.Exit(0 if verdict.passed else 1)


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
        _fail(exc)
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
        table.add_row(*(_fmt(v) for v in record))
    console.print(table)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
