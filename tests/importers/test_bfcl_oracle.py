"""BFCL's own checker (``bfcl-eval``) as the oracle for tooleval's verdicts on BFCL result lines.

``bfcl-eval`` cannot be a ``[dev]`` dependency: it pins ``numpy==1.26.4`` beside tooleval's ``numpy==2.4.6``, and
its model registry imports every provider's SDK (and ``sentence-transformers`` with torch). So a fixture builds an
environment of its own (``bfcl-eval`` without its dependencies, plus the three its checkers import: ``mpmath``,
``filelock``) and runs ``bfcl_oracle/judge.py`` there, which replaces only the model registry (one flag per
model). Set ``TOOLEVAL_BFCL_ORACLE_PYTHON`` to use an existing environment's Python instead.

The hand-written lines of ``test_bfcl.py`` are judged on every run. The lines generated and mutated from all
3,675 questions (``bfcl_oracle/lines.py``, about 29,000 lines, several minutes of scoring) are judged when
``TOOLEVAL_BFCL_ORACLE_FULL=1``: tooleval's verdict on each is what a user gets, the default release gate's on
the rows a real ``tooleval run`` publishes for the imported lines. The agreement per category is printed and every
disagreement must be of a class listed in :data:`EXPECTED_DISAGREEMENTS` (docs/importers.md "BFCL" says why each
is not reproduced)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.support.paths import SHARED_DATA
from tests.importers.bfcl_oracle.lines import generate, read_lines

BFCL = SHARED_DATA / "bfcl"
ORACLE = ("bfcl-eval==2026.3.23", "mpmath==1.3.0", "filelock==3.20.0")
JUDGE = Path(__file__).parent / "bfcl_oracle" / "judge.py"

EXPECTED_DISAGREEMENTS = {
    # (category, line kind, BFCL's verdict): why tooleval gives the other verdict
    ("multi_turn_base", "wrong_value", True): "BFCL executes the calls: a wrong argument whose call changes nothing "
                                              "and returns what the reference call returns (an unknown stock symbol "
                                              "for add_to_watchlist, a client id authenticate_travel does not check) "
                                              "leaves the end state and the results right (only execution decides)",
    ("multi_turn_base", "extra_write", False): "BFCL's end-state check: the extra write changes the state",
}


@pytest.fixture(scope="session")
def oracle_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("TOOLEVAL_BFCL_ORACLE_PYTHON")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tooleval" / "bfcl-oracle"
    python = cache / "bin" / "python"
    marker = cache / "installed.txt"
    if not marker.exists() or marker.read_text() != "\n".join(ORACLE):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(cache)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", *ORACLE],
                              capture_output=True, text=True)
        if done.returncode:
            # a failure, not a skip: a missing oracle would otherwise pass the hand-written verdicts unchecked
            pytest.fail(f"cannot install BFCL's checker ({' '.join(ORACLE)}) into {cache}: {done.stderr[-400:]} "
                        "(the package index must be reachable, or set TOOLEVAL_BFCL_ORACLE_PYTHON to a Python that "
                        "has it)")
        marker.write_text("\n".join(ORACLE))
    return python


def judge(python: Path, lines: list[dict]) -> dict[int, dict]:
    """BFCL's verdict on each line (``{key: {valid, error_type}}``)."""
    questions = {q["id"]: q for path in BFCL.glob("BFCL_v4_*.json") for q in read_lines(path)}
    truths = {a["id"]: a["ground_truth"] for path in (BFCL / "possible_answer").glob("*.json")
              for a in read_lines(path)}
    stdin = "".join(json.dumps({**line, "question": questions[line["id"]], "ground_truth": truths.get(line["id"])})
                    + "\n" for line in lines)
    done = subprocess.run([str(python), str(JUDGE)], input=stdin, capture_output=True, text=True, check=True)
    return {v["key"]: v for v in map(json.loads, done.stdout.splitlines())}


def test_bfcls_checker_gives_the_hand_written_verdicts(oracle_python: Path) -> None:
    """The hand-written lines of test_bfcl.py (whose tooleval verdicts that module checks) get the same verdict
    from BFCL's checker: the expected verdicts there are BFCL's own."""
    from tests.importers.test_bfcl import VERDICTS

    lines = [{"key": i, "category": category, "id": qid, "kind": what, "result": result,
              "mode": "prompt" if what == "dotted function name" else "fc"}
             for i, (category, qid, result, _, what) in enumerate(VERDICTS)]
    verdicts = judge(oracle_python, lines)
    assert {VERDICTS[k][4]: v["valid"] for k, v in verdicts.items()} == {v[4]: v[3] for v in VERDICTS}


def test_bfcls_runner_gives_the_hand_written_multi_turn_verdicts(oracle_python: Path) -> None:
    """The hand-written multi-turn lines of test_bfcl.py (calls in turns whose ground truth is empty, results that
    ended early) get the same verdict from BFCL's runner."""
    from tests.importers.test_bfcl import MULTI_TURN_VERDICTS

    lines = [{"key": i, "category": "multi_turn_base", "id": qid, "kind": what, "result": result, "mode": "fc"}
             for i, (qid, result, _, what) in enumerate(MULTI_TURN_VERDICTS)]
    verdicts = judge(oracle_python, lines)
    assert {MULTI_TURN_VERDICTS[k][3]: v["valid"] for k, v in verdicts.items()} == {
        v[3]: v[2] for v in MULTI_TURN_VERDICTS}
    ended = [v["error_type"] for k, v in verdicts.items() if MULTI_TURN_VERDICTS[k][3].startswith("ended early")]
    assert ended == ["multi_turn:force_terminated"] * 2


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.skipif(os.environ.get("TOOLEVAL_BFCL_ORACLE_FULL") != "1",
                    reason="about 29,000 generated lines: set TOOLEVAL_BFCL_ORACLE_FULL=1")
@pytest.mark.usefixtures("prefect_harness")
def test_agreement_with_bfcls_checker_on_lines_from_every_question(oracle_python: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    """tooleval's verdict on a line is the default release gate's on the rows of a real ``tooleval run`` over
    the imported lines (:func:`bfcl_oracle.compare.tooleval_verdicts`)."""
    from tests.importers.bfcl_oracle.compare import tooleval_verdicts

    lines = generate(BFCL)
    assert len({line["id"] for line in lines}) == 3675
    bfcl = judge(oracle_python, lines)
    ours = tooleval_verdicts(BFCL, lines, tmp_path)
    per_category: dict[str, Counter] = defaultdict(Counter)
    unexplained, expected = Counter(), Counter()
    for line in lines:
        agree = ours[line["key"]] == bfcl[line["key"]]["valid"]
        per_category[line["category"]][agree] += 1
        if agree:
            continue
        if (line["category"], line["kind"], bfcl[line["key"]]["valid"]) in EXPECTED_DISAGREEMENTS:
            expected[line["category"], line["kind"], bfcl[line["key"]]["valid"]] += 1
        else:
            unexplained[line["category"], line["kind"], line["id"], bfcl[line["key"]]["error_type"]] += 1
    with capsys.disabled():
        totals: dict[str, Counter] = defaultdict(Counter)
        for category, counts in sorted(per_category.items()):
            total = counts[True] + counts[False]
            totals["multi-turn" if "multi_turn" in category else "single-turn"].update(counts)
            print(f"\n{category}: {counts[True]}/{total} lines agree ({100 * counts[True] / total:.2f} %)", end="")
        for group, counts in sorted(totals.items()):
            print(f"\n{group}: {counts[True]}/{counts[True] + counts[False]} lines agree", end="")
        print("\ndisagreements:", dict(expected))
    assert not unexplained, unexplained.most_common(20)
