"""Trace capture: recorded traces, trace envelopes, provenance and redaction."""
