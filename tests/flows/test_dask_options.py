"""``--dask-address`` and the workers' redaction key, without a cluster (the cluster itself: test_cluster.py)."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from flows._dask import check_scheduler, parse_address
from tooleval.capture.keys import KEY_ENV, KEY_FILE_ENV, environment_key, plan_key
from tooleval.capture.redaction import load_key
from tooleval.cli import app
from tooleval.errors import InputFileError

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


class TestAddress:
    @pytest.mark.parametrize(("address", "expected"), [
        ("tcp://127.0.0.1:8786", ("127.0.0.1", 8786)),
        ("tls://scheduler.internal:8786", ("scheduler.internal", 8786)),
        ("tcp://[::1]:9000", ("::1", 9000)),
    ])
    def test_parsed(self, address, expected):
        assert parse_address(address) == expected

    @pytest.mark.parametrize("address", ["127.0.0.1:8786", "http://127.0.0.1:8786", "tcp://host", "tcp://h:0",
                                         "tcp://h:70000", "tcp://a b:1"])
    def test_refused(self, address):
        with pytest.raises(InputFileError, match="not a Dask scheduler address"):
            parse_address(address)

    def test_unreachable_scheduler_is_a_usage_error(self):
        port = _closed_port()
        with pytest.raises(InputFileError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
            check_scheduler(f"tcp://127.0.0.1:{port}", timeout_s=2)


class TestWorkerKey:
    def test_key_file_read_and_stripped(self, tmp_path, monkeypatch):
        monkeypatch.delenv(KEY_ENV, raising=False)
        (tmp_path / "k").write_text("  s3cret-key-0000001\n")
        monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "k"))
        assert environment_key() == b"s3cret-key-0000001"
        # workers and the planner use the same key; nothing is written next to the results
        out = tmp_path / "out"
        assert load_key(out, create=False) == b"s3cret-key-0000001"
        planned = plan_key(out)
        assert (planned.key, planned.source) == (b"s3cret-key-0000001", "env") and not out.exists()

    def test_key_text_wins_over_key_file(self, tmp_path, monkeypatch):
        monkeypatch.setenv(KEY_ENV, "from-env")
        monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "missing"))
        assert environment_key() == b"from-env"

    @pytest.mark.parametrize(("content", "message"), [(None, "cannot read the redaction key file"),
                                                      ("\n", "is empty")])
    def test_bad_key_file(self, tmp_path, monkeypatch, content, message):
        monkeypatch.delenv(KEY_ENV, raising=False)
        path = tmp_path / "k"
        if content is not None:
            path.write_text(content)
        monkeypatch.setenv(KEY_FILE_ENV, str(path))
        with pytest.raises(InputFileError, match=message):
            environment_key()


class TestRunOption:
    def test_bad_address_exit_2_nothing_written(self, tmp_path):
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "out"
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--dask-address",
                                     "localhost:8786"], env=WIDE)
        assert result.exit_code == 2 and "not a Dask scheduler address" in result.output
        assert not out.exists()

    def test_cluster_run_needs_the_key_in_the_environment(self, tmp_path, monkeypatch):
        monkeypatch.delenv(KEY_ENV, raising=False)
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "out"
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--dask-address",
                                     f"tcp://127.0.0.1:{_closed_port()}"], env=WIDE)
        assert result.exit_code == 2 and "needs the redaction key in the environment" in result.output
        assert not out.exists()

    @pytest.mark.slow  # the Prefect test harness's server
    def test_unreachable_scheduler_exit_2_nothing_published(self, tmp_path, monkeypatch, prefect_harness):
        monkeypatch.setenv(KEY_ENV, "k")
        dataset = write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)
        out = tmp_path / "out"
        port = _closed_port()
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--dask-address",
                                     f"tcp://127.0.0.1:{port}"], env=WIDE)
        assert result.exit_code == 2 and f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in result.output
        assert not (out / "rows").exists() and not (out / "runs").exists()

    def test_run_on_object_storage_without_credentials_is_exit_2_and_writes_no_local_folder(self, tmp_path,
                                                                                           monkeypatch):
        monkeypatch.chdir(tmp_path)
        from s3fs import S3FileSystem

        S3FileSystem.clear_instance_cache()  # an instance cached by an earlier test holds its credentials
        no_credentials = {**WIDE, "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SESSION_TOKEN": None,
                          "AWS_PROFILE": None, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                          "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true",
                          "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
        result = runner.invoke(app, ["run", "--out", "s3://bucket/nightly"], env=no_credentials)
        assert result.exit_code == 2 and "cannot reach the results location" in result.output
        assert "AWS_ACCESS_KEY_ID" in result.output
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize("command", [["runs"], ["gc"], ["view"]])
    def test_the_reading_commands_take_an_object_storage_out_and_write_no_local_folder(self, tmp_path, monkeypatch,
                                                                                       command):
        """No command refuses a URL any more: without credentials they fail on the bucket (exit 2), never
        by writing a local folder named ``s3:``."""
        monkeypatch.chdir(tmp_path)
        from s3fs import S3FileSystem

        S3FileSystem.clear_instance_cache()  # an instance cached by an earlier test holds its credentials
        no_credentials = {**WIDE, "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SESSION_TOKEN": None,
                          "AWS_PROFILE": None, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                          "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true",
                          "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
        result = runner.invoke(app, [*command, "--out", "s3://bucket/nightly"], env=no_credentials)
        assert result.exit_code == 2 and "works on a local results folder only" not in result.output
        assert "cannot reach the results location" in result.output, result.output
        assert list(tmp_path.iterdir()) == []
