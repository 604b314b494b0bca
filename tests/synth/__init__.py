"""Tests of tooleval.synth: the synthetic corpora."""
