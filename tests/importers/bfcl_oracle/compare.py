"""tooleval's verdicts on generated BFCL result lines (:mod:`lines`), to compare with BFCL's checker's: the verdict
of the default release gate of a real ``tooleval run`` over the imported lines, read from the published rows."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from typer.testing import CliRunner

from tests.support.importers import read_jsonl, write_lines
from tooleval.cli import app
from tooleval.importers import import_bfcl
from tooleval.rules import GateTally
from tooleval.runs.gate import gate_batches, gate_config_for


def _merge_traces(dataset: Path, target: Path) -> dict[int, str]:
    """One recorded-traces file of every agent's traces of ``dataset`` (one agent per line kind and occurrence),
    agent ``i``'s lines as trial ``i`` (a replay run reads one traces file); ``{trial: agent}``."""
    agents: dict[int, str] = {}
    with gzip.open(target, "wt", encoding="utf-8") as out:
        for trial, traces in enumerate(sorted((dataset / "traces").glob("*.jsonl.gz"))):
            agents[trial] = traces.name.removesuffix(".jsonl.gz")
            for line in read_jsonl(traces):
                out.write(json.dumps({**line, "trial": trial}) + "\n")
    return agents


def gate_verdicts(dataset: Path, traces: Path, out: Path, run_id: str) -> dict[tuple[str, int], bool]:
    """``{(case id, trial): passes}`` from ``tooleval run --dataset DATASET --traces TRACES`` with every default:
    each published row judged by the gate the run used, the default one (an imported dataset has no gate.toml:
    under the row outcome ``match`` a row passes when its calls match under its case's match mode and no blocking
    rule fires). The run's own gate counts (``summary.json``) must agree with the rows judged here."""
    result = CliRunner().invoke(app, ["run", "--dataset", str(dataset), "--traces", str(traces), "--out", str(out),
                                      "--run-id", run_id], env={"COLUMNS": "200"})
    # each agent (trial) answers only the questions its line kind applies to: the others are unscored for it,
    # (case, trial) by (case, trial); the only rows with errors are the turns a result never reached
    errors = json.loads((out / "runs" / run_id / "errors.json").read_text()) if result.exit_code == 1 else []
    assert result.exit_code in (0, 1), (result.output, result.exception)
    missing = [e for e in errors if e["kind"] == "missing_trace"]
    assert all(e["trial"] is not None for e in missing), missing[:3]
    assert all("ended early" in e["message"] for e in errors if e["kind"] != "missing_trace"), errors[:3]
    summary = json.loads((out / "runs" / run_id / "summary.json").read_text())
    assert summary["row_outcome"]["gate"] == "match" and summary["row_outcome"]["config"] is None, summary["row_outcome"]
    tally = GateTally(gate_config_for(dataset), today=datetime.now(timezone.utc).date())
    parts = sorted((out / "rows" / f"dataset_revision={summary['dataset_revision']}" / f"run_id={run_id}").glob("*.parquet"))
    verdicts = {}
    for batch in gate_batches(parts):
        for row in batch:
            verdicts[str(row["case_id"]), int(row["trial"])] = not tally.add(row).rules
    assert summary["rows"] == len(verdicts)
    assert summary["blocking_rows"] == sum(not v for v in verdicts.values()) + len(missing), summary["gate"]["reasons"]
    return verdicts


def tooleval_verdicts(root: Path, lines: list[dict], work: Path) -> dict[int, bool]:
    """``{line key: passes}``: the lines written as BFCL result files (one model folder per line kind and
    occurrence, so that no file repeats a question), imported with the questions, and run by ``tooleval run``
    (one run per category: :func:`gate_verdicts`). A multi-turn line passes when every turn's row passes."""
    where: dict[tuple[str, str, str], int] = {}
    by_file: dict[tuple[str, str], list[dict]] = defaultdict(list)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for line in lines:
        n = seen[line["id"], line["kind"]]
        seen[line["id"], line["kind"]] += 1
        agent = f"{line['kind']}-{n}"
        by_file[line["category"], agent].append({"id": line["id"], "result": line["result"]})
        where[line["category"], agent, line["id"]] = line["key"]
    results = work / "result"
    for (category, agent), records in by_file.items():
        folder = results / agent
        folder.mkdir(parents=True, exist_ok=True)
        write_lines(folder / f"BFCL_v4_{category}_result.json", records)
    report = import_bfcl(root, work / "imported", results=[results])
    assert report.skipped_total == 0, report.skipped
    verdicts: dict[int, bool] = {}
    for dataset in report.datasets:
        category = dataset.name
        if not (dataset / "traces").is_dir():
            continue
        traces = work / f"{category}.jsonl.gz"
        agents = _merge_traces(dataset, traces)
        for (case_id, trial), passes in gate_verdicts(dataset, traces, work / "results", f"oracle-{category}").items():
            key = where[category, agents[trial], case_id.split("/turn-")[0]]
            verdicts[key] = verdicts.get(key, True) and passes
    return verdicts
