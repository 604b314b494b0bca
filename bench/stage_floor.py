"""Benchmark: the floor of a row path built of separate cached stages, with no tooleval logic at all, beside the
warm ragas loop on the same rows.

Each row's trace is JSON text that every stage boundary writes and the next stage reads (the generation stage file
holds the redacted trace, the capture stage file the envelope's messages, scoring reads them): this times exactly
that transport, per row, on one core —

1. generation: orjson-decode the trace line, orjson-encode it into the generation stage file (Parquet, zstd);
2. capture: read that file, orjson-decode each payload, sha256 of its sorted compact encoding (the digest),
   orjson-encode the messages into the envelope stage file;
3. scoring: read the envelope file and orjson-decode each row's messages —

and the loop a ragas user writes (ragas messages and ``ToolCallF1`` per row, warm: imported and run over the first
500 rows before the clock starts). Nothing here redacts, validates, matches or applies a rule: it bounds what any
row path with these stage files can reach on this machine.

Run from the repository root, on a ``tooleval synth`` folder (or any dataset with a plain ``traces.jsonl``):

    .venv/bin/python bench/stage_floor.py DATASET [ROWS]

Prints rows per second of the transport alone, of the warm ragas loop, and their ratio.
"""
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path.cwd()))


def transport(lines: list[bytes], folder: Path) -> float:
    """Seconds for the three stages' JSON and Parquet transport of ``lines``."""
    started = time.perf_counter()
    payloads = [orjson.dumps(orjson.loads(line)).decode() for line in lines]
    pq.write_table(pa.table({"payload_json": payloads}), folder / "generation.parquet", compression="zstd")
    del payloads
    messages, digests = [], []
    for text in pq.read_table(folder / "generation.parquet")["payload_json"].to_pylist():
        trace = orjson.loads(text)
        digests.append(hashlib.sha256(orjson.dumps(trace, option=orjson.OPT_SORT_KEYS)).hexdigest())
        messages.append(orjson.dumps(trace.get("messages")).decode())
    pq.write_table(pa.table({"messages_json": messages, "trace_digest": digests}), folder / "capture.parquet",
                   compression="zstd")
    del messages
    for text in pq.read_table(folder / "capture.parquet")["messages_json"].to_pylist():
        orjson.loads(text)
    return time.perf_counter() - started


def main() -> None:
    dataset = Path(sys.argv[1])
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    with (dataset / "traces.jsonl").open("rb") as handle:
        lines = [line for _, line in zip(range(rows), handle)]
    from tooleval.bench._peers import ragas_loop  # the benchmark's own ragas peer

    with tempfile.TemporaryDirectory() as folder:
        floor_s = min(transport(lines, Path(folder)) for _ in range(3))
    ragas_loop(dataset, min(500, len(lines)))  # warm-up, untimed
    started = time.perf_counter()
    ragas_loop(dataset, len(lines))
    ragas_s = time.perf_counter() - started
    floor_rate, ragas_rate = len(lines) / floor_s, len(lines) / ragas_s
    print(f"{len(lines)} rows: stage transport alone {floor_rate:,.0f} rows/s on one core "
          f"({1e6 * floor_s / len(lines):.0f} us/row); warm ragas loop {ragas_rate:,.0f} rows/s; "
          f"transport / ragas = {floor_rate / ragas_rate:.3f} (x2 cores: {2 * floor_rate / ragas_rate:.3f})")


if __name__ == "__main__":
    main()
