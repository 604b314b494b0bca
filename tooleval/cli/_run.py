"""``tooleval run``: the evaluation flow (generation, capture, scoring, aggregation, legacy scalar, drift)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tooleval.errors import InputFileError
from tooleval.models import TRIAL_MAX

from tooleval.cli._app import (UrlOutOption, _bundled_dataset, app, console, err_console, fail, fail_environment,
                               open_results, prefect_session, results_location, say)
from tooleval.storage import hold_run
from tooleval.cli._report import print_drift, print_gate_line, print_run


LIVE_OPTIONS = ("base_url", "model", "temperature", "max_steps", "concurrency", "request_timeout", "max_retries",
                "tool_results")


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _check_replay_options(ctx: typer.Context) -> None:
    """Live-agent options and ``--repeats`` mean nothing to the replay agent: refuse them (exit 2)."""
    given = [name for name in ("repeats", *LIVE_OPTIONS) if _given(ctx, name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputFileError(None, None, f"{flags} with the replay agent: replay takes its trials and tool results "
                             "from the recorded traces, and asks no model.",
                             "drop those options, or pass --agent openai for a live agent.")


def _check_cluster_key(no_redaction: bool) -> None:
    """A cluster run's workers redact with the key of their own environment: the client must have one too (the key
    never travels as a parameter, since Prefect records parameters on its server, and never lands next to the results,
    since whoever reads both could test guesses of a redacted value against its token)."""
    from tooleval.capture.keys import KEY_ENV, KEY_FILE_ENV, environment_key

    if not no_redaction and environment_key() is None:
        raise InputFileError(None, None, f"--dask-address needs the redaction key in the environment: the workers "
                             f"read it from their own ${KEY_ENV} or ${KEY_FILE_ENV}, never from the flow.",
                             f"set {KEY_ENV} (or {KEY_FILE_ENV}=PATH) here and on every Dask worker, "
                             "or pass --no-redaction.")


@app.command()
def run(
    ctx: typer.Context,
    dataset: Annotated[Optional[Path], typer.Option(help="Dataset folder or fsspec URL (default: bundled tau-bench airline).")] = None,
    traces: Annotated[Optional[Path], typer.Option(
        help="Recorded traces for the replay agent: a file, an fsspec URL, or the name of a file in the dataset's "
             "traces/ folder.")] = None,
    out: UrlOutOption = Path("results"),
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Run id (default: a new one).")] = None,
    shard_size: Annotated[Optional[int], typer.Option(
        min=1, help="Rows per shard (content-hashed buckets; default: about 8 shards per worker, 100-20,000 rows and at "
        "most 64 MiB of trace lines).")]
    = None,
    workers: Annotated[Optional[int], typer.Option(min=1, help="Parallel shard workers (default: the cores).")]
    = None,
    dask_address: Annotated[Optional[str], typer.Option(
        "--dask-address", help="Run the shards on the existing Dask cluster at tcp://HOST:PORT (docs/cluster.md); "
        "workers read the redaction key from their own TOOLEVAL_REDACTION_KEY(_FILE).")] = None,
    slices: Annotated[Optional[str], typer.Option(help="Comma-separated slices: evaluate only their cases.")] = None,
    legacy_only: Annotated[bool, typer.Option("--legacy-only", help="Publish traces and the legacy scalar only.")] = False,
    agent: Annotated[str, typer.Option(help="replay (recorded traces) or openai (a live OpenAI-compatible server).")]
    = "replay",
    base_url: Annotated[Optional[str], typer.Option(help="Live agent: the server's base URL (…/v1).")] = None,
    model: Annotated[Optional[str], typer.Option(help="Live agent: model name.")] = None,
    repeats: Annotated[int, typer.Option(min=1, max=TRIAL_MAX + 1, help="Live agent: trials per case (seed = trial "
                                         "index; every trial fits its int32 column).")] = 1,
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
    new_redaction_key: Annotated[bool, typer.Option(
        "--new-redaction-key", help="Start a new redaction key although runs with another key exist in --out.")]
    = False,
) -> None:
    """Run the evaluation flow: generation, trace capture, scoring, aggregation, legacy scalar, drift check.

    Exit 0: every row scored and no drift; 1: row errors or drift; 2: file or usage error (nothing written);
    130: interrupted (Ctrl-C; nothing of the run published).
    """
    from pydantic import ValidationError

    from tooleval.runs.plan import check_run_id, plan_run
    from tooleval.runs.spec import RunSpec, spec_error
    from tooleval.settings import make_prefect_home

    dataset = results_location(dataset or _bundled_dataset())  # a folder, or an fsspec URL (s3://…)
    traces = None if traces is None else results_location(traces)
    slice_list = None if slices is None else [s.strip() for s in slices.split(",") if s.strip()]
    live = None
    try:
        try:
            spec = RunSpec(dataset=dataset, traces=traces, out=results_location(out), run_id=run_id,
                           shard_size=shard_size, workers=workers, dask_address=dask_address, slices=slice_list,
                           legacy_only=legacy_only, repeats=repeats, tool_results=tool_results, outcome=outcome,
                           gate_config=gate_config, redaction=not no_redaction, redact_fields=redact_field,
                           new_redaction_key=new_redaction_key, progress=not console.quiet)
        except ValidationError as exc:
            raise ValueError(spec_error(exc)) from None
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
        else:
            _check_replay_options(ctx)
        if dask_address is not None:
            from flows import parse_address

            parse_address(dask_address)
            _check_cluster_key(no_redaction)
        open_results(out, remote=True)
        location = results_location(out)  # a folder, or an fsspec URL (s3://bucket/prefix)
        spec = spec.model_copy(update={"agent": live})  # the agent's options were checked as it was made
        say("reading the dataset and its traces…")
        plan = plan_run(spec, write_key=False)
        make_prefect_home()  # a $TOOLEVAL_PREFECT_HOME that cannot be made is refused before the lease is written
    except ValueError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2)
    except InputFileError as exc:
        fail(exc)
    # what the run needs of this first plan: the flow plans again, and the plan's index and case digests (tens
    # of MB for a million rows) would otherwise stay alive in this process for the whole run
    run_id, planned_out, revision, rows = plan.run_id, plan.out, plan.dataset.revision, plan.index.rows
    del plan
    spec = spec.model_copy(update={"run_id": run_id})  # the flow's plan keeps the id this one made
    expected: list[int] = []
    lease = hold_run(location, run_id)
    try:
        lease.__enter__()
    except InputFileError as exc:
        fail(exc)
    try:
        check_run_id(planned_out, run_id, revision)  # again, now that no one else writes it
    except InputFileError as exc:
        lease.__exit__(None, None, None)
        fail(exc)
    try:
        with prefect_session(out, expected, preload=("flows.evaluate",)):
            from flows.evaluate import run_evaluate

            say(f"planning {rows:,} rows…")
            result, drifted = run_evaluate(spec, rows_hint=rows)
            expected.append(sum(sum(states.values()) for states in result.stage_states.values()))
    except InputFileError as exc:
        fail(exc, published=False)
    except Exception as exc:  # a disk that fills, a folder that turns read-only, a killed worker, after the plan:
        # wherever the write was (a stage file, a partition part, junit.xml), the run's commit marker was never
        # written, so the message says what it says for a file error at that point
        fail_environment(exc, published=False)
    finally:
        lease.__exit__(None, None, None)
    print_run(result)
    if result.drift is not None:
        print_drift(result.drift)
    print_gate_line(result)
    verdict = result.summary.get("gate")
    gate_failed = gate_ and verdict is not None and not verdict["passed"]
    raise typer.Exit(1 if result.errors or drifted or gate_failed else 0)
