"""Every command that reads a published run, on object storage and on a folder: the bundled dataset is run once into
``s3://`` (moto's S3 server on 127.0.0.1, reached through s3fs exactly as a real bucket is), the bucket's results are
copied into a folder, and each command runs on both. The two must print the same (once the location's own text is
replaced) and exit with the same code, failures included; what they publish must read back the same.

Streaming: while the commands run, s3fs may not download an object to a local file, and a Parquet object may only be
read through a file handle (ranged GETs, as pyarrow and DuckDB read one file, or its columns, at a time), never
fetched whole as bytes; nothing of the results lands in this machine's cache. The viewer's pages (``tooleval view``,
served to Starlette's test client) are the same on both, and read the bucket under the same rules.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from urllib.parse import urlencode

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
    """The output with the results' location written ``<out>``; a stage's ``Cached`` reads ``Completed``: the
    second rescore of a pair finds the first one's aggregation in Prefect's cache, which is keyed by the rows'
    content, not by where they are stored."""
    return text.replace(location, "<out>").replace("│ Cached    ", "│ Completed ")


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


_MOMENT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
"""A date and time as the viewer shows one: the runs published separately on each side (``head``, each rescored on
its own) were completed at other moments."""


def _pages(location: str | Path, paths: list[str], monkeypatch) -> list[tuple[int, str]]:
    """``(status, body)`` of each viewer page of ``paths`` over ``location``, served as ``tooleval view --out
    LOCATION`` serves them (the command is run, with the server handed to Starlette's test client instead of
    uvicorn); the location's text is written ``<out>`` and dates ``<moment>``."""
    import tooleval.view
    from starlette.testclient import TestClient

    served = []
    monkeypatch.setattr(tooleval.view, "serve", lambda out, host, port: served.append(out), raising=False)
    result = runner.invoke(app, ["view", "--out", str(location)], env=NO_WIDTH)
    assert result.exit_code == 0 and served, result.output
    assert isinstance(served[0], str) == isinstance(location, str)  # a URL is served as one, never a local path
    client = TestClient(tooleval.view.create_app(served[0]))
    pages = []
    for path in paths:
        answer = client.get(path)
        pages.append((answer.status_code, _MOMENT.sub("<moment>", answer.text.replace(str(served[0]), "<out>"))))
    return pages


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
        # "latest" where there is no run: refused alike
        (tmp_path / "empty").mkdir()
        for args in (["drift", "--run-id", "latest"], ["gate", "--run-id", "latest"]):
            code, text = _both(f"s3://{bucket}/empty", tmp_path / "empty", args)
            assert code == 2 and "no run with rows to take as 'latest'" in text, (args, text)
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
        # latest: the newest run with rows, from the bucket's run catalog as from the folder's summaries
        code, text = _both(url, folder, ["drift", "--run-id", "latest"])
        assert code == 0 and "written: <out>/runs/head/drift.json" in text
        code, text = _both(url, folder, ["gate", "--run-id", "latest"])
        assert code in (0, 1) and "written: <out>/runs/head/junit.xml" in text

        # the viewer: every page read through the commit markers, the same on the bucket as on the folder
        row = f"/runs/base/row?{urlencode({'case': case, 'trial': 0})}"
        paths = ["/", "/runs/base", "/runs/head", "/runs/base?verdict=fail&sort=f1&order=desc&size=25",
                 f"/runs/base?q={case}", "/runs/base?page=3&size=25", row, row.replace("/base/", "/head/"),
                 "/runs/base/report", "/compare?base=base&head=head", "/runs/nope",
                 f"/runs/base/row?{urlencode({'case': 'no such case', 'trial': 0})}", "/compare?base=base"]
        on_bucket, on_folder = _pages(url, paths, monkeypatch), _pages(folder, paths, monkeypatch)
        for path, bucket_page, folder_page in zip(paths, on_bucket, on_folder):
            assert bucket_page == folder_page, path
        statuses = [status for status, _ in on_bucket]
        assert statuses == [200] * 10 + [404, 404, 400], statuses
        assert f">{case}<" in on_bucket[6][1] and "head" in on_bucket[6][1]  # the row, and the other run that has it

        assert not any(path.endswith(".parquet") for path in downloads.whole), downloads.whole
        assert not (tmp_path / "cache" / "tooleval" / "inputs").exists()  # no copy of the results on this machine
        S3FileSystem.clear_instance_cache()
