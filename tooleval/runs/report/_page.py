"""The report page: one HTML file with the vega-embed bundle inlined (vl-convert ships Vega, Vega-Lite and
vega-embed as one script), the plots' specs inlined, and the tables rendered by Jinja2. It makes no network
request: no CDN, no font, no image URL; the embed menu's "open in editor" link is switched off."""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from typing import Any

import jinja2

from tooleval.rules import FINDING_KINDS

__all__ = ["render_page", "javascript_bundle"]

logger = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def javascript_bundle() -> str:
    """vega-embed with Vega and Vega-Lite, as one script (vl-convert's offline copy; ~0.9 MB).

    vl-convert bundles it anew on each call (~1-2 s of CPU, a fifth of a small cached run), and the result
    depends only on the vl-convert and Vega-Lite versions: it is kept in this machine's cache
    (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``tooleval/vl-convert/``) under both versions. A cache that
    cannot be read or written is skipped.
    """
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    from tooleval.storage import cache_root

    version = vl_version_for_vl_convert()
    cached = cache_root() / "vl-convert" / f"vega-embed-{vl_convert.__version__}-{version}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    bundle = vl_convert.javascript_bundle(vl_version=version)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}")
        partial.write_text(bundle, encoding="utf-8")
        os.replace(partial, cached)  # whole or absent: a reader never sees half a bundle
    except OSError as exc:
        logger.debug("could not cache the vega-embed bundle at %s: %s", cached, exc)
    return bundle


def _script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (``</`` cannot close it)."""
    return json.dumps(value, ensure_ascii=False, default=str).replace("</", "<\\/")


def _call(call: dict) -> str:
    if call.get("args_json") is None and call.get("args_raw") is not None:
        return f"{call['name']}({call['args_raw']}) [malformed: {call.get('parse_error')}]"
    if call.get("args_json") is None and call.get("parse_error") is None:
        return f"{call['name']}(...) [arguments not captured]"
    return f"{call['name']}({call.get('args_json') or ''})"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "-" if value is None else str(value)


_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_ENV.filters["fmt"] = _fmt
_ENV.filters["call"] = _call
_ENV.filters["script_json"] = _script_json

_TEMPLATE = _ENV.from_string("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:">
<title>tooleval report: run {{ run_id }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.headline td:first-child { font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.plot { border: 1px solid #eee; padding: 0.5em; }
code, pre { font-size: 0.85em; white-space: pre-wrap; word-break: break-all; }
.blocking { color: #b00; font-weight: 600; }
details { scroll-margin-top: 0.5em; }
details:target { outline: 2px solid #f2c744; }
</style>
<script>{{ bundle | safe }}</script>
</head>
<body>
<h1>Run {{ run_id }}</h1>
<p>dataset revision <code>{{ summary.dataset_revision }}</code>; completed {{ summary.completed_at | fmt }};
tooleval {{ summary.versions.tooleval }}, ragas {{ summary.versions.ragas }}; gate:
<strong id="gate-verdict">{{ gate_label }}</strong>; drift check: <strong>{{ drift_label }}</strong></p>

<h2>Headline</h2>
<table class="headline" id="headline">
{% for label, value in headline %}
<tr><td>{{ label }}</td><td class="num">{{ value | fmt }}</td></tr>
{% endfor %}
</table>

<h2>Plots</h2>
<div class="plots">
{% for name in charts %}
<div class="plot" id="plot-{{ name }}"></div>
{% endfor %}
</div>

{% for title, kind in (("Slices", "slice"), ("Tool families", "family")) %}
<h2>{{ title }}</h2>
<table id="table-{{ kind }}">
<tr><th>{{ kind }}</th><th>rows</th><th>quarantined</th><th>exact match</th><th>mean f1</th><th>min f1</th>
<th>fp</th><th>fn</th><th>failing rows</th><th>floors</th><th>verdict</th></tr>
{% for s in groups if s.kind == kind %}
<tr><td>{{ s.name }}</td><td class="num">{{ s.rows }}</td><td class="num">{{ s.quarantined_rows }}</td>
<td class="num">{{ s.exact_match_rows }}</td><td class="num">{{ s.mean_f1 | fmt }}</td>
<td class="num">{{ s.min_f1 | fmt }}</td><td class="num">{{ s.fp }}</td><td class="num">{{ s.fn }}</td>
<td class="num">{{ s.failing_rows }}</td>
<td>{{ ("met" if s.passed else "not met: " ~ s.failures | join("; ")) if s.configured else "none set" }}</td>
<td class="verdict {{ 'blocking' if s.failing_rows or not s.passed else '' }}">{{ "FAIL" if s.failing_rows or not s.passed else "PASS" }}</td></tr>
{% endfor %}
</table>
{% endfor %}
<p>A slice or tool family fails when one of its rows fails the gate (failing rows above 0) or when it misses a
floor set in gate.toml; either fails the run's gate.</p>

<h2>Tool schema findings</h2>
{% if not schema_checked %}
<p id="schema-note">No call was checked: the dataset has no tools.json (or the rows predate the check).</p>
{% else %}
<p id="schema-note">Observed calls checked against their tools.json schemas in {{ schema_checked }} row(s):
{{ summary.schema_findings }} finding(s) in {{ summary.rows_with_schema_findings }} row(s). Findings never change
f1; they are advisory unless gate.toml's <code>[tool_schema] blocking_tools</code> names the tool.</p>
{% endif %}
<table id="table-schema">
<tr><th>tool</th>{% for k in finding_kinds %}<th>{{ k }}</th>{% endfor %}</tr>
{% for tool, counts in schema_by_tool | dictsort %}
<tr><td>{{ tool }}</td>{% for k in finding_kinds %}<td class="num">{{ counts.get(k, 0) }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% if findings %}
<table id="schema-findings">
<tr><th>case</th><th>trial</th><th>call #</th><th>tool</th><th>kind</th><th>path</th><th>detail</th></tr>
{% for f in findings %}
<tr><td>{{ f.case_id }}</td><td class="num">{{ f.trial }}</td><td class="num">{{ f.call }}</td><td>{{ f.tool }}</td>
<td>{{ f.kind }}</td><td><code>{{ f.path }}</code></td><td>{{ f.detail }}</td></tr>
{% endfor %}
</table>
<p>{{ findings | length }} finding(s) listed (at most {{ finding_limit }}).</p>
{% endif %}

<h2>Failing rows</h2>
<p id="failing-note">{{ failing }} row(s) fail the gate (row_outcome = "{{ row_outcome }}"{% if passes_when %}: a row
passes when {{ passes_when }}{% endif %}; waived and quarantined rows excluded); {{ rows | length }} shown, the worst
first{% if listed is not none %} (the gate lists at most {{ listed }}: <code>listed_rows</code> in gate.toml){% endif %}.</p>
<p id="other-counts">Counted apart from the gate: {{ not_exact }} scored row(s) not an exact match, {{ errored }}
row(s) with errors.</p>
<p>
<label>tool <select id="filter-tool"><option value="">(all)</option>
{% for t in tools %}<option>{{ t }}</option>{% endfor %}</select></label>
<label>slice <select id="filter-slice"><option value="">(all)</option>
{% for s in slices %}<option>{{ s }}</option>{% endfor %}</select></label>
<label>category <select id="filter-category"><option value="">(all)</option>
{% for c in categories %}<option>{{ c }}</option>{% endfor %}</select></label>
<span id="shown-count"></span>
</p>
<table id="failing-rows">
<thead><tr><th>case</th><th>trial</th><th>slice</th><th>f1</th><th>ragas f1</th><th>categories</th>
<th>failing rules</th><th>evidence</th></tr></thead>
<tbody>
{% for r in rows %}
<tr data-case="{{ r.case_id }}" data-trial="{{ r.trial }}" data-slice="{{ r.slice or '' }}"
 data-tools="{{ r.tools | join('|') }}" data-categories="{{ r.categories | join('|') }}">
<td>{{ r.case_id }}</td><td class="num">{{ r.trial }}</td><td>{{ r.slice | fmt }}</td>
<td class="num">{{ r.f1 | fmt }}</td><td class="num">{{ r.ragas_tool_call_f1 | fmt }}</td>
<td>{{ r.categories | join(", ") }}</td>
<td class="{{ 'blocking' if r.blocking or r.gate_rules else '' }}">{{ (r.gate_rules or r.blocking_rules) | join(", ") }}</td>
<td><a class="evidence-link" href="#evidence-{{ loop.index }}">evidence</a></td></tr>
{% endfor %}
</tbody>
</table>

<h2>Evidence</h2>
{% for r in rows %}
<details id="evidence-{{ loop.index }}">
<summary>{{ r.case_id }} #{{ r.trial }}: {{ (r.gate_rules or r.blocking_rules or r.categories) | join(", ") }}{% if r.gate_rules and r.categories %} ({{ r.categories | join(", ") }}){% endif %}</summary>
{% if r.error %}<p>error: <code>{{ r.error }}</code></p>{% endif %}
{% if r.missing_calls %}<p>missing calls:</p><ul>{% for c in r.missing_calls %}<li><code>{{ c | call }}</code></li>{% endfor %}</ul>{% endif %}
{% if r.extra_calls %}<p>extra calls:</p><ul>{% for c in r.extra_calls %}<li><code>{{ c | call }}</code></li>{% endfor %}</ul>{% endif %}
{% if r.wrong_args %}<p>wrong arguments:</p><ul>{% for w in r.wrong_args %}<li><code>{{ w.name }}</code> differs at
<code>{{ (w.paths or []) | join(", ") }}</code>: expected <code>{{ w.expected_args_json }}</code>, observed
<code>{{ w.observed_args_json }}</code></li>{% endfor %}</ul>{% endif %}
{% if r.schema_findings %}<p>tool schema findings:</p><ul>{% for f in r.schema_findings %}<li>call #{{ f.call_index + 1 }}
<code>{{ f.tool }}</code> {{ f.kind }}{% if f.path %} at <code>{{ f.path }}</code>{% endif %}: {{ f.detail }}</li>{% endfor %}</ul>{% endif %}
{% if r.violations %}<p>violations:</p><ul>{% for v in r.violations %}<li>{{ v.severity }} <code>{{ v.rule }}</code>
{{ v.tool | fmt }}: {{ v.detail }}</li>{% endfor %}</ul>{% endif %}
<p>trace digest <code>{{ r.trace_digest | fmt }}</code>; hand it to its owner:
<code>tooleval handoff --run-id {{ run_id }} --case {{ r.case_id }} --trial {{ r.trial }}</code></p>
</details>
{% endfor %}

{% if drift %}
<h2>Drift check</h2>
<p>{{ drift.verdict }}: legacy {{ drift.legacy.value | fmt }} over {{ drift.legacy.rows }} rows, row-level
{{ drift.new.value | fmt }} over {{ drift.new.rows }} rows; {{ drift.rows_differing | length }} row(s) differ.</p>
{% for reason in drift.reasons %}<p>{{ reason }}</p>{% endfor %}
{% endif %}

<script>
const specs = {{ specs | script_json | safe }};
const pending = Object.entries(specs).map(([name, spec]) =>
  vegaEmbed("#plot-" + name, spec, {actions: false, renderer: "svg"}));
Promise.all(pending).then(() => { document.body.dataset.plotsReady = "yes"; })
  .catch((error) => { console.error(error); document.body.dataset.plotsReady = "failed"; });
function applyFilters() {
  const tool = document.getElementById("filter-tool").value;
  const slice = document.getElementById("filter-slice").value;
  const category = document.getElementById("filter-category").value;
  let shown = 0;
  for (const row of document.querySelectorAll("#failing-rows tbody tr")) {
    const ok = (!tool || row.dataset.tools.split("|").includes(tool))
      && (!slice || row.dataset.slice === slice)
      && (!category || row.dataset.categories.split("|").includes(category));
    row.hidden = !ok;
    if (ok) shown += 1;
  }
  document.getElementById("shown-count").textContent = shown + " row(s) shown";
}
for (const id of ["filter-tool", "filter-slice", "filter-category"]) {
  document.getElementById(id).addEventListener("change", applyFilters);
}
applyFilters();
// An evidence link opens its block and brings it into view: the browser scrolls to a closed <details> and
// leaves it closed, and a link that names the current hash again does not scroll at all.
function showEvidence(hash) {
  const block = hash && hash.startsWith("#evidence-") ? document.getElementById(hash.slice(1)) : null;
  if (!block) return;
  block.open = true;
  block.scrollIntoView({block: "start"});
}
for (const link of document.querySelectorAll("a.evidence-link")) {
  link.addEventListener("click", (event) => {
    event.preventDefault();
    const hash = link.getAttribute("href");
    if (location.hash !== hash) history.pushState(null, "", hash);
    showEvidence(hash);
  });
}
window.addEventListener("hashchange", () => showEvidence(location.hash));
showEvidence(location.hash);
// Opened through `tooleval view` (served at /runs/<run>/report), each failing row also links to its row page
// there; opened as a file, the page stays as it is, self-contained.
const viewed = location.protocol.startsWith("http") && location.pathname.match(new RegExp("^/runs/([^/]+)/report$"));
if (viewed) {
  for (const row of document.querySelectorAll("#failing-rows tbody tr")) {
    const link = document.createElement("a");
    link.className = "viewer-link";
    link.href = `/runs/${viewed[1]}/row?` + new URLSearchParams({case: row.dataset.case, trial: row.dataset.trial});
    link.textContent = "row page";
    row.lastElementChild.append(" ", link);
  }
}
</script>
</body>
</html>
""")


def render_page(**context: Any) -> str:
    """Render the report page; ``context`` is what :func:`tooleval.runs.report.build_report` assembles."""
    return _TEMPLATE.render(bundle=javascript_bundle(), finding_kinds=FINDING_KINDS, **context)
