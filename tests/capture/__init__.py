"""Tests of tooleval.capture: trace capture, bounded inputs, redaction."""
