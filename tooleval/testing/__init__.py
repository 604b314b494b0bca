"""tooleval inside a team's own tests: assert on one trajectory, or run a dataset's rows as pytest items.

* :func:`assert_tool_calls` / :func:`check_tool_calls` — score one trajectory (OpenAI chat messages or Responses
  items, LangChain messages, ``{"name", "args"}`` calls, a recorded trace or an envelope) against its reference
  with the run's own capture and scoring code: the same matching, argument rules, match modes and policy rules,
  the same row. In-process, no Prefect, nothing written; redaction only with ``redaction_key=``.
* The pytest plugin (:mod:`tooleval.testing.pytest_plugin`, entry point ``pytest11``): ``pytest --tooleval-dataset
  DIR`` collects one item per (case, trial) of the dataset's recorded traces, judged by the release gate, plus one
  item for the dataset-level checks; the fixture ``tooleval_case`` hands a test each case and its reference.

Example (seed 004's refund runs: README "In your tests")::

    from tooleval.testing import assert_tool_calls

    def test_refund(messages):
        assert_tool_calls(messages, [{"name": "issue_refund", "args": {"order_id": "ORD-7731", "amount": 49.99}}],
                          mode="superset")
"""

from tooleval.testing._check import (RULE_KEYS, RedactionKey, ToolCallCheck, ToolCallMismatch,
                                     assert_tool_calls, check_tool_calls)
from tooleval.testing._explain import explain, format_call

for _public in (RedactionKey, ToolCallCheck, ToolCallMismatch):  # pytest names the exception where users import it from
    _public.__module__ = __name__

__all__ = ["assert_tool_calls", "check_tool_calls", "RedactionKey", "ToolCallCheck", "ToolCallMismatch", "RULE_KEYS",
           "explain", "format_call"]
