"""Agents that answer cases: the replay agent (recorded traces) and the live OpenAI-compatible agent.

Each turns work items into generation records ``{case_id, trial, seed, payload_json, error}``. The live agent
answers tool calls with a :class:`ToolExecutor` and caches finished items in a :class:`GenerationStore`.
"""

from tooleval.agents._executor import UNKNOWN_TOOL, ToolExecutor, read_tool_results
from tooleval.agents._openai import (
    OpenAIAgentConfig,
    generation_digest,
    openai_generate,
    openai_tools,
    request_id_for,
)
from tooleval.agents._replay import ReplayAgentConfig, WorkItem, replay_generate, replay_lines
from tooleval.agents._store import GenerationStore, item_key

__all__ = [
    "GenerationStore",
    "OpenAIAgentConfig",
    "ReplayAgentConfig",
    "ToolExecutor",
    "UNKNOWN_TOOL",
    "WorkItem",
    "generation_digest",
    "item_key",
    "openai_generate",
    "openai_tools",
    "read_tool_results",
    "replay_generate",
    "replay_lines",
    "request_id_for",
]
