"""Tests of tooleval.agents: the replay and live agents, the tool executor, the generation store."""
