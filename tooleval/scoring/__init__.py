"""Scoring: call matching, the ragas column and building one row per (case, trial)."""
