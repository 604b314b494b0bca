"""Stage 1, generation: ask the agent for each (case, trial) of a shard and keep its raw response.

Cache key: the agent config (for the replay agent, the traces file digest), the shard's work items (case id,
case content digest, trial, seed), the stage-store folder and this task's source. The run id is not part of it,
so a new run over the same inputs regenerates nothing.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.agents import ReplayAgentConfig, WorkItem, replay_generate
from tooleval.stages import GENERATION_SCHEMA, StageRef, write_stage_table


@task(name="generation", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def generate_shard(agent: ReplayAgentConfig, items: list[WorkItem], stage_dir: str) -> StageRef:
    """Generate one shard.

    Args:
        agent: Agent configuration.
        items: The shard's work items (tens to hundreds).
        stage_dir: Folder for the generation stage file.

    Returns:
        Ref to a Parquet file of :data:`tooleval.stages.GENERATION_SCHEMA` rows, in ``items`` order.
    """
    records = replay_generate(agent, items)
    return write_stage_table(stage_dir, "generation", records, GENERATION_SCHEMA)
