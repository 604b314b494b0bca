"""Trace capture: recorded traces, trace envelopes, provenance and redaction.

Import these names from here (each is imported on first use: :mod:`tooleval.faces`); modules whose names start
with ``_`` are this package's own.
"""

from tooleval.faces import lazy_face

_EXPORTS = {
    "boundary_calls": "tooleval.capture.envelope",
    "build_envelope": "tooleval.capture.envelope",
    "capture_tables": "tooleval.capture._shard",
    "digest_ok": "tooleval.capture.envelope",
    "envelope_calls": "tooleval.capture.envelope",
    "envelope_digest": "tooleval.capture.envelope",
    "generation_envelope": "tooleval.capture.envelope",
    "KEY_ENV": "tooleval.capture.keys",
    "KEY_FILE_ENV": "tooleval.capture.keys",
    "PlannedKey": "tooleval.capture.keys",
    "environment_key": "tooleval.capture.keys",
    "persist_key": "tooleval.capture.keys",
    "plan_key": "tooleval.capture.keys",
    "recorded_key_digests": "tooleval.capture.keys",
    "failure_owner": "tooleval.capture.provenance",
    "first_divergent_boundary": "tooleval.capture.provenance",
    "input_key": "tooleval.capture.provenance",
    "join_check": "tooleval.capture.provenance",
    "join_check_key": "tooleval.capture.provenance",
    "TraceIndex": "tooleval.capture.recorded",
    "TraceLine": "tooleval.capture.recorded",
    "file_digest": "tooleval.capture.recorded",
    "index_traces": "tooleval.capture.recorded",
    "iter_json_lines": "tooleval.capture.recorded",
    "iter_trace_lines": "tooleval.capture.recorded",
    "load_unique_json": "tooleval.capture.recorded",
    "read_trace_line": "tooleval.capture.recorded",
    "replay_keys": "tooleval.capture.recorded",
    "trace_key": "tooleval.capture.recorded",
    "trace_line_problem": "tooleval.capture.recorded",
    "Transcript": "tooleval.capture.transcript",
    "align_calls": "tooleval.capture.transcript",
    "message_text": "tooleval.capture.transcript",
    "transcript_columns": "tooleval.capture.transcript",
    "view_arrays": "tooleval.capture.transcript",
    "written_texts": "tooleval.capture.transcript",
    "read_written": "tooleval.capture.transcript",
    "DEFAULT_FIELDS": "tooleval.capture.redaction",
    "MARKER_KEY": "tooleval.capture.redaction",
    "RedactionConfig": "tooleval.capture.redaction",
    "Redactor": "tooleval.capture.redaction",
    "build_redactor": "tooleval.capture.redaction",
    "case_reference_values": "tooleval.capture.redaction",
    "key_path": "tooleval.capture.redaction",
    "load_key": "tooleval.capture.redaction",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
