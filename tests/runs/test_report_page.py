"""runs/<run>/report.html of the bundled run, rendered in headless Chromium (Debian's /usr/bin/chromium driven by
Playwright; `.ci/run` installs it): no console error, no request leaves the file, the failing-rows table holds
the expected rows, every plot has drawn marks, the filters work. The screenshot is kept under the output folder.
"""

from __future__ import annotations

import re
import shutil

import pyarrow.parquet as pq
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Flags this machine needs: no sandbox as root, and no background networking (the network is closed).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLOTS = ["f1", "families", "tools", "variability", "cases", "trend", "drift"]


def _rows(out, run_id):
    files = sorted((out / "rows").glob(f"*/run_id={run_id}/*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


@pytest.fixture(scope="module")
def page_report(bundled_pair):
    from playwright.sync_api import sync_playwright

    report = bundled_pair / "runs" / "base" / "report.html"
    console, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: console.append((m.type, m.text)))
        page.on("pageerror", lambda e: console.append(("pageerror", str(e))))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(report.as_uri())
        page.wait_for_function("document.body.dataset.plotsReady !== undefined", timeout=30_000)
        state = {
            "ready": page.evaluate("document.body.dataset.plotsReady"),
            "marks": page.evaluate("Object.fromEntries([...document.querySelectorAll('.plot')].map(p => "
                                   "[p.id.slice(5), p.querySelectorAll('svg g.mark-rect path, svg g.mark-line path,"
                                   " svg g.mark-symbol path, svg g.mark-rule line').length]))"),
            "rows": page.evaluate("[...document.querySelectorAll('#failing-rows tbody tr')].map(r => "
                                  "[r.dataset.case, Number(r.dataset.trial)])"),
            "headline": page.evaluate("Object.fromEntries([...document.querySelectorAll('#headline tr')].map(r => "
                                      "[r.cells[0].textContent, r.cells[1].textContent]))"),
        }
        page.screenshot(path=str(bundled_pair / "report-base.png"), full_page=True)
        page.select_option("#filter-tool", "book_reservation")
        state["shown_book"] = page.evaluate("[...document.querySelectorAll('#failing-rows tbody tr')]"
                                            ".filter(r => !r.hidden).length")
        page.click("#failing-rows tbody tr:not([hidden]) a")
        state["evidence_open"] = page.evaluate("location.hash")
        browser.close()
    return report, state, console, requests


class TestReportInChromium:
    def test_no_console_error_and_no_network_request(self, page_report):
        report, _, console, requests = page_report
        assert [c for c in console if c[0] in ("error", "pageerror", "warning")] == []
        assert {url.split("#")[0] for url in requests} == {report.as_uri()}

    def test_every_plot_has_drawn_marks(self, page_report):
        _, state, _, _ = page_report
        assert state["ready"] == "yes"
        assert set(state["marks"]) == set(PLOTS)
        assert all(count > 0 for count in state["marks"].values()), state["marks"]

    def test_failing_rows_are_the_non_exact_rows_worst_first(self, page_report, bundled_pair):
        _, state, _, _ = page_report
        rows = _rows(bundled_pair, "base")
        # Independently: every row that is blocking or not an exact match (188 = 200 - 12 exact rows, the
        # measured facts of ../shared/data/README.md, plus any exact row that a rule blocks).
        failing = {(r["case_id"], r["trial"]) for r in rows if r["blocking"] or not r["exact_match"]}
        assert len(failing) >= 188
        shown = [tuple(r) for r in state["rows"]]
        assert set(shown) == failing and len(shown) == len(failing)
        blocking = [k for k in shown if next(r for r in rows if (r["case_id"], r["trial"]) == k)["blocking"]]
        assert shown[: len(blocking)] == blocking  # blocking rows first
        assert len(blocking) == 117  # the gate's blocking rows on the bundled data (summary.json)

    def test_headline_counts(self, page_report):
        _, state, _, _ = page_report
        headline = state["headline"]
        assert headline["rows"] == "200" and headline["exact-match rows"] == "12"
        assert headline["provenance missing"] == "200"  # tau-bench's trajectories carry no ids
        # tp + fp = 1,164 observed calls, tp + fn = 632 expected calls (../shared/data/README.md)
        fp, fn = int(headline["false positive calls (fp)"]), int(headline["false negative calls (fn)"])
        assert 1164 - fp == 632 - fn

    def test_tool_filter_and_evidence_link(self, page_report, bundled_pair):
        _, state, _, _ = page_report
        rows = _rows(bundled_pair, "base")
        expected = sum(
            1 for r in rows if (r["blocking"] or not r["exact_match"]) and "book_reservation" in
            {c["name"] for key in ("missing_calls", "extra_calls", "wrong_args") for c in r[key] or []}
            | {v["tool"] for v in r["violations"] or []})
        assert state["shown_book"] == expected > 0
        assert re.fullmatch(r"#evidence-\d+", state["evidence_open"])

    def test_screenshot_is_kept_under_the_output_folder(self, page_report, bundled_pair):
        shot = bundled_pair / "report-base.png"
        assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_report_holds_the_worst_n_rows_only(self, bundled_pair):
        from tooleval.runs.report import report_for_run

        rows = _rows(bundled_pair, "base")
        failing = sum(1 for r in rows if r["blocking"] or not r["exact_match"])
        html = report_for_run(bundled_pair, "base", limit=5)
        assert html.count("<tr data-case=") == 5
        assert f"{failing} failing row(s)" in html

    def test_trend_lists_both_runs(self, bundled_pair):
        from tooleval.runs.report._data import run_history

        assert [h["run_id"] for h in run_history(bundled_pair)] == ["base", "head"]
