"""Stage 1, generation: ask the agent for each (case, trial) of a shard and keep its raw response.

A live agent's responses are redacted here, as they arrive, before anything is written, so that no secret reaches a
disk: the stage file and the live agent's per-item store hold only redacted values. A replayed trace is already on
disk, in its traces file: its record names the line by its digest and holds nothing of it, and trace capture reads,
decodes and redacts the line (once). Cache key: the agent config (replay: the traces
file digest; live: base URL, model, temperature, max steps), the shard's work items (case id, case content digest,
trial, seed), the dataset, the tool results file, the redaction config (with the key's digest), the stage-store folder
and this task's source. The run id is not part of it, so a new run over the same inputs regenerates nothing. A live
agent also keeps every finished item in ``<out>/.tooleval/generations`` (keyed by case digest, agent digest, trial and
seed), so a run killed midway resumes with only the missing items.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson
from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE, CachePolicy
from prefect.utilities.hashing import hash_objects

from tooleval.agents import GenerationStore, ToolExecutor, WorkItem, openai_generate, read_tool_results
from tooleval.canonical import loads_text
from tooleval.dataset import load_dataset_trusted
from tooleval.errors import RowError
from tooleval.runs.plan import AgentConfig, DatasetRef, ExecutorRef
from tooleval.capture.redaction import RedactionConfig
from tasks._shared import cached_redactor
from tooleval.storage import local_state_dir
from tooleval.storage.stages import GENERATION_SCHEMA, StageRef, write_stage_table


def _executor(ref: ExecutorRef | None) -> ToolExecutor | None:
    if ref is None:
        return None
    return read_tool_results(ref.path)


def work_items_digest(items: Any) -> str:
    """sha256 (hex) of the work items' fields, every item's in order (:class:`tooleval.agents.WorkItem`: case id,
    case digest, trial, seed, trace digest).

    Prefect's ``INPUTS`` policy hashed the list through its JSON serializer, ~10 µs an item in a pool worker (a
    second of CPU per 100,000 rows); the fields' values encoded by orjson give the same cover for ~1 µs. A list
    holding anything but work items is hashed as Prefect hashes inputs.

    Raises:
        ValueError: a list that neither encoding can hash (as Prefect's ``INPUTS`` policy raises).
    """
    items = items.unquote() if hasattr(items, "unquote") else items
    if all(type(item) is WorkItem for item in items):
        return hashlib.sha256(orjson.dumps([item.__dict__ for item in items])).hexdigest()
    return hash_objects(list(items), raise_on_failure=True)


@dataclass
class _WorkItemsKey(CachePolicy):
    """The ``items`` input of a task in its cache key as :func:`work_items_digest` (the other inputs are left to
    the policies it is composed with)."""

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        return work_items_digest(inputs["items"])


@task(name="generation", cache_policy=INPUTS - "agent" - "dataset" - "items" + _WorkItemsKey() + TASK_SOURCE,
      persist_result=True)
def generate_shard(
    agent: AgentConfig,
    items: list[WorkItem],
    dataset: DatasetRef,
    redaction: RedactionConfig | None,
    out: str,
    stage_dir: str,
    executor: ExecutorRef | None = None,
    scope: str = "",
) -> StageRef:
    """Generate one shard.

    Args:
        agent: Agent configuration (replay or live); not hashed itself: ``scope`` carries what matters of it.
        items: The shard's work items (case digest, trial, seed and, for replay, the trace line's digest).
        dataset: The dataset (its cases are asked, and seed the redactor); not hashed: ``scope`` carries it.
        redaction: Redaction config; ``None`` keeps responses as they are.
        out: Results folder (redaction key, live generation store).
        stage_dir: Folder for the generation stage file.
        executor: Recorded tool results for a live multi-step tool loop.
        scope: :func:`tooleval.runs.shards.generation_scope` — the agent's config digest (live) and the
            dataset-wide inputs of this stage (tool schemas, the redactor's seeded values), so that a corpus that
            grows by a few cases keeps every other shard's key.

    Returns:
        Ref to a Parquet file of :data:`tooleval.storage.stages.GENERATION_SCHEMA` rows, in ``items`` order. A failed
        live generation is a record with ``error`` set and what was captured so far. A replayed item is a record
        with ``line_digest`` set and no payload: trace capture reads its line (:func:`tasks.capture.capture_shard`).
    """
    started = time.perf_counter()
    if agent.kind == "replay":
        # the recorded line is the response: trace capture reads, decodes and redacts it, so that nothing here
        # decodes it a first time; the line's digest makes capture's cache key follow its content
        records = ({"case_id": item.case_id, "trial": item.trial, "seed": item.seed, "payload_json": None,
                    "error": None, "line_digest": item.trace_digest or ""} for item in items)
        return write_stage_table(stage_dir, "generation", records, GENERATION_SCHEMA, started=started, arrow=True)
    loaded = load_dataset_trusted(dataset.path, dataset.content_digest)
    redactor = cached_redactor(out, redaction, dataset)

    def redact(record: dict) -> dict:
        if redactor is None or record["payload_json"] is None:
            return record
        trace = loads_text(record["payload_json"])
        try:
            return dict(record, payload_json=redactor.redact_trace_text(trace, loaded.cases.get(record["case_id"])))
        except (ValueError, RecursionError) as exc:  # what redaction cannot process costs its row, not the shard
            return dict(record, payload_json=None, error=str(RowError(
                "generation_error", record["case_id"], record["trial"],
                f"the response cannot be redacted: {type(exc).__name__}: {exc}")))

    store = GenerationStore(local_state_dir(out, "generations"))
    records = openai_generate(agent, items, loaded.cases, loaded.tools, executor=_executor(executor),
                              store=store, transform=redact)
    return write_stage_table(stage_dir, "generation", records, GENERATION_SCHEMA, started=started, arrow=True)
