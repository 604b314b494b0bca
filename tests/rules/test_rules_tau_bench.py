"""The airline policy's rules on the bundled tau-bench data (``datasets/tau-bench-airline`` + its gate.toml),
each count equal to an independent computation over the raw source file (``../shared/data/tau-bench``), written
here without tooleval code, and to the facts in ``../shared/data/README.md``.

* Writes require confirmation (the policy asks for an explicit "yes" before any booking change): rows with a write
  made without an un-negated affirmative in the user's last message since the agent's last proposal.
* A case whose reference has no write forbids writes: README — "80 runs (20 tasks) have a reference with no write
  at all; in 21 of them the agent still made a write that succeeded (no ``Error:`` reply), and all 21 got
  reward 0".
"""

from __future__ import annotations

import json
import re
from datetime import date

import pytest

from tests.support.paths import BUNDLED, SHARED_DATA
from tests.support.rules import score_folder
from tooleval.rules import GateConfig, evaluate_gate, load_gate_config, load_policy

SOURCE = SHARED_DATA / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
WRITES = {"book_reservation", "cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
          "update_reservation_passengers", "send_certificate"}  # ../shared/data/README.md
YES = ["yes", "yeah", "yep", "yup", "confirm", "confirmed", "go ahead", "proceed", "sure", "correct", "please do",
       "ok", "okay", "absolutely", "sounds good", "do it"]
NOT = {"no", "not", "don't", "dont", "never", "nope", "cannot", "can't", "won't", "isn't", "doesn't"}
NOT_YES = ["make sure", "making sure", "be sure"]


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    return json.loads(SOURCE.read_text())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return score_folder(BUNDLED)


def _confirms(text: str) -> bool:
    tokens = [t.strip("'") for t in re.sub(r"[^a-z0-9']+", " ", text.lower().replace("\u2019", "'")).split()]
    skip = set()
    for phrase in NOT_YES:
        n = len(phrase.split())
        skip |= {k for i in range(len(tokens)) if tokens[i:i + n] == phrase.split() for k in range(i, i + n)}
    for phrase in YES:
        n = len(phrase.split())
        for i in range(len(tokens) - n + 1):
            if tokens[i:i + n] == phrase.split() and i not in skip and not NOT & set(tokens[max(0, i - 3):i]):
                return True
    return False


def _unconfirmed_write(traj: list[dict]) -> bool:
    for i, m in enumerate(traj):
        if m["role"] != "assistant" or not any(c["function"]["name"] in WRITES for c in m.get("tool_calls") or []):
            continue
        spoke = [j for j in range(i + 1) if traj[j]["role"] == "assistant" and (traj[j].get("content") or "").strip()]
        last_proposal = spoke[-1] if spoke else -1
        replies = [traj[j]["content"] for j in range(last_proposal + 1, i) if traj[j]["role"] == "user"]
        if not replies or not _confirms(replies[-1]):
            return True
    return False


def _successful_write(traj: list[dict]) -> bool:
    for i, m in enumerate(traj):
        made = [c["function"]["name"] for c in m.get("tool_calls") or []] if m["role"] == "assistant" else []
        results = traj[i + 1:i + 1 + len(made)]  # the tool replies follow in order (ids repeat: use positions)
        for name, result in zip(made, results):
            if name in WRITES and not str(result.get("content", "")).startswith("Error:"):
                return True
    return False


def test_rows_with_a_write_and_no_preceding_confirmation(runs, rows):
    expected = {(str(r["task_id"]), r["trial"]) for r in runs if _unconfirmed_write(r["traj"])}
    found = {(row["case_id"], row["trial"]) for row in rows
             if any(v["rule"] == "missing_confirmation" for v in row["violations"])}
    assert found == expected
    # 35 of the 200 runs; e.g. task 6 trial 2 changes flights after "I'll go with Option 2, please. Could you also
    # make sure that my original payment is still used": no "yes" ("make sure" is not one)
    assert len(found) == 35 and ("6", 2) in found


def test_rows_with_a_successful_write_where_the_reference_has_none(runs, rows):
    no_write = [r for r in runs if not any(a["name"] in WRITES for a in r["info"]["task"]["actions"])]
    assert len(no_write) == 80  # data README
    expected = {(str(r["task_id"]), r["trial"]) for r in no_write if _successful_write(r["traj"])}
    assert len(expected) == 21  # data README
    assert all(r["reward"] == 0 for r in no_write if (str(r["task_id"]), r["trial"]) in expected)
    found = {(row["case_id"], row["trial"]) for row in rows
             if any(v["rule"] == "forbidden_tool" and v["severity"] == "blocking" for v in row["violations"])}
    assert found == expected


def test_failed_unreferenced_writes_are_advisory(rows):
    advisory = [v for row in rows for v in row["violations"] if v["rule"] == "forbidden_tool"
                and v["severity"] == "advisory"]
    assert advisory and all("the attempt failed" in v["detail"] for v in advisory)


def test_missing_outputs_agree_with_tau_bench_rewards(rows):
    # tau-bench's reward requires every output in some reply: a row missing one never has reward 1
    missing = [row for row in rows if any(v["rule"] == "missing_output" for v in row["violations"])]
    assert missing and all(row["recorded_reward"] == 0 for row in missing)


def test_gate_toml_and_verdict(rows):
    policy = load_policy(BUNDLED)
    assert policy.forbid_unreferenced_writes and policy.outputs_in == "any_reply"
    verdict = evaluate_gate(rows, load_gate_config(BUNDLED / "gate.toml"), today=date(2026, 6, 1))
    counts = verdict.counts
    # README: 200 rows, 12 exact-match rows; fp = 1,164 observed - tp and fn = 632 expected - tp
    assert counts["rows_evaluated"] == 200 and counts["exact_match_rows"] == 12
    assert 1164 - counts["false_positive_calls"] == 632 - counts["false_negative_calls"]
    assert not verdict.passed and counts["blocking_rows"] == sum(1 for row in rows if row["blocking"])
    assert next(s for s in verdict.slices if s.name == "airline").passed  # 200 rows >= min_rows


def test_a_rule_waiver_counts_only_rows_it_lets_pass(rows):
    # The README's own gate config (a row passes when no blocking rule fires; missing_confirmation waived): a row
    # whose only blocking rule is missing_confirmation is waived (it passes); a row that also fails another rule
    # fails, and is counted and listed as failing only. Every row is then exactly one of fail, waived, pass.
    config = GateConfig.from_toml('row_outcome = "no_blocking"\nlisted_rows = 1000\n[[waivers]]\n'
                                  'rule = "missing_confirmation"\nowner = "o"\nreason = "r"\nexpires = 2027-12-31\n',
                                  "my-gate.toml")
    verdict = evaluate_gate(rows, config, today=date(2026, 6, 1))
    failing = {(o.case_id, o.trial) for o in verdict.failing_rows}
    waived = {(o.case_id, o.trial) for o in verdict.waived}
    assert not failing & waived
    assert all(o.rules == [] and o.waived_rules == ["missing_confirmation"] for o in verdict.waived)
    assert (len(failing), len(waived)) == (verdict.counts["blocking_rows"], verdict.counts["waived_rows"])
    # independently of the gate: the rows whose blocking violations are all missing_confirmation (the bundled
    # gate.toml's severities are not in this config, so each violation keeps the severity the row recorded)
    only_confirmation = {(row["case_id"], row["trial"]) for row in rows
                         if {v["rule"] for v in row["violations"] if v["severity"] == "blocking"}
                         == {"missing_confirmation"} and not row.get("error_kind")}
    assert waived == only_confirmation and 0 < len(waived) < 35  # 35 rows have the rule (above), some with others
