"""Tests of tooleval.bench: the benchmark."""
