"""The README a newcomer follows: its quick start on the first screen, its links to docs/ alive, the test command
CI runs, the slow tests it lists, and no example waiver that has already expired (copying one would fail the gate).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from tests.support.paths import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest -n 2"


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start: end if end != -1 else None]


def test_the_quick_start_comes_first_with_the_two_commands():
    lines = README.splitlines()
    first_screen = "\n".join(lines[:50])
    assert "## Quick start" in first_screen and "### The two commands" in first_screen
    assert ".venv/bin/tooleval run" in first_screen and TEST_COMMAND in first_screen
    assert "report.html" in first_screen  # where the report is
    assert README.index("## Quick start") < README.index("## Contents") < README.index("## Tests")


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in README
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && $TIMEOUT 3600 .venv/bin/python -m pytest -n 2\n" in ci


HARNESS_REASON = "the Prefect test harness's server"
"""The reason beside the slow mark of a test that is slow for the Prefect test harness alone: the README says so
of them all in one sentence, and lists the others."""

_MARK = re.compile(r"^(?P<indent>\s*)(?P<mark>pytestmark = .*pytest\.mark\.slow.*?|@pytest\.mark\.slow)(  # (?P<reason>.*))?$")


def slow_marks(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The slow marks of the test files under ``root``, with the reason written beside each (on the mark's line or
    the comment line above it): ``({module path: reason}, {module path::test: reason})``, paths relative to
    ``root``."""
    modules, tests = {}, {}
    for path in sorted(root.rglob("test_*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(lines):
            found = _MARK.match(line)
            if found is None:
                continue
            reason = found["reason"] or lines[number - 1].strip().removeprefix("# ")
            if found["mark"].startswith("pytestmark"):
                modules[name] = reason
            else:
                following = next(text for text in lines[number + 1:] if re.match(r"\s*(async )?def ", text))
                function = re.search(r"def (\w+)", following)[1]
                tests[f"{name}::{function}"] = reason
    return modules, tests


def test_every_slow_module_and_test_is_listed():
    """Every module and single test marked slow for a process of its own (not for the Prefect test harness alone)
    is named in the README's Tests section, by its path under tests/."""
    tests = " ".join(_section("Tests").split())
    modules, singles = slow_marks(REPO / "tests")
    listed = {name: reason for name, reason in {**modules, **singles}.items() if reason != HARNESS_REASON}
    assert len([name for name in listed if "::" not in name]) == 21 and len(listed) == 30
    for name in listed:
        assert f"`{name}`" in tests or f"`{name}::" in tests, name
    assert 'pytest -m "not slow"' in tests



def test_every_link_to_docs_exists():
    linked = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert {"docs/scoring.md", "docs/rules.md", "docs/importers.md", "docs/storage.md", "docs/cluster.md",
            "docs/benchmark.md"} <= linked
    assert [path for path in sorted(linked) if not (REPO / path).is_file()] == []
    for doc in (REPO / "docs").glob("*.md"):  # links between the docs, relative to docs/
        for target in re.findall(r"\]\(([a-z_]+\.md)", doc.read_text(encoding="utf-8")):
            assert (REPO / "docs" / target).is_file(), (doc.name, target)


def test_no_example_waiver_has_expired():
    # an example a newcomer copies must pass today: a waiver whose date has passed fails the gate
    texts = {"README.md": README, **{f"docs/{p.name}": p.read_text(encoding="utf-8")
                                     for p in Path(REPO / "docs").glob("*.md")}}
    dates = [(name, d) for name, text in texts.items() for d in re.findall(r"expires = (\d{4}-\d\d-\d\d)", text)]
    assert dates, "the README or docs/ show a waiver"
    assert [(name, d) for name, d in dates if date.fromisoformat(d) < date.today()] == []


def test_design_md_states_the_versions_the_code_writes():
    """docs/design.md is where a reader learns the persisted shapes: the versions it states must be the ones the
    code writes today (a stale "summary version 3" misled a newcomer adding a summary key)."""
    from tooleval.runs.documents import SUMMARY_VERSION
    from tooleval.storage import ENVELOPE_VERSION, ROW_SCHEMA_VERSION

    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    stated = {name: [int(v) for v in re.findall(rf"{name} version (\d+)", design)]
              for name in ("row schema", "envelope", "summary")}
    assert stated == {"row schema": [ROW_SCHEMA_VERSION], "envelope": [ENVELOPE_VERSION],
                      "summary": [SUMMARY_VERSION]}
