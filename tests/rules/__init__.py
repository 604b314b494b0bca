"""Tests of tooleval.rules: argument rules, match modes, policies, the gate."""
