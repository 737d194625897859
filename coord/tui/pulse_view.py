"""The pulse view (`:pulses`, k9s's): per member, sparklines of proposals/s, WAL fsync
p99, leader changes, read-only and NOSPACE, from the members' /metrics (`pulse.py`), so
an operator sees the cluster's pulse without Grafana. The members' metrics URLs come
from their status (each names its --listen-metrics-urls) and from `coord tui
--metrics-urls`; without any the view says how to get them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rich.markup import escape
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Sparkline, Static

from coord.tui.format import Filter
from coord.tui.model import ClusterModel
from coord.tui.pulse import INTERVAL_S, POINTS, MemberPulse, scrape

NO_URLS = ("No metrics URLs: no member's status names one. Start the members with "
           "[b]--listen-metrics-urls http://HOST:PORT[/b] (`make run` does), or the "
           "console with [b]coord tui --metrics-urls http://HOST:PORT,...[/b].")
# (series attribute, caption, how its newest point reads)
CHARTS = (("proposals", "proposals/s", "{:.0f}"), ("fsync_p99_ms", "fsync p99", "{:.1f} ms"),
          ("leader_changes", "leader changes", "{:.0f}"), ("read_only", "read-only", "{:.0f}"),
          ("nospace", "NOSPACE", "{:.0f}"))


def newest(points: Sequence[float], fmt: str) -> str:
    return fmt.format(points[-1]) if points else "-"


class PulseCard(Vertical):
    """One member: its name and state, then one captioned sparkline per series."""

    def __init__(self, pulse: MemberPulse) -> None:
        super().__init__(classes="pulse-card")
        self.pulse = pulse

    def compose(self):
        yield Static("", classes="pulse-head")
        with Horizontal(classes="pulse-row"):
            for attr, _, _ in CHARTS:
                with Vertical(classes="pulse-chart"):
                    yield Static("", classes="pulse-caption", id=f"cap-{attr}")
                    yield Sparkline([], id=f"spark-{attr}")

    def draw(self) -> None:
        p = self.pulse
        state = (f"[b red]not answering[/]: {escape(p.error)}" if p.error
                 else "[green]up[/]" if p.last is not None else "[dim]waiting[/]")
        self.query_one(".pulse-head", Static).update(
            f"[b]{escape(p.name or '?')}[/b]  {escape(p.url)}  {state}")
        for attr, caption, fmt in CHARTS:
            points = list(getattr(p, attr))
            self.query_one(f"#cap-{attr}", Static).update(f"{caption} {newest(points, fmt)}")
            self.query_one(f"#spark-{attr}", Sparkline).data = points or [0.0]


class PulseView(Vertical):
    view = "pulses"
    title = "Pulses"
    help = (("/", "filter the members by name or URL"),)

    def __init__(self, model: ClusterModel) -> None:
        super().__init__(id=f"view-{self.view}")
        self.model = model
        self.filter = Filter()
        self.scope = None
        self._drawn = -1
        self._shown: list[str] = []

    def compose(self):
        yield Static(self.title, id=f"title-{self.view}", classes="view-title")
        with VerticalScroll(id="pulse-cards"):
            yield Static(NO_URLS if not self.model.pulses.urls else "", id="pulse-hint")

    @property
    def focus_target(self) -> VerticalScroll:
        return self.query_one("#pulse-cards", VerticalScroll)

    def kept(self) -> list[MemberPulse]:
        return [p for p in self.model.pulses.members.values()
                if self.filter.keeps(f"{p.name} {p.url}")]

    def sync(self) -> None:
        pulses = self.model.pulses
        if pulses.version == self._drawn:
            return
        self._drawn = pulses.version
        self.query_one("#pulse-hint", Static).update("" if pulses.urls else NO_URLS)
        self.query_one("#pulse-hint", Static).display = not pulses.urls
        kept = self.kept()
        if [p.url for p in kept] != self._shown:
            self._shown = [p.url for p in kept]
            box = self.focus_target
            for card in list(box.query(PulseCard)):
                card.remove()
            box.mount_all([PulseCard(p) for p in kept])
            self.call_after_refresh(self._draw_cards)
        else:
            self._draw_cards()
        self.update_title()

    def _draw_cards(self) -> None:
        for card in self.query(PulseCard):
            card.draw()

    def tick(self) -> None:
        pass

    def update_title(self) -> None:
        p = self.model.pulses
        up = sum(1 for m in p.members.values() if m.last is not None and not m.error)
        text = (f"Pulses [{up} of {len(p.members)} answering]   a scrape every "
                f"{INTERVAL_S:g}s, the last {POINTS}"
                + (f"  /{self.filter}" if self.filter else ""))
        self.query_one(f"#title-{self.view}", Static).update(text)

    def set_filter(self, f: Filter) -> None:
        self.filter = f
        self._drawn = -1
        self.sync()

    def set_scope(self, scope: Any) -> None:
        self.scope = None

    def selected(self) -> list:
        return []

    def describe(self, row: Any) -> dict:
        return {}


async def scrape_round(model: ClusterModel) -> None:
    """Scrape every member's metrics at once; each scrape is bounded by its timeout."""
    urls = model.pulses.urls
    answers = await asyncio.gather(*(scrape(u) for u in urls))
    now = model.mono()
    names = {m.id: m.name for m in model.members.rows.values() if m.id}
    for url, answer in zip(urls, answers, strict=True):
        model.pulses.record(url, answer, now, names)
