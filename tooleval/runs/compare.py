"""Compare two runs row by row: metric deltas (overall, per slice, per tool family) with 95 % bootstrap intervals
over cases, the rows whose verdict or F1 changed, and the rules that newly fail (``tooleval compare BASE HEAD``).

Rows are paired by ``(case_id, trial)``; a delta is ``mean(HEAD) - mean(BASE)`` over the pairs where both rows
have the metric, and its interval resamples **cases** (a case's trials move together:
:func:`tooleval.runs.bootstrap.cluster_mean_ci`). All four metrics are "higher is better".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooleval.dataset import check_name
from tooleval.errors import InputFileError
from tooleval.storage import GATE_PASSES, as_location, document_path, join, read_document
from tooleval.runs.bootstrap import cluster_mean_ci

__all__ = ["METRICS", "FailOn", "parse_fail_on", "compare_runs", "failed_thresholds", "run_row_outcome"]

METRICS = {
    "f1": "f1",
    "ragas_f1": "ragas_tool_call_f1",
    "exact_match": "CAST(exact_match AS DOUBLE)",
    "pass_rate": "CASE WHEN error_kind IS NOT NULL THEN NULL WHEN gate_verdict = 'quarantined' THEN NULL "
                 "WHEN gate_verdict IS NOT NULL THEN CAST(gate_verdict IN (" + ", ".join(f"'{v}'" for v in GATE_PASSES)
                 + ") AS DOUBLE) "
                 "WHEN {fails} THEN CAST(0 AS DOUBLE) ELSE CAST(1 AS DOUBLE) END",
}
"""Metric name -> SQL over one row (null when the row has no value: an error row has no F1, and neither it nor a
quarantined row counts in a pass rate). ``pass_rate`` reads the row's ``gate_verdict``, the verdict its run's gate
stored at publication (waivers and quarantine included: a waived row passes); rows published before that column
existed are judged by ``{fails}``, their run's row outcome (:data:`_FAILS`) over their own columns."""

_FAILS = {"match": "coalesce(blocking, false) OR NOT coalesce(calls_match, false)",
          "no_blocking": "coalesce(blocking, false)"}
"""SQL of "this row fails" per row outcome (:attr:`tooleval.rules.GateConfig.row_outcome`)."""

_CHANGED_LIMIT = 1000

_PAIRS = """
CREATE TEMP TABLE pairs AS
WITH b AS (SELECT * FROM rows WHERE run_id = $base), h AS (SELECT * FROM rows WHERE run_id = $head)
SELECT coalesce(h.case_id, b.case_id) AS case_id, coalesce(h.trial, b.trial) AS trial,
       coalesce(h.slice, b.slice) AS slice,
       list_distinct(list_concat(coalesce(b.tool_families, []), coalesce(h.tool_families, []))) AS families,
       b.case_id IS NOT NULL AS in_base, h.case_id IS NOT NULL AS in_head,
       {columns},
       {verdicts},
       {rules}
FROM b FULL OUTER JOIN h ON b.case_id = h.case_id AND b.trial = h.trial
"""

_RULES = ("CASE WHEN {t}.gate_verdict IS NOT NULL THEN "
          "(CASE WHEN {t}.gate_verdict = 'fail' THEN coalesce({t}.gate_rules, []) ELSE [] END) "
          "ELSE list_sort(list_distinct([v.rule FOR v IN coalesce({t}.violations, []) IF v.severity = 'blocking'])) END "
          "AS {side}_rules")
"""The rules a row fails: the gate's unwaived rules of a ``fail`` row (none for ``pass``, ``waived`` and
``quarantined``); for rows published before ``gate_verdict``, the blocking rules the scorer recorded."""

_VERDICT = ("CASE WHEN {t}.case_id IS NULL THEN NULL WHEN {t}.gate_verdict IS NOT NULL THEN {t}.gate_verdict "
            "WHEN {t}.error_kind IS NOT NULL THEN 'error' "
            "WHEN coalesce({t}.blocking, false) OR ({names_block} AND coalesce({t}.name_only, false)) "
            "THEN 'blocking' "
            "WHEN {match} AND NOT coalesce({t}.calls_match, false) THEN 'mismatch' ELSE 'pass' END AS {t}_verdict")
"""A row's verdict: its ``gate_verdict`` (``pass``, ``fail``, ``waived``, ``quarantined``: the gate's, as its run
stored it). Rows published before that column existed are judged over their own columns as before: ``error``,
``blocking`` (a name-only row counts as blocking unless the run accepted names: ``args_not_captured``),
``mismatch`` (its calls do not match the reference under its match mode, judged under the row outcome ``match``)
or ``pass``."""

_NAME_ONLY_FAILS = " OR coalesce(name_only, false)"
"""Added to a run's :data:`_FAILS` unless its gate accepted name-only rows (``accept_name_only``)."""


def _summary_of(out: Path | str, run_id: str):
    """The committed ``summary.json`` of a run under a folder or a URL, as a
    :class:`tooleval.runs.documents.RunSummary`.

    Raises:
        InputFileError: no summary, or one that is not a summary this tooleval reads.
    """
    from tooleval.runs.documents import read_summary

    relpath = f"runs/{run_id}/summary.json"
    data = read_document(out, relpath)
    if data is None:
        raise InputFileError(document_path(out, relpath), None, f"run {run_id!r} has no summary.json.",
                             "tooleval runs lists the runs; pass --out with their results folder.")
    return read_summary(document_path(out, relpath), data)


def run_row_outcome(out: Path | str, run_id: str) -> str:
    """The row outcome a published run was judged by (``summary.json``'s ``row_outcome.gate``); ``no_blocking``
    for a summary written before runs recorded it (that was the only outcome then). ``out``: a results folder or
    an fsspec URL."""
    recorded = _summary_of(out, run_id).row_outcome
    return "no_blocking" if recorded is None else recorded.gate


def run_accepts_name_only(out: Path | str, run_id: str) -> bool:
    """Whether a published run's gate let name-only rows pass (``summary.json``'s ``row_outcome.accept_name_only``;
    false when not recorded: the gate's default, and no row of an older run is name-only anyway). ``out``: a
    results folder or an fsspec URL."""
    recorded = _summary_of(out, run_id).row_outcome
    return bool(recorded is not None and recorded.accept_name_only)


@dataclass(frozen=True)
class FailOn:
    """``--fail-on METRIC:THRESHOLD``: fail when HEAD is worse by at least ``threshold`` and the interval of the
    difference excludes 0."""

    metric: str
    threshold: float


def parse_fail_on(spec: str) -> list[FailOn]:
    """Parse ``f1:0.02`` (several comma-separated).

    Raises:
        ValueError: an unknown metric or a threshold that is not a number >= 0, naming the accepted forms.
    """
    result = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = re.fullmatch(r"([a-z_0-9]+):(\d+(?:\.\d*)?|\.\d+)", part)
        if not match or match.group(1) not in METRICS:
            raise ValueError(f"bad --fail-on {part!r}: use METRIC:THRESHOLD with METRIC one of "
                             f"{', '.join(METRICS)} and THRESHOLD >= 0 (e.g. f1:0.02).")
        result.append(FailOn(match.group(1), float(match.group(2))))
    return result


def _delta(con, where: str, metric: str, params: dict) -> dict[str, Any]:
    sql = (f"SELECT case_id, sum(h_{metric} - b_{metric}), count(*), sum(b_{metric}), sum(h_{metric}) FROM pairs "
           f"WHERE in_base AND in_head AND b_{metric} IS NOT NULL AND h_{metric} IS NOT NULL AND {where} "
           f"GROUP BY case_id ORDER BY case_id")
    per_case = con.execute(sql, params).fetchall()
    n = sum(r[2] for r in per_case)
    if not n:
        return {"base": None, "head": None, "delta": None, "ci95": None, "rows": 0, "cases": 0}
    ci = cluster_mean_ci([r[1] for r in per_case], [r[2] for r in per_case])
    return {"base": sum(r[3] for r in per_case) / n, "head": sum(r[4] for r in per_case) / n,
            "delta": sum(r[1] for r in per_case) / n, "ci95": list(ci), "rows": n, "cases": len(per_case)}


def _group(con, where: str, params: dict) -> dict[str, Any]:
    return {metric: _delta(con, where, metric, params) for metric in METRICS}


def compare_runs(out: str | Path, base: str, head: str) -> dict[str, Any]:
    """Compare run ``head`` against run ``base`` under ``out``, a results folder or an fsspec URL
    (``s3://bucket/prefix``: DuckDB reads the committed rows through the URL's filesystem, the columns each query
    needs, never a copy of the runs).

    Returns:
        ``{base, head, base_revision, head_revision, row_outcome, pairs, only_base, only_head, overall, by_slice,
        by_family, changed_rows, changed_count, new_failing_rules}``: ``row_outcome`` is ``{base, head}``, each
        run's row outcome (``match`` | ``no_blocking``: how its verdicts and pass rate are judged); ``overall`` / ``by_slice[name]`` / ``by_family[name]`` map each metric of
        :data:`METRICS` to ``{base, head, delta, ci95: [low, high], rows, cases}`` (floats unrounded);
        ``changed_rows`` (at most 1,000, ``changed_count`` counts all) lists ``{case_id, trial, base_f1,
        head_f1, base_verdict, head_verdict, base_rules, head_rules}`` for pairs whose F1 or verdict differ or
        that are in one run only: the verdict is the row's ``gate_verdict`` (``pass`` | ``fail`` | ``waived`` |
        ``quarantined``; a run published before that column: ``error`` | ``blocking`` | ``mismatch`` | ``pass``)
        and the rules those it fails (a ``fail`` row's unwaived rules, else ``[]``);
        ``new_failing_rules`` maps a rule to the ``[case_id, trial]`` pairs it fails in HEAD but not in BASE. Every list holds at most 1,000 entries (by key: ``only_base``, ``only_head``, each rule's pairs);
        ``only_base_count``, ``only_head_count`` and ``new_failing_rules_count`` (rule -> pairs) count them all.

    Raises:
        InputFileError: a run that is not under ``out`` or has no rows, or two runs without a common
            ``(case_id, trial)`` pair (deltas are computed over paired rows only).
    """
    from tooleval.storage import connect

    out = as_location(out) if isinstance(out, str) else Path(out)
    for run in (base, head):
        check_name(run, what="run id")
        if read_document(out, f"runs/{run}/summary.json") is None:
            raise InputFileError(join(out, f"runs/{run}"), None, f"no run {run!r} under {out}.",
                                 "tooleval runs lists the runs; pass --out with their results folder.")
    con = connect(out)
    params = {"base": base, "head": head}
    for run in (base, head):
        if not con.execute("SELECT count(*) FROM rows WHERE run_id = $r", {"r": run}).fetchone()[0]:
            raise InputFileError(join(out, "rows"), None, f"run {run!r} has no rows (a legacy-only run?).",
                                 "compare runs of the row-level path.")
    outcomes = {"b": run_row_outcome(out, base), "h": run_row_outcome(out, head)}
    names = {"b": run_accepts_name_only(out, base), "h": run_accepts_name_only(out, head)}
    fails = {t: _FAILS[outcomes[t]] + ("" if names[t] else _NAME_ONLY_FAILS) for t in ("b", "h")}
    columns = ", ".join(f"{_qualify(sql.format(fails=fails[t]), t)} AS {t}_{m}"
                        for m, sql in METRICS.items() for t in ("b", "h"))
    verdicts = ", ".join(_VERDICT.format(t=t, match=str(outcomes[t] == "match").upper(),
                                         names_block=str(not names[t]).upper()) for t in ("b", "h"))
    rules = ", ".join(_RULES.format(t=t, side=side) for t, side in (("b", "base"), ("h", "head")))
    con.execute(_PAIRS.format(columns=columns, verdicts=verdicts, rules=rules), params)
    keys = f"SELECT case_id, trial FROM pairs WHERE {{}} ORDER BY case_id, trial LIMIT {_CHANGED_LIMIT}"
    pairs = con.execute("SELECT count(*) FROM pairs WHERE in_base AND in_head").fetchone()[0]
    revisions = [con.execute("SELECT any_value(dataset_revision) FROM rows WHERE run_id = $r", {"r": run}).fetchone()[0]
                 for run in (base, head)]
    if not pairs:
        raise InputFileError(join(out, f"runs/{head}"), None,
                             f"runs {base!r} (revision {revisions[0]!r}) and {head!r} (revision {revisions[1]!r}) "
                             f"share no (case_id, trial) pair: there is nothing to compare.",
                             "compare two runs of the same dataset (tooleval runs lists runs with their revision).")
    result: dict[str, Any] = {
        "base": base, "head": head, "base_revision": revisions[0], "head_revision": revisions[1],
        "row_outcome": {"base": outcomes["b"], "head": outcomes["h"]},
        "pairs": pairs,
        "only_base": [list(k) for k in con.execute(keys.format("NOT in_head")).fetchall()],
        "only_head": [list(k) for k in con.execute(keys.format("NOT in_base")).fetchall()],
        "only_base_count": con.execute("SELECT count(*) FROM pairs WHERE NOT in_head").fetchone()[0],
        "only_head_count": con.execute("SELECT count(*) FROM pairs WHERE NOT in_base").fetchone()[0],
        "overall": _group(con, "true", {}),
    }
    slices = [r[0] for r in con.execute("SELECT DISTINCT slice FROM pairs WHERE slice IS NOT NULL ORDER BY 1").fetchall()]
    result["by_slice"] = {s: _group(con, "slice = $s", {"s": s}) for s in slices}
    families = [r[0] for r in con.execute("SELECT DISTINCT unnest(families) FROM pairs ORDER BY 1").fetchall()]
    result["by_family"] = {f: _group(con, "list_contains(families, $f)", {"f": f}) for f in families}
    # the gate's verdict or the F1: a row failing for other rules is not listed (new_failing_rules names those)
    changed = ("FROM pairs WHERE NOT (in_base AND in_head) OR b_verdict IS DISTINCT FROM h_verdict "
               "OR b_f1 IS DISTINCT FROM h_f1")
    result["changed_count"] = con.execute(f"SELECT count(*) {changed}").fetchone()[0]
    cursor = con.execute(f"SELECT case_id, trial, b_f1 AS base_f1, h_f1 AS head_f1, b_verdict AS base_verdict, "
                         f"h_verdict AS head_verdict, CASE WHEN in_base THEN base_rules END AS base_rules, "
                         f"CASE WHEN in_head THEN head_rules END AS head_rules "
                         f"{changed} ORDER BY case_id, trial LIMIT {_CHANGED_LIMIT}")
    names = [d[0] for d in cursor.description]
    result["changed_rows"] = [dict(zip(names, r)) for r in cursor.fetchall()]
    new_rules: dict[str, list] = {}
    counts: dict[str, int] = {}
    newly = ("SELECT rule, case_id, trial FROM (SELECT unnest(list_filter(head_rules, lambda r: NOT list_contains("
             "base_rules, r))) AS rule, case_id, trial FROM pairs WHERE in_base AND in_head)")
    for rule, n in con.execute(f"SELECT rule, count(*) FROM ({newly}) GROUP BY ALL ORDER BY 1").fetchall():
        counts[rule] = n
    listed = (f"SELECT rule, case_id, trial FROM (SELECT *, row_number() OVER (PARTITION BY rule ORDER BY case_id, "
              f"trial) AS n FROM ({newly})) WHERE n <= {_CHANGED_LIMIT} ORDER BY ALL")
    for rule, case_id, trial in con.execute(listed).fetchall():
        new_rules.setdefault(rule, []).append([case_id, trial])
    result["new_failing_rules"] = new_rules
    result["new_failing_rules_count"] = counts
    return result


def _qualify(sql: str, alias: str) -> str:
    """Prefix the row columns a metric's SQL reads with the join alias (``f1`` -> ``b.f1``)."""
    return re.sub(r"\b(f1|ragas_tool_call_f1|exact_match|calls_match|error_kind|blocking|name_only|gate_verdict)\b",
                  rf"{alias}.\1", sql)


def failed_thresholds(comparison: dict[str, Any], fail_on: list[FailOn]) -> list[str]:
    """The ``--fail-on`` conditions that hold: HEAD worse by at least the threshold on the overall delta and
    the 95 % interval of the difference entirely below 0.

    Returns:
        One message per failed condition (empty when none failed).
    """
    messages = []
    for condition in fail_on:
        figure = comparison["overall"][condition.metric]
        if figure["delta"] is None:
            continue
        low, high = figure["ci95"]
        if figure["delta"] <= -condition.threshold and high < 0:
            messages.append(f"{condition.metric} fell by {-figure['delta']:.4f} (>= {condition.threshold}) and "
                            f"its 95 % interval [{low:.4f}, {high:.4f}] excludes 0")
    return messages
