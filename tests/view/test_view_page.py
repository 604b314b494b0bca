"""The viewer in headless Chromium (Debian's /usr/bin/chromium driven by Playwright, as the report test does) over
the bundled run and over a 20,000-row synthetic run: open the run, filter to ``wrong_args`` on one tool with the
page's own form, open a row by clicking it, and check the rendered diff against values computed from the Parquet
files (pyarrow, DuckDB) without the viewer's code; no console error and no request outside the server. Screenshots of the four pages are kept under the results folder."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.support.viewer import at_path, parquet_rows, tools_of, viewer

pytestmark = pytest.mark.slow  # Chromium over the viewer's pages

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as tests/runs/test_report_page.py: no sandbox as root, and no background networking (the network is closed)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_click_from_the_run_page_to_a_row(bundled_pair) -> None:
    from playwright.sync_api import sync_playwright

    out = bundled_pair
    rows = parquet_rows(out, "base")
    wrong = [r for r in rows if "wrong_args" in (r["mismatch_categories"] or [])]
    tool = Counter(t for r in wrong for t in tools_of(r)).most_common(1)[0][0]
    first = min((r for r in wrong if tool in tools_of(r)), key=lambda r: (r["case_id"], r["trial"]))
    console, requests = [], []
    with viewer(out) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: console.append((m.type, m.text)))
        page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url + "/")
        page.screenshot(path=str(out / "view-runs.png"), full_page=True)
        page.click("#runs a[href='/runs/base']")
        page.wait_for_selector("#headline")
        assert page.text_content("#gate") == "FAIL"
        page.select_option("#filter-tool", tool)
        page.select_option("#filter-category", "wrong_args")
        page.click("#apply")
        page.wait_for_url("**category=wrong_args**")
        page.screenshot(path=str(out / "view-run.png"), full_page=True)
        shown = page.eval_on_selector_all("#rows tr[data-case]", "rs => rs.map(r => [r.dataset.case, "
                                                                  "Number(r.dataset.trial)])")
        assert shown[0] == [first["case_id"], first["trial"]]
        assert int(page.text_content("#total")) == sum(1 for r in wrong if tool in tools_of(r))
        page.locator("#rows a.row-link").first.click()
        page.wait_for_selector("#reference-calls")
        page.screenshot(path=str(out / "view-row.png"), full_page=True)
        diff = page.eval_on_selector_all(
            "table.diff", "ts => ts.map(t => [t.dataset.tool, [...t.querySelectorAll('tr.hl')].map(r => "
                          "[...r.cells].map(c => c.textContent.trim()))])")
        page.goto(f"{url}/runs/base/report")  # the run's own report, served by the viewer, links into it
        page.wait_for_selector("a.viewer-link")
        first_link = page.get_attribute("#failing-rows tbody tr a.viewer-link", "href")
        first_row = page.eval_on_selector("#failing-rows tbody tr", "r => [r.dataset.case, r.dataset.trial]")
        page.goto(f"{url}/compare?base=base&head=head")
        page.screenshot(path=str(out / "view-compare.png"), full_page=True)
        browser.close()
    expected = [[pair["name"], [[path, at_path(json.loads(pair["expected_args_json"]), path),
                                 at_path(json.loads(pair["observed_args_json"]), path)] for path in pair["paths"]]]
                for pair in first["wrong_args"]]
    assert diff == expected and diff
    assert first_link == f"/runs/base/row?case={first_row[0]}&trial={first_row[1]}"
    assert console == []
    assert requests and all(r.startswith(url + "/") for r in requests)


SYNTH_ROWS = 20_000


@pytest.fixture(scope="session")
def synth_run(prefect_harness, tmp_path_factory) -> Path:
    """A results folder with one run (``synth``) of a 20,000-row synthetic bfcl dataset (seed 0), made once per
    session by the flow ``tooleval run`` calls, in this process under the session's Prefect test harness: the walk
    below is about the viewer over a run of that size, and two more processes (``tooleval synth``, then ``tooleval
    run`` starting a Prefect server of its own) only added their start-ups to it."""
    from flows.evaluate import run_evaluate
    from tooleval.runs.spec import RunSpec
    from tooleval.synth import write_synth

    root = tmp_path_factory.mktemp("view-synth")
    data = write_synth(SYNTH_ROWS, 0, "bfcl", root / "data").path
    result, _ = run_evaluate(RunSpec(dataset=str(data), out=str(root / "out"), run_id="synth", workers=1))
    assert result.summary["rows"] == SYNTH_ROWS
    return root / "out"


def _wrong_args_rows(out: Path) -> list[dict]:
    """The run's rows with a ``wrong_args`` mismatch, read by DuckDB straight from the Parquet files on disk
    (not through the viewer's readers): case id, trial, the tools of both sides and the wrong-arguments pairs."""
    files = sorted(str(f) for f in (out / "rows").glob("*/run_id=synth/*.parquet"))
    assert files
    con = duckdb.connect()
    try:
        cursor = con.execute(
            "SELECT case_id, trial, [c.name FOR c IN coalesce(expected_calls, [])] AS expected, "
            "[c.name FOR c IN coalesce(observed_calls, [])] AS observed, wrong_args FROM read_parquet($files) "
            "WHERE list_contains(mismatch_categories, 'wrong_args')", {"files": files})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values)) for values in cursor.fetchall()]
    finally:
        con.close()


def test_click_to_a_wrong_args_row_of_a_20000_row_run(synth_run) -> None:
    """The same walk over a generated run of 20,000 rows: filter with the page's form to ``wrong_args`` (the tool
    menu then counts under that category) and to the tool with the most such rows, open the first row by clicking
    it, and compare the page with the rows DuckDB reads from the Parquet files."""
    from playwright.sync_api import sync_playwright

    out = synth_run
    wrong = _wrong_args_rows(out)
    assert len(wrong) > 100  # the generated run has a population of such rows, not a handful
    tool = Counter(t for r in wrong for t in set(r["expected"]) | set(r["observed"])).most_common(1)[0][0]
    chosen = sorted(((r["case_id"], r["trial"]), r) for r in wrong if tool in set(r["expected"]) | set(r["observed"]))
    first = chosen[0][1]
    assert first["wrong_args"]
    console, requests = [], []
    with viewer(out) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: console.append((m.type, m.text)))
        page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url + "/")
        page.click("#runs a[href='/runs/synth']")
        page.wait_for_selector("#headline")
        assert page.text_content("#headline td.num") == str(SYNTH_ROWS)
        page.select_option("#filter-category", "wrong_args")
        page.click("#apply")
        page.wait_for_url("**category=wrong_args**")
        assert int(page.text_content("#total")) == len(wrong)
        page.select_option("#filter-tool", tool)
        page.click("#apply")
        page.wait_for_url("**tool=**")
        assert int(page.text_content("#total")) == len(chosen)
        shown = page.eval_on_selector_all("#rows tr[data-case]", "rs => rs.map(r => [r.dataset.case, "
                                                                  "Number(r.dataset.trial)])")
        assert shown == [list(key) for key, _ in chosen[:50]]
        page.locator("#rows a.row-link").first.click()
        page.wait_for_selector("#reference-calls")
        assert page.url.startswith(f"{url}/runs/synth/row?")
        diff = page.eval_on_selector_all(
            "table.diff", "ts => ts.map(t => [t.dataset.tool, [...t.querySelectorAll('tr.hl')].map(r => "
                          "[...r.cells].map(c => c.textContent.trim()))])")
        marks = page.eval_on_selector_all("tr.call[data-mark='wrong_args']", "rs => rs.length")
        browser.close()
    expected = [[pair["name"], [[path, at_path(json.loads(pair["expected_args_json"]), path),
                                 at_path(json.loads(pair["observed_args_json"]), path)] for path in pair["paths"]]]
                for pair in first["wrong_args"]]
    assert diff == expected and any(rows for _, rows in diff)
    assert marks == 2 * len(first["wrong_args"])  # each pair marks its reference call and its observed call
    assert console == []
    assert requests and all(r.startswith(url + "/") for r in requests)
