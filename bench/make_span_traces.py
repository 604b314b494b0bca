"""Write an OTLP JSON-lines span file with a real producer, plus the references file of the cases it ran.

    python bench/make_span_traces.py openllmetry /tmp/spans/otlp.jsonl 1000
    python bench/make_span_traces.py openinference /tmp/spans/oi.jsonl 1000

The producer (OpenLLMetry or openinference-instrumentation-openai over the openai SDK, the OpenTelemetry SDK's
OTLP JSON file exporter) talks to the scripted chat server of the tests on 127.0.0.1 (tests/importers/
span_producers.py). Case 7's tool span records arguments the model never emitted (an adapter that rewrote them)
and case 11's first tool runs twice (an executor retry). The references go to ``<out>.refs.jsonl``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    style, out, count = sys.argv[1], Path(sys.argv[2]), int(float(sys.argv[3]))
    spec = importlib.util.spec_from_file_location("span_producers", ROOT / "tests" / "importers" / "span_producers.py")
    producers = importlib.util.module_from_spec(spec)
    sys.modules["span_producers"] = producers
    spec.loader.exec_module(producers)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    plan = producers.default_plan(count)
    producers.produce(style, out, plan)
    refs = Path(str(out) + ".refs.jsonl")
    refs.write_text("".join(json.dumps(r) + "\n" for r in producers.references(plan)), encoding="utf-8")
    sys.stdout.write(f"{out}: {count} traces ({out.stat().st_size:,} bytes); references {refs}\n")


if __name__ == "__main__":
    main()
