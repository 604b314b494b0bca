"""Helpers for the importer tests: read what an importer wrote, and score it with the real scoring core."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

from tooleval.capture.envelope import build_envelope
from tooleval.capture.recorded import iter_trace_lines
from tooleval.dataset import find_traces_file, load_dataset
from tooleval.models import RecordedTrace
from tooleval.scoring.rows import score_envelopes

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def read_jsonl(path: Path) -> list[dict]:
    """Every line of a JSON-lines file (``.gz`` read as gzip)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_lines(path: Path, records: list) -> Path:
    """Write records as JSON lines (a ``str`` record is written as is: a broken line)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def score(dataset: Path, traces: Path | None = None) -> list[dict]:
    """Rows of a dataset's recorded traces, by the scoring stage's core (envelopes, then rows; no Prefect)."""
    loaded = load_dataset(dataset)
    traces = traces or find_traces_file(dataset)
    envelopes = [build_envelope(RecordedTrace.model_validate(line.data), loaded.revision, AT)
                 for line in iter_trace_lines(traces)]
    return score_envelopes(loaded.cases, envelopes, tools={tool.name: tool for tool in loaded.tools})
