"""tooleval's verdicts on generated BFCL result lines (:mod:`lines`), to compare with BFCL's checker's."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from import_helpers import score, write_lines
from tooleval.importers import import_bfcl


def row_passes(row: dict) -> bool:
    """A row passes when it was scored and its calls match under its case's match mode (``calls_match`` where
    the row has it, else ``exact_match``)."""
    if row.get("error_kind"):
        return False
    return bool(row["calls_match"] if "calls_match" in row else row["exact_match"])


def tooleval_verdicts(root: Path, lines: list[dict], work: Path) -> dict[int, bool]:
    """``{line key: passes}``: the lines written as BFCL result files (one model folder per line kind and
    occurrence, so that no file repeats a question), imported with the questions and scored. A multi-turn line
    passes when every turn passes."""
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
    report = import_bfcl(root, work / "out", results=[results])
    assert report.skipped_total == 0, report.skipped
    verdicts: dict[int, bool] = {}
    for dataset in report.datasets:
        category = dataset.name
        for traces in sorted((dataset / "traces").glob("*.jsonl.gz")):
            agent = traces.name.removesuffix(".jsonl.gz")
            for row in score(dataset, traces):
                conversation = row["case_id"].split("/turn-")[0]
                key = where[category, agent, conversation]
                verdicts[key] = verdicts.get(key, True) and row_passes(row)
    return verdicts
