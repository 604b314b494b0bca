"""ToolExecutor: recorded results keyed by (name, canonical args), registered callables, error strings."""

from __future__ import annotations

import pytest

from tooleval.agents import UNKNOWN_TOOL, ToolExecutor


def test_recorded_results_match_canonical_arguments():
    executor = ToolExecutor({("refund", '{"id": "A", "cents": 250}'): {"ok": True}})
    assert executor.execute("refund", '{"cents": 250.0, "id": "A"}') == '{"ok": true}'  # key order, 250 == 250.0
    assert executor.execute("refund", '{"cents": "250", "id": "A"}').startswith("Error: no recorded result")
    assert executor.execute("refund", '{"id": "A"').startswith("Error: malformed arguments for refund")
    assert executor.execute("get_user", "{}") == UNKNOWN_TOOL == "Error: unknown tool"
    assert executor.tool_names == ["refund"]


def test_from_records_and_empty_arguments():
    executor = ToolExecutor.from_records([{"name": "list_orders", "args": {}, "result": "[]"},
                                          {"name": "get", "args": {"id": 1}, "result": "one"}])
    assert executor.execute("list_orders", "") == "[]" and executor.execute("list_orders", None) == "[]"
    assert executor.execute("get", {"id": 1.0}) == "one"
    with pytest.raises(ValueError, match="record #0"):
        ToolExecutor.from_records([{"args": {}}])
    with pytest.raises(ValueError, match="not a JSON object"):
        ToolExecutor().record("x", "[1]", "r")


def test_registered_callables_win_and_their_failures_are_results():
    executor = ToolExecutor({("get_order", '{"id": "A"}'): "recorded"})
    executor.register("get_order", lambda id: {"id": id, "source": "python"})
    executor.register("boom", lambda: 1 / 0)
    assert executor.execute("get_order", '{"id": "A"}') == '{"id": "A", "source": "python"}'
    assert executor.execute("boom", "{}") == "Error: ZeroDivisionError: division by zero"
    assert executor.execute("get_order", '{"wrong": 1}').startswith("Error: TypeError:")
    with pytest.raises(TypeError):
        executor.register("x", "not callable")


def test_digest_changes_with_what_the_executor_answers():
    def get_order(id):
        return id

    empty = ToolExecutor().digest()
    recorded = ToolExecutor({("a", "{}"): "1"})
    assert recorded.digest() == ToolExecutor({("a", " { } "): "1"}).digest() != empty
    assert ToolExecutor({("a", "{}"): "2"}).digest() != recorded.digest()
    registered = ToolExecutor()
    registered.register("get_order", get_order)
    assert registered.digest() != empty and len(registered.digest()) == 64
