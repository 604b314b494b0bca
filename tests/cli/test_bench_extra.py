"""``tooleval bench`` on an install without the ``bench`` extra: one line naming what is missing and how to
install it (exit 2), before the corpus is written; the extra's modules were imported deep inside the run, where
a missing one ended the command in a traceback."""
import sys

import pytest
from typer.testing import CliRunner

from tooleval.cli import app
from tooleval.cli._scale import BENCH_MODULES


@pytest.mark.parametrize("hidden", BENCH_MODULES)
def test_bench_without_the_bench_extra_names_the_missing_module_and_the_install(hidden, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, hidden, None)  # importlib then finds no such module, as on a plain install
    result = CliRunner().invoke(app, ["bench", "--rows", "10", "--workdir", str(tmp_path / "work")])
    assert result.exit_code == 2, result.output
    assert f"the benchmark needs {hidden}, which the bench extra installs: pip install -e '.[bench]'" in \
        " ".join(result.output.split())
    assert not (tmp_path / "work").exists()  # nothing written


def test_the_bench_extra_lists_what_the_benchmark_imports():
    import tomllib
    from pathlib import Path

    extra = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["bench"]
    names = {requirement.split("==")[0].replace("-", "_") for requirement in extra}
    assert names == set(BENCH_MODULES)
