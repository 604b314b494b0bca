"""Tests of tooleval.cli: the commands as a user types them, in-process and as real processes."""
