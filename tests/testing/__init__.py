"""Tests of tooleval.testing: check_tool_calls and the pytest plugin."""
