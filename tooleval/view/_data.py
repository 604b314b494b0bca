"""What the viewer's pages show, read with DuckDB over one results location's committed files: a folder, or an
fsspec URL (``s3://bucket/prefix``) whose filesystem is registered with DuckDB.

Every page is a few queries over the run's Parquet files through the marker-aware readers (only the files a run's
commit marker names): a page of rows, the counts of each filter value and one row's record leave DuckDB, never a
whole run. On object storage DuckDB reads each Parquet object by ranged requests (its footer, then the columns a
query needs), so no run is downloaded. Nothing here imports Prefect, so the server starts fast and stays small.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import duckdb

from tooleval.canonical import MISSING, value_at
from tooleval.dataset import check_name
from tooleval.errors import InputFileError
from tooleval.storage import (GATE_VERDICTS, as_location, committed_files, read_document, scan_parquet_sql,
                              scan_rows_sql, tree_of)

__all__ = ["ViewError", "RowFilter", "FACETS", "SORTS", "PAGE_SIZES", "Store", "mark_calls", "diff_table"]


class ViewError(Exception):
    """A request the viewer cannot answer: an HTTP ``status`` (4xx), what is wrong and what to do about it."""

    def __init__(self, status: int, problem: str, fix: str = "") -> None:
        super().__init__(status, problem, fix)
        self.status, self.problem, self.fix = status, problem, fix


_TOOLS = ("list_distinct(list_concat([c.name FOR c IN coalesce(expected_calls, [])], "
          "[c.name FOR c IN coalesce(observed_calls, [])]))")
_RULES = "list_distinct([v.rule FOR v IN coalesce(violations, [])])"

FACETS: dict[str, tuple[str, bool]] = {
    "tool": ("tools", True),
    "rule": ("rules", True),
    "slice": ("slice", False),
    "category": ("categories", True),
    "owner": ("failure_owner", False),
    "blocking": ("CASE WHEN blocking THEN 'yes' ELSE 'no' END", False),
    "verdict": ("gate_verdict", False),
}
"""Filter name -> (SQL of the row's value over a run's index table, whether it is a list of values). A filter
keeps the rows whose value is (or whose list holds) the chosen one; each page counts the rows of each value under
the other filters."""

SORTS = {"case": "case_id", "trial": "trial", "f1": "f1", "ragas": "ragas_tool_call_f1", "slice": "slice"}
"""``sort=`` name -> row column. Ties break by case id, then trial, so a page's rows are always the same."""

PAGE_SIZES = (25, 50, 100, 200)
_FACET_VALUES = 60
"""Values listed per filter (the most frequent first); a chosen value is always listed."""


@dataclass(frozen=True)
class RowFilter:
    """The rows table's query string, checked: filters, free text in case id, F1 range, sort and page."""

    values: dict[str, str] = field(default_factory=dict)
    q: str = ""
    f1_min: float | None = None
    f1_max: float | None = None
    sort: str = "case"
    order: str = "asc"
    page: int = 1
    size: int = 50

    @classmethod
    def parse(cls, params: Any) -> "RowFilter":
        """Read a query string (a mapping with ``multi_items()`` or ``items()``).

        Raises:
            ViewError: 400 for an unknown parameter, a repeated one, an F1 bound that is not a number in [0, 1],
                an unknown sort or order, a page that is not an integer >= 1 or a page size not in
                :data:`PAGE_SIZES`.
        """
        items = list(params.multi_items() if hasattr(params, "multi_items") else params.items())
        seen: dict[str, str] = {}
        allowed = {*FACETS, "q", "f1_min", "f1_max", "sort", "order", "page", "size"}
        for key, value in items:
            if key not in allowed:
                raise ViewError(400, f"unknown filter {key!r}.", f"use {', '.join(sorted(allowed))}.")
            if key in seen:
                raise ViewError(400, f"filter {key!r} is given twice.", "give each filter once.")
            seen[key] = value
        values = {k: v for k, v in seen.items() if k in FACETS and v != ""}
        if "blocking" in values and values["blocking"] not in ("yes", "no"):
            raise ViewError(400, f"blocking={values['blocking']!r} is neither yes nor no.", "use blocking=yes or no.")
        if "verdict" in values and values["verdict"] not in GATE_VERDICTS:
            raise ViewError(400, f"verdict={values['verdict']!r} is not a gate verdict.",
                            f"use verdict={' or '.join(GATE_VERDICTS)}.")
        bounds = {}
        for key in ("f1_min", "f1_max"):
            text = seen.get(key, "")
            if text == "":
                bounds[key] = None
                continue
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not 0 <= number <= 1:
                raise ViewError(400, f"{key}={text!r} is not a number in [0, 1].", f"use e.g. {key}=0.5.")
            bounds[key] = number
        sort, order = seen.get("sort") or "case", seen.get("order") or "asc"
        if sort not in SORTS:
            raise ViewError(400, f"unknown sort {sort!r}.", f"use sort={' or '.join(SORTS)}.")
        if order not in ("asc", "desc"):
            raise ViewError(400, f"unknown order {order!r}.", "use order=asc or order=desc.")
        numbers = {}
        for key, default in (("page", 1), ("size", 50)):
            text = seen.get(key) or str(default)
            if not text.isdigit() or int(text) < 1:
                raise ViewError(400, f"{key}={text!r} is not a whole number >= 1.", f"use e.g. {key}={default}.")
            numbers[key] = int(text)
        if numbers["size"] not in PAGE_SIZES:
            raise ViewError(400, f"size={numbers['size']} is not a page size.",
                            f"use size={' or '.join(map(str, PAGE_SIZES))}.")
        return cls(values=values, q=seen.get("q", ""), f1_min=bounds["f1_min"], f1_max=bounds["f1_max"],
                   sort=sort, order=order, page=numbers["page"], size=numbers["size"])

    def query(self, **changes: Any) -> str:
        """This filter's query string with ``changes`` (``None`` drops a key), defaults left out: the stable
        URL of a page."""
        state: dict[str, Any] = {**self.values, "q": self.q, "f1_min": self.f1_min, "f1_max": self.f1_max,
                                 "sort": self.sort, "order": self.order, "page": self.page, "size": self.size}
        state.update(changes)
        defaults = {"sort": "case", "order": "asc", "page": 1, "size": 50, "q": ""}
        kept = {k: v for k, v in state.items() if v is not None and v != "" and defaults.get(k, object()) != v}
        return urlencode(kept)

    def where(self, leave_out: str | None = None) -> tuple[str, dict[str, Any]]:
        """SQL condition and parameters of every filter but ``leave_out`` (a facet name)."""
        parts, params = ["true"], {}
        for name, value in self.values.items():
            if name == leave_out:
                continue
            sql, is_list = FACETS[name]
            params[f"v_{name}"] = value
            parts.append(f"list_contains({sql}, $v_{name})" if is_list else f"({sql}) = $v_{name}")
        if self.q:
            params["q"] = self.q
            parts.append("contains(lower(case_id), lower($q))")
        if self.f1_min is not None:
            params["f1_min"] = self.f1_min
            parts.append("f1 >= $f1_min")
        if self.f1_max is not None:
            params["f1_max"] = self.f1_max
            parts.append("f1 <= $f1_max")
        return " AND ".join(parts), params


_INDEX = """
SELECT case_id, trial, slice, f1, ragas_tool_call_f1, exact_match, calls_match, coalesce(blocking, false) AS blocking,
       gate_verdict, error_kind, failure_owner, coalesce(mismatch_categories, []) AS categories, {rules} AS rules,
       {tools} AS tools, coalesce(name_only, false) AS name_only, coalesce(len(expected_calls), 0) AS n_expected,
       coalesce(len(observed_calls), 0) AS n_observed
FROM {source}
"""
"""The narrow copy of a run's rows every rows page reads: the columns the table shows and filters on, and no call
or trace text (which is most of the Parquet bytes)."""

_LISTED = ("case_id, trial, slice, f1, ragas_tool_call_f1, exact_match, calls_match, blocking, gate_verdict, "
           "error_kind, failure_owner, categories, rules, tools")

_HEADLINE = """
SELECT count(*) AS rows, count(*) FILTER (WHERE exact_match) AS exact, count(*) FILTER (WHERE blocking) AS blocking,
       count(*) FILTER (WHERE gate_verdict = 'fail') AS gate_fail, count(gate_verdict) AS gate_judged,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors, avg(f1) FILTER (WHERE NOT name_only) AS mean_f1,
       avg(ragas_tool_call_f1) AS mean_ragas, sum(n_expected) AS expected_calls, sum(n_observed) AS observed_calls
FROM {table}
"""

_MEMORY_LIMIT = "128MB"
"""DuckDB's buffer pool: a run's index lives in a database file, so a large run is read from disk in blocks
instead of being held; with Python, Starlette and Jinja this keeps the server under 400 MB."""


def _records(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


@dataclass(frozen=True)
class RunRef:
    """One published run: its id, revision, summary and its committed files (rows and traces)."""

    run_id: str
    revision: str
    summary: dict[str, Any]
    rows_files: tuple[str, ...]
    """The committed row files (empty when the run published no rows)."""
    traces_files: tuple[str, ...]

    @property
    def rows_source(self) -> str | None:
        """A :func:`tooleval.storage.scan_rows_sql` expression over the rows, or ``None`` without rows."""
        return scan_rows_sql(list(self.rows_files)) if self.rows_files else None


@dataclass(frozen=True)
class _Index:
    """A run's rows table, built once per set of committed files: the table's name in the Store's database, the
    headline and the unfiltered count of each facet value."""

    files: tuple[tuple[str, ...], tuple[str, ...]]
    table: str
    headline: dict[str, Any]
    facets: dict[str, list[tuple[Any, int]]]
    ranked: set[tuple[str, str]] = field(default_factory=set)
    """The tables made on first use, as name suffixes ``(a, b)`` of ``<table>_<a>_<b>``: each (sort, order) whose
    rank table exists (rank ``r``, 1..rows, and the index row's ``rowid`` ``k``), and ``("traces", "")`` once
    the places of the trace envelopes are known."""


class Store:
    """Queries over one results location (``--out``: a folder, or an fsspec URL such as ``s3://bucket/prefix``).
    Thread-safe: each query runs on its own cursor.

    The first page of a run builds the run's index (one read of its Parquet files: the narrow columns of
    :data:`_INDEX` and where each (case, trial) is stored; the first unfiltered page of each sort and order adds
    that order's ranks), in a DuckDB database file in a temporary folder removed when the Store is. Pages then read the index, and a row page reads the one
    row file and trace file that hold the row. The index is keyed by the files the run's commit marker names, so
    a re-published run is indexed again; no page's answer is kept.

    On object storage the index still lives in the local temporary folder (it is the viewer's own working copy of
    a few narrow columns, not the results); the runs come from the run catalog (:func:`tooleval.runs.catalog.
    list_runs`), the documents from what each run's commit marker names, and the Parquet objects are read by DuckDB
    through the URL's fsspec filesystem, registered with the Store's database (DuckDB's own ``httpfs`` extension
    is downloaded from a server these machines may not reach).

    Args:
        out: The results folder (made absolute), or a URL (``file://`` URLs become their path).

    Raises:
        ValueError: a URL that names no bucket (``s3://``).
    """

    def __init__(self, out: str | Path) -> None:
        import tempfile
        import weakref

        location = as_location(out)
        self.out: Path | str = location.resolve() if isinstance(location, Path) else location
        folder = tempfile.mkdtemp(prefix="tooleval-view-")
        self._con = duckdb.connect(str(Path(folder) / "index.duckdb"),
                                   config={"memory_limit": _MEMORY_LIMIT, "preserve_insertion_order": "false"})
        if isinstance(self.out, str):
            # registered once on the database: every cursor of a page's query reads the URLs through it
            self._con.register_filesystem(tree_of(self.out).fs)
        self._finalizer = weakref.finalize(self, _remove_index, self._con, folder)
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._indexes: dict[str, _Index] = {}
        self._built = 0

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._con.cursor()

    def _run_query(self, run: RunRef, sql: str, params: dict | None = None,
                   cursor: duckdb.DuckDBPyConnection | None = None) -> list[dict[str, Any]]:
        try:
            return _records((cursor or self._cursor()).execute(sql, params or {}))
        except duckdb.Error as exc:
            raise ViewError(422, f"run {run.run_id!r}: its Parquet files cannot be read: {exc}".splitlines()[0],
                            f"re-publish the run (tooleval rescore --run-id {run.run_id}) or delete it "
                            f"(tooleval runs --delete {run.run_id}).") from None

    # -- runs ---------------------------------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """The runs ``tooleval runs`` lists, newest first, with the dataset name and the gate's pass rate."""
        from tooleval.runs.catalog import list_runs

        listed = []
        for info in list_runs(self.out):
            summary = self._summary(info.run_id) or {}
            gate = summary.get("gate") or {}
            listed.append({**info.__dict__, "dataset": (summary.get("dataset") or {}).get("name", ""),
                           "pass_rate": _pass_rate(summary),
                           "failing_rows": gate.get("failing_rows_count")})
        return listed

    def _summary(self, run_id: str) -> dict[str, Any] | None:
        """The run's committed ``summary.json``, or ``None`` when it has none or it cannot be read."""
        return self.document(run_id, "summary.json", json_=True)

    def document(self, run_id: str, name: str, *, json_: bool = False) -> Any:
        """The committed content of ``runs/<run_id>/<name>`` (the copy the run's commit marker names): text, or
        parsed JSON with ``json_``; ``None`` when there is none or it cannot be read or parsed."""
        try:
            data = read_document(self.out, f"runs/{run_id}/{name}")
            if data is None:
                return None
            text = data.decode("utf-8")
            return json.loads(text) if json_ else text
        except (OSError, ValueError, InputFileError):  # UnicodeDecodeError is a ValueError
            return None

    def run(self, run_id: str) -> RunRef:
        """The published run ``run_id``.

        Raises:
            ViewError: 404 for an unsafe run id or one that is not published under the results folder.
        """
        try:
            check_name(run_id, what="run id")
        except InputFileError:
            raise ViewError(404, f"{run_id!r} is not a run id.", "the runs page lists the runs.") from None
        summary = self._summary(run_id)
        if summary is None:
            raise ViewError(404, f"no run {run_id!r} under {self.out}.", "the runs page lists the runs.")
        revision = summary.get("dataset_revision", "")
        try:
            rows = committed_files(self.out, "rows", revision, run_id)
            traces = committed_files(self.out, "traces", revision, run_id)
        except InputFileError as exc:
            raise ViewError(422, f"run {run_id!r}: {exc.problem}", exc.fix) from None
        return RunRef(run_id, revision, summary, tuple(map(str, rows)), tuple(map(str, traces)))

    def rows_source(self, run: RunRef) -> str:
        if run.rows_source is None:
            raise ViewError(404, f"run {run.run_id!r} has no rows (a legacy-only run?).",
                            "open a run of the row-level path (tooleval run without --legacy-only).")
        return run.rows_source

    def _index(self, run: RunRef) -> _Index:
        """The run's index, built on first use (about 3 s per million rows on two cores) and again when the
        run's committed files change.

        Raises:
            ViewError: 404 for a run without rows, 422 when its Parquet files cannot be read.
        """
        source = self.rows_source(run)
        files = (run.rows_files, run.traces_files)
        with self._build_lock:
            known = self._indexes.get(run.run_id)
            if known is not None and known.files == files:
                return known
            self._built += 1
            table = f"run_{self._built}"
            cursor = self._cursor()
            self._run_query(run, f"CREATE TABLE {table} AS {_INDEX.format(source=source, rules=_RULES, tools=_TOOLS)}",
                            cursor=cursor)
            # where each row is stored, so a row page reads one row file (the traces' places are found by the
            # first row page: a damaged trace file then spoils the row pages, not the rows table)
            self._run_query(run, f"CREATE TABLE {table}_rows AS SELECT case_id, trial, filename AS file "
                                 f"FROM {scan_parquet_sql(list(run.rows_files))}", cursor=cursor)
            headline = self._run_query(run, _HEADLINE.format(table=table), cursor=cursor)[0]
            facets = {name: self._facet(run, cursor, table, name, "true", {}) for name in FACETS}
            if known is not None:
                for suffix in ("", "_rows", *(f"_{s}_{o}".rstrip("_") for s, o in known.ranked)):
                    cursor.execute(f"DROP TABLE IF EXISTS {known.table}{suffix}")
            index = _Index(files, table, headline, facets)
            self._indexes[run.run_id] = index
            return index

    def _ranks(self, run: RunRef, index: _Index, sort: str, order: str) -> str:
        """The name of the index's rank table of ``sort`` and ``order``, made on first use (one sort of the key
        column and the row ids: about half a second per million rows)."""
        table = f"{index.table}_{sort}_{order}"
        with self._build_lock:
            if (sort, order) not in index.ranked:
                self._run_query(run, f"CREATE TABLE {table} AS SELECT row_number() OVER (ORDER BY {SORTS[sort]} "
                                     f"{order.upper()} NULLS LAST, case_id, trial)::INTEGER AS r, rowid AS k "
                                     f"FROM {index.table}")
                index.ranked.add((sort, order))
        return table

    def _traces_places(self, run: RunRef, index: _Index) -> str:
        """The name of the index's table of where each trace envelope is stored, made on first use."""
        table = f"{index.table}_traces"
        with self._build_lock:
            if ("traces", "") not in index.ranked:
                self._run_query(run, f"CREATE TABLE {table} AS SELECT case_id, trial, filename AS file "
                                     f"FROM {scan_parquet_sql(list(run.traces_files))}")
                index.ranked.add(("traces", ""))
        return table

    def _facet(self, run: RunRef, cursor: duckdb.DuckDBPyConnection, source: str, name: str, where: str,
               params: dict[str, Any]) -> list[tuple[Any, int]]:
        sql, is_list = FACETS[name]
        value = f"unnest({sql})" if is_list else f"({sql})"
        counted = self._run_query(run, f"SELECT v, count(*) AS n FROM (SELECT {value} AS v FROM {source} "
                                       f"WHERE {where}) WHERE v IS NOT NULL GROUP BY v ORDER BY n DESC, v "
                                       f"LIMIT {_FACET_VALUES}", params, cursor=cursor)
        return [(r["v"], r["n"]) for r in counted]

    def headline(self, run: RunRef) -> dict[str, Any]:
        """The run's figures, counted over its rows: rows, exact, blocking, errors, means and call counts."""
        return dict(self._index(run).headline)

    def page(self, run: RunRef, filters: RowFilter) -> dict[str, Any]:
        """One page of the run's rows under ``filters``, the count of all matching rows and, per facet, the
        count of each value under the other filters.

        Returns:
            ``{rows: [...], total, pages, facets: {name: [(value, count)]}}``.

        Raises:
            ViewError: 404 for a run without rows, 422 when its Parquet files cannot be read.
        """
        index = self._index(run)
        cursor = self._cursor()
        offset = (filters.page - 1) * filters.size
        where, params = filters.where()
        narrowed = where != "true"
        if narrowed:
            # the matching rows once, in a table of this cursor's own: the count, the page and every facet that
            # is not chosen read it instead of the whole run
            self._run_query(run, f"CREATE OR REPLACE TEMP TABLE chosen AS SELECT * FROM {index.table} WHERE {where}",
                            params, cursor=cursor)
            total = self._run_query(run, "SELECT count(*) AS n FROM chosen", cursor=cursor)[0]["n"]
            rows = self._run_query(run, f"SELECT {_LISTED} FROM chosen ORDER BY {SORTS[filters.sort]} "
                                        f"{filters.order.upper()} NULLS LAST, case_id, trial LIMIT {filters.size} "
                                        f"OFFSET {offset}", cursor=cursor)
        else:
            # the ranks number the whole run 1..N in this order, so a page is a range of ranks: no sort of the
            # run per request, however deep the page
            total = index.headline["rows"]
            ranks = self._ranks(run, index, filters.sort, filters.order)
            rows = self._run_query(run, f"SELECT {', '.join('i.' + c for c in _LISTED.split(', '))} FROM "
                                        f"{index.table} AS i JOIN (SELECT r, k FROM {ranks} WHERE r > {offset} AND "
                                        f"r <= {offset + filters.size}) AS p ON i.rowid = p.k ORDER BY p.r",
                                   cursor=cursor)
        pages = max(1, -(-total // filters.size))
        facets = {}
        for name in FACETS:
            if not narrowed:
                listed = list(index.facets[name])
            elif name not in filters.values:
                listed = self._facet(run, cursor, "chosen", name, "true", {})
            else:
                other, other_params = filters.where(leave_out=name)
                listed = (list(index.facets[name]) if other == "true"
                          else self._facet(run, cursor, index.table, name, other, other_params))
            chosen = filters.values.get(name)
            if chosen is not None and chosen not in {v for v, _ in listed}:
                listed.append((chosen, 0))
            facets[name] = listed
        if narrowed:
            cursor.execute("DROP TABLE IF EXISTS chosen")
        return {"rows": rows, "total": total, "pages": pages, "facets": facets}

    def row(self, run: RunRef, case_id: str, trial: int) -> dict[str, Any]:
        """One row's record and its trace envelope (``None`` when the run kept none for it).

        Raises:
            ViewError: 404 when the run has no row of ``(case_id, trial)``, 422 when its files cannot be read.
        """
        index = self._index(run)
        cursor = self._cursor()
        key = {"c": case_id, "t": trial}
        found = []
        for located in self._run_query(run, f"SELECT DISTINCT file FROM {index.table}_rows WHERE case_id = $c AND "
                                            f"trial = $t", key, cursor=cursor):
            found += self._run_query(run, f"SELECT * FROM {scan_rows_sql([located['file']])} WHERE case_id = $c "
                                          f"AND trial = $t", key, cursor=cursor)
        if not found:
            raise ViewError(404, f"run {run.run_id!r} has no row of case {case_id!r}, trial {trial}.",
                            "open a row from the run's rows table.")
        envelope = None
        if run.traces_files:
            places = self._traces_places(run, index)
            for located in self._run_query(run, f"SELECT DISTINCT file FROM {places} WHERE case_id = $c "
                                                f"AND trial = $t", key, cursor=cursor):
                envelopes = self._run_query(run, f"SELECT * FROM {scan_parquet_sql([located['file']])} WHERE "
                                                 f"case_id = $c AND trial = $t", key, cursor=cursor)
                envelope = envelopes[0] if envelopes else envelope
        return {"row": found[0], "envelope": envelope}

    def other_runs(self, run: RunRef, case_id: str, trial: int) -> list[str]:
        """The other published runs that have a row of ``(case_id, trial)``, by run id."""
        try:
            # only the other runs' committed files, and of them only the key columns
            files = [str(f) for f in committed_files(self.out, "rows") if f"/run_id={run.run_id}/" not in str(f)]
            if not files:
                return []
            found = self._cursor().execute(
                f"SELECT DISTINCT run_id FROM {scan_parquet_sql(files)} WHERE case_id = $c AND trial = $t "
                f"ORDER BY run_id", {"c": case_id, "t": trial}).fetchall()
        except (duckdb.Error, InputFileError):
            return []  # another run's unreadable file must not hide this row's page
        return [r[0] for r in found]

    def compare(self, base: str, head: str) -> dict[str, Any]:
        """``tooleval compare BASE HEAD``'s result (:func:`tooleval.runs.compare.compare_runs`).

        Raises:
            ViewError: 404 for an unknown run, 422 for two runs that cannot be compared.
        """
        from tooleval.runs.compare import compare_runs

        for run_id in (base, head):
            self.rows_source(self.run(run_id))
        try:
            return compare_runs(self.out, base, head)
        except InputFileError as exc:
            raise ViewError(422, exc.problem, exc.fix) from None
        except duckdb.Error as exc:
            raise ViewError(422, f"runs {base!r} and {head!r} cannot be read: {exc}".splitlines()[0],
                            "re-publish or delete the run whose file is damaged.") from None


def _remove_index(con: duckdb.DuckDBPyConnection, folder: str) -> None:
    """Close a Store's database and remove its folder (the Store is gone, or the interpreter is exiting)."""
    import shutil

    try:
        con.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pass_rate(summary: dict[str, Any]) -> float | None:
    """The share of scored rows that pass the gate, or ``None`` without a gate: ``1 - failing / scored``, where
    ``failing`` counts only scored rows. The gate's failing list also holds a placeholder for each case in scope
    without a row (rule ``unscored``) and each row that carries an error (rule ``row_error``); neither is a scored
    row, so counting them would give a rate below 0 (``tooleval compare`` leaves error rows out of a pass rate too).
    """
    gate = summary.get("gate") or {}
    counts = gate.get("counts") or {}
    scored = counts.get("scored_rows", gate.get("scored_rows", summary.get("scored_rows")))
    failing = gate.get("failing_rows_count")
    if not scored or failing is None:
        return None
    by_rule = counts.get("failures_by_rule") or {}
    failing_scored = failing - by_rule.get("unscored", 0) - by_rule.get("row_error", 0)
    return min(1.0, max(0.0, 1 - failing_scored / scored))


def _calls(values: list[dict] | None) -> list[dict]:
    return [dict(c) for c in values or []]


def mark_calls(row: dict[str, Any]) -> dict[str, list[dict]]:
    """The reference and observed calls of a row, each marked ``matched`` | ``missing`` | ``extra`` |
    ``wrong_args`` from the row's own ``missing_calls``, ``extra_calls`` and ``wrong_args`` (multisets, by
    name and canonical argument text): a wrong-arguments pair is one missing and one extra call of a tool.

    Returns:
        ``{"reference": [...], "observed": [...]}``: each call a dict with ``name``, ``args_json``, ``mark`` and,
        for ``wrong_args``, the pair's differing ``paths``.
    """
    def key(call: dict) -> tuple:
        return call.get("name"), call.get("args_json"), call.get("args_raw")

    reference = _calls(row.get("reference_calls") if row.get("reference_calls") is not None
                       else row.get("expected_calls"))
    observed = _calls(row.get("observed_calls"))
    pairs = [dict(p) for p in row.get("wrong_args") or []]
    marked: dict[str, list[dict]] = {}
    for side, calls, unmatched, pair_key in (("reference", reference, row.get("missing_calls"), "expected_args_json"),
                                             ("observed", observed, row.get("extra_calls"), "observed_args_json")):
        left = [key(c) for c in unmatched or []]
        free_pairs = list(pairs)
        for call in calls:
            call["mark"], call["paths"] = "matched", []
            if key(call) in left:
                left.remove(key(call))
                pair = next((p for p in free_pairs if p["name"] == call.get("name")
                             and p[pair_key] == call.get("args_json")), None)
                if pair is not None:
                    free_pairs.remove(pair)
                    call["mark"], call["paths"] = "wrong_args", list(pair.get("paths") or [])
                else:
                    call["mark"] = "missing" if side == "reference" else "extra"
        marked[side] = calls
    return marked


def _shown(value: Any) -> str:
    return "(absent)" if value is MISSING else json.dumps(value, ensure_ascii=False, sort_keys=True)


def diff_table(pair: dict[str, Any]) -> list[dict[str, str]]:
    """One wrong-arguments pair as rows ``{path, expected, observed}``: the value at each differing path on each
    side (canonical JSON text; ``(absent)`` where a side has no such path)."""
    try:
        expected = json.loads(pair.get("expected_args_json") or "{}")
        observed = json.loads(pair.get("observed_args_json") or "{}")
    except ValueError:
        expected = observed = MISSING
    return [{"path": path, "expected": _shown(value_at(expected, path)), "observed": _shown(value_at(observed, path))}
            for path in pair.get("paths") or []]
