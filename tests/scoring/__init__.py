"""Tests of tooleval.scoring: rows, the ragas column, name-only calls, the handed scoring cases."""
