"""Seed 004's four refund runs as a pytest file: the same reply, four trajectories, one right.

Each run is the list of tool calls an agent made (in a real suite: your agent's messages, as OpenAI chat
messages, Responses items or LangChain messages). ``assert_tool_calls`` scores each against the reference with
tooleval's own scoring, in-process: the calls must match in ``strict`` mode (the same calls, in the same order),
and no blocking rule may be broken (only the three refund tools, no repeated call, lookup before verification
before the refund; ``issue_refund`` is a write, so a wrong amount is a ``wrong_write_arguments``).

Run: ``pytest docs/examples/test_refund_trajectory.py`` — 1 passed, 3 failed, each failure naming what went wrong:
the skipped verification, the amount 499.9 instead of 49.99, the loop with the extra ``web_search``.
"""

import pytest

from tooleval.testing import assert_tool_calls


def call(tool, **args):
    return {"name": tool, "args": args}


EXPECTED = [call("lookup_order", order_id="ORD-7731"), call("verify_identity", customer_id="C-118"),
            call("issue_refund", order_id="ORD-7731", amount=49.99)]

RUNS = {
    "correct": EXPECTED,
    "skipped-verification": [call("lookup_order", order_id="ORD-7731"),
                             call("issue_refund", order_id="ORD-7731", amount=49.99)],
    "wrong-amount": [call("lookup_order", order_id="ORD-7731"), call("verify_identity", customer_id="C-118"),
                     call("issue_refund", order_id="ORD-7731", amount=499.9)],
    "looping": [call("lookup_order", order_id="ORD-7731"), call("lookup_order", order_id="ORD-7731"),
                call("lookup_order", order_id="ORD-7731"), call("verify_identity", customer_id="C-118"),
                call("web_search", query="refund policy"), call("issue_refund", order_id="ORD-7731", amount=49.99)],
}

RULES = {
    "allowed_tools": ["lookup_order", "verify_identity", "issue_refund"],
    "no_repeated_calls": True,
    "sequence_rules": [{"before": "lookup_order", "then": "verify_identity"},
                       {"before": "verify_identity", "then": "issue_refund"}],
}
TOOLS = [{"name": "issue_refund", "side_effect": "write"}]


@pytest.mark.parametrize("run", RUNS)
def test_refund(run):
    assert_tool_calls(RUNS[run], EXPECTED, mode="strict", rules=RULES, tools=TOOLS)
