"""Agents that answer cases: the replay agent (recorded traces). Each turns work items into raw responses."""

from tooleval.agents._replay import ReplayAgentConfig, WorkItem, replay_generate

__all__ = ["ReplayAgentConfig", "WorkItem", "replay_generate"]
