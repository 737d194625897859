"""The audit's report: `summary.json`, PNG plots (matplotlib, no display needed) and an
`index.html` that shows them with every violation and the rows that show it."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from coord.audit.changes import counts_text, describe


def write_report(out: Path, summary: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    _plots(out, summary)
    page = out / "index.html"
    page.write_text(_html(summary))
    return page


def _plots(out: Path, s: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = s["stats"]
    for name, key, title in (("tenure.png", "tenure", "Ownership tenure"),
                             ("takeover.png", "takeover",
                              "Time to takeover after an owner's session expired")):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        hist = stats[key]["histogram_log2_ms"]
        if hist:
            ax.bar([f"{2 ** b / 1000:g}s" if 2 ** b >= 1000 else f"{2 ** b}ms" for b, _ in hist],
                   [n for _, n in hist])
            ax.tick_params(axis="x", rotation=60, labelsize=7)
        ax.set_title(f"{title} (n={stats[key]['count']})")
        ax.set_xlabel("duration, from (log2 buckets)")
        ax.set_ylabel("count")
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)

    t0 = s["overview"]["first_ms"] or 0
    fig, ax = plt.subplots(figsize=(9, 2.8))
    terms = stats["timeline"]["terms"]
    members = sorted({leader or "?" for _, _, leader in terms}) or ["?"]
    for (_term, start, leader), nxt in zip(terms, terms[1:] + [None], strict=False):
        end = nxt[1] if nxt else s["overview"]["last_ms"]
        y = members.index(leader or "?")
        ax.broken_barh([((start - t0) / 1000, max((end - start) / 1000, 1e-3))], (y - 0.3, 0.6),
                       color="tab:blue")
    for _member, _mode, since, until in stats["timeline"]["quorum_lost"]:
        ax.axvspan((since - t0) / 1000, (until - t0) / 1000, color="tab:red", alpha=0.3)
    ax.set_yticks(range(len(members)), members)
    ax.set_xlabel("seconds since the first entry (red: without a quorum)")
    ax.set_title(f"Leaders by term ({len(terms)} terms) and quorum losses")
    fig.tight_layout()
    fig.savefig(out / "timeline.png", dpi=90)
    plt.close(fig)

    rate = stats["ops_rate"]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    top = sorted(rate["per_kind"].items(), key=lambda kv: -sum(v for _, v in kv[1]))[:8]
    for kind, points in top:
        ax.plot([b * rate["bucket_ms"] / 1000 for b, _ in points], [v for _, v in points],
                label=kind, linewidth=1)
    ax.set_xlabel(f"seconds since the first entry ({rate['bucket_ms'] / 1000:g} s buckets)")
    ax.set_ylabel("commands/s")
    ax.set_title("Committed commands per second, by kind")
    if top:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "ops_rate.png", dpi=90)
    plt.close(fig)


def _html(s: dict[str, Any]) -> str:
    e = html.escape
    o = s["overview"]
    when = _when(o["first_ms"])
    checks = "".join(
        f"<tr><td>{e(name)}</td><td class={'bad' if c['violations'] else 'ok'}>"
        f"{c['violations']}</td><td>{_seconds(c['seconds'])}</td></tr>"
        for name, c in s["checks"].items())
    viol = "".join(
        f"<tr><td>{e(v['check'])}</td><td>{v['index']}</td><td>{v['revision']}</td>"
        f"<td>{e(v['subject'])}</td><td>{e(v['detail'])}</td><td><pre>"
        f"{e(chr(10).join(v['evidence'] or []))}</pre></td></tr>"
        for v in s["examples"])
    trail = s["changes"]
    changes = "".join(
        f"<tr><td>{c['index']}</td><td>{e(_when(c['time_ms']))}</td><td>{e(c['actor'] or '')}"
        f"</td><td>{e(describe(c))}</td></tr>" for c in trail["listed"])
    stats = s["stats"]
    figures = "".join(f"<li>{e(k)}: n={stats[k]['count']}, "
                      f"{e(json.dumps(stats[k]['percentiles_ms']))} ms</li>"
                      for k in ("tenure", "takeover"))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>coord audit</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:3px 6px;
vertical-align:top}}table{{border-collapse:collapse}}.bad{{color:#b00;font-weight:bold}}
.ok{{color:#070}}pre{{margin:0;font-size:80%}}</style></head><body>
<h1>coord audit: {'FAILED' if s['violations'] else 'passed'}</h1>
<p>{e(s['history'])}: {o['rows']} rows, {o['entries']} entries (index {o['first_index']}..
{o['last_index']}, revision {o['first_revision']}..{o['last_revision']}, {o['terms']} terms)
from {e(when)}; schema v{s['schema_version']}; Spark master {e(s['master'])};
{s['seconds']:.1f} s.</p>
<h2>Checks</h2><table><tr><th>check</th><th>violations</th><th>seconds</th></tr>{checks}</table>
<h2>Violations (first {len(s['examples'])})</h2>
<table><tr><th>check</th><th>index</th><th>revision</th><th>subject</th><th>detail</th>
<th>rows that show it</th></tr>{viol}</table>
<h2>Auth and admin changes ({trail['count']}; first {len(trail['listed'])} listed)</h2>
<p>by actor: {e(counts_text(trail['by_actor']))}; logins: {e(counts_text(trail['logins']))}</p>
<table><tr><th>index</th><th>time (UTC)</th><th>actor</th><th>change</th></tr>{changes}</table>
<h2>Ownership</h2><ul>{figures}</ul>
<img src="tenure.png"> <img src="takeover.png">
<h2>Leadership and quorum</h2><img src="timeline.png">
<h2>Load</h2><img src="ops_rate.png"></body></html>
"""


def _when(time_ms: int | None) -> str:
    return datetime.fromtimestamp(time_ms / 1000, UTC).isoformat() if time_ms else "?"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
