"""Tests of tooleval.importers, each on a real sample of its format."""
