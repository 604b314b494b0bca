"""Grow a real MLflow SQLite store to many traces, for measuring ``tooleval import mlflow`` on a large store.

    python bench/make_big_mlflow_store.py SMALL.db BIG.db COPIES

Every trace of SMALL.db (one MLflow wrote: tests/importers/mlflow_producer.py) is copied COPIES times into BIG.db
with fresh OpenTelemetry trace ids (MLflow's ``tr-`` id follows): the spans' ``content`` JSON, their rows, the
trace's tags, metadata and assessments. Span ids are kept (they are unique within a trace), so each copy is a new
trial of the same case, as an agent run again would be.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import sys


def grow(small: str, big: str, copies: int) -> int:
    shutil.copy(small, big)
    db = sqlite3.connect(big)
    traces = [row[0] for row in db.execute("SELECT request_id FROM trace_info")]
    tables = {name: [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
              for name in ("trace_info", "trace_tags", "trace_request_metadata", "assessments", "spans")}
    key = {"trace_info": "request_id", "trace_tags": "request_id", "trace_request_metadata": "request_id",
           "assessments": "trace_id", "spans": "trace_id"}
    written = 0
    for copy in range(copies):
        for trace_id in traces:
            hex_id = os.urandom(16).hex()
            new_id = "tr-" + hex_id
            for table, columns in tables.items():
                # a generated column (spans.duration_ns) is computed by SQLite, not inserted
                columns = [c for c in columns if c != "duration_ns"]
                rows = db.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {key[table]} = ?", (trace_id,))
                out = []
                for row in rows:
                    record = dict(zip(columns, row))
                    record[key[table]] = new_id
                    if table == "assessments":
                        record["assessment_id"] = f"a-{os.urandom(16).hex()}"
                    if table == "spans":
                        content = json.loads(record["content"])
                        content["trace_id"] = base64.b64encode(bytes.fromhex(hex_id)).decode()
                        content["attributes"]["mlflow.traceRequestId"] = json.dumps(new_id)
                        record["content"] = json.dumps(content)
                    out.append(tuple(record[c] for c in columns))
                db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                               out)
            written += 1
        db.commit()
    db.close()
    return written


if __name__ == "__main__":
    print(f"{grow(sys.argv[1], sys.argv[2], int(sys.argv[3]))} traces added")
