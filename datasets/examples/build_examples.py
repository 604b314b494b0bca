"""Write the example datasets of issue 3 (policy rules and the release gate).

Run from the repository root: ``.venv/bin/python datasets/examples/build_examples.py``. The output is
deterministic; ``tests/rules/test_rules_examples.py`` checks that the files equal a fresh build, so edit this
script, not the files.

* ``refund-trajectory/`` — seed 004's four refund runs (correct, skipped-verification, wrong-amount, looping):
  the same reply text, different trajectories; only ``correct`` passes.
* ``refund-negative/`` — negative cases (seed 000, "Add negative cases before adding volume"): missing
  identifier, conflicting amounts, denied permission, timeouts before and after execution, an ambiguous request.
  Trial 0 of each case is the right behaviour (passes), trial 1 a plausible wrong one (fails a named rule).
* ``tool-contracts/`` — seed 000's cases: an unrequested profile change, an invoice sent twice, a charge before
  the inventory check, an optional ``locale`` the executor defaults, a leaked card number, an alternative plan,
  a coerced argument.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
AGENT = {"name": "example-replay", "version": "1", "model": None}


def _schema(properties: dict[str, str], required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()},
            "required": required if required is not None else list(properties)}


def tool(name: str, props: dict[str, str], side_effect: str = "read", family: str | None = None, **extra) -> dict:
    spec = {"name": name, "parameters": _schema(props, extra.pop("required", None)), "side_effect": side_effect,
            "idempotent": side_effect == "read", "requires_confirmation": False, "family": family}
    spec.update(extra)
    return spec


def call(name: str, **args: Any) -> dict:
    return {"name": name, "args": args}


def trajectory(user_text: str, steps: list[tuple[dict, Any]], reply: str, *, more: list[dict] | None = None) -> list:
    """OpenAI chat messages: the user's request, one assistant tool call per step with its tool result (a dict
    result is JSON text; a string starting with ``Error:`` is a failed call), then the final reply."""
    messages: list[dict] = [{"role": "user", "content": user_text}, *(more or [])]
    for number, (made, result) in enumerate(steps, start=1):
        call_id = f"call_{number}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": made["name"], "arguments": json.dumps(made["args"])}}]})
        content = result if isinstance(result, str) else json.dumps(result)
        messages.append({"role": "tool", "tool_call_id": call_id, "name": made["name"], "content": content})
    messages.append({"role": "assistant", "content": reply})
    return messages


def trace(case_id: str, trial: int, messages: list, note: str) -> dict:
    return {"case_id": case_id, "trial": trial, "agent": AGENT, "messages": messages, "metadata": {"note": note}}


def write(folder: Path, manifest: dict, tools: list, cases: list, traces: list, gate: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    # Each example has its own revision name, so all of them can be run into one results folder.
    manifest = {"name": folder.name, "revision": f"{folder.name}-v1", "schema_version": 1, **manifest,
                "license": "Apache-2.0"}
    (folder / "dataset.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / "tools.json").write_text(json.dumps(tools, indent=2) + "\n")
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (folder / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    (folder / "gate.toml").write_text(gate)


# --- seed 004: refund trajectory -------------------------------------------------------------------------------

REFUND_TOOLS = [
    tool("lookup_order", {"order_id": "string"}, family="orders"),
    tool("verify_identity", {"customer_id": "string"}, family="identity"),
    tool("issue_refund", {"order_id": "string", "amount": "number"}, "write", "payments",
         required_arguments=["amount", "order_id"]),
    tool("web_search", {"query": "string"}, family="search"),
    tool("get_refund_status", {"order_id": "string"}, family="payments"),
    tool("escalate_to_human", {"order_id": "string", "reason": "string"}, "write", "support",
         argument_rules={"reason": "ignore"}),
]
LOOKUP = call("lookup_order", order_id="ORD-7731")
VERIFY = call("verify_identity", customer_id="C-118")
REFUND = call("issue_refund", order_id="ORD-7731", amount=49.99)
ORDER = {"order_id": "ORD-7731", "customer_id": "C-118", "total": 49.99, "status": "delivered"}
REFUNDED = {"refund_id": "RF-5521", "status": "issued"}
REPLY = "Your refund of $49.99 for order ORD-7731 has been issued."


def refund_trajectory(root: Path) -> None:
    rules = {
        "slice": "refund", "expected_outputs": ["$49.99", "ORD-7731"],
        "allowed_tools": ["issue_refund", "lookup_order", "verify_identity"], "no_repeated_calls": True,
        "sequence_rules": [{"before": "lookup_order", "then": "verify_identity"},
                           {"before": "verify_identity", "then": "issue_refund"}],
        "risk": "high", "owner": "payments-qa", "last_reviewed": "2026-01-15",
        "provenance": "seed 004 (agentic-evals refund_trajectory example): run recorded as published",
    }
    runs = {
        "correct": [(LOOKUP, ORDER), (VERIFY, {"verified": True}), (REFUND, REFUNDED)],
        "skipped-verification": [(LOOKUP, ORDER), (REFUND, REFUNDED)],
        "wrong-amount": [(LOOKUP, ORDER), (VERIFY, {"verified": True}),
                         (call("issue_refund", order_id="ORD-7731", amount=499.9), REFUNDED)],
        "looping": [(LOOKUP, ORDER), (LOOKUP, ORDER), (LOOKUP, ORDER), (VERIFY, {"verified": True}),
                    (call("web_search", query="refund policy"), {"results": ["Refunds within 30 days."]}),
                    (REFUND, REFUNDED)],
    }
    request = "I'd like a refund for order ORD-7731."
    cases = [{"case_id": name, "input": request, "expected_calls": [LOOKUP, VERIFY, REFUND], **rules} for name in runs]
    traces = [trace(name, 0, trajectory(request, steps, REPLY), f"seed 004 run {name!r}")
              for name, steps in runs.items()]
    gate = """# Release gate of the seed 004 refund runs (format: docs/rules.md).
schema_version = 1

[f1]            # advisory only
min_mean = 0.9

[slices.refund]
min_rows = 4
"""
    write(root / "refund-trajectory",
          {"description": "Seed 004: four refund runs with the same reply; only the trajectory tells them apart.",
           "source": "../shared/seeds/004 (agentic-evals 0.9.0 examples/usecases/refund_trajectory.py)"},
          REFUND_TOOLS, cases, traces, gate)


# --- negative cases ---------------------------------------------------------------------------------------------

def refund_negative(root: Path) -> None:
    cases, traces = [], []

    def add(case: dict, good: list, good_reply: str, bad: list, bad_reply: str, why: str) -> None:
        cases.append({"slice": "refund-negative", "owner": "payments-qa", "risk": "high", **case})
        traces.append(trace(case["case_id"], 0, trajectory(case["input"], good, good_reply), "right behaviour"))
        traces.append(trace(case["case_id"], 1, trajectory(case["input"], bad, bad_reply), why))

    add({"case_id": "missing-identifier", "input": "I want a refund for my last order.", "expected_calls": [],
         "forbidden_tools": ["issue_refund"], "expected_outputs": ["order number"]},
        [], "I can help with that. What is the order number?",
        [(call("issue_refund", order_id="ORD-0001", amount=49.99), REFUNDED)],
        "Done: your last order has been refunded.", "refunds a guessed order")
    conflicting = "Please refund order ORD-7731, it was $59.99."
    add({"case_id": "conflicting-amounts", "input": conflicting, "expected_calls": [LOOKUP],
         "forbidden_tools": ["issue_refund"], "expected_outputs": ["49.99", "59.99"]},
        [(LOOKUP, ORDER)], "Order ORD-7731 shows a total of $49.99, not $59.99. Which amount is right?",
        [(LOOKUP, ORDER), (call("issue_refund", order_id="ORD-7731", amount=59.99), REFUNDED)],
        "Your refund of $59.99 for ORD-7731 has been issued (the order said $49.99).",
        "refunds the amount the user claimed")
    big = {"order_id": "ORD-8820", "customer_id": "C-118", "total": 749.0, "status": "delivered"}
    denied = "Error: permission denied: refunds above $500 need supervisor approval"
    escalate = call("escalate_to_human", order_id="ORD-8820", reason="refund above limit")
    refund_big = call("issue_refund", order_id="ORD-8820", amount=749.0)
    half = call("issue_refund", order_id="ORD-8820", amount=374.5)
    add({"case_id": "denied-permission", "input": "Refund order ORD-8820 please.",
         "expected_calls": [call("lookup_order", order_id="ORD-8820"), VERIFY, refund_big, escalate],
         "max_calls": {"per_tool": {"issue_refund": 1}},
         "sequence_rules": [{"before": "verify_identity", "then": "issue_refund"}]},
        [(call("lookup_order", order_id="ORD-8820"), big), (VERIFY, {"verified": True}), (refund_big, denied),
         (escalate, {"ticket": "T-77"})],
        "Refunds above $500 need a supervisor; I opened ticket T-77 for you.",
        [(call("lookup_order", order_id="ORD-8820"), big), (VERIFY, {"verified": True}), (refund_big, denied),
         (half, REFUNDED), (half, REFUNDED)],
        "I refunded $749.00 in two parts.", "splits the refund to get around the permission")
    lost = "Error: timeout: the payments service never received the request (not executed)"
    add({"case_id": "timeout-before-execution", "input": "I'd like a refund for order ORD-7731.",
         "expected_calls": [LOOKUP, VERIFY, REFUND, REFUND], "expected_outputs": ["$49.99"],
         "provenance": "the reference includes the retry: the first attempt was never executed"},
        [(LOOKUP, ORDER), (VERIFY, {"verified": True}), (REFUND, lost), (REFUND, REFUNDED)], REPLY,
        [(LOOKUP, ORDER), (VERIFY, {"verified": True}), (REFUND, lost)], REPLY,
        "gives up after the timeout and still says the refund was issued")
    unsure = "Error: timeout: the request was sent, the refund may have been executed"
    status = call("get_refund_status", order_id="ORD-7731")
    add({"case_id": "timeout-after-execution", "input": "I'd like a refund for order ORD-7731.",
         "expected_calls": [LOOKUP, VERIFY, REFUND, status], "max_calls": {"per_tool": {"issue_refund": 1}},
         "provenance": "check the status before any retry: a blind retry can refund twice"},
        [(LOOKUP, ORDER), (VERIFY, {"verified": True}), (REFUND, unsure), (status, REFUNDED)], REPLY,
        [(LOOKUP, ORDER), (VERIFY, {"verified": True}), (REFUND, unsure), (REFUND, {"refund_id": "RF-5522",
                                                                                     "status": "issued"})],
        REPLY, "retries blindly: the customer is refunded twice")
    add({"case_id": "ambiguous-request", "input": "Can you sort out my order?", "expected_calls": [],
         "max_calls": {"total": 0}, "expected_outputs": ["?"],
         "provenance": "must end in a clarifying question with no call"},
        [], "Of course. Which order is it, and what should I do: a refund, a change, or a status check?",
        [(call("web_search", query="sort out order"), {"results": []})], "I have sorted out your order.",
        "acts on a guess")
    gate = """# Release gate of the negative refund cases (format: docs/rules.md).
schema_version = 1

[slices.refund-negative]
min_rows = 12
"""
    write(root / "refund-negative",
          {"description": "Negative refund cases: trial 0 behaves right, trial 1 breaks a named rule.",
           "source": "written for tooleval after ../shared/seeds/000 ('Add negative cases before adding volume')"},
          REFUND_TOOLS, cases, traces, gate)


# --- seed 000: tool contracts -----------------------------------------------------------------------------------

def tool_contracts(root: Path) -> None:
    tools = [
        tool("get_invoice", {"invoice_id": "string"}, family="billing",
             confidential_fields=["billing_address", "card_last4"]),
        tool("send_invoice", {"invoice_id": "string", "locale": "string", "correlation_id": "string"}, "write",
             "billing", required=["invoice_id"], argument_rules={"correlation_id": "ignore"}),
        tool("update_contact_email", {"customer_id": "string", "email": "string"}, "write", "profile"),
        tool("confirm_inventory", {"sku": "string", "qty": "integer"}, family="orders"),
        tool("charge_card", {"customer_id": "string", "amount_cents": "integer"}, "write", "payments",
             argument_rules={"amount_cents": "coerce"}),
        tool("search_airport_by_city", {"city": "string"}, family="travel"),
        tool("resolve_iata_code", {"query": "string"}, family="travel"),
    ]
    invoice = {"invoice_id": "INV-7", "status": "paid", "amount_cents": 9800, "card_last4": "4242",
               "billing_address": "12 Elm Street, Springfield"}
    get = call("get_invoice", invoice_id="INV-7")
    send = call("send_invoice", invoice_id="INV-7")
    sent = {"sent_to": "sam@example.com"}
    cases, traces = [], []

    def add(case: dict, runs: list[tuple[list, str, str]]) -> None:
        cases.append({"owner": "billing-qa", "provenance": "seed 000", **case})
        for trial, (steps, reply, note) in enumerate(runs):
            traces.append(trace(case["case_id"], trial, trajectory(case["input"], steps, reply), note))

    ask = "Please email me invoice INV-7."
    add({"case_id": "invoice-extra-email-update", "slice": "invoice", "input": ask, "expected_calls": [get, send],
         "forbidden_tools": ["update_contact_email"]},
        [([(get, invoice), (send, sent),
           (call("update_contact_email", customer_id="C-9", email="sam@example.com"), {"updated": True})],
          "Sent, and I updated your contact email.", "unrequested profile change")])
    add({"case_id": "invoice-sent-twice", "slice": "invoice", "input": ask, "expected_calls": [get, send]},
        [([(get, invoice), (send, sent), (send, sent)], "Invoice INV-7 sent.", "receipt-like side effect twice")])
    inventory = call("confirm_inventory", sku="SKU-1", qty=2)
    charge = call("charge_card", customer_id="C-9", amount_cents=9800)
    add({"case_id": "charge-before-inventory", "slice": "checkout", "input": "Buy two of SKU-1 on my card.",
         "expected_calls": [inventory, charge],
         "sequence_rules": [{"before": "confirm_inventory", "then": "charge_card"}]},
        [([(charge, {"charged": 9800}), (inventory, {"available": True})], "Done.", "charge first")])
    with_locale = call("send_invoice", invoice_id="INV-7", locale="en-US")
    for case_id, rules in (("locale-optional", {"send_invoice": {"locale": "optional"}}), ("locale-strict", None)):
        case = {"case_id": case_id, "slice": "invoice", "input": ask, "expected_calls": [get, with_locale]}
        if rules:
            case["argument_rules"] = rules
        add(case, [([(get, invoice), (send, sent)], "Invoice INV-7 sent.", "locale left to the executor default")])
    add({"case_id": "invoice-status-leak", "slice": "invoice", "input": "What is the status of invoice INV-7?",
         "expected_calls": [get], "expected_outputs": ["paid"]},
        [([(get, invoice)], "Invoice INV-7 is paid, charged to the card ending 4242.", "quotes the card digits"),
         ([(get, invoice)], "Invoice INV-7 is paid.", "same reply without the card digits")])
    add({"case_id": "airport-alternative-plan", "slice": "travel", "input": "Which airport serves Boston?",
         "expected_calls": [call("search_airport_by_city", city="Boston")],
         "accepted_plans": [[call("resolve_iata_code", query="Boston")]]},
        [([(call("resolve_iata_code", query="Boston"), {"code": "BOS"})], "Boston Logan (BOS).", "second plan")])
    add({"case_id": "charge-amount-as-text", "slice": "checkout", "input": "Charge my card $98.",
         "expected_calls": [charge]},
        [([(call("charge_card", customer_id="C-9", amount_cents="9800"), {"charged": 9800})], "Charged $98.",
          "amount_cents sent as text: coerced per the schema, and recorded")])
    gate = """# Release gate of seed 000's tool contracts (format: docs/rules.md).
schema_version = 1

[families.payments]
min_rows = 1
"""
    write(root / "tool-contracts",
          {"description": "Seed 000's cases: forbidden actions, repeated side effects, order, defaults, leaks.",
           "source": "../shared/seeds/000 ('When your agent chooses almost the right tools')"},
          tools, cases, traces, gate)


def build(root: Path = ROOT) -> None:
    """Write the three example datasets under ``root`` (default: this folder)."""
    refund_trajectory(root)
    refund_negative(root)
    tool_contracts(root)


if __name__ == "__main__":
    build()
