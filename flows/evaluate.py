"""The nightly evaluation flow: generation -> trace capture -> scoring -> aggregation, on shards, with the
legacy scalar path and the drift check beside them.

Each stage is a separate cached task (``tasks/``); the flow plans the run (every file or usage error is raised
here, before anything is written), runs the stages shard by shard, then publishes the run's partitions and run
files together (:class:`tooleval.storage.Publication`: committed at once by the run's marker). On drift between the
legacy scalar and the row-level path the flow run ends ``Failed`` (its data is still the :class:`RunResult`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from prefect import flow

from flows._publish import STAGES, RunResult, publish_run, run_stage
from tasks import capture_shard, generate_shard, legacy_scalar, score_shard
from tooleval.agents import OpenAIAgentConfig
from tooleval.runs.plan import RunPlan, plan_run
from tooleval.rules import load_gate_config
from tooleval.runs.variability import outcome_from_spec
from tooleval.scoring.ragas_metric import ragas_version
from tooleval.storage.stages import StageRef, stage_dir
from tooleval.versions import scorer_version

__all__ = ["evaluate", "run_evaluate", "RunResult", "DEFAULT_DATASET", "STAGES"]

DEFAULT_DATASET = str(Path(__file__).resolve().parents[1] / "datasets" / "tau-bench-airline")


def _shards(plan: RunPlan, size: int) -> list[list]:
    return [plan.items[i : i + size] for i in range(0, len(plan.items), size)]


@flow(name="tooleval-evaluate", validate_parameters=True)
def evaluate(
    dataset: str = DEFAULT_DATASET,
    traces: str | None = None,
    out: str = "results",
    run_id: str | None = None,
    shard_size: int = 50,
    slices: list[str] | None = None,
    legacy_only: bool = False,
    redact_fields: list[str] | None = None,
    redaction: bool = True,
    agent: OpenAIAgentConfig | None = None,
    repeats: int = 1,
    tool_results: str | None = None,
    outcome: str = "gate",
    gate_config: str | None = None,
    new_redaction_key: bool = False,
) -> RunResult:
    """Evaluate a dataset's recorded (or generated) trajectories and publish envelopes, rows, the legacy scalar,
    a summary and the drift check.

    Args:
        dataset: Dataset folder (default: the bundled tau-bench airline dataset).
        traces: Recorded traces file for the replay agent; default: the dataset's own.
        out: Results folder (DESIGN.md "Output layout").
        run_id: Run id; default: a new one (UTC timestamp + random suffix).
        shard_size: Rows per shard task (tens to hundreds keep Prefect's per-task cost small: PREFECT.md).
        slices: Only cases of these slices (the migration switches the row-level writer on slice by slice).
        legacy_only: Publish only the trace envelopes and the legacy scalar (the old pipeline, before the
            row-level writer is switched on): no rows, no drift check.
        redact_fields: Field names redacted at capture (default: api_key, card_number, email, phone).
        redaction: ``False`` turns redaction off.
        agent: A live OpenAI-compatible agent; ``None`` replays recorded traces.
        repeats: Trials per case for a live agent (``--repeats K``).
        tool_results: JSON-lines ``{name, args, result}`` answering a live agent's tool calls (multi-step).
        outcome: Row outcome for pass@k / pass^k: ``gate`` | ``exact`` | ``f1>=X`` | ``recorded_reward``.
        gate_config: Gate config file (default: the dataset's gate.toml).
        new_redaction_key: Start a new redaction key although runs with another key exist under ``out``.

    Returns:
        A :class:`RunResult`; the flow run is ``Failed`` (with the result as its data) when drift was found.

    Raises:
        tooleval.errors.InputFileError: a file or usage error; nothing is written.
    """
    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    outcome_from_spec(outcome)  # a bad spec is a usage error, before anything runs
    if gate_config is not None:
        load_gate_config(gate_config)  # so is a bad gate config
    plan = plan_run(dataset, traces, out, run_id, slices=slices, redact_fields=redact_fields,
                    redaction=redaction, agent=agent, repeats=repeats, tool_results=tool_results,
                    new_redaction_key=new_redaction_key)
    code, ragas = scorer_version(), ragas_version()
    dirs = {name: str(stage_dir(plan.out, name)) for name in ("generation", "capture", "scoring")}
    states: dict[str, Counter] = {name: Counter() for name in STAGES}
    envelope_refs: list[StageRef] = []
    row_refs: list[StageRef] = []
    generation_refs: list[StageRef] = []
    for shard in _shards(plan, shard_size):
        generated = run_stage(generate_shard, states["generation"], plan.agent, shard, plan.dataset,
                              plan.redaction, plan.out, dirs["generation"], plan.executor,
                              retry_errors=plan.agent.kind != "replay")
        generation_refs.append(generated)
        captured = run_stage(capture_shard, states["trace-capture"], generated, plan.dataset.revision,
                              plan.dataset.tool_schema_version, code, dirs["capture"])
        envelope_refs.append(captured)
        if not legacy_only:
            row_refs.append(run_stage(score_shard, states["scoring"], captured, plan.dataset, plan.redaction,
                                       code, ragas, plan.out, dirs["scoring"]))
    legacy = run_stage(legacy_scalar, states["legacy-scalar"], [r.path for r in envelope_refs],
                        [r.digest for r in envelope_refs], plan.dataset, plan.redaction, code, ragas, plan.out)
    return publish_run(
        out=plan.out, run_id=plan.run_id, dataset=plan.dataset, redaction=plan.redaction, slices=plan.slices,
        errors=plan.errors, envelope_refs=envelope_refs, row_refs=row_refs, legacy=legacy, states=states,
        legacy_only=legacy_only, outcome=outcome, gate_config=gate_config, generation_refs=generation_refs,
        extra_summary={"agent": plan.agent.model_dump(mode="json"), "repeats": repeats},
    )


def run_evaluate(**parameters: Any) -> tuple[RunResult, bool]:
    """Call :func:`evaluate` and return ``(result, drift_failed)`` instead of raising on a drift failure.

    Raises:
        tooleval.errors.InputFileError: a file or usage error (re-raised from the flow).
    """
    state = evaluate(**parameters, return_state=True)
    data = state.result(raise_on_failure=False)
    if isinstance(data, RunResult):
        return data, state.is_failed()
    state.result()  # re-raises the flow's exception
    raise RuntimeError(f"evaluate returned {data!r}")
