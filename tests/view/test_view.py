"""`tooleval view` over real published runs: the bundled dataset run twice (``bundled_pair``: ``base`` and
``head``), served by uvicorn on 127.0.0.1 and read over HTTP. Every figure asserted is computed here from the
Parquet files with pyarrow (or is a bundled figure), not from the viewer's queries."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.support.datasets import CHANGED_CASE
from tests.support.viewer import at_path, get, parquet_rows, tools_of, viewer


@pytest.fixture(scope="module")
def served(bundled_pair):
    with viewer(bundled_pair) as url:
        yield bundled_pair, url


def cells(body: str, table_id: str) -> list[list[str]]:
    """The text of each data row's cells of the table ``table_id``."""
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', body, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
            for r in rows if "<td" in r]


@pytest.mark.slow  # the Prefect test harness's server
def test_runs_page_lists_both_runs_with_their_verdicts(served) -> None:
    out, url = served
    status, body = get(url + "/")
    assert status == 200
    listed = {row[0]: row for row in cells(body, "runs")}
    assert set(listed) == {"base", "head"}
    assert listed["base"][4] == "200" and listed["base"][7] == "FAIL" and listed["base"][8] == "ok"
    assert listed["base"][5] == "0.3538"
    assert listed["base"][6] == f"{1 - 117 / 200:.4f}"  # pass rate: rows with no blocking rule (no_blocking gate)
    assert 'class="trend"' in body


@pytest.mark.slow  # the Prefect test harness's server
def test_run_page_headline_is_the_bundled_figures(served) -> None:
    out, url = served
    status, body = get(url + "/runs/base")
    assert status == 200
    headline = dict(_pairs(body))
    assert headline["rows"] == "200" and headline["exact match rows"] == "12"
    assert headline["expected / observed calls"] == "632 / 1164"
    assert headline["mean f1"] == "0.3538" and headline["mean ragas ToolCallF1"] == "0.3449"
    assert headline["blocking rows"] == "117" and headline["gate"] == "FAIL" and headline["drift"] == "ok"


@pytest.mark.slow  # the Prefect test harness's server
def test_run_page_filters_by_the_gates_verdict(served) -> None:
    """The bundled gate (row_outcome no_blocking, no waiver) fails the 117 rows with a blocking rule: the headline
    and the verdict filter read the stored gate_verdict; a value that is no verdict is refused."""
    out, url = served
    rows = parquet_rows(out, "base")
    failing = sum(1 for r in rows if r["gate_verdict"] == "fail")
    assert failing == 117 == sum(1 for r in rows if r["blocking"])
    status, body = get(url + "/runs/base")
    assert dict(_pairs(body))["rows the gate fails (gate_verdict fail)"] == "117"
    assert ">fail (117)<" in body and ">pass (83)<" in body
    status, body = get(url + "/runs/base?verdict=pass&size=200")
    assert status == 200 and re.search(r'<span id="total">(\d+)</span>', body).group(1) == "83"
    assert {r[7] for r in cells(body, "rows")} == {"pass"}
    status, body = get(url + "/runs/base?verdict=blocking")
    assert status == 400 and "is not a gate verdict" in body


def _pairs(body: str) -> list[tuple[str, str]]:
    table = re.search(r'<table id="headline">(.*?)</table>', body, re.S).group(1)
    return [(html.unescape(re.sub(r"<[^>]+>", "", th)).strip(), html.unescape(re.sub(r"<[^>]+>", "", td)).strip())
            for th, td in re.findall(r"<th>(.*?)</th><td[^>]*>(.*?)</td>", table, re.S)]


@pytest.mark.slow  # the Prefect test harness's server
def test_filter_counts_sort_and_paging_agree_with_the_parquet_files(served) -> None:
    out, url = served
    rows = parquet_rows(out, "base")
    wrong = [r for r in rows if "wrong_args" in (r["mismatch_categories"] or [])]
    tool = Counter(t for r in wrong for t in tools_of(r)).most_common(1)[0][0]
    chosen = [r for r in wrong if tool in tools_of(r)]
    query = urlencode({"tool": tool, "category": "wrong_args", "size": 25})
    status, body = get(f"{url}/runs/base?{query}")
    assert status == 200
    assert re.search(r'<span id="total">(\d+)</span>', body).group(1) == str(len(chosen))
    expected = sorted((r["case_id"], r["trial"]) for r in chosen)[:25]
    assert [(r[0], int(r[1])) for r in cells(body, "rows")] == sorted(expected, key=lambda k: (k[0], k[1]))
    # the counts beside each value: blocking under the other filters, category under the tool alone
    assert f'>yes ({sum(1 for r in chosen if r["blocking"])})<' in body
    with_tool = [r for r in rows if tool in tools_of(r)]
    assert f'>wrong_args ({len(chosen)})<' in body
    assert f'>extra ({sum(1 for r in with_tool if "extra" in (r["mismatch_categories"] or []))})<' in body
    # sorted by F1, highest first, ties by case id then trial; page 2 of 25
    status, body = get(f"{url}/runs/base?sort=f1&order=desc&size=25&page=2")
    ordered = sorted(rows, key=lambda r: (r["f1"] is None, -(r["f1"] or 0), r["case_id"], r["trial"]))
    assert [(r[0], int(r[1])) for r in cells(body, "rows")] == [(r["case_id"], r["trial"]) for r in ordered[25:50]]
    assert 'page 2 of 8' in body
    # blocking filter and F1 range
    status, body = get(f"{url}/runs/base?blocking=yes&f1_min=0.5")
    assert re.search(r'<span id="total">(\d+)</span>', body).group(1) == str(
        sum(1 for r in rows if r["blocking"] and r["f1"] is not None and r["f1"] >= 0.5))


@pytest.mark.slow  # the Prefect test harness's server
def test_row_page_marks_calls_and_shows_the_diff(served) -> None:
    out, url = served
    rows = parquet_rows(out, "base")
    row = next(r for r in rows if r["wrong_args"] and r["violations"])
    status, body = get(f"{url}/runs/base/row?{urlencode({'case': row['case_id'], 'trial': row['trial']})}")
    assert status == 200
    diffs = re.findall(r'<table class="diff" data-tool="([^"]+)">(.*?)</table>', body, re.S)
    assert [d[0] for d in diffs] == [p["name"] for p in row["wrong_args"]]
    for (_, table), pair in zip(diffs, row["wrong_args"]):
        shown = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
                 for tr in re.findall(r'<tr class="hl">(.*?)</tr>', table, re.S)]
        expected, observed = json.loads(pair["expected_args_json"]), json.loads(pair["observed_args_json"])
        assert shown == [[p, at_path(expected, p), at_path(observed, p)] for p in pair["paths"]]
    marks = Counter(re.findall(r'<tr class="call" data-mark="(\w+)">', body))
    assert marks["wrong_args"] == 2 * len(row["wrong_args"])
    assert marks["missing"] == len(row["missing_calls"]) - len(row["wrong_args"])
    assert marks["extra"] == len(row["extra_calls"]) - len(row["wrong_args"])
    reference = row["reference_calls"] if row["reference_calls"] is not None else row["expected_calls"]
    assert sum(marks.values()) == len(reference) + len(row["observed_calls"])
    assert [c[0] for c in cells(body, "violations")] == [v["rule"] for v in row["violations"]]
    assert 'id="redaction"' in body and "card_number" in body  # the bundled run is redacted
    assert f'--case={row["case_id"]} --trial {row["trial"]}' in body
    assert f'href="/runs/head/row?case={row["case_id"]}&amp;trial={row["trial"]}"' in body
    assert body.count('class="msg"') == len(json.loads(_envelope(out, row)["messages_json"]))


def _envelope(out: Path, row: dict) -> dict:
    import pyarrow.parquet as pq

    for f in sorted((out / "traces").glob("*/run_id=base/*.parquet")):
        for e in pq.read_table(f).to_pylist():
            if (e["case_id"], e["trial"]) == (row["case_id"], row["trial"]):
                return e
    raise AssertionError("no envelope")


@pytest.mark.slow  # the Prefect test harness's server
def test_compare_page_links_the_changed_row(served) -> None:
    out, url = served
    status, body = get(f"{url}/compare?base=base&head=head")
    assert status == 200
    changed = [(r[0], int(r[1])) for r in cells(body, "changed")]
    assert changed == [CHANGED_CASE]
    case, trial = CHANGED_CASE
    assert f'href="/runs/head/row?case={case}&amp;trial={trial}"' in body


@pytest.mark.slow  # the Prefect test harness's server
@pytest.mark.parametrize("path, status, words", [
    ("/runs/nope", 404, "no run &#39;nope&#39;"),
    ("/runs/bad%20id", 404, "is not a run id"),
    ("/runs/..%2Fetc", 404, "no page at"),
    ("/runs/base?f1_min=2", 400, "not a number in [0, 1]"),
    ("/runs/base?tool=a&tool=b", 400, "given twice"),
    ("/runs/base?colour=red", 400, "unknown filter"),
    ("/runs/base?page=x", 400, "whole number"),
    ("/runs/base?sort=bogus", 400, "unknown sort"),
    ("/runs/base/row?case=0&trial=-1", 400, "trial=&lt;whole number&gt;"),
    ("/runs/base/row?case=nope&trial=0", 404, "has no row of case"),
    ("/compare?base=base", 400, "compare needs"),
    ("/compare?base=base&head=nope", 404, "no run"),
    ("/no/such/page", 404, "no page at"),
])
def test_bad_requests_get_a_page_that_says_what_is_wrong(served, path, status, words) -> None:
    out, url = served
    got, body = get(url + path)
    assert got == status
    assert 'id="error"' in body and words in body and "Traceback" not in body
    assert f"<title>{status}:" in body


@pytest.mark.slow  # the Prefect test harness's server
def test_a_run_without_rows_and_a_corrupted_file(served, tmp_path) -> None:
    out, _ = served
    bare = tmp_path / "bare"
    shutil.copytree(out / "runs", bare / "runs")  # the documents only: the run published no row files
    broken = tmp_path / "broken"
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns(".tooleval"))
    part = sorted((broken / "rows").glob("*/run_id=base/*.parquet"))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with viewer(bare) as url:
        status, body = get(url + "/runs/base")
        assert status == 404 and "has no rows" in body
    with viewer(broken) as url:
        status, body = get(url + "/runs/base")
        assert status == 422 and "cannot be read" in body and "Traceback" not in body
        assert get(url + "/runs/head")[0] == 200  # another run's files are untouched


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # the Prefect test harness's server
def test_the_command_serves_127_0_0_1_and_says_where(bundled_pair) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "tooleval.cli", "view", "--out", str(bundled_pair), "--port", str(port)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            line = process.stdout.readline()
            assert f"at http://127.0.0.1:{port}/" in line
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert get(f"http://127.0.0.1:{port}/")[0] == 200
                    break
                except OSError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            taken = subprocess.run(command, capture_output=True, text=True, timeout=60)
            assert taken.returncode == 2 and "cannot serve on 127.0.0.1" in taken.stderr
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)


@pytest.mark.slow  # the Prefect test harness's server
def test_the_viewer_imports_no_prefect(bundled_pair) -> None:
    code = ("import sys; from tooleval.view import Store, RowFilter; s = Store(sys.argv[1]); r = s.run('base'); "
            "s.page(r, RowFilter()); s.row(r, '0', 0); s.runs(); s.compare('base', 'head'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('prefect', 'ragas')))")
    done = subprocess.run([sys.executable, "-c", code, str(bundled_pair)], capture_output=True, text=True,
                          env={**os.environ}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_query_strings_round_trip() -> None:
    from tooleval.view import RowFilter

    parsed = RowFilter.parse({"tool": "book_reservation", "category": "wrong_args", "f1_max": "0.5", "sort": "f1",
                              "order": "desc", "page": "3"})
    assert RowFilter.parse(dict(p.split("=") for p in parsed.query().split("&"))) == parsed
    assert parsed.query(page=1) == "tool=book_reservation&category=wrong_args&f1_max=0.5&sort=f1&order=desc"


@pytest.mark.slow  # the Prefect test harness's server
def test_every_sort_and_order_pages_as_the_parquet_files_do(served) -> None:
    """Unfiltered pages read the run's rank tables and filtered pages sort the matching rows: both give, for each
    sort and order, the rows pyarrow's reading sorts the same way (nulls last, ties by case id then trial)."""
    out, url = served
    rows = parquet_rows(out, "base")
    columns = {"case": "case_id", "trial": "trial", "f1": "f1", "ragas": "ragas_tool_call_f1", "slice": "slice"}
    for sort, column in columns.items():
        for order in ("asc", "desc"):
            for filtered in (False, True):
                chosen = [r for r in rows if not filtered or r["blocking"]]
                present = sorted((r for r in chosen if r[column] is not None),
                                 key=lambda r: (r["case_id"], r["trial"]))
                present.sort(key=lambda r: r[column], reverse=order == "desc")  # stable: ties keep case, trial
                ordered = present + sorted((r for r in chosen if r[column] is None),
                                           key=lambda r: (r["case_id"], r["trial"]))
                query = urlencode({"sort": sort, "order": order, "size": 25, "page": 3,
                                   **({"blocking": "yes"} if filtered else {})})
                status, body = get(f"{url}/runs/base?{query}")
                assert status == 200
                assert [(r[0], int(r[1])) for r in cells(body, "rows")] == [
                    (r["case_id"], r["trial"]) for r in ordered[50:75]], query


@pytest.mark.slow  # the Prefect test harness's server
def test_the_index_follows_the_committed_files(bundled_pair) -> None:
    """A run is indexed by the files its commit marker names: the same run named with fewer files (as after a
    re-publication) is indexed again, and its figures are those of the files named."""
    import pyarrow.parquet as pq

    from tooleval.view import RowFilter, Store

    store = Store(bundled_pair)
    whole = store.run("base")
    assert len(whole.rows_files) > 1  # else a part of the files is not a different set
    assert store.headline(whole)["rows"] == 200
    part = dataclasses.replace(whole, rows_files=whole.rows_files[:1])
    in_part = pq.read_table(part.rows_files[0], columns=["case_id", "trial", "f1"]).to_pylist()
    assert store.headline(part)["rows"] == len(in_part) < 200
    shown = store.page(part, RowFilter.parse({"size": "200"}))["rows"]
    assert [(r["case_id"], r["trial"]) for r in shown] == sorted((r["case_id"], r["trial"]) for r in in_part)
    assert store.headline(store.run("base"))["rows"] == 200


@pytest.mark.slow  # the Prefect test harness's server
def test_a_damaged_trace_file_spoils_the_row_pages_not_the_rows_table(served, tmp_path) -> None:
    out, _ = served
    broken = tmp_path / "broken"
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns(".tooleval"))
    for part in sorted((broken / "traces").glob("*/run_id=base/*.parquet")):
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    row = parquet_rows(out, "base")[0]
    with viewer(broken) as url:
        status, body = get(url + "/runs/base")
        assert status == 200 and re.search(r'<span id="total">(\d+)</span>', body).group(1) == "200"
        status, body = get(f"{url}/runs/base/row?{urlencode({'case': row['case_id'], 'trial': row['trial']})}")
        assert status == 422 and "cannot be read" in body and "Traceback" not in body


def test_the_runs_pass_rate_counts_only_scored_rows():
    """A run of 2 scored rows, both failing, and one case in scope without a trace: the gate lists 3 failing
    entries (the placeholder of the missing case among them) and the pass rate is 0/2 = 0.0, never
    1 - 3/2 = -0.5 (what the runs page showed for such a run). With 4 scored rows, 3 failing entries of which one
    is an unscored placeholder and one an error row: 1 failing scored row, so 1 - 1/4 = 0.75."""
    from tooleval.view._data import _pass_rate

    def summary(scored: int, failing: int, by_rule: dict[str, int]) -> dict:
        return {"gate": {"failing_rows_count": failing,
                         "counts": {"scored_rows": scored, "failures_by_rule": by_rule}}}

    assert _pass_rate(summary(2, 3, {"reference_mismatch": 2, "unscored": 1})) == 0.0
    assert _pass_rate(summary(4, 3, {"reference_mismatch": 1, "unscored": 1, "row_error": 1})) == 0.75
    assert _pass_rate(summary(0, 1, {"unscored": 1})) is None  # nothing scored: no rate
    assert _pass_rate({}) is None  # no gate
