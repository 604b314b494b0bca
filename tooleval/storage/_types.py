"""Arrow struct types shared by the persisted shapes (rows and trace envelopes): tool calls, wrong-argument pairs,
violations, coercions, schema findings and executor payloads."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["CALL_TYPE", "WRONG_ARGS_TYPE", "EXECUTOR_CALL_TYPE", "VIOLATION_TYPE", "COERCION_TYPE",
           "SCHEMA_FINDING_TYPE"]

CALL_TYPE = pa.struct(
    [("name", pa.string()), ("args_json", pa.string()), ("args_raw", pa.string()), ("parse_error", pa.string())]
)
"""One tool call. ``args_json`` is canonical JSON text; ``args_raw``/``parse_error`` are set only when malformed."""

WRONG_ARGS_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("expected_args_json", pa.string()),
        ("observed_args_json", pa.string()),
        ("paths", pa.list_(pa.string())),
    ]
)
"""One (expected, observed) pair of the same tool with differing argument ``paths`` (e.g. ``flights[0].date``)."""

EXECUTOR_CALL_TYPE = pa.struct(
    [
        ("name", pa.string()),
        ("args_json", pa.string()),
        ("args_raw", pa.string()),
        ("parse_error", pa.string()),
        ("executions", pa.int32()),
        ("status", pa.string()),
    ]
)
"""A payload a tool received, with how many times it ran (``executions``, >= 1) and its result ``status``."""

VIOLATION_TYPE = pa.struct(
    [("rule", pa.string()), ("severity", pa.string()), ("tool", pa.string()), ("detail", pa.string())]
)
"""One policy violation: ``rule`` (docs/rules.md), ``severity`` (``blocking`` | ``advisory``), tool, detail."""

COERCION_TYPE = pa.struct(
    [
        ("call_index", pa.int32()),
        ("tool", pa.string()),
        ("path", pa.string()),
        ("from_value", pa.string()),
        ("to_value", pa.string()),
    ]
)
"""One applied argument coercion (a declared per-field rule), values as canonical JSON text."""

SCHEMA_FINDING_TYPE = pa.struct(
    [
        ("call_index", pa.int32()),
        ("tool", pa.string()),
        ("kind", pa.string()),
        ("path", pa.string()),
        ("detail", pa.string()),
    ]
)
"""One way an observed call departs from its tools.json schema (:class:`tooleval.rules.SchemaFinding`): ``kind``
is ``undeclared_tool`` | ``missing_required`` | ``unknown_parameter`` | ``wrong_type``; ``call_index`` 0-based."""
