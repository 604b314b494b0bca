"""What a run is: one frozen, validated :class:`RunSpec`, built once by whoever starts the run — the command line,
the Python API, a Prefect deployment — and taken as it is by the plan, the flow and the publication.

A run's options used to travel as a dozen keyword arguments through six signatures, each re-checking some of
them; a spec is checked once, when it is made, and adding an option means adding one field here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tooleval.agents import OpenAIAgentConfig

__all__ = ["RunSpec", "DEFAULT_DATASET", "spec_error"]

DEFAULT_DATASET = str(Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline")
"""The bundled tau-bench airline dataset (50 tasks x 4 recorded gpt-4o runs): what a run evaluates by default."""


class RunSpec(BaseModel):
    """The options of one evaluation run.

    Paths may be given as :class:`pathlib.Path` or text (a folder or an fsspec URL such as ``s3://bucket/x``);
    they are kept as text. Checks made here: ranges (``shard_size``, ``workers``, ``repeats`` >= 1) and the
    ``outcome`` spec; files are checked by the plan (:func:`tooleval.runs.plan.plan_run`), which reads them.

    Raises:
        pydantic.ValidationError: an option out of its range or an unknown option name; its first error's
            message is what the command line prints (:func:`spec_error`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str = DEFAULT_DATASET
    """Dataset folder or URL."""
    traces: str | None = None
    """Recorded traces for the replay agent (a file, a URL, or the name of a file in the dataset's ``traces/``
    folder); ``None``: the dataset's own."""
    out: str = "results"
    """Results folder or URL."""
    run_id: str | None = None
    """Run id; ``None``: a new one (UTC timestamp and a random suffix)."""
    shard_size: int | None = Field(default=None, ge=1)
    """Rows per shard; ``None``: :func:`tooleval.runs.shards.default_shard_size` of the rows and workers."""
    workers: int | None = Field(default=None, ge=1)
    """Parallel shard workers; ``None``: the machine's cores."""
    dask_address: str | None = None
    """``tcp://HOST:PORT`` of an existing Dask scheduler: the shards run on its workers."""
    slices: list[str] | None = None
    """Evaluate only the cases of these slices."""
    legacy_only: bool = False
    """Publish only the trace envelopes and the legacy scalar (no rows, no drift check)."""
    legacy_pass: bool = True
    """``False`` skips the legacy scalar path and the drift check (the benchmark's row path alone)."""
    agent: OpenAIAgentConfig | None = None
    """A live OpenAI-compatible agent; ``None`` replays the recorded traces."""
    repeats: int = Field(default=1, ge=1)
    """Trials per case for a live agent (trial ``t`` is sent with seed ``t``)."""
    tool_results: str | None = None
    """JSON lines ``{name, args, result}`` answering a live agent's tool calls (multi-step)."""
    outcome: str = "gate"
    """Row outcome for pass@k / pass^k: ``gate`` | ``exact`` | ``f1>=X`` | ``recorded_reward``."""
    gate_config: str | None = None
    """Gate config file; ``None``: the dataset's ``gate.toml``, if any."""
    redaction: bool = True
    """``False`` keeps raw values."""
    redact_fields: list[str] | None = None
    """Field names redacted besides the defaults (api_key, card_number, email, phone)."""
    redact_paths: list[str] | None = None
    """Dotted argument or result paths redacted as well."""
    new_redaction_key: bool = False
    """Start a new redaction key although runs with another key exist under ``out``."""
    progress: bool = False
    """Show live progress on stderr."""

    @field_validator("dataset", "traces", "out", "tool_results", "gate_config", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, Path) else value

    @field_validator("outcome")
    @classmethod
    def _outcome(cls, value: str) -> str:
        from tooleval.runs.variability import outcome_from_spec

        outcome_from_spec(value)  # raises ValueError naming the accepted forms
        return value


def spec_error(error: ValidationError) -> str:
    """The message of a :class:`RunSpec`'s first validation error, as a user reads it: the text a validator
    raised (``unknown --outcome …``), or pydantic's own for a range (``shard_size: Input should be greater than
    or equal to 1``)."""
    first = error.errors()[0]
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, Exception):
        return str(raised)
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else first["msg"]
