"""Tests of tooleval.runs: plans, shards, aggregation, drift, the gate's verdicts, publication, reports."""
