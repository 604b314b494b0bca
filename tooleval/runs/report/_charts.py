"""The report's plots as Vega-Lite specs, built with Altair (data inlined as values: no file, no URL)."""

from __future__ import annotations

from typing import Any

import altair as alt

__all__ = ["f1_distribution", "failures_by_family", "failures_by_tool", "variability", "case_outcomes", "trend",
           "drift_panel"]

_WIDTH = 520


def _spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    # labels that would touch are thinned out rather than drawn over each other ("0.000.02")
    return chart.configure_axis(labelOverlap="greedy", labelSeparation=4).to_dict()


def f1_distribution(histogram: list[dict]) -> dict[str, Any]:
    """Rows per F1 bin, both F1s side by side (``histogram`` from :func:`_data.f1_histogram`)."""
    chart = alt.Chart(alt.Data(values=histogram), title="F1 distribution (rows per 0.1 bin)").mark_bar().encode(
        x=alt.X("bin:O", title="F1 (bin lower edge)", axis=alt.Axis(labelAngle=0, format=".1f")),
        xOffset=alt.XOffset("metric:N"),
        y=alt.Y("rows:Q", title="rows"), color=alt.Color("metric:N", title="metric"),
        tooltip=["metric:N", "bin:O", "rows:Q"])
    return _spec(chart.properties(width=_WIDTH, height=220))


def failures_by_family(counts: dict[str, int]) -> dict[str, Any]:
    """Blocking rows per tool family (the gate's ``failures_by_tool_family``)."""
    values = [{"family": family, "rows": n} for family, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    chart = alt.Chart(alt.Data(values=values), title="Blocking rows by tool family").mark_bar().encode(
        y=alt.Y("family:N", sort="-x", title="tool family"), x=alt.X("rows:Q", title="blocking rows"),
        tooltip=["family:N", "rows:Q"])
    return _spec(chart.properties(width=_WIDTH))


def failures_by_tool(by_tool: dict[str, dict[str, int]], top: int = 20) -> dict[str, Any]:
    """Missing, extra and wrong-argument calls of the ``top`` tools with the most failures, stacked."""
    ranked = sorted(by_tool.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:top]
    values = [{"tool": tool, "kind": kind, "calls": n} for tool, counts in ranked for kind, n in counts.items()]
    chart = alt.Chart(alt.Data(values=values), title=f"Failed calls by tool (top {top})").mark_bar().encode(
        y=alt.Y("tool:N", sort=[tool for tool, _ in ranked], title="tool"), x=alt.X("sum(calls):Q", title="calls"),
        color=alt.Color("kind:N", title="failure"), tooltip=["tool:N", "kind:N", "calls:Q"])
    return _spec(chart.properties(width=_WIDTH))


def variability(summary: dict[str, Any]) -> dict[str, Any]:
    """pass@k and pass^k by k with their 95 % bootstrap intervals over cases (``summary["variability"]``)."""
    values = []
    for name in ("pass@k", "pass^k"):
        intervals = summary.get(f"{name}_ci95") or {}
        for k, value in (summary.get(name) or {}).items():
            low, high = intervals.get(k) or (value, value)
            values.append({"estimator": name, "k": int(k), "value": value, "low": low, "high": high})
    base = alt.Chart(alt.Data(values=values), title=f"pass@k and pass^k (outcome {summary.get('outcome')}, "
                     "95 % bootstrap interval over cases)")
    line = base.mark_line(point=True).encode(
        x=alt.X("k:O", title="k", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title="probability"),
        color=alt.Color("estimator:N"), tooltip=["estimator:N", "k:O", "value:Q", "low:Q", "high:Q"])
    bars = base.mark_errorbar().encode(x="k:O", y=alt.Y("low:Q", title="probability"), y2="high:Q",
                                       color="estimator:N")
    return _spec((line + bars).properties(width=_WIDTH, height=220))


def case_outcomes(cells: list[dict]) -> dict[str, Any]:
    """Outcome of every trial of the weakest cases (``cells`` from :func:`_data.case_trials`), cases in the
    order of ``cells`` (natural order: 2 before 10)."""
    chart = alt.Chart(alt.Data(values=cells), title="Per-case outcomes across trials (weakest cases)").mark_rect(
        ).encode(x=alt.X("trial:O"), y=alt.Y("case_id:N", title="case", sort=None),
                 color=alt.Color("outcome:N", scale=alt.Scale(
                     domain=["exact", "not exact", "fails the gate", "waived", "quarantined", "error"],
                     range=["#4c9f38", "#f2c744", "#d62728", "#9467bd", "#bcbd22", "#7f7f7f"])),
                 tooltip=["case_id:N", "trial:O", "outcome:N", "f1:Q"])
    return _spec(chart.properties(width=220))


def trend(history: list[dict]) -> dict[str, Any]:
    """Mean F1, mean ragas F1 and the legacy scalar of each run, in completion order, by dataset revision."""
    values = [{"run_id": h["run_id"], "revision": h["dataset_revision"], "completed_at": h["completed_at"],
               "metric": metric, "value": h[key]}
              for h in history for metric, key in (("mean f1", "mean_f1"),
                                                   ("mean ragas_tool_call_f1", "mean_ragas_tool_call_f1"),
                                                   ("legacy scalar", "legacy_value"))
              if h[key] is not None]
    order = [h["run_id"] for h in history]
    chart = alt.Chart(alt.Data(values=values), title="Trend across runs and dataset revisions").mark_line(
        point=True).encode(
        x=alt.X("run_id:N", sort=order, title="run (oldest first)"), y=alt.Y("value:Q", title="value"),
        color=alt.Color("metric:N"), shape=alt.Shape("revision:N"),
        tooltip=["run_id:N", "revision:N", "completed_at:N", "metric:N", "value:Q"])
    return _spec(chart.properties(width=_WIDTH, height=220))


def drift_panel(drift: dict[str, Any]) -> dict[str, Any]:
    """The legacy scalar beside the row-level mean of ragas ToolCallF1, on the same traces."""
    values = [{"path": "legacy scalar", "value": drift["legacy"]["value"], "rows": drift["legacy"]["rows"]},
              {"path": "row-level mean", "value": drift["new"]["value"], "rows": drift["new"]["rows"]}]
    values = [v for v in values if v["value"] is not None]
    chart = alt.Chart(alt.Data(values=values), title=f"Legacy vs row-level (drift check: {drift['verdict']})"
                      ).mark_bar().encode(x=alt.X("value:Q", title="tool_call_f1", scale=alt.Scale(domain=[0, 1]),
                                                  axis=alt.Axis(format=".1f", tickCount=10)),
                                          y=alt.Y("path:N", title=None),
                                          color=alt.Color("path:N", legend=None),
                                          tooltip=["path:N", "value:Q", "rows:Q"])
    return _spec(chart.properties(width=_WIDTH))
