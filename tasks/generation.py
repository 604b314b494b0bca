"""Stage 1, generation: ask the agent for each (case, trial) of a shard and keep its raw response.

Responses are redacted here, as they arrive, before anything is written (issue 4): the stage file and the live
agent's per-item store hold only redacted values. Cache key: the agent config (replay: the traces file digest;
live: base URL, model, temperature, max steps), the shard's work items (case id, case content digest, trial,
seed), the dataset, the tool results file, the redaction config (with the key's digest), the stage-store folder
and this task's source. The run id is not part of it, so a new run over the same inputs regenerates nothing.
A live agent also keeps every finished item in ``<out>/.tooleval/generations`` (keyed by case digest, agent
digest, trial and seed), so a run killed midway resumes with only the missing items.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tooleval.agents import (GenerationStore, ToolExecutor, WorkItem, openai_generate, read_tool_results,
                             replay_generate)
from tooleval.dataset import load_dataset_cached
from tooleval.runs.plan import AgentConfig, DatasetRef, ExecutorRef
from tooleval.capture.redaction import RedactionConfig, build_redactor
from tooleval.storage.stages import GENERATION_SCHEMA, StageRef, write_stage_table


def _executor(ref: ExecutorRef | None) -> ToolExecutor | None:
    if ref is None:
        return None
    return read_tool_results(ref.path)


@task(name="generation", cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def generate_shard(
    agent: AgentConfig,
    items: list[WorkItem],
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    out: str,
    stage_dir: str,
    executor: ExecutorRef | None = None,
) -> StageRef:
    """Generate one shard.

    Args:
        agent: Agent configuration (replay or live).
        items: The shard's work items (tens to hundreds).
        dataset: The dataset (its cases are asked, and seed the redactor).
        redaction: Redaction config; ``None`` keeps responses as they are.
        out: Results folder (redaction key, live generation store).
        stage_dir: Folder for the generation stage file.
        executor: Recorded tool results for a live multi-step tool loop.

    Returns:
        Ref to a Parquet file of :data:`tooleval.storage.stages.GENERATION_SCHEMA` rows, in ``items`` order. A failed
        live generation is a record with ``error`` set and what was captured so far.
    """
    loaded = load_dataset_cached(dataset.path)
    redactor = build_redactor(out, redaction, loaded.cases) if redaction else None

    def redact(record: dict) -> dict:
        if redactor is None or record["payload_json"] is None:
            return record
        trace = redactor.redact_trace(json.loads(record["payload_json"]), loaded.cases.get(record["case_id"]))
        return dict(record, payload_json=json.dumps(trace, ensure_ascii=False))

    if agent.kind == "replay":
        records = [redact(record) for record in replay_generate(agent, items)]
    else:
        store = GenerationStore(Path(out) / ".tooleval" / "generations")
        records = openai_generate(agent, items, loaded.cases, loaded.tools, executor=_executor(executor),
                                  store=store, transform=redact)
    return write_stage_table(stage_dir, "generation", records, GENERATION_SCHEMA)
