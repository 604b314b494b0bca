"""Every input file has a size and a depth cap, and every redaction key file a size floor and ceiling: past them,
exit 2 naming the file and the fix, before anything is written.

A device named as an input (``/dev/zero``) is the sharpest case: read whole, it grew the process to 17-20 GB
before the kernel killed it. Those runs happen in a process of their own under an address-space limit (3 GB), so
that a reader without a cap fails there (``MemoryError``) instead of on the machine."""

from __future__ import annotations

import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.datasets import TINY_CASES, TINY_TRACES, write_dataset
from tests.support.paths import REPO, USER_CACHE
from tooleval.capture.keys import KEY_ENV, KEY_FILE_ENV, MAX_KEY_BYTES, MIN_KEY_BYTES, environment_key, plan_key
from tooleval.capture.redaction import load_key
from tooleval.cli import app
from tooleval.errors import InputFileError

runner = CliRunner()
WIDE = {"COLUMNS": "250"}
GOOD_KEY = "0123456789abcdef0123456789abcdef"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TOOLEVAL_"))}
    env.update(COLUMNS="250", TOOLEVAL_PREFECT_SERVER_IDLE_S="0", XDG_CACHE_HOME=str(USER_CACHE), **extra)
    return env


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _run_limited(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tooleval.cli", *args], env=_clean_env(**env), cwd=REPO,
                          capture_output=True, text=True, timeout=300, preexec_fn=_limited)


def _refused(done, *needles: str) -> None:
    printed = " ".join((done.stdout + done.stderr).split()) if hasattr(done, "stdout") else " ".join(
        done.output.split())
    code = done.returncode if hasattr(done, "returncode") else done.exit_code
    assert code == 2, printed[-3000:]
    assert "Traceback" not in printed and "MemoryError" not in printed, printed[-3000:]
    for needle in needles:
        assert needle in printed, (needle, printed[-3000:])


@pytest.fixture
def dataset(tmp_path) -> Path:
    return write_dataset(tmp_path / "d", TINY_CASES, TINY_TRACES)


class TestDevicesNamedAsInputs:
    @pytest.mark.parametrize("name", ["tools.json", "dataset.json"])
    def test_a_dataset_file_that_is_dev_zero(self, dataset, tmp_path, name):
        (dataset / name).unlink(missing_ok=True)
        (dataset / name).symlink_to("/dev/zero")
        done = _run_limited(["run", "--dataset", str(dataset), "--out", str(tmp_path / "out")])
        _refused(done, f"{dataset / name}", "larger than 67,108,864 bytes", "TOOLEVAL_MAX_LINE_BYTES")
        assert not (tmp_path / "out").exists()

    def test_the_key_file_named_by_the_environment_is_dev_zero(self, dataset, tmp_path):
        done = _run_limited(["run", "--dataset", str(dataset), "--out", str(tmp_path / "out")],
                            **{KEY_FILE_ENV: "/dev/zero"})
        _refused(done, "/dev/zero", f"longer than {MAX_KEY_BYTES} bytes", "openssl rand -hex 32")
        assert not (tmp_path / "out").exists()

    def test_the_results_folders_key_file_is_dev_zero(self, dataset, tmp_path):
        out = tmp_path / "out"
        out.mkdir()
        (out / "redaction.key").symlink_to("/dev/zero")
        done = _run_limited(["run", "--dataset", str(dataset), "--out", str(out)])
        _refused(done, str(out / "redaction.key"), f"longer than {MAX_KEY_BYTES} bytes")
        assert sorted(p.name for p in out.iterdir()) == ["redaction.key"]


class TestSizeAndDepthCaps:
    def run(self, dataset: Path, out: Path, *extra: str, **env: str):
        return runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out), "--run-id", "x", *extra],
                             env={**WIDE, **env})

    def test_tools_json_past_the_cap(self, dataset, tmp_path):
        (dataset / "tools.json").write_text("[" + ",".join(['{"name": "t%d"}' % i for i in range(200)]) + "]")
        result = self.run(dataset, tmp_path / "out", TOOLEVAL_MAX_LINE_BYTES="1024")
        _refused(result, "tools.json", "larger than 1,024 bytes", "TOOLEVAL_MAX_LINE_BYTES=<bytes>")
        assert not (tmp_path / "out").exists()

    @pytest.mark.parametrize("depth", [201, 900, 100_000])
    def test_tools_json_nested_too_deep(self, dataset, tmp_path, depth):
        deep = "[" * depth + "]" * depth
        (dataset / "tools.json").write_text('[{"name": "t", "parameters": {"x": ' + deep + '}}]')
        result = self.run(dataset, tmp_path / "out")
        _refused(result, "tools.json", "nested", "flatten that part of the file")

    def test_dataset_json_nested_too_deep(self, dataset, tmp_path):
        (dataset / "dataset.json").write_text('{"name": "n", "revision": "r1", "schema_version": 1, "source": '
                                              + "[" * 100_000 + "]" * 100_000 + "}")
        result = self.run(dataset, tmp_path / "out")
        _refused(result, "dataset.json", "nested", "flatten")

    @pytest.mark.parametrize("depth", [201, 100_000])
    def test_gate_toml_nested_too_deep(self, dataset, tmp_path, depth):
        (dataset / "gate.toml").write_text("[policy]\nx = " + "[" * depth + "]" * depth + "\n")
        result = self.run(dataset, tmp_path / "out")  # RecursionError traceback before
        _refused(result, "gate.toml", "nested", "flatten that value")
        assert not (tmp_path / "out").exists()

    @pytest.mark.parametrize("shape", ["{key} = 1", "[{key}]\nz = 1", "x = {{{key} = 1}}", "[{key_quoted}]"])
    def test_gate_toml_with_a_dotted_key_of_100_000_parts(self, dataset, tmp_path, shape):
        key = ".".join(["a"] * 100_000)
        (dataset / "gate.toml").write_text(shape.format(key=key, key_quoted=".".join(['"a"'] * 100_000)) + "\n")
        started = time.monotonic()
        result = self.run(dataset, tmp_path / "out")  # tomllib spent minutes on such a key before
        _refused(result, "gate.toml", "more than 200 dotted parts", "flatten that key")
        assert time.monotonic() - started < 60
        assert not (tmp_path / "out").exists()

    def test_gate_toml_text_with_many_dots_elsewhere_is_read(self):
        from tooleval.rules import GateConfig

        dots = "." * 300
        config = GateConfig.from_toml(f'# a comment{dots}\n')  # only key-shaped text is measured
        assert config == GateConfig.from_toml("")

    def test_gate_toml_past_the_cap(self, dataset, tmp_path):
        (dataset / "gate.toml").write_text("# padding\n" * 200)
        result = self.run(dataset, tmp_path / "out", TOOLEVAL_MAX_LINE_BYTES="1024")
        _refused(result, "gate.toml", "larger than 1,024 bytes")


class TestKeyFiles:
    @pytest.mark.parametrize(("content", "needle"), [
        (b"", "is empty"), (b" \n", "is empty"), (b"short-key\n", f"a key needs at least {MIN_KEY_BYTES}"),
        (b"k" * (MAX_KEY_BYTES + 1), f"longer than {MAX_KEY_BYTES} bytes")])
    def test_the_results_folders_key_file_is_refused(self, dataset, tmp_path, monkeypatch, content, needle):
        monkeypatch.delenv(KEY_ENV, raising=False)
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        out = tmp_path / "out"
        out.mkdir()
        (out / "redaction.key").write_bytes(content)
        (out / "redaction.key").chmod(0o600)
        result = runner.invoke(app, ["run", "--dataset", str(dataset), "--out", str(out)], env=WIDE)
        _refused(result, str(out / "redaction.key"), needle, "openssl rand -hex 32")  # an empty key was used before
        assert sorted(p.name for p in out.iterdir()) == ["redaction.key"]
        with pytest.raises(InputFileError, match=needle):  # what gate, drift, rescore and workers read
            load_key(out, create=False)

    @pytest.mark.parametrize(("content", "needle"), [
        (b"\n", "is empty"), (b"short-key\n", f"a key needs at least {MIN_KEY_BYTES}"),
        (b"k" * (MAX_KEY_BYTES + 1), f"longer than {MAX_KEY_BYTES} bytes")])
    def test_the_key_file_named_by_the_environment_is_refused(self, tmp_path, monkeypatch, content, needle):
        monkeypatch.delenv(KEY_ENV, raising=False)
        (tmp_path / "k").write_bytes(content)
        monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "k"))
        with pytest.raises(InputFileError, match=needle) as raised:
            environment_key()
        assert str(raised.value.path) == str(tmp_path / "k") and "openssl rand -hex 32" in raised.value.fix

    def test_a_key_file_others_may_read_is_used_with_a_warning(self, tmp_path, monkeypatch, caplog):
        monkeypatch.delenv(KEY_ENV, raising=False)
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        out = tmp_path / "out"
        out.mkdir()
        (out / "redaction.key").write_text(GOOD_KEY)
        (out / "redaction.key").chmod(0o644)
        with caplog.at_level(logging.WARNING, logger="tooleval.capture.keys"):
            assert plan_key(out).key == GOOD_KEY.encode()
        assert any("may be read by others" in r.getMessage() and "chmod 600" in r.getMessage()
                   and "0o644" in r.getMessage() for r in caplog.records)
        caplog.clear()
        (tmp_path / "private.key").write_text(GOOD_KEY)
        (tmp_path / "private.key").chmod(0o600)
        monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "private.key"))
        with caplog.at_level(logging.WARNING, logger="tooleval.capture.keys"):
            assert environment_key() == GOOD_KEY.encode()
        assert not caplog.records

    def test_a_created_key_is_accepted_as_it_is(self, tmp_path, monkeypatch):
        monkeypatch.delenv(KEY_ENV, raising=False)
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        out = tmp_path / "out"
        key = load_key(out)  # created: 32 random bytes as hex, mode 0600
        assert len(key) == 64 and load_key(out, create=False) == key
        assert (out / "redaction.key").stat().st_mode & 0o777 == 0o600
