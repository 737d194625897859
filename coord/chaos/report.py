"""A chaos run's report for people: `report.html` in the run directory (self-contained,
the plot inlined), beside the history files it names, and `timeline.png`.

The timeline is Jepsen's picture: every operation by the client that ran it over the
run's time (ok, fail, info in their colours), every operation's latency below, each
fault's window shaded across both, and each violation a red line at the time of the
first row that shows it. The page has the verdict, the seed and the command that
replays the run, the faults, every checker's verdict and the violations' messages."""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from coord.check.oplog import Op, pair
from coord.check.result import CheckResult

COLOURS = {"ok": "#2a9d3f", "fail": "#e08a1e", "info": "#d62728"}
FAULT_COLOURS = ("#9ecae1", "#c7b9e2", "#fdd0a2", "#c7e9c0", "#fcbba1", "#d9d9d9", "#fee391")
MAX_POINTS = 200_000
"""Operations plotted at most (evenly sampled beyond: a long run's picture, not its
every point; the page says how many were left out)."""


def _first_time(found: Any) -> int | None:
    """The earliest `time_ns` in a violation's evidence (rows, ops, anomalies: any
    nesting of dicts and lists)."""
    times: list[int] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("time_ns"), int):
                times.append(x["time_ns"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(found)
    return min(times) if times else None


def violation_marks(checks: Iterable[CheckResult]) -> Iterator[tuple[str, str, int | None]]:
    """(checker, message, time_ns of its first row) for every violation kept."""
    for c in checks:
        for v in c.violations:
            yield c.checker, v["message"], _first_time({k: x for k, x in v.items()
                                                        if k != "message"})


def _lanes(ops: list[Op]) -> dict[int, int]:
    """Client -> lane (the worker a process belongs to: a worker's processes change id
    after an op whose outcome is unknown, its `worker` field does not)."""
    clients = sorted({op.invoke.get("worker", op.process) for op in ops})
    return {c: n for n, c in enumerate(clients)}


def plot_timeline(rows: list[dict[str, Any]], faults: list[dict[str, Any]],
                  checks: list[CheckResult], path: Path) -> int:
    """Writes the timeline PNG to `path`; returns how many operations it left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in pair(rows) if op.completion is not None]
    t0 = min((r["time_ns"] for r in rows), default=0)
    step = max(1, len(ops) // MAX_POINTS)
    shown = ops[::step]
    lanes = _lanes(ops)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 8), sharex=True,
                                      gridspec_kw={"height_ratios": (3, 2)})
    for status, colour in COLOURS.items():
        mine = [op for op in shown if op.status == status]
        if not mine:
            continue
        xs = [(op.start - t0) / 1e9 for op in mine]
        count = sum(o.status == status for o in ops)
        top.scatter(xs, [lanes[op.invoke.get("worker", op.process)] for op in mine], s=4,
                    marker="|", c=colour, label=f"{status} ({count:,})", rasterized=True)
        bottom.scatter(xs, [max((op.completion["time_ns"] - op.start) / 1e6, 0.01)
                            for op in mine], s=3, c=colour, rasterized=True)
    kinds = sorted({f["kind"] for f in faults})
    for f in faults:
        if not f.get("start_ns"):
            continue
        end = f.get("end_ns") or max((r["time_ns"] for r in rows), default=f["start_ns"])
        colour = FAULT_COLOURS[kinds.index(f["kind"]) % len(FAULT_COLOURS)]
        for ax in (top, bottom):
            ax.axvspan((f["start_ns"] - t0) / 1e9, (end - t0) / 1e9, color=colour, alpha=0.35,
                       lw=0)
        top.text((f["start_ns"] - t0) / 1e9, len(lanes) - 0.5, f["kind"], fontsize=7,
                 va="top")
    for n, (_, _, at) in enumerate(violation_marks(checks)):
        if at is None:
            continue
        for ax in (top, bottom):
            ax.axvline((at - t0) / 1e9, color="red", lw=1, ls="--",
                       label=None if n or ax is bottom else "violation")
        top.plot([(at - t0) / 1e9], [len(lanes) - 0.5], marker="x", color="red")
    top.set_ylabel("client")
    top.set_yticks(range(len(lanes)))
    doing = {c: Counter() for c in lanes}
    for op in ops:
        doing[op.invoke.get("worker", op.process)][op.f] += 1
    top.set_yticklabels([f"{c} {doing[c].most_common(1)[0][0]}" for c in lanes], fontsize=6)
    if ops:
        top.legend(loc="upper right", fontsize=8)
    bottom.set_yscale("log")
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("seconds into the run")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return len(ops) - len(shown)


def _table(head: list[str], body: Iterable[list[Any]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                  for row in body)
    return f"<table><tr>{cells}</tr>{trs}</table>"


def write_report(out: Path, verdict: str, seed: int, command: str,
                 rows: list[dict[str, Any]], faults: list[dict[str, Any]],
                 checks: list[CheckResult]) -> Path:
    """`out`/report.html (and timeline.png); returns the page's path."""
    png = out / "timeline.png"
    try:
        left_out = plot_timeline(rows, faults, checks, png)
        img = base64.b64encode(png.read_bytes()).decode()
        picture = f'<img alt="timeline" src="data:image/png;base64,{img}">' + (
            f"<p>{left_out:,} operations not drawn (evenly sampled)</p>" if left_out else "")
    except ImportError:
        picture = "<p>No timeline: matplotlib is missing (pip install 'coord[chaos]').</p>"
    types = Counter(r["type"] for r in rows if r["type"] != "invoke")
    marks = list(violation_marks(checks))
    t0 = min((r["time_ns"] for r in rows), default=0)
    files = [p.name for p in sorted(out.iterdir()) if p.suffix in (".jsonl", ".json", ".txt")]
    v = html.escape(verdict)
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>coord chaos seed {seed}: {verdict}</title><style>
body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 2px 8px; font-size: 13px; text-align: left; }}
.illegal {{ color: #c00; }} .ok {{ color: #080; }} .unknown {{ color: #a60; }}
code {{ background: #f4f4f4; padding: 2px 4px; }}</style></head><body>
<h1>coord chaos, seed {seed}: <span class="{v}">{v}</span></h1>
<p>Replay: <code>{html.escape(command)}</code></p>
<p>Rows: {", ".join(f"{n:,} {t}" for t, n in sorted(types.items()))}.
Files: {", ".join(f'<a href="{html.escape(f)}">{html.escape(f)}</a>' for f in files)},
<a href="cluster/">cluster/</a> (the members' logs).</p>
{picture}
<h2>Violations ({sum(c.count for c in checks):,})</h2>
{_table(["checker", "at (s)", "message"],
        [[c, "" if at is None else f"{(at - t0) / 1e9:.3f}", m] for c, m, at in marks])}
<h2>Checkers</h2>
{_table(["checker", "verdict", "violations", "stats", "reason"],
        [[c.checker, c.verdict, c.count, json.dumps(c.stats), c.reason] for c in checks])}
<h2>Faults ({len(faults)})</h2>
{_table(["kind", "member", "start (s)", "end (s)", "note", "error"],
        [[f["kind"], f["member"], f["start_s"], f.get("end_s"), f.get("note", ""),
          f.get("error", "")] for f in faults])}
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
