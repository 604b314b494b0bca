"""JUnit XML of a gate verdict: ``runs/<run>/junit.xml``, bounded at any corpus size: a million-row run
neither holds nor writes a test case per row.

Rows listed one by one — the verdict's listed rows (:attr:`GateVerdict.listed`, gate.toml ``listed_rows``,
default 100, per list: failing, quarantined, waived; the worst first) — are test cases with ``classname`` = the
case's slice (or the suite name when it has none) and ``name`` = ``<case_id>#<trial>``:

* a failing row has a ``<failure>`` whose ``message`` lists its rules and whose text is JSON holding the rules,
  the blocking violations and the missing / extra / wrong-argument call objects (:meth:`RowOutcome.evidence`);
* a quarantined row that would fail is ``<skipped>`` with the same evidence (it does not block);
* a waived row passes and says what was waived, and by whom, in ``<system-out>``; advisory violations go there
  too.

Every other row is **counted**, per slice (same ``classname``):

* ``<rule>: N more failing rows`` — one failing test case per slice and blocking rule with rows not listed
  (``type`` = the rule; a row failing two rules counts under both);
* ``N more quarantined rows`` — skipped, for quarantined rows not listed that would fail;
* ``N passing rows`` — one passing test case for the slice's rows that pass (waived rows included), with the
  slice's counts and its advisory violations by count in ``<system-out>``.

Gate-level failures (a slice floor, a missing slice, an expired waiver) are extra test cases of classname
``gate`` so that a red build always names its cause. The ``<testsuite>`` carries the run's totals as
``<properties>`` (``rows``, ``failing_rows``, ``listed_rows``, …). Written with the standard library, one
element at a time; read back in the tests with junitparser.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from tooleval.rules._verdict import NO_SLICE, GateVerdict, RowOutcome

__all__ = ["write_junit"]


def _text(payload: Any) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False)


def _row_case(suite: ET.Element, name: str, outcome: RowOutcome, state: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=str(outcome.slice or name),
                         name=f"{outcome.case_id}#{'-' if outcome.no_trial else outcome.trial}", time="0")
    notes: list[str] = []
    if state == "failing":
        failure = ET.SubElement(case, "failure", message="blocking: " + ", ".join(outcome.rules),
                                type=outcome.rules[0])
        failure.text = _text(outcome.evidence())
    elif state == "quarantined" and outcome.rules:
        q = outcome.quarantine or {}
        skipped = ET.SubElement(case, "skipped", message=f"quarantined by {q.get('owner')}: {q.get('reason')}; "
                                f"would fail: {', '.join(outcome.rules)}")
        skipped.text = _text(outcome.evidence())
    if outcome.waived_rules:
        notes.append("waived: " + ", ".join(outcome.waived_rules) + "\n" + _text(outcome.waivers))
    advisory = [v for v in outcome.violations if v["severity"] == "advisory"]
    if advisory:
        notes.append("advisory violations:\n" + _text(advisory))
    if notes:
        ET.SubElement(case, "system-out").text = "\n".join(notes)


def _counted_cases(suite: ET.Element, verdict: GateVerdict, listed: list[RowOutcome], name: str) -> None:
    """The per-slice test cases that count the rows not listed (see the module docstring)."""
    counts = verdict.counts
    listed_failing = Counter((o.slice or NO_SLICE, rule) for o in verdict.failing_rows for rule in o.rules)
    listed_quarantined = Counter(o.slice or NO_SLICE for o in verdict.quarantined if o.rules)
    for slice_, tally in (counts.get("rows_by_slice") or {}).items():
        classname = name if slice_ == NO_SLICE else slice_
        for rule, n in (counts.get("failures_by_slice_and_rule") or {}).get(slice_, {}).items():
            more = n - listed_failing[(slice_, rule)]
            if more > 0:
                case = ET.SubElement(suite, "testcase", classname=classname, name=f"{rule}: {more} more failing rows",
                                     time="0")
                ET.SubElement(case, "failure", type=rule, message=(
                    f"{more} more row(s) of {slice_} fail rule {rule} (not listed: junit.xml lists the worst "
                    f"{verdict.listed} failing rows; summary.json counts them all)")).text = _text(
                    {"slice": slice_, "rule": rule, "failing_rows": n, "listed": n - more})
        more = tally["quarantined_failing"] - listed_quarantined[slice_]
        if more > 0:
            case = ET.SubElement(suite, "testcase", classname=classname, name=f"{more} more quarantined rows",
                                 time="0")
            ET.SubElement(case, "skipped", message=f"{more} more quarantined row(s) of {slice_} would fail")
        passing = tally["rows"] - tally["failing"] - tally["quarantined_failing"]
        if passing > 0:
            case = ET.SubElement(suite, "testcase", classname=classname, name=f"{passing} passing rows", time="0")
            ET.SubElement(case, "system-out").text = _text({"slice": slice_, **tally, "passing": passing})


def write_junit(verdict: GateVerdict, path: str | Path, *, suite_name: str = "tooleval") -> Path:
    """Write the verdict as JUnit XML: its listed rows one by one and the other rows counted (module docstring).

    Args:
        verdict: :func:`tooleval.rules.evaluate_gate`'s (or :class:`tooleval.rules.GateTally`'s) result.
        path: Output file (its folder must exist).
        suite_name: The ``<testsuite>`` name and the classname of rows without a slice (use the dataset
            name or revision).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    root = ET.Element("testsuites", name=suite_name)
    suite = ET.SubElement(root, "testsuite", name=suite_name)
    properties = ET.SubElement(suite, "properties")
    counts = verdict.counts
    for key, value in (("rows", counts["rows_evaluated"] + counts["unscored_cases"]),
                       ("failing_rows", counts["blocking_rows"]), ("waived_rows", counts["waived_rows"]),
                       ("quarantined_rows", counts["quarantined_rows"]), ("listed_rows", verdict.listed),
                       ("passed", str(verdict.passed).lower())):
        ET.SubElement(properties, "property", name=key, value=str(value))
    seen: set[tuple[str, int]] = set()
    listed: list[RowOutcome] = []
    for state, outcomes in (("quarantined", verdict.quarantined), ("failing", verdict.failing_rows),
                            ("waived", verdict.waived)):
        for outcome in outcomes:
            key = (outcome.case_id, outcome.trial)
            if key not in seen:
                seen.add(key)
                listed.append(outcome)
                _row_case(suite, suite_name, outcome, state)
    _counted_cases(suite, verdict, listed, suite_name)
    for s in verdict.slices:
        if s.configured:
            case = ET.SubElement(suite, "testcase", classname="gate", name=f"{s.kind}:{s.name}", time="0")
            if s.failures:
                ET.SubElement(case, "failure", message="; ".join(s.failures), type="slice_floor").text = \
                    _text(s.to_dict())
    for w in verdict.expired_waivers:
        case = ET.SubElement(suite, "testcase", classname="gate",
                             name=f"waiver:{w.case or '*'}:{w.rule or '*'}", time="0")
        ET.SubElement(case, "failure", message=f"waiver expired on {w.expires.isoformat()}",
                      type="expired_waiver").text = _text(w.to_dict())
    cases = suite.findall("testcase")
    totals = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.find("failure") is not None),
        "errors": 0,
        "skipped": sum(1 for c in cases if c.find("skipped") is not None),
    }
    for element in (root, suite):
        for key, value in totals.items():
            element.set(key, str(value))
    out = Path(path)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out
