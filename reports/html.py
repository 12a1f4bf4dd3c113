"""The HTML consistency report: one self-contained file (no CDN, no fonts, no network) per campaign.

The campaign index, coverage matrix, counterexamples and trial list are rendered here, escaped.
Per-trial details (timeline, anomalies) are drawn in the browser from one embedded JSON block, only
for the trial the reader opens, so a report of thousands of trials stays light to open. Untrusted
text (pipeline names, exception messages) is escaped here and set through ``textContent`` there.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from chaos.scenario.faults import PHASES
from chaos.scenario.names import display_names, short_name
from chaos.store.atomic import write_text
from properties.strategies import ACTION_ORDER
from reports.data import campaign_view

ASSETS = Path(__file__).parent  # report.css and report.js, inlined: the file must open offline


PHASE_COLOURS = {"planned": "#94a3b8", "reading": "#60a5fa", "state-commit": "#a78bfa",
                 "sink-write": "#f59e0b", "sink-done": "#f97316", "committed": "#16a34a"}



CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def badge(verdict: str | None) -> str:
    v = verdict or "unknown"
    return f'<span class="badge v-{escape(v)}">{escape(v)}</span>'


def _meets(meets: bool | None) -> str:
    return {True: '<span class="ok">meets</span>', False: '<span class="bad">VIOLATES</span>',
            None: '<span class="muted">inconclusive</span>'}[meets]


def _name(name: str, shown: str | None = None) -> str:
    """A pipeline as the report shows it: a job by its short name, the full reference on hover."""
    shown = short_name(name) if shown is None else shown
    return escape(name) if shown == name else f'<span title="{escape(name)}">{escape(shown)}</span>'


def _index(summary: dict) -> str:
    rows = []
    shown = display_names(summary["pipelines"])
    for name, row in summary["pipelines"].items():
        ce = row.get("counterexample")
        minimal = escape(" ".join(ce["minimal"]) or "no fault") if ce else ""
        link = f'<a href="#{escape(ce["minimal_trial"])}" class="ce-link">{minimal}</a>' if ce else ""
        rows.append(f"<tr><td>{_name(name, shown[name])}</td><td>{badge(row['declared'])}</td>"
                    f"<td>{badge(row['verdict'])}</td>"
                    f"<td>{_meets(row['meets'])}{_weak(row)}</td><td>{row['trials']}</td>"
                    f"<td>{row.get('faulted_trials', '')}</td><td>{_windows(row)}</td><td>{row.get('stalled', 0)}</td>"
                    f"<td>{row.get('faults_fired', 0)}</td><td>{row.get('seconds', 0)}s</td><td>{link}</td></tr>")
    for s in summary.get("skipped", []):
        rows.append(f"<tr><td>{_name(s['pipeline'])}</td><td colspan=10 class=muted>skipped: {escape(s['reason'])}"
                    "</td></tr>")
    return ('<table id="index"><thead><tr><th>pipeline</th><th>declared</th><th>measured</th><th></th><th>trials</th>'
            "<th>with a fired fault</th><th>canonical windows</th><th>stalled</th><th>faults fired</th><th>time</th>"
            "<th>minimal counterexample</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _grid(summary: dict) -> str:
    """Configuration variants: a pipeline x configuration grid of verdict badges (nothing without variants)."""
    from chaos.scenario.variants import grid

    table = grid(summary)
    if table is None:
        return ""
    columns, cells = table
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    shown = display_names(cells)
    body = "".join(
        f"<tr><td>{_name(pipeline, shown[pipeline])}</td>" + "".join(
            f"<td>{badge(row[c]['verdict'])} {_meets(row[c]['meets'])}</td>" if c in row
            else "<td class=muted>not run</td>" for c in columns) + "</tr>"
        for pipeline, row in cells.items())
    return (f'<h2>Verdicts by configuration</h2><table id="grid"><thead><tr><th>pipeline</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _weak(row: dict) -> str:
    """A pass that claims more than its trials exercised: a canonical window never opened, or no fault fired."""
    late = (f' <span class="bad" title="{escape(", ".join(row["late_writes"]))}">late writes in '
            f'{len(row["late_writes"])} trial(s)</span>') if row.get("late_writes") else ""
    return (' <span class="muted weak">weak evidence</span>' if row.get("weak") else "") + late


def _windows(row: dict) -> str:
    if "not_covered" not in row:
        return ""
    total = len(row.get("windows") or [])
    missing = row["not_covered"]
    title = escape("not covered: " + ", ".join(missing)) if missing else "every canonical window was opened"
    undeclared = ('<div class="muted">keeps state it does not declare (state_store = True plans its window)</div>'
                  if row.get("state_undeclared") else "")
    return f'<span title="{title}" class="{"bad" if missing else "ok"}">{total - len(missing)} of {total}</span>' + (
        f'<div class="muted">not: {escape(", ".join(missing))}</div>' if missing else "") + undeclared


def _coverage(coverage: dict[str, dict[str, int]]) -> str:
    actions = [a for a in ACTION_ORDER if a in coverage] + sorted(a for a in coverage if a not in ACTION_ORDER)
    if not actions:
        return '<p class="muted">no fault fired yet</p>'
    head = "".join(f"<th>{p}</th>" for p in PHASES)
    body = []
    for a in actions:
        cells = "".join(f'<td class="{"z" if not coverage[a].get(p) else ""}">{coverage[a].get(p, 0)}</td>'
                        for p in PHASES)
        body.append(f"<tr><th>{escape(a)}</th>{cells}</tr>")
    return f'<table class="cov" id="coverage"><tr><th>action \\ phase</th>{head}</tr>{"".join(body)}</table>'


def _timing(spec: dict) -> str:
    """When the faults fired: at their planned phases (said by nothing) or at random wall-clock times."""
    if spec.get("timing", "phase") == "phase":
        return ""
    return "faults at random times over a no-fault trial's duration (--timing random) · "


def _stream(spec: dict) -> str:
    """The stream options a campaign was given (``--late-fraction 0.05``, ...), if any: its trials' streams."""
    names = ("partitions", "keys", "skew", "max_disorder_ms", "late_fraction", "resent_fraction")
    given = [f"{k.replace('_', '-')} {spec[k]}" for k in names if spec.get(k) is not None]
    return f"stream {escape(', '.join(given))} · " if given else ""


def _shards(summary: dict) -> str:
    """A merged campaign's shards and the planned trials none of them finished (chaos/campaign/merge.py)."""
    merged = summary.get("merged_from")
    if not merged:
        return ""
    missing = summary.get("missing") or []
    return (f'<div class="sub" id="shards">merged from {len(merged)} shard director'
            f'{"y" if len(merged) == 1 else "ies"} · '
            + (f"missing {len(missing)} planned trial(s), no claim covers them: {escape(', '.join(missing[:20]))}"
               + (" ..." if len(missing) > 20 else "") if missing else "every planned trial finished") + "</div>")


def _counterexamples(summary: dict) -> str:
    out = []
    shown = display_names(summary["pipelines"])
    for name, row in summary["pipelines"].items():
        ce = row.get("counterexample")
        if not ce:
            continue
        path = "".join(f"<li>{escape(' '.join(p['faults']) or 'no fault')} → {badge(p['verdict'])}"
                       f" <span class=muted>({escape(p['trial'])})</span></li>" for p in ce.get("path", []))
        out.append(
            f'<div class="counterexample"><h3>{_name(name, shown[name])}: declared {badge(ce["declared"])}, measured '
            f'{badge(ce["verdict"])}</h3><div>minimal schedule: <b>{escape(" ".join(ce["minimal"]) or "no fault")}</b>'
            + (f' (not shrunk: {escape(ce["skipped"])}; trial {escape(ce["from"])})</div>' if ce.get("skipped") else
               f' (shrunk from {escape(" ".join(ce["from_faults"]))}, trial {escape(ce["from"])})</div>')
            + f'<pre class="replay">{escape(ce["command"])}</pre>'
            + (f"<details><summary>shrink path ({len(ce.get('path', []))} candidates)</summary><ol>{path}</ol>"
               "</details>" if path else "")
            + "".join(f'<div class="muted">another shard\'s counterexample (shard {escape(str(o["shard"]))}): '
                      f'{escape(" ".join(o["minimal"]) or "no fault")} → {badge(o["verdict"])}</div>'
                      for o in ce.get("others", [])) + "</div>")
    return "".join(out) or '<p class="muted">no violation: every pipeline met its declared guarantee</p>'


def _agreement(row: dict) -> str:
    css = {True: "ok", False: "bad", None: "muted"}[row.get("agrees")]
    return f'<span class="{css}">{escape(row.get("status") or "")}</span>'


def _conformance(conformance: dict | None) -> str:
    if not conformance:
        return ""
    rows = "".join(
        f"<tr><td>{escape(r['component'])}</td><td>{badge(r['documented'])}</td><td>{badge(r.get('measured'))}</td>"
        f"<td>{_agreement(r)}</td><td>{r.get('trials', 0)}</td><td>{escape(r.get('example') or '')}</td></tr>"
        for r in conformance.get("rows", []))
    return ('<h2>Conformance with Spark\'s documented guarantees</h2><table id="conformance"><tr><th>component</th>'
            "<th>Spark docs say</th><th>measured</th><th></th><th>trials</th><th>example anomaly</th></tr>"
            + rows + "</table>")


def _trial_faults(t: dict) -> str:
    """Faults as planned; each that did not fire is marked (a trial none of whose faults fired is a no-fault one)."""
    if not t["faults"]:
        return "none"
    return " ".join(escape(f) if f in t["fired"] else f'{escape(f)} <span class="muted">(not fired)</span>'
                    for f in t["faults"])


def _trials(trials: list[dict]) -> str:
    nodes = any(t.get("node") for t in trials)  # a campaign on a Ray cluster: where each trial ran
    rows = "".join(
        f'<tr data-id="{escape(t["id"])}"><td>{escape(t["id"])}</td><td>{_name(t["pipeline"])}</td>'
        f'<td>{_trial_faults(t)}</td><td>{badge(t["verdict"])}</td><td>{_meets(t["meets"])}</td>'
        f'<td>{t["counts"].get("lost", 0)}</td><td>{t["counts"].get("duplicated", 0)}</td><td>{t["seconds"]}s</td>'
        + (f'<td>{escape(t.get("node") or "")}</td>' if nodes else "") + "</tr>"
        for t in trials)
    return ('<table id="trials"><thead><tr><th>trial</th><th>pipeline</th><th>faults</th><th>verdict</th><th></th>'
            "<th>lost</th><th>dup</th><th>time</th>" + ("<th>Ray node</th>" if nodes else "")
            + "</tr></thead><tbody>" + rows + "</tbody></table>")


def _embed(data: dict) -> str:
    """JSON inside <script>: no '</script>' or '<!--' can close it early."""
    return json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c")


def render(view: dict) -> str:
    summary = view["summary"]
    trials = view["trials"]
    first_ce = next((r["counterexample"]["minimal_trial"] for r in summary["pipelines"].values()
                     if r.get("counterexample")), None)
    initial = first_ce or next((t["id"] for t in trials if t["meets"] is False), trials[0]["id"] if trials else None)
    spec = summary["spec"]
    verdict = {0: "every pipeline meets its declared guarantee", 1: "some pipeline violates its declared guarantee",
               3: "inconclusive (stalled trials or nothing finished)"}.get(summary["exit_code"], "")
    data = {"trials": trials, "initial": initial, "phases": list(PHASES), "colours": PHASE_COLOURS}
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>streamchaos report — {escape(view['root'])}</title>
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<style>{(ASSETS / 'report.css').read_text()}</style></head><body>
<header><h1>streamchaos consistency report</h1>
<div class="sub">{escape(view['root'])} · created {escape(str(view.get('created') or ''))} · seed {spec['seed']} ·
faults {escape(','.join(spec['kinds']))} · {_timing(spec)}{_stream(spec)}
{summary['finished']}/{summary['planned']} planned trials ·
{summary['seconds']}s of trials · <b id="outcome">{escape(verdict)}</b></div>{_shards(summary)}</header>
<main>
<h2>Pipelines: declared vs measured</h2>{_index(summary)}
{_grid(summary)}
{_conformance(view.get('conformance'))}
<h2>Minimal counterexamples</h2>{_counterexamples(summary)}
<h2>Fault coverage (fired faults by action and phase)</h2>{_coverage(summary['coverage'])}
<h2>Trials</h2><p class="muted">Click a trial for its timeline: micro-batches per driver incarnation (green:
committed, red: never committed by that incarnation) with phase ticks, faults as red markers, what a fault holds
until its heal (a channel toxic, a partition, a paused or starved node) as yellow spans.</p>{_trials(trials)}
<div id="detail"><noscript>Per-trial timelines need JavaScript.</noscript></div>
</main>
<script type="application/json" id="trial-data">{_embed(data)}</script>
<script>{(ASSETS / 'report.js').read_text()}</script>
</body></html>
"""


def write_report(root: Path, out: Path | None = None) -> Path:
    """Render ``root``'s report to ``out`` (default ``root/report.html``), atomically."""
    return write_text(Path(out) if out else Path(root) / "report.html", render(campaign_view(Path(root))))


def merge_views(views: list[dict], title: str) -> dict:
    """One view of several campaigns (a pytest session's checks): pipelines and trials side by side."""
    if len(views) == 1:
        return views[0]
    pipelines, skipped, coverage, trials = {}, [], {}, []
    for k, view in enumerate(views):
        s = view["summary"]
        for name, row in s["pipelines"].items():
            pipelines[name if name not in pipelines else f"{name} (check {k + 1})"] = row
        skipped += s.get("skipped", [])
        for action, phases in s["coverage"].items():
            for phase, n in phases.items():
                coverage.setdefault(action, {})[phase] = coverage.get(action, {}).get(phase, 0) + n
        trials += [{**t, "id": f"{k + 1}.{t['id']}"} for t in view["trials"]]
    for row in pipelines.values():
        if row.get("counterexample"):
            k = next(i for i, v in enumerate(views) if row in v["summary"]["pipelines"].values())
            row["counterexample"] = {**row["counterexample"],
                                     "minimal_trial": f"{k + 1}.{row['counterexample']['minimal_trial']}"}
    codes = [v["summary"]["exit_code"] for v in views]
    first = views[0]["summary"]
    summary = {**first, "pipelines": pipelines, "skipped": skipped, "coverage": coverage,
               "planned": sum(v["summary"]["planned"] for v in views),
               "finished": sum(v["summary"]["finished"] for v in views),
               "seconds": round(sum(v["summary"]["seconds"] for v in views), 1),
               "exit_code": 1 if 1 in codes else (3 if 3 in codes else 0)}
    return {"root": title, "created": views[0].get("created"), "summary": summary, "trials": trials,
            "conformance": None}


def write_session_report(roots: list[Path], out: Path) -> Path:
    """The report of several campaign directories (``--chaos-report`` of a pytest session)."""
    view = merge_views([campaign_view(Path(r)) for r in roots], f"pytest session ({len(roots)} checks)")
    return write_text(Path(out), render(view))
