"""The house's import rules, checked on the installed source: the layers (import-linter's contract in
pyproject.toml), no import cycle, and no package reaching into another package's ``_`` modules or names.

The graph is grimp's (the engine import-linter runs on), with imports made only for type checkers left out: they
are never executed. A function-level import counts like a top-level one: it is a dependency all the same.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tooleval", "flows", "tasks")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=True)


def owner(graph: grimp.ImportGraph, module: str) -> str:
    """The package a module belongs to for these rules: ``tooleval.<sub-package>``, ``flows`` or ``tasks``; a
    top-level module of ``tooleval`` (``tooleval.models``) is its own."""
    parts = module.split(".")
    if parts[0] != "tooleval" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_the_layers_contract_is_kept() -> None:
    """import-linter's own command over pyproject.toml's contract (exit 0: every contract kept)."""
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                           "lint_imports_command()", "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in done.stdout


def cycles_of(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of the module graph with more than one module (scipy), each sorted."""
    modules = sorted(graph.modules)
    index = {name: i for i, name in enumerate(modules)}
    pairs = [(index[a], index[b]) for a in modules for b in graph.find_modules_directly_imported_by(a)]
    if not pairs:
        return []
    rows, cols = (np.array(side, dtype=np.int64) for side in zip(*pairs))
    matrix = csr_matrix((np.ones(len(pairs)), (rows, cols)), shape=(len(modules), len(modules)))
    _, labels = connected_components(matrix, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, label in zip(modules, labels):
        groups.setdefault(int(label), []).append(name)
    return sorted(group for group in groups.values() if len(group) > 1)


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    """Each strongly connected component is one module. A package's ``__init__`` that imports its own module,
    which imports the package back, is a cycle too."""
    assert cycles_of(graph) == []


def test_the_checker_sees_a_cycle(tmp_path: Path) -> None:
    """:func:`cycles_of` on a package whose two modules import each other (one inside a function), and on one
    whose imports go one way only (so the test above can fail, and only on a cycle)."""
    for name, b_source, expected in [("cyclic_pkg", "from cyclic_pkg import a\n", [["cyclic_pkg.a", "cyclic_pkg.b"]]),
                                     ("acyclic_pkg", "X = 1\n", [])]:
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "a.py").write_text(f"def f():\n    from {name} import b\n")
        (package / "b.py").write_text(b_source)
        sys.path.insert(0, str(tmp_path))
        try:
            small = grimp.build_graph(name, include_external_packages=False)
        finally:
            sys.path.remove(str(tmp_path))
        assert cycles_of(small) == expected


def test_no_cross_package_private_module(graph: grimp.ImportGraph) -> None:
    """No module imports a module of another package whose dotted path has a segment starting with ``_``."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if owner(graph, imported) == owner(graph, importer):
                continue
            inside = imported[len(owner(graph, imported)):].split(".")
            if any(is_private(part) for part in inside):
                lines = [d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)]
                found.append(f"{importer} -> {imported} (line {', '.join(map(str, lines))})")
    assert found == []


def _source_files() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_cross_package_private_name() -> None:
    """No ``from <another package's module> import _name`` (a private name of a public module, or a ``_`` module
    taken as a name: ``from tooleval.cli import _prefect_server``), read from the source with ``ast``."""
    found = []
    for path in _source_files():
        module = _module_of(path)
        mine = module.split(".")[0] if not module.startswith("tooleval.") else ".".join(module.split(".")[:2])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            target = node.module.split(".")
            theirs = target[0] if target[0] != "tooleval" or len(target) == 1 else ".".join(target[:2])
            if theirs == mine:
                continue
            for alias in node.names:
                if is_private(alias.name):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {alias.name}")
    assert found == []


@pytest.mark.parametrize("package", ["tooleval.agents", "tooleval.bench", "tooleval.capture", "tooleval.cli",
                                     "tooleval.importers", "tooleval.rules", "tooleval.runs", "tooleval.scoring",
                                     "tooleval.storage", "tooleval.synth", "tooleval.testing", "flows", "tasks"])
def test_every_package_has_a_face(package: str) -> None:
    """Each package's ``__init__`` lists its public names in ``__all__``, and each of them resolves."""
    import importlib

    face = importlib.import_module(package)
    names = getattr(face, "__all__", None)
    assert names, f"{package} has no __all__"
    for name in names:
        assert getattr(face, name) is not None


MAX_PARAMETERS = 8
"""The most parameters a function of the house takes (``*args`` and ``**kwargs`` count one each, ``self`` and
``cls`` none); a typer command apart, whose parameters are the command line's options. More than this and the
options belong in a small frozen model that travels as one."""

def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a call may pass: positional-only, positional, keyword-only, ``*args`` and ``**kwargs``, less
    a method's ``self`` or ``cls``."""
    arguments = function.args
    count = (len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
             + (arguments.vararg is not None) + (arguments.kwarg is not None))
    if arguments.args and arguments.args[0].arg in ("self", "cls"):
        count -= 1
    return count


def is_typer_command(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function is registered as a command by a decorator ``@<app>.command(...)``."""
    return any(isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
               and decorator.func.attr == "command" for decorator in function.decorator_list)


def functions_over_the_limit(paths: list[Path], root: Path) -> dict[str, int]:
    """``path::function`` -> parameter count of every function in ``paths`` above :data:`MAX_PARAMETERS`, the
    typer commands apart."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_typer_command(node)
                    and parameter_count(node) > MAX_PARAMETERS):
                found[f"{path.relative_to(root).as_posix()}::{node.name}"] = parameter_count(node)
    return found


def test_no_function_takes_more_than_eight_parameters() -> None:
    over = functions_over_the_limit(_source_files(), ROOT)
    assert over == {}


def test_the_parameter_count_sees_every_kind_of_parameter(tmp_path: Path) -> None:
    """Nine parameters of every kind are over the limit, ``self`` is not counted, a typer command is let be."""
    module = tmp_path / "wide.py"
    module.write_text(
        "def nine(a, /, b, *args, c, d=1, e=2, f=3, g=4, **kwargs): ...\n"
        "class Holder:\n"
        "    def method(self, a, b, c, d, e, f, g, h): ...\n"
        "@app.command()\n"
        "def run(a, b, c, d, e, f, g, h, i, j): ...\n"
        "async def ten(a, b, c, d, e, f, g, h, i, j): ...\n")
    assert functions_over_the_limit([module], tmp_path) == {"wide.py::nine": 9, "wide.py::ten": 10}
