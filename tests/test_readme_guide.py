"""The README a newcomer follows: its quick start on the first screen, its links to docs/ alive, the test command
CI runs, the slow tests it lists, and no example waiver that has already expired (copying one would fail the gate).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from conftest import REPO, SLOW_MODULES, SLOW_TESTS

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
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && $TIMEOUT 2400 .venv/bin/python -m pytest -n 2\n" in ci


def test_every_slow_module_and_test_is_listed():
    tests = _section("Tests")
    for module in SLOW_MODULES:
        assert module in tests, module
    for test in SLOW_TESTS:
        assert test in " ".join(tests.split()), test
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
