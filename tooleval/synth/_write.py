"""Writing a synthetic dataset folder, streaming (see :mod:`tooleval.synth`)."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tooleval.synth._bfcl import BFCL_TRIALS, bfcl_case, bfcl_tools, bfcl_trace
from tooleval.synth._tau import TAU_TRIALS, TauSource

__all__ = ["PROFILES", "SynthResult", "write_synth"]

PROFILES = ("bfcl", "tau")

BUNDLED_TAU = Path(__file__).resolve().parents[2] / "datasets" / "tau-bench-airline"


@dataclass(frozen=True)
class SynthResult:
    """What :func:`write_synth` wrote."""

    path: Path
    rows: int
    cases: int
    traces_bytes: int


def _dump(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_synth(
    rows: int, seed: int, profile: Literal["bfcl", "tau"], out: str | Path, *, source: str | Path | None = None
) -> SynthResult:
    """Write a synthetic dataset of exactly ``rows`` (case, trial) rows.

    Row ``r`` is trial ``r mod T`` of case ``r // T`` (``T`` = 7 for bfcl, 4 for tau), so the last case may have
    fewer trials. The same ``(rows, seed, profile)`` always writes the same bytes; and the first ``n`` cases of a
    corpus are the same whatever ``rows`` is (a larger corpus only appends cases).

    Args:
        rows: Number of rows (>= 1).
        seed: Random seed.
        profile: ``"bfcl"`` or ``"tau"``.
        out: Dataset folder to write (created; an existing ``cases.jsonl``/``traces.jsonl`` is overwritten).
        source: For ``tau``, the dataset to resample (default: the bundled tau-bench airline dataset).

    Returns:
        A :class:`SynthResult`.

    Raises:
        ValueError: ``rows < 1`` or an unknown profile.
    """
    if rows < 1:
        raise ValueError("rows must be >= 1")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    trials = BFCL_TRIALS if profile == "bfcl" else TAU_TRIALS
    n_cases = -(-rows // trials)
    manifest = {"name": f"synth-{profile}", "revision": f"synth-{profile}-{rows}-s{seed}", "schema_version": 1,
                "description": f"tooleval synth --profile {profile} --rows {rows} --seed {seed}",
                "license": "Apache-2.0" if profile == "bfcl" else "MIT", "source": "tooleval synth"}
    if profile == "bfcl":
        tools = bfcl_tools()
        by_name = {tool["name"]: tool for tool in tools}
        (out / "tools.json").write_text(json.dumps(tools, indent=1), encoding="utf-8")
    else:
        tau = TauSource(Path(source) if source else BUNDLED_TAU)
        for name in ("tools.json", "gate.toml", "LICENSE"):
            if (tau.dataset / name).is_file():
                shutil.copyfile(tau.dataset / name, out / name)
    (out / "dataset.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    with (out / "cases.jsonl").open("w", encoding="utf-8") as cases, \
            (out / "traces.jsonl").open("w", encoding="utf-8") as traces:
        for index in range(n_cases):
            rng = random.Random(f"{seed}:{profile}:{index}")  # per case: a prefix of a corpus is the same corpus
            case_id = f"{profile}-{index:07d}"
            case = bfcl_case(rng, case_id, tools) if profile == "bfcl" else tau.case(index, case_id)
            cases.write(_dump(case))
            for trial in range(min(trials, rows - index * trials)):
                trace = (bfcl_trace(rng, case, trial, tools, by_name) if profile == "bfcl"
                         else tau.trace(rng, index, case_id, trial))
                traces.write(_dump(trace))
    return SynthResult(path=out, rows=rows, cases=n_cases, traces_bytes=(out / "traces.jsonl").stat().st_size)
