"""Stage 1, generation: ask the agent for each (case, trial) of a shard and keep its raw response.

Responses are redacted here, as they arrive, before anything is written (issue 4): the stage file already holds
only redacted values. Cache key: the agent config (for the replay agent, the traces file digest), the shard's
work items (case id, case content digest, trial, seed), the dataset, the redaction config (with the key's
digest), the stage-store folder and this task's source. The run id is not part of it, so a new run over the same
inputs regenerates nothing.
"""

from __future__ import annotations

import json

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.agents import ReplayAgentConfig, WorkItem, replay_generate
from tooleval.dataset import load_dataset
from tooleval.plan import DatasetRef
from tooleval.redaction import RedactionConfig, build_redactor
from tooleval.stages import GENERATION_SCHEMA, StageRef, write_stage_table


@task(name="generation", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def generate_shard(
    agent: ReplayAgentConfig,
    items: list[WorkItem],
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    out: str,
    stage_dir: str,
) -> StageRef:
    """Generate one shard.

    Args:
        agent: Agent configuration.
        items: The shard's work items (tens to hundreds).
        dataset: The dataset (its cases seed the redactor).
        redaction: Redaction config; ``None`` keeps responses as they are.
        out: Results folder (where the redaction key lives).
        stage_dir: Folder for the generation stage file.

    Returns:
        Ref to a Parquet file of :data:`tooleval.stages.GENERATION_SCHEMA` rows, in ``items`` order.
    """
    records = replay_generate(agent, items)
    redactor = build_redactor(out, redaction, load_dataset(dataset.path).cases) if redaction else None
    if redactor is not None:
        for record in records:
            if record["payload_json"] is not None:
                record["payload_json"] = json.dumps(redactor.redact_trace(json.loads(record["payload_json"])),
                                                    ensure_ascii=False)
    return write_stage_table(stage_dir, "generation", records, GENERATION_SCHEMA)
