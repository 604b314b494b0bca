"""Every command that reads a published run, on object storage and on a folder: the bundled dataset is run once into
``s3://`` (moto's S3 server on 127.0.0.1, reached through s3fs exactly as a real bucket is), the bucket's results are
copied into a folder, and each command runs on both. The two must print the same (once the location's own text is
replaced) and exit with the same code, failures included; what they publish must read back the same.

Streaming: while the commands run, s3fs may not download an object to a local file, and a Parquet object may only be
read through a file handle (ranged GETs, as pyarrow and DuckDB read one file, or its columns, at a time), never
fetched whole as bytes; nothing of the results lands in this machine's cache.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.storage.s3_server import moto_s3
from tests.support.runs import published_rows
from tooleval.cli import app

pytestmark = pytest.mark.slow  # moto's S3 server, and the Prefect test harness for run, rescore and legacy

runner = CliRunner()
NO_WIDTH = {"COLUMNS": None}
"""Output that is not a terminal is never wrapped (4,096 columns) unless ``COLUMNS`` is set: a folder's path and a
URL of other lengths then wrap the same."""
AWS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


class Downloads:
    """What the commands asked s3fs for: whole objects fetched as bytes (``cat_file``) and downloads to a local file
    (``get_file``, refused)."""

    def __init__(self) -> None:
        self.whole: list[str] = []

    def install(self, monkeypatch) -> None:
        from s3fs import S3FileSystem

        original = S3FileSystem._cat_file
        seen = self.whole

        async def cat_file(fs, path, *args, **kwargs):
            seen.append(path)
            return await original(fs, path, *args, **kwargs)

        async def get_file(fs, rpath, lpath, *args, **kwargs):
            raise AssertionError(f"a command downloaded {rpath} to {lpath}")

        monkeypatch.setattr(S3FileSystem, "_cat_file", cat_file)
        monkeypatch.setattr(S3FileSystem, "_get_file", get_file)


def _normal(text: str, location: str) -> str:
    """The output with the results' location written ``<out>``; the viewer's hint, which ``run`` and ``rescore``
    print for a folder only (the viewer reads a local folder), is left out; a stage's ``Cached`` reads
    ``Completed``: the second rescore of a pair finds the first one's aggregation in Prefect's cache, which is keyed
    by the rows' content, not by where they are stored."""
    text = text.replace(location, "<out>").replace("│ Cached    ", "│ Completed ")
    return "\n".join(line for line in text.splitlines() if not line.startswith("view:"))


def _both(url: str, folder: Path, args: list[str], *, to: Path | None = None) -> tuple[int, str]:
    """Run ``tooleval ARGS --out URL``, then ``--out FOLDER``; assert the same exit code and output; return them.
    ``to``: a file the command writes (``export otel --to``): one of its own per location, named ``<to>`` in the
    compared output, and their contents compared too."""
    outputs = []
    for location in (url, str(folder)):
        extra = [] if to is None else ["--to", str(to.with_suffix(f".{'s3' if location == url else 'dir'}.jsonl"))]
        result = runner.invoke(app, [*args, "--out", location, *extra], env=NO_WIDTH)
        text = result.output
        if to is not None:
            text = text.replace(extra[1], "<to>")
        assert "Traceback" not in text, text
        outputs.append((result.exit_code, _normal(text, location)))
    if outputs[0] != outputs[1]:
        import difflib

        diff = difflib.unified_diff(outputs[1][1].splitlines(), outputs[0][1].splitlines(), "folder", "s3", lineterm="")
        pytest.fail(f"{args}: exit {outputs[0][0]} on s3, {outputs[1][0]} on a folder\n" + "\n".join(diff))
    if to is not None:  # written whole or not at all, the same either way
        written = [to.with_suffix(suffix) for suffix in (".s3.jsonl", ".dir.jsonl")]
        assert [path.read_bytes() if path.exists() else None for path in written] == [
            written[1].read_bytes() if written[1].exists() else None] * 2
    return outputs[0]


def _document(location: str | Path, relpath: str) -> bytes:
    from tooleval.storage import read_document

    data = read_document(location, relpath)
    assert data is not None, f"{relpath} is not published under {location}"
    return data


def test_every_command_reads_a_bucket_as_it_reads_a_folder(tmp_path, monkeypatch, prefect_harness):
    import fsspec
    from s3fs import S3FileSystem

    with moto_s3() as endpoint:
        for name, value in {**AWS, "AWS_ENDPOINT_URL": endpoint, "TOOLEVAL_REDACTION_KEY": "on-object-storage",
                            "XDG_CACHE_HOME": str(tmp_path / "cache")}.items():
            monkeypatch.setenv(name, value)
        S3FileSystem.clear_instance_cache()  # cached instances keep the endpoint they were made with
        bucket = f"results-{uuid.uuid4().hex[:12]}"
        fs = fsspec.filesystem("s3")
        fs.mkdir(bucket)
        url = f"s3://{bucket}/nightly"
        done = runner.invoke(app, ["run", "--out", url, "--run-id", "base"], env=NO_WIDTH)
        assert done.exit_code == 0, done.output
        folder = tmp_path / "results"
        fs.get(f"{bucket}/nightly", str(folder), recursive=True)  # the bucket's results, marker and all
        assert published_rows(folder, "base") == published_rows(url, "base")
        case = next(row["case_id"] for row in published_rows(folder, "base") if row["gate_verdict"] == "fail")

        downloads = Downloads()
        downloads.install(monkeypatch)
        # what each command family prints and exits with, the failures first (nothing published yet)
        for args in (["gate", "--run-id", "nope"], ["drift", "--run-id", "nope"], ["report", "--run-id", "nope"],
                     ["legacy", "--run-id", "nope"], ["handoff", "--run-id", "base", "--case", "no such case"],
                     ["rescore", "--run-id", "base", "--case", "no such case"], ["compare", "base", "nope"],
                     ["gate", "--run-id", "base", "--dataset", str(tmp_path / "no-dataset")]):
            code, text = _both(url, folder, args)
            assert code == 2 and "error:" in text, (args, text)
        assert _both(url, folder, ["export", "otel", "--run-id", "nope"], to=tmp_path / "none")[0] == 2

        code, text = _both(url, folder, ["gate", "--run-id", "base"])
        assert code == 1 and "written: <out>/runs/base/junit.xml" in text
        assert _both(url, folder, ["gate", "--run-id", "base", "--format", "json"])[0] == 1
        for relpath in ("runs/base/junit.xml", "runs/base/gate.json"):
            assert _document(url, relpath) == _document(folder, relpath)
        code, text = _both(url, folder, ["drift", "--run-id", "base"])
        assert code == 0 and "written: <out>/runs/base/drift.json" in text
        code, text = _both(url, folder, ["report", "--run-id", "base"])
        assert code == 0 and "written: <out>/runs/base/report.html" in text
        assert _document(url, "runs/base/report.html") == _document(folder, "runs/base/report.html")
        code, text = _both(url, folder, ["legacy", "--run-id", "base"])
        assert code == 0 and "legacy tool_call_f1 = " in text
        code, text = _both(url, folder, ["handoff", "--run-id", "base", "--case", case, "--trial", "0"])
        assert code == 0 and text.startswith("written: <out>/runs/base/handoff/")
        handoff = re.search(r"<out>/(\S+)", text).group(1) + "/handoff.json"
        handed = [json.loads(_document(location, handoff)) for location in (url, folder)]
        assert handed[0] == json.loads(json.dumps(handed[1]).replace(str(folder), url))  # its rescore command
        code, text = _both(url, folder, ["rescore", "--run-id", "base", "--to-run-id", "head"])
        assert code == 0 and "Run head" in text
        assert published_rows(url, "head") == published_rows(folder, "head")
        code, text = _both(url, folder, ["compare", "base", "head"])
        assert code == 0 and "compare head (head) with base (base): 200 paired rows" in text
        assert _both(url, folder, ["compare", "base", "head", "--json", "--fail-on", "f1:0.02"])[0] == 0
        code, text = _both(url, folder, ["export", "otel", "--run-id", "base"], to=tmp_path / "verdicts")
        assert code == 0 and "wrote 200 gen_ai.evaluation.result events to <to>" in text

        assert not any(path.endswith(".parquet") for path in downloads.whole), downloads.whole
        assert not (tmp_path / "cache" / "tooleval" / "inputs").exists()  # no copy of the results on this machine
        S3FileSystem.clear_instance_cache()
