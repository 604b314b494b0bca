"""``runs/<run>/report.html``: one self-contained page per run (headline counts, slice and tool-family tables,
the worst failing rows with their evidence, the tool schema findings, and Vega-Lite plots built with Altair, their JavaScript inlined).

:func:`build_report` is what publication calls with the staged rows; :func:`report_for_run` rebuilds the page
of a published run (``tooleval report --run-id R``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from tooleval.runs.report import _charts, _data
from tooleval.runs.report._data import CASE_LIMIT, WORST_ROWS, worst_rows
from tooleval.runs.report._page import render_page
from tooleval.storage import source_connection

__all__ = ["WORST_ROWS", "CASE_LIMIT", "build_report", "report_for_run", "worst_rows"]

_HEADLINE = [
    ("rows", "rows"), ("exact-match rows", "exact_match_rows"), ("false positive calls (fp)", "fp"),
    ("false negative calls (fn)", "fn"), ("blocking rows", "blocking_rows"), ("waived rows", "waived_rows"),
    ("quarantined rows", "quarantined_rows"), ("rows with errors", "rows_with_errors"),
    ("mean f1", "mean_f1"), ("mean ragas_tool_call_f1", "mean_ragas_tool_call_f1"),
    ("tool schema findings", "schema_findings"), ("rows with schema findings", "rows_with_schema_findings"),
]


def _row_view(row: dict[str, Any]) -> dict[str, Any]:
    calls = [*(row["missing_calls"] or []), *(row["extra_calls"] or []), *(row["wrong_args"] or [])]
    violations = row["violations"] or []
    findings = row.get("schema_findings") or []
    return {**row, "tools": sorted({c["name"] for c in calls} | {v["tool"] for v in violations if v["tool"]}
                                   | {f["tool"] for f in findings}),
            "schema_findings": findings,
            "categories": list(row["mismatch_categories"] or []) + (["error"] if row["error"] else []),
            "blocking_rules": sorted({v["rule"] for v in violations if v["severity"] == "blocking"}),
            "violations": violations}


def _gate_failing(con: Any, source: str, gate: dict[str, Any], limit: int) -> tuple[list[dict[str, Any]], int]:
    """The rows the gate failed, as it listed them (the worst first, at most ``limit``), with their evidence and
    the gate's rules; and how many rows fail the gate in all (its ``blocking_rows``, unscored cases included).
    One meaning of failing: the gate's, under the dataset's ``row_outcome``."""
    listed = list(gate.get("failing_rows") or [])[:limit]
    keys = [(str(r["case_id"]), int(r["trial"])) for r in listed if r.get("trial") is not None]
    found = _data.rows_of(con, source, keys)
    views = []
    for entry in listed:
        row = found.get((str(entry["case_id"]), int(entry["trial"]))) if entry.get("trial") is not None else None
        if row is None:  # an unscored case: no row, the gate's entry says why
            detail = "; ".join(v.get("detail") or "" for v in entry.get("violations") or [])
            row = {"case_id": entry["case_id"], "trial": entry.get("trial"), "slice": entry.get("slice"), "f1": None,
                   "ragas_tool_call_f1": None, "exact_match": None, "blocking": True, "error_kind": "unscored",
                   "error_message": detail, "error": f"unscored: {detail}", "mismatch_categories": [],
                   "missing_calls": [], "extra_calls": [], "wrong_args": [], "violations": [],
                   "tool_families": [], "trace_digest": None, "schema_findings": []}
        view = _row_view(row)
        view["gate_rules"] = list(entry.get("rules") or [])
        views.append(view)
    counts = gate.get("counts") or {}
    return views, int(counts.get("blocking_rows") or len(listed))


def _name_only_lines(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """Headline lines of the name-only rows (calls whose arguments were not captured), when the run has any: they
    are out of the mean f1 and the exact-match rows above, so the page says how many and their own mean."""
    if not summary.get("name_only_rows"):
        return []
    return [("name-only rows (arguments not captured; out of mean f1 and exact-match rows)",
             summary["name_only_rows"]), ("mean name-level f1 of name-only rows", summary.get("mean_name_f1"))]


def build_report(rows_source: str, summary: dict[str, Any], drift: dict[str, Any] | None, out: str | Path,
                 *, limit: int = WORST_ROWS) -> str:
    """The report page of one run.

    Args:
        rows_source: DuckDB table expression over the run's rows (:func:`tooleval.storage.scan_rows_sql`);
            read with aggregates and ``LIMIT`` only.
        summary: The run's ``summary.json`` content.
        drift: The run's ``drift.json`` content, or ``None`` (a legacy-only run).
        out: Results folder (the trend panel reads the other runs' summaries there).
        limit: Failing rows listed (the worst first), and tool schema findings listed.

    Returns:
        The HTML text (UTF-8; ~1 MB, most of it the inlined vega-embed bundle).
    """
    con = source_connection(rows_source)
    gate = summary.get("gate") or {}
    counts = gate.get("counts") or {}
    if gate:
        views, failing = _gate_failing(con, rows_source, gate, limit)
    else:  # a summary written before the gate judged runs: its rows' own columns
        rows, failing = _data.worst_rows(con, rows_source, limit)
        views = [_row_view(r) for r in rows]
    others = _data.not_exact(con, rows_source)
    specs = {
        "f1": _charts.f1_distribution(_data.f1_histogram(con, rows_source)),
        "families": _charts.failures_by_family(counts.get("failures_by_tool_family") or {}),
        "tools": _charts.failures_by_tool(summary.get("failures_by_tool") or {}),
    }
    if summary.get("variability"):
        specs["variability"] = _charts.variability(summary["variability"])
    specs["cases"] = _charts.case_outcomes(_data.case_trials(con, rows_source))
    specs["trend"] = _charts.trend(_data.run_history(out, summary))
    if drift is not None:
        specs["drift"] = _charts.drift_panel(drift)
    provenance = summary.get("provenance") or {}
    headline = [(label, summary.get(key, counts.get(key))) for label, key in _HEADLINE]
    headline.append(("provenance missing", provenance.get("missing")))
    headline += _name_only_lines(summary)
    return render_page(
        run_id=summary["run_id"], summary=summary, headline=headline, charts=list(specs), specs=specs,
        groups=gate.get("slices") or [], rows=views, failing=failing, not_exact=others[0], errored=others[1],
        row_outcome=gate.get("row_outcome") or "match", passes_when=gate.get("row_passes_when"),
        listed=gate.get("listed"),
        tools=sorted({t for v in views for t in v["tools"]}),
        schema_by_tool=summary.get("schema_findings_by_tool") or {},
        schema_checked=summary.get("rows_schema_checked"),
        findings=_data.schema_findings(con, rows_source, limit), finding_limit=limit,
        slices=sorted({v["slice"] for v in views if v["slice"] is not None}),
        categories=sorted({c for v in views for c in v["categories"]}),
        gate_label="-" if not gate else ("PASS" if gate.get("passed") else "FAIL"),
        drift_label="-" if drift is None else drift["verdict"], drift=drift,
    )


def report_for_run(out: str | Path, run_id: str, *, limit: int = WORST_ROWS) -> str:
    """Rebuild the report page of a published run from its summary, drift file and rows partition.

    Args:
        out: Results folder, or an fsspec URL (``s3://bucket/prefix``): the run's committed documents and rows are
            read through its commit marker, the rows by DuckDB through the URL's fsspec filesystem (aggregates and
            ``LIMIT`` queries: the columns they need, never a copy of the run).
        run_id: The run.
        limit: See :func:`build_report`.

    Returns:
        The page's HTML text.

    Raises:
        tooleval.errors.InputFileError: no such run, or a run without rows (a legacy-only run).
    """
    from tooleval.dataset import check_name
    from tooleval.errors import InputFileError
    from tooleval.storage import as_location, committed_files, join, read_document, scan_rows_sql

    location = as_location(out) if isinstance(out, str) else Path(out)
    out = location.resolve() if isinstance(location, Path) else location
    check_name(run_id, what="run id")
    data = read_document(out, f"runs/{run_id}/summary.json")
    if data is None:
        raise InputFileError(join(out, f"runs/{run_id}/summary.json"), None, f"no run {run_id!r} under {out}.",
                             "check --run-id and --out (tooleval runs lists them).")
    summary = json.loads(data)
    files = committed_files(out, "rows", summary["dataset_revision"], run_id)
    if not files:
        raise InputFileError(join(out, "rows"), None, f"run {run_id!r} has no rows (a legacy-only run).",
                             "run the row-level path first (tooleval run without --legacy-only).")
    drift = read_document(out, f"runs/{run_id}/drift.json")
    return build_report(scan_rows_sql(files), summary, None if drift is None else json.loads(drift), out,
                        limit=limit)
