"""Runs: planning, aggregation, variability, the legacy scalar, drift, the gate, handoff and reading published runs."""
