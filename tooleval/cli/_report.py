"""What the commands print: a run's stages and figures, the drift check, the gate verdict."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from tooleval.cli._app import console, err_console, fmt


def _under(location: str, relpath: str) -> str:
    """``relpath`` under a printed location (a folder or an fsspec URL)."""
    from tooleval.storage import as_location, join

    return str(join(as_location(location), relpath))


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
    if result.rows_path is not None:  # a legacy-only run has no row-level figures: no empty table
        _print_figures(result, s)
    variability = s.get("variability")
    if variability:
        from tooleval.runs.variability import format_variability

        console.print(f"Variability across trials (outcome: {variability.get('outcome')})", style="bold")
        console.print(format_variability(variability), highlight=False)
    if result.errors:
        errors = Table(title=f"Errors ({len(result.errors)}; details in errors.json)")
        for column in ("kind", "case", "trial", "line", "message"):
            errors.add_column(column)
        for error in result.errors[:ERRORS_LISTED]:
            # a traces-file line that names no case is found by its file and line
            where = f"{Path(error['path']).name}:{error['line']}" if error.get("path") and error.get("line") else "-"
            errors.add_row(error["kind"], str(error["case_id"]), fmt(error["trial"]), where, error["message"])
        _unless_quiet(False).print(errors)
        if len(result.errors) > ERRORS_LISTED:
            _unless_quiet(False).print(f"... and {len(result.errors) - ERRORS_LISTED:,} more errors (all in "
                                       f"{_under(result.run_path, 'errors.json')})", highlight=False)
    if result.rows_path is not None:
        console.print(f"rows:    {result.rows_path}")
        console.print(f"report:  {_under(result.run_path, 'report.html')}")
        import shlex

        console.print(f"view:    tooleval view --out {shlex.quote(str(result.out))}  (then open "
                      f"http://127.0.0.1:8765/runs/{result.run_id})", highlight=False, soft_wrap=True)
    console.print(f"traces:  {result.traces_path}")
    console.print(f"summary: {_under(result.run_path, 'summary.json')}")
    console.print(f"errors:  {_under(result.run_path, 'errors.json')}")
    legacy = s.get("legacy") or {}
    scalar = _under(result.out, f"legacy/dataset_revision={result.dataset_revision}/run_id={result.run_id}")
    from tooleval.storage import committed_files

    published = committed_files(result.out, "legacy", result.dataset_revision, result.run_id)
    where = f"({scalar})" if published else "(not published: a diagnostic subset)"
    console.print(f"legacy:  tool_call_f1 = {fmt(legacy.get('value'))} over {fmt(legacy.get('rows'))} rows {where}")
    if result.rows_path is not None:
        console.print(f"query:   tooleval sql --out {result.out} \"SELECT case_id, trial, f1 FROM rows WHERE "
                      f"run_id = '{result.run_id}' ORDER BY f1 LIMIT 10\"", soft_wrap=True, markup=False)
    else:
        console.print(f"query:   tooleval sql --out {result.out} \"SELECT dataset_revision, run_id, value, rows "
                      "FROM legacy_scalars ORDER BY computed_at\"", soft_wrap=True, markup=False)


TOP_TOOLS = 20
"""Tools the failures-by-tool table lists (the most failures first); the rest are counted in one line."""
ERRORS_LISTED = 50
"""Row errors a run's output lists one by one; the rest are counted (all are in errors.json)."""


def _print_figures(result, s: dict) -> None:
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
        ("tool schema findings (advisory unless gate.toml blocks the tool)", "schema_findings"),
    ]:
        summary.add_row(label, fmt(s.get(key)))
    if s.get("name_only_rows"):  # calls whose arguments were not captured: out of mean f1 and exact-match rows
        summary.add_row("name-only rows (arguments not captured)", fmt(s["name_only_rows"]))
        summary.add_row("mean name-level f1 of name-only rows", fmt(s.get("mean_name_f1")))
    provenance = s.get("provenance") or {}
    if provenance:
        summary.add_row("provenance ok / missing / mismatch",
                        f"{provenance['ok']} / {provenance['missing']} / {provenance['mismatch']}")
    console.print(summary)
    by_tool = s.get("failures_by_tool", {})
    ranked = sorted(by_tool.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    left = (s.get("omitted_entries") or {}).get("failures_by_tool") or {"entries": 0, "counts": {}}
    tools = Table(title=f"Failures by tool (top {min(TOP_TOOLS, len(ranked))} of {len(ranked) + left['entries']})")
    for column in ("tool", "missing", "extra", "wrong args"):
        tools.add_column(column, justify="left" if column == "tool" else "right", no_wrap=True,
                         overflow="fold" if column == "tool" else "ellipsis")
    for tool, counts in ranked[:TOP_TOOLS]:
        tools.add_row(tool, str(counts["missing"]), str(counts["extra"]), str(counts["wrong_args"]))
    console.print(tools)
    if len(ranked) + left["entries"] > TOP_TOOLS:
        rest = ranked[TOP_TOOLS:]
        more = len(rest) + left["entries"]
        failed = sum(sum(c.values()) for _, c in rest) + sum(left["counts"].values())
        where = (f"runs/{result.run_id}/summary.json, failures_by_tool" if not left["entries"] else
                 "every tool: tooleval sql over the rows' missing_calls, extra_calls and wrong_args")
        console.print(f"... and {more} more tools with {failed} failed calls ({where})", highlight=False)


def _unless_quiet(ok: bool):
    """The console for a verdict line: under ``--quiet`` a failing verdict still reaches stderr, so that an exit
    code of 1 always comes with its reason."""
    return err_console if console.quiet and not ok else console


def print_gate_line(result) -> None:
    """The gate's one-line verdict of a run, its blocking-row count and the command with the details."""
    verdict = result.summary.get("gate")
    if verdict is None:
        return
    style = "green" if verdict["passed"] else "bold red"
    counts = verdict["counts"]
    unscored = counts.get("unscored_cases", 0)
    rows = counts.get("blocking_rows")
    blocking = f"{rows} blocking row{'' if rows == 1 else 's'}" + (f", {unscored} unscored" if unscored else "")
    _unless_quiet(verdict["passed"]).print(f"gate: [{style}]{'PASS' if verdict['passed'] else 'FAIL'}[/] "
                                           f"({blocking})")
    for reason in verdict["reasons"][:5]:
        console.print(f"  - {_with_rules(reason, counts)}", highlight=False)
    outcome = result.summary.get("row_outcome")
    if outcome:
        console.print(f"  row outcome {outcome['gate']} ({_decided_by(outcome['config'])}): a row passes when "
                      f"{outcome['passes_when']}", highlight=False)
    # a command stays on one line, whatever the width: it is meant to be copied
    console.print(f"  details: tooleval gate --run-id {result.run_id} --out {result.out}", soft_wrap=True,
                  highlight=False, markup=False)


def _with_rules(reason: str, counts: dict) -> str:
    """``188 blocking row(s)`` followed by the failing rows per rule, the most first."""
    by_rule = counts.get("failures_by_rule") or {}
    if not reason.endswith("blocking row(s)") or not by_rule:
        return reason
    return reason + ": " + ", ".join(f"{rule} {n}" for rule, n in sorted(by_rule.items(), key=lambda kv: -kv[1]))


def _decided_by(config: str | None) -> str:
    return "the default: the dataset has no gate.toml" if config is None else f"set by {config}"


def print_drift(drift: dict) -> None:
    style = "green" if drift["verdict"] == "ok" else "bold red"
    _unless_quiet(drift["verdict"] == "ok").print(
        f"drift check: [{style}]{drift['verdict']}[/] (legacy scalar {fmt(drift['legacy']['value'])}, row-level "
        f"mean {fmt(drift['new']['value'])}; coverage {drift['coverage']['legacy']} / {drift['coverage']['new']})"
    )
    for reason in drift["reasons"]:
        console.print(f"  - {reason}", highlight=False)
    for row in drift["rows_differing"][:20]:
        console.print(f"    {row['case_id']}#{row['trial']}: legacy {row['legacy']} vs row-level {row['new']}")
    for side in ("only_legacy", "only_new", "duplicated_legacy", "duplicated_new"):
        keys = drift["coverage"][side]
        if keys:
            console.print(f"    {side}: " + ", ".join(f"{k['case_id']}#{k['trial']}" for k in keys[:20]))


def print_gate(verdict, run_id: str, *, show: int | None = None, footer: list[str] | None = None,
               outcome_source: str | None = "") -> None:
    """``tooleval gate``'s text (:func:`tooleval.cli._gate_view.gate_lines`): the verdict line first (under
    ``--quiet`` a failing one still reaches stderr), never wrapped again by the console."""
    from tooleval.cli._gate_view import gate_lines, view_width

    width = view_width(console.width if console.is_terminal else None)
    lines = gate_lines(verdict, run_id, width=width, show=show, footer=footer, outcome_source=outcome_source)
    verdict_line, _, rest = lines[0].partition(" for run ")
    style = "green" if verdict.passed else "bold red"
    _unless_quiet(verdict.passed).print(f"[{style}]{escape(verdict_line)}[/] for run {escape(rest)}",
                                        soft_wrap=True, highlight=False)
    for line in lines[1:]:
        console.print(line, soft_wrap=True, highlight=False, markup=False)
