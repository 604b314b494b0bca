"""Tests of tasks: the stage tasks' cache keys."""
