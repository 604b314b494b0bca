"""The viewer in headless Chromium (Debian's /usr/bin/chromium driven by Playwright, as the report test does) over
the bundled run: open the run, filter to ``wrong_args`` on one tool with the page's own form, open a row by
clicking it, and check the rendered diff against values computed from the Parquet files with pyarrow; no console
error and no request outside the server. Screenshots of the four pages are kept under the results folder."""

from __future__ import annotations

import json
import shutil
from collections import Counter

from view_helpers import at_path, parquet_rows, tools_of, viewer

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
