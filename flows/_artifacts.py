"""Prefect artifacts of a published run, so the Prefect UI shows results and not bare task runs: a markdown
summary, a table of the worst rows and a link to ``runs/<run>/report.html``. Artifact keys are lowercase
letters, digits and dashes (Prefect refuses any other key); a key holds one version per flow run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from tooleval.storage import as_location, join, source_connection
from tooleval.storage import location_exists

__all__ = ["TABLE_ROWS", "publish_artifacts", "summary_markdown"]

TABLE_ROWS = 20
"""Rows in the worst-rows table artifact."""


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else ("-" if value is None else str(value))


def summary_markdown(summary: dict[str, Any], report: Path | str | None) -> str:
    """The markdown summary of a run: gate and drift verdicts, then its headline figures."""
    gate = summary.get("gate") or {}
    verdict = "-" if not gate else ("PASS" if gate.get("passed") else "FAIL")
    drift = (summary.get("drift") or {}).get("verdict", "-")
    lines = [f"# tooleval run `{summary['run_id']}`", "",
             f"dataset revision `{summary['dataset_revision']}`; gate **{verdict}**; drift check **{drift}**", "",
             "| figure | value |", "|---|---:|"]
    for key in ("rows", "exact_match_rows", "fp", "fn", "blocking_rows", "waived_rows", "quarantined_rows",
                "errors", "mean_f1", "mean_ragas_tool_call_f1"):
        lines.append(f"| {key} | {_fmt(summary.get(key))} |")
    legacy = summary.get("legacy") or {}
    lines.append(f"| legacy tool_call_f1 | {_fmt(legacy.get('value'))} |")
    if report is not None:
        lines += ["", f"report: `{report}`"]
    return "\n".join(lines)


def publish_artifacts(summary: dict[str, Any], run_path: Path | str, rows_source: str | None) -> None:
    """Create the run's artifacts in the current flow run.

    Args:
        summary: The run's ``summary.json`` content.
        run_path: ``<out>/runs/<run>`` (published): a folder, or a URL on object storage.
        rows_source: DuckDB table expression over the published rows, or ``None`` for a legacy-only run.
    """
    report = join(as_location(run_path) if isinstance(run_path, str) else run_path, "report.html")
    has_report = location_exists(report)
    create_markdown_artifact(summary_markdown(summary, report if has_report else None), key="tooleval-summary",
                             description=f"run {summary['run_id']}")
    if rows_source is not None:
        from tooleval.runs.report import worst_rows  # the report's module is heavy: see flows._publish

        rows, failing = worst_rows(source_connection(rows_source), rows_source, TABLE_ROWS)
        table = [{"case_id": r["case_id"], "trial": r["trial"], "f1": r["f1"],
                  "ragas_tool_call_f1": r["ragas_tool_call_f1"], "blocking": r["blocking"],
                  "categories": ", ".join(r["mismatch_categories"] or []),
                  "rules": ", ".join(sorted({v["rule"] for v in r["violations"] or []})),
                  "error": r["error"]} for r in rows]
        create_table_artifact(json.loads(json.dumps(table, default=str)), key="tooleval-worst-rows",
                              description=f"the {len(table)} worst of {failing} failing rows")
    if has_report:
        link = report.resolve().as_uri() if isinstance(report, Path) else report
        create_link_artifact(link, link_text=f"report of run {summary['run_id']}",
                             key="tooleval-report")
