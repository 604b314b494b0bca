"""JUnit XML of a gate verdict: ``runs/<run>/junit.xml`` (issue 3).

One ``<testcase>`` per row — ``classname`` = the case's slice (or the suite name when it has none), ``name`` =
``<case_id>#<trial>`` — so CI shows every row, not a mean:

* a failing row has a ``<failure>`` whose ``message`` lists its rules and whose text is JSON holding the rules,
  the blocking violations and the missing / extra / wrong-argument call objects (:meth:`RowOutcome.evidence`);
* a quarantined row that would fail is ``<skipped>`` with the same evidence (it does not block);
* a waived row passes and says what was waived, and by whom, in ``<system-out>``; advisory violations go there
  too.

Gate-level failures (a slice floor, a missing slice, an expired waiver) are extra test cases of classname
``gate`` so that a red build always names its cause. Written with the standard library; read back in the tests
with junitparser.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tooleval.rules._verdict import GateVerdict, RowOutcome

__all__ = ["write_junit"]


def _text(payload: Any) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False)


def _row_case(suite: ET.Element, row: dict, name: str, outcome: RowOutcome | None, state: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=str(row.get("slice") or name),
                         name=f"{row['case_id']}#{'-' if row.get('trial') is None else row['trial']}", time="0")
    notes: list[str] = []
    if outcome is not None and state == "failing":
        failure = ET.SubElement(case, "failure", message="blocking: " + ", ".join(outcome.rules),
                                type=outcome.rules[0])
        failure.text = _text(outcome.evidence())
    elif outcome is not None and state == "quarantined":
        q = outcome.quarantine or {}
        would = ", ".join(outcome.rules) or "nothing"
        skipped = ET.SubElement(case, "skipped",
                                message=f"quarantined by {q.get('owner')}: {q.get('reason')}; would fail: {would}")
        skipped.text = _text(outcome.evidence())
    if outcome is not None and outcome.waived_rules:
        notes.append("waived: " + ", ".join(outcome.waived_rules) + "\n" + _text(outcome.waivers))
    advisory = [v for v in (outcome.violations if outcome else row.get("violations") or [])
                if v["severity"] == "advisory"]
    if advisory:
        notes.append("advisory violations:\n" + _text(advisory))
    if notes:
        ET.SubElement(case, "system-out").text = "\n".join(notes)


def write_junit(verdict: GateVerdict, rows: list[dict[str, Any]], path: str | Path, *,
                suite_name: str = "tooleval") -> Path:
    """Write the verdict as JUnit XML.

    Args:
        verdict: :func:`tooleval.rules.evaluate_gate`'s result for ``rows``.
        rows: The same rows, in report order.
        path: Output file (its folder must exist).
        suite_name: The ``<testsuite>`` name and the classname of rows without a slice (use the dataset
            name or revision).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    failing = {(o.case_id, o.trial): o for o in verdict.failing_rows}
    quarantined = {(o.case_id, o.trial): o for o in verdict.quarantined}
    waived = {(o.case_id, o.trial): o for o in verdict.waived}
    root = ET.Element("testsuites", name=suite_name)
    suite = ET.SubElement(root, "testsuite", name=suite_name)
    for row in rows:
        key = (str(row["case_id"]), int(row.get("trial") or 0))
        if key in quarantined:
            _row_case(suite, row, suite_name, quarantined[key], "quarantined" if quarantined[key].rules else "")
        elif key in failing:
            _row_case(suite, row, suite_name, failing[key], "failing")
        else:
            _row_case(suite, row, suite_name, waived.get(key), "")
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
