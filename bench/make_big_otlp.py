"""Grow a produced OTLP JSON-lines file to a target size for the memory benchmark of ``tooleval import otlp``.

    python bench/make_span_traces.py openllmetry /tmp/spans/seed.jsonl 100
    python bench/make_big_otlp.py /tmp/spans/seed.jsonl /tmp/spans/big.jsonl 1e9
    /usr/bin/time -v tooleval import otlp /tmp/spans/big.jsonl --out /tmp/spans/big-ds \\
        --references /tmp/spans/big.jsonl.refs.jsonl

Copy k of the seed gets new trace ids (the first 8 hex digits replaced by k) and case ids ``case-<i>`` ->
``case-<i>`` with trial k (``tooleval.trial``): every copy is a new trial of the same cases, so the references
stay the seed's. Copies are interleaved batch by batch, as a collector flushes concurrent traces, so each trace's
spans end up far apart in the file and the importer must gather them across batches.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def _retag(request: dict, copy: int) -> dict:
    for resource_spans in request["resourceSpans"]:
        for scope in resource_spans["scopeSpans"]:
            for span in scope["spans"]:
                span["traceId"] = f"{copy:08x}" + span["traceId"][8:]
                if not span.get("parentSpanId"):
                    span.setdefault("attributes", []).append({"key": "tooleval.trial",
                                                              "value": {"intValue": str(copy)}})
    return request


def main() -> None:
    seed, out, target = Path(sys.argv[1]), Path(sys.argv[2]), int(float(sys.argv[3]))
    lines = [json.loads(line) for line in seed.read_text(encoding="utf-8").splitlines() if line.strip()]
    written, copy = 0, 0
    with open(out, "w", encoding="utf-8") as handle:
        while written < target:
            # four copies interleaved line by line: a trace's batches are separated by other traces' batches
            group = range(copy, copy + 4)
            for line in lines:
                for k in group:
                    text = json.dumps(_retag(json.loads(json.dumps(line)), k)) + "\n"
                    handle.write(text)
                    written += len(text.encode("utf-8"))
            copy += 4
    shutil.copyfile(str(seed) + ".refs.jsonl", str(out) + ".refs.jsonl")
    sys.stdout.write(f"{out}: {written:,} bytes, {copy} copies of {seed.name}\n")


if __name__ == "__main__":
    main()
