"""The viewer's pages: Jinja2 templates kept in the package as text, styles inline (the pages work offline: no CDN,
no script from elsewhere). Autoescaping is on: every value from a run is text on the page, never markup."""

from __future__ import annotations

from typing import Any

import jinja2

__all__ = ["render"]

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}tooleval view{% endblock %}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
header{background:#24292f;color:#fff;padding:8px 16px}header a{color:#fff;text-decoration:none;margin-right:16px}
main{padding:12px 16px;max-width:1400px}
table{border-collapse:collapse;margin:6px 0 14px}th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;
vertical-align:top}th{background:#f0f3f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px/1.4 ui-monospace,monospace}pre{white-space:pre-wrap;word-break:break-word;margin:0}
.FAIL,.missing,.extra,.drift{color:#b3261e;font-weight:600}.PASS,.matched,.ok{color:#1a7f37;font-weight:600}
.wrong_args{color:#9a6700;font-weight:600}.hl{background:#fff3b0}
form.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:end;margin:8px 0}
form.filters label{display:flex;flex-direction:column;font-size:12px}
.msg{border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:6px 0;background:#fff}
.role{font-weight:600;text-transform:uppercase;font-size:11px;color:#57606a}
.notice{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
.error{background:#ffebe9;border:1px solid #cf222e;padding:10px;border-radius:6px}
.cols{display:flex;gap:16px;flex-wrap:wrap}.cols>div{flex:1;min-width:420px}
</style></head><body>
<header><a href="/">tooleval view</a><span>{{ out }}</span></header>
<main>{% block main %}{% endblock %}</main></body></html>
"""

_ERROR = """{% extends "base" %}{% block title %}{{ status }}: tooleval view{% endblock %}{% block main %}
<div class="error" id="error"><h2>{{ status }}: {{ problem }}</h2>{% if fix %}<p>{{ fix }}</p>{% endif %}</div>
<p><a href="/">the runs</a></p>{% endblock %}"""

_RUNS = """{% extends "base" %}{% block main %}
<h1>Runs</h1>
{% if not runs %}<p>No published run under {{ out }} (tooleval run writes one).</p>{% endif %}
<form method="get" action="/compare" id="compare-form">
<table id="runs"><tr><th>run id</th><th>dataset</th><th>revision</th><th>completed (UTC)</th><th>rows</th>
<th>mean f1</th><th>pass rate</th><th>gate</th><th>drift</th><th>base</th><th>head</th></tr>
{% for r in runs %}<tr data-run="{{ r.run_id }}"><td><a href="/runs/{{ r.run_id|urlencode }}">{{ r.run_id }}</a></td>
<td>{{ r.dataset }}</td><td>{{ r.dataset_revision }}</td><td>{{ (r.completed_at or '-')[:19] }}</td>
<td class="num">{{ r.rows if r.rows is not none else '-' }}</td><td class="num">{{ fmt(r.mean_f1) }}</td>
<td class="num">{{ fmt(r.pass_rate) }}</td><td class="{{ r.gate }}">{{ r.gate or '-' }}</td>
<td class="{{ r.drift }}">{{ r.drift or '-' }}</td>
<td><input type="radio" name="base" value="{{ r.run_id }}"{% if loop.index == 2 %} checked{% endif %}></td>
<td><input type="radio" name="head" value="{{ r.run_id }}"{% if loop.first %} checked{% endif %}></td></tr>
{% endfor %}</table>{% if runs|length > 1 %}<button type="submit">compare</button>{% endif %}</form>
{% for name, points in trends.items() %}<h2>Trend: {{ name }}</h2>
<p>mean f1 <span style="color:#0969da">&#9632;</span> and pass rate <span style="color:#cf222e">&#9632;</span>
over {{ points|length }} run(s), oldest first</p>
<svg class="trend" width="{{ 60 + 40 * points|length }}" height="130" role="img">
<line x1="30" y1="110" x2="{{ 40 + 40 * points|length }}" y2="110" stroke="#999"/>
<text x="2" y="14" font-size="10">1.0</text><text x="2" y="112" font-size="10">0.0</text>
{% for key, colour in (("mean_f1", "#0969da"), ("pass_rate", "#cf222e")) %}
<polyline fill="none" stroke="{{ colour }}" stroke-width="2" points="{% for p in points %}{% if p[key] is not none %}{{ 40 + 40 * loop.index0 }},{{ 110 - 100 * p[key] }} {% endif %}{% endfor %}"/>
{% for p in points %}{% if p[key] is not none %}<circle cx="{{ 40 + 40 * loop.index0 }}" cy="{{ 110 - 100 * p[key] }}" r="3" fill="{{ colour }}"><title>{{ p.run_id }}: {{ key }} {{ fmt(p[key]) }}</title></circle>{% endif %}{% endfor %}
{% endfor %}</svg>{% endfor %}
{% endblock %}"""

_RUN = """{% extends "base" %}{% block title %}{{ run.run_id }}: tooleval view{% endblock %}{% block main %}
<h1>Run {{ run.run_id }}</h1>
<p>dataset {{ (run.summary.dataset or {}).name }}, revision {{ run.revision }}, completed {{ (run.summary.completed_at or '-')[:19] }};
<a href="/runs/{{ run.run_id|urlencode }}/report">the report and its plots</a></p>
<table id="headline">
<tr><th>rows</th><td class="num">{{ head.rows }}</td></tr>
<tr><th>exact match rows</th><td class="num">{{ head.exact }}</td></tr>
<tr><th>expected / observed calls</th><td class="num">{{ head.expected_calls }} / {{ head.observed_calls }}</td></tr>
<tr><th>mean f1</th><td class="num">{{ fmt(head.mean_f1) }}</td></tr>
<tr><th>mean ragas ToolCallF1</th><td class="num">{{ fmt(head.mean_ragas) }}</td></tr>
<tr><th>blocking rows</th><td class="num">{{ head.blocking }}</td></tr>
{% if head.gate_judged %}<tr><th>rows the gate fails (gate_verdict fail)</th><td class="num" id="gate-fail">{{ head.gate_fail }}</td></tr>{% endif %}
<tr><th>rows with an error</th><td class="num">{{ head.errors }}</td></tr>
<tr><th>gate</th><td id="gate" class="{{ gate }}">{{ gate or '-' }}</td></tr>
<tr><th>drift</th><td class="{{ drift }}">{{ drift or '-' }}</td></tr>
</table>
<h2>Rows</h2>
<form class="filters" method="get" id="filters">
{% for name, values in page.facets.items() %}<label>{{ name }}<select name="{{ name }}" id="filter-{{ name }}">
<option value="">any</option>{% for value, n in values %}<option value="{{ value }}"{% if filters.values.get(name) == value %} selected{% endif %}>{{ value }} ({{ n }})</option>{% endfor %}
</select></label>{% endfor %}
<label>case id contains<input name="q" value="{{ filters.q }}" size="12"></label>
<label>f1 from<input name="f1_min" value="{{ '' if filters.f1_min is none else filters.f1_min }}" size="4"></label>
<label>f1 to<input name="f1_max" value="{{ '' if filters.f1_max is none else filters.f1_max }}" size="4"></label>
<label>sort<select name="sort">{% for s in sorts %}<option{% if filters.sort == s %} selected{% endif %}>{{ s }}</option>{% endfor %}</select></label>
<label>order<select name="order">{% for o in ("asc", "desc") %}<option{% if filters.order == o %} selected{% endif %}>{{ o }}</option>{% endfor %}</select></label>
<label>per page<select name="size">{% for s in sizes %}<option{% if filters.size == s %} selected{% endif %}>{{ s }}</option>{% endfor %}</select></label>
<button type="submit" id="apply">apply</button> <a href="?">clear</a></form>
<p id="matching"><span id="total">{{ page.total }}</span> matching row(s); page {{ filters.page }} of {{ page.pages }}
{% if filters.page > 1 %}<a id="prev" href="?{{ filters.query(page=filters.page - 1) }}">previous</a>{% endif %}
{% if filters.page < page.pages %}<a id="next" href="?{{ filters.query(page=filters.page + 1) }}">next</a>{% endif %}</p>
<table id="rows"><tr>{% for label, key in (("case", "case"), ("trial", "trial"), ("slice", "slice"), ("f1", "f1"), ("ragas", "ragas")) %}
<th><a href="?{{ filters.query(sort=key, order='desc' if filters.sort == key and filters.order == 'asc' else 'asc', page=1) }}">{{ label }}</a></th>{% endfor %}
<th>exact</th><th>blocking</th><th>verdict</th><th>categories</th><th>rules</th><th>owner</th><th>error</th></tr>
{% for r in page.rows %}<tr data-case="{{ r.case_id }}" data-trial="{{ r.trial }}">
<td><a class="row-link" href="/runs/{{ run.run_id|urlencode }}/row?{{ {'case': r.case_id, 'trial': r.trial}|urlencode }}">{{ r.case_id }}</a></td>
<td class="num">{{ r.trial }}</td><td>{{ r.slice or '' }}</td><td class="num">{{ fmt(r.f1) }}</td>
<td class="num">{{ fmt(r.ragas_tool_call_f1) }}</td><td>{{ 'yes' if r.exact_match else 'no' }}</td>
<td>{{ 'yes' if r.blocking else 'no' }}</td><td class="verdict">{{ r.gate_verdict or '-' }}</td><td>{{ r.categories|join(', ') }}</td><td>{{ r.rules|join(', ') }}</td>
<td>{{ r.failure_owner or '' }}</td><td>{{ r.error_kind or '' }}</td></tr>{% endfor %}</table>
{% endblock %}"""

_CALLS = """{% macro call_table(id, calls) %}<table id="{{ id }}"><tr><th>#</th><th>tool</th><th>arguments</th><th>mark</th></tr>
{% for c in calls %}<tr class="call" data-mark="{{ c.mark }}"><td class="num">{{ loop.index }}</td><td>{{ c.name }}</td>
<td><pre>{{ c.args_json if c.args_json is not none else c.args_raw }}</pre>{% if c.parse_error %}<div class="missing">{{ c.parse_error }}</div>{% endif %}
{% if c.paths %}<div>differs at: {% for p in c.paths %}<code class="hl">{{ p }}</code> {% endfor %}</div>{% endif %}</td>
<td class="{{ c.mark }}">{{ c.mark }}</td></tr>{% endfor %}</table>{% endmacro %}
{% macro plain_calls(calls) %}{% if calls is none %}<p>not recorded</p>{% else %}<table><tr><th>#</th><th>tool</th><th>arguments</th>{% if calls and 'status' in calls[0] %}<th>executions</th><th>status</th>{% endif %}</tr>
{% for c in calls %}<tr><td class="num">{{ loop.index }}</td><td>{{ c.name }}</td><td><pre>{{ c.args_json if c.args_json is not none else c.args_raw }}</pre></td>
{% if 'status' in c %}<td class="num">{{ c.executions }}</td><td>{{ c.status }}</td>{% endif %}</tr>{% endfor %}</table>{% endif %}{% endmacro %}"""

_ROW = """{% extends "base" %}{% import "calls" as m %}{% block title %}{{ row.case_id }}/{{ row.trial }}: {{ run.run_id }}{% endblock %}{% block main %}
<p><a href="/runs/{{ run.run_id|urlencode }}">run {{ run.run_id }}</a></p>
<h1>Case {{ row.case_id }}, trial {{ row.trial }}</h1>
<table id="row-figures"><tr><th>slice</th><td>{{ row.slice or '-' }}</td><th>f1</th><td class="num" id="row-f1">{{ fmt(row.f1) }}</td>
<th>ragas</th><td class="num">{{ fmt(row.ragas_tool_call_f1) }}</td><th>exact</th><td>{{ 'yes' if row.exact_match else 'no' }}</td>
<th>match mode</th><td>{{ row.match_mode or '-' }}</td><th>calls match</th><td>{{ row.calls_match }}</td>
<th>blocking</th><td>{{ 'yes' if row.blocking else 'no' }}</td>
<th>gate verdict</th><td id="row-verdict">{{ row.gate_verdict or '-' }}{% if row.gate_rules %} ({{ row.gate_rules|join(', ') }}){% endif %}</td></tr></table>
{% if row.error_kind %}<div class="error">{{ row.error_kind }}: {{ row.error_message }}</div>{% endif %}
{% if redaction %}<p class="notice" id="redaction">Redacted: values of the fields {{ redaction|join(', ') }} were replaced
before anything was stored; this page shows them as stored.</p>{% endif %}
<h2>Calls: reference against observed</h2>
<p>categories: {{ (row.mismatch_categories or [])|join(', ') or 'none' }}; plan {{ row.chosen_plan if row.chosen_plan is not none else '-' }}
({{ 'the expected calls' if not row.chosen_plan else 'accepted plan ' ~ (row.chosen_plan - 1) }})</p>
<div class="cols"><div><h3>reference</h3>{{ m.call_table("reference-calls", calls.reference) }}</div>
<div><h3>observed</h3>{{ m.call_table("observed-calls", calls.observed) }}</div></div>
{% if diffs %}<h3>Wrong arguments</h3>{% for d in diffs %}<table class="diff" data-tool="{{ d.name }}"><caption>{{ d.name }}</caption>
<tr><th>path</th><th>expected</th><th>observed</th></tr>{% for p in d.rows %}<tr class="hl"><td><code>{{ p.path }}</code></td>
<td><pre>{{ p.expected }}</pre></td><td><pre>{{ p.observed }}</pre></td></tr>{% endfor %}</table>{% endfor %}{% endif %}
<h2>Violations</h2>{% if row.violations %}<table id="violations"><tr><th>rule</th><th>severity</th><th>tool</th><th>detail</th></tr>
{% for v in row.violations %}<tr><td>{{ v.rule }}</td><td class="{{ 'FAIL' if v.severity == 'blocking' else '' }}">{{ v.severity }}</td>
<td>{{ v.tool or '' }}</td><td>{{ v.detail or '' }}</td></tr>{% endfor %}</table>{% else %}<p>none</p>{% endif %}
{% if row.coercions %}<h2>Coercions</h2><table><tr><th>call</th><th>tool</th><th>path</th><th>from</th><th>to</th></tr>
{% for c in row.coercions %}<tr><td class="num">{{ c.call_index + 1 }}</td><td>{{ c.tool }}</td><td><code>{{ c.path }}</code></td>
<td><pre>{{ c.from_value }}</pre></td><td><pre>{{ c.to_value }}</pre></td></tr>{% endfor %}</table>{% endif %}
{% if row.schema_findings %}<h2>Tool schema findings</h2><table><tr><th>call</th><th>tool</th><th>kind</th><th>path</th><th>detail</th></tr>
{% for f in row.schema_findings %}<tr><td class="num">{{ f.call_index + 1 }}</td><td>{{ f.tool }}</td><td>{{ f.kind }}</td>
<td><code>{{ f.path or '' }}</code></td><td>{{ f.detail or '' }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Calls at each boundary</h2><p id="first-divergent">first divergent boundary: <b>{{ row.first_divergent_boundary or 'none' }}</b></p>
{% if envelope %}<div class="cols"><div><h3{% if row.first_divergent_boundary == none %}{% endif %}>model</h3>{{ m.plain_calls(envelope.model_calls) }}</div>
<div><h3 class="{{ 'hl' if row.first_divergent_boundary == 'adapter' else '' }}">adapter</h3>{{ m.plain_calls(envelope.adapter_calls) }}</div>
<div><h3 class="{{ 'hl' if row.first_divergent_boundary == 'executor' else '' }}">executor</h3>{{ m.plain_calls(envelope.executor_calls) }}</div></div>
{% else %}<p>The run kept no trace envelope for this row.</p>{% endif %}
<h2>Provenance</h2><table id="provenance"><tr><th>status</th><td>{{ row.provenance_status or '-' }}</td></tr>
<tr><th>detail</th><td>{{ row.provenance_detail or '' }}</td></tr><tr><th>failure owner</th><td>{{ row.failure_owner or '-' }}</td></tr>
<tr><th>agent</th><td>{{ row.agent_name or '-' }} {{ row.agent_version or '' }}</td></tr>
<tr><th>request / response id</th><td>{{ row.request_id or '-' }} / {{ row.response_id or '-' }}</td></tr>
<tr><th>tool schema version</th><td>{{ row.tool_schema_version or '-' }}</td></tr><tr><th>trace digest</th><td><code>{{ row.trace_digest or '-' }}</code></td></tr>
<tr><th>scorer / ragas</th><td><code>{{ row.scorer_version }}</code> / {{ row.ragas_version }}</td></tr></table>
<h2>Elsewhere</h2><p>handoff: <code id="handoff">{{ handoff }}</code></p>
<p id="other-runs">the same case and trial in other runs: {% for other in others %}<a href="/runs/{{ other|urlencode }}/row?{{ {'case': row.case_id, 'trial': row.trial}|urlencode }}">{{ other }}</a> {% else %}none{% endfor %}</p>
<h2>Conversation</h2>{% if messages is none %}<p>not recorded</p>{% endif %}
<div id="conversation">{% for msg in messages or [] %}<div class="msg"><div class="role">{{ msg.role }}{% if msg.name %} ({{ msg.name }}){% endif %}</div>
{% if msg.text %}<pre>{{ msg.text }}</pre>{% endif %}{% for c in msg.calls %}<div>&rarr; <b>{{ c.name }}</b> <code>{{ c.arguments }}</code></div>{% endfor %}</div>{% endfor %}</div>
{% endblock %}"""

_COMPARE = """{% extends "base" %}{% block title %}compare {{ c.base }} {{ c.head }}{% endblock %}{% block main %}
<h1>Compare {{ c.base }} (base) with {{ c.head }} (head)</h1>
<p>{{ c.pairs }} paired rows; only in base {{ c.only_base_count }}, only in head {{ c.only_head_count }};
revisions {{ c.base_revision }} / {{ c.head_revision }}</p>
<table id="overall"><tr><th>metric</th><th>base</th><th>head</th><th>delta</th><th>95 % interval</th><th>rows</th></tr>
{% for metric, f in c.overall.items() %}<tr><td>{{ metric }}</td><td class="num">{{ fmt(f.base) }}</td><td class="num">{{ fmt(f.head) }}</td>
<td class="num">{{ fmt(f.delta, '+') }}</td><td class="num">{% if f.ci95 %}[{{ fmt(f.ci95[0], '+') }}, {{ fmt(f.ci95[1], '+') }}]{% endif %}</td>
<td class="num">{{ f.rows }}</td></tr>{% endfor %}</table>
{% if c.new_failing_rules %}<h2>Newly failing rules</h2><ul>{% for rule, keys in c.new_failing_rules.items() %}<li>{{ rule }}: {{ c.new_failing_rules_count[rule] }} row(s)</li>{% endfor %}</ul>{% endif %}
<h2>Changed rows ({{ c.changed_count }})</h2>
<table id="changed"><tr><th>case</th><th>trial</th><th>base f1</th><th>head f1</th><th>base verdict</th><th>head verdict</th></tr>
{% for r in c.changed_rows %}{% set key = {'case': r.case_id, 'trial': r.trial}|urlencode %}<tr data-case="{{ r.case_id }}" data-trial="{{ r.trial }}">
<td>{{ r.case_id }}</td><td class="num">{{ r.trial }}</td>
<td class="num">{% if r.base_verdict %}<a href="/runs/{{ c.base|urlencode }}/row?{{ key }}">{{ fmt(r.base_f1) }}</a>{% else %}-{% endif %}</td>
<td class="num">{% if r.head_verdict %}<a href="/runs/{{ c.head|urlencode }}/row?{{ key }}">{{ fmt(r.head_f1) }}</a>{% else %}-{% endif %}</td>
<td>{{ r.base_verdict or '-' }}</td><td>{{ r.head_verdict or '-' }}</td></tr>{% endfor %}</table>
{% endblock %}"""


def _fmt(value: Any, sign: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:{sign}.4f}"
    return str(value)


_ENV = jinja2.Environment(
    loader=jinja2.DictLoader({"base": _BASE, "error": _ERROR, "runs": _RUNS, "run": _RUN, "calls": _CALLS,
                              "row": _ROW, "compare": _COMPARE}),
    autoescape=True)
_ENV.globals["fmt"] = _fmt


def render(template: str, **context: Any) -> str:
    """The HTML of ``template`` (``runs`` | ``run`` | ``row`` | ``compare`` | ``error``) with ``context``."""
    return _ENV.get_template(template).render(**context)
