"""`CoordApp`: the console. One screen of views (members, sessions, owners, producers,
keys, events, the read-only users and roles, and the members' pulse from their
metrics) switched with `:` (k9s aliases), a header saying where the console looks, and
a banner across the app while the member it talks to is read-only or the cluster has no
quorum. Keys follow k9s: `/` filters (`/!` inverts), `?` lists every key, `esc` goes
back, `enter` drills down, `d`/`y` describe, space/ctrl+space/`*` mark rows, `q` quits.

The model is drawn from the feeds every 100 ms (only what changed, only the view shown);
every change to the cluster goes through the `ActionGate` (actions.py). On a cluster with
auth on, whatever the console's user may not see or do is said, with the permission
the cluster named, in the flash line (and a refused view's title), never a crash.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from typing import Any, Literal

from rich.markup import escape
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import ContentSwitcher, DataTable, Footer, Input, Static

from coord.client import TLS, AsyncClient
from coord.client.errors import CompactedError, CoordError
from coord.tui import commands
from coord.tui.actions import Action, ActionGate, ActionRefused, Writer
from coord.tui.auth_views import RolesView, UsersView
from coord.tui.feeds import Feeds
from coord.tui.format import Filter, key_text, short_value
from coord.tui.keys_view import KeysView
from coord.tui.model import ClusterModel
from coord.tui.pulse import INTERVAL_S, Pulses
from coord.tui.pulse_view import PulseView, scrape_round
from coord.tui.screens import ConfirmScreen, PromptScreen, TextScreen
from coord.tui.views import EventsView, MembersView, OwnersView, ProducersView, SessionsView

DRAW_S = 0.1
TICK_S = 1.0
HISTORY_ITEM_S = 2.0

COMMON_KEYS = (
    (":", "command mode: :members :sessions :owners :pids :keys :events :users :roles,"
          " :pulses, :q quits"),
    ("/", "filter the view (/!text keeps rows without text); esc clears"),
    ("?", "this help"), ("esc", "back: clear the filter, the drill-down, marks, or go back"),
    ("enter", "drill down"), ("d", "describe the row"), ("y", "the row as JSON"),
    ("space", "mark the row"), ("ctrl+space", "mark the range from the last mark"),
    ("*", "mark every filtered row"), ("u", "clear the marks"), ("q / ctrl+c", "quit"),
)


class CoordApp(App):
    TITLE = "coord"
    CSS = """
    #banner { background: $error; color: $text; text-style: bold; padding: 0 1;
              display: none; }
    #banner.shown { display: block; }
    #switcher { height: 1fr; }
    #header { background: $primary-background; padding: 0 1; height: 1; }
    .view-title { background: $boost; text-style: bold; padding: 0 1; height: 1; }
    #prompt { dock: bottom; display: none; }
    #prompt.shown { display: block; }
    #keys-left { width: 45%; }
    #keys-right { width: 55%; border-left: solid $primary; padding: 0 1; }
    #dialog { width: 72; height: auto; border: thick $warning; background: $surface;
              padding: 1 2; }
    #pane { width: 90%; height: 80%; border: thick $primary; background: $surface;
            padding: 0 1; }
    .dialog-title { text-style: bold; margin-bottom: 1; }
    .buttons { height: auto; margin-top: 1; }
    ConfirmScreen, PromptScreen, TextScreen { align: center middle; }
    #table-pid-leases, #table-pid-blocks { height: 1fr; }
    #pulse-cards { height: 1fr; }
    .pulse-card { height: auto; margin-bottom: 1; }
    .pulse-head { height: 1; padding: 0 1; }
    .pulse-row { height: auto; }
    .pulse-chart { width: 1fr; height: auto; padding: 0 1; }
    .pulse-caption { height: 1; }
    .pulse-chart Sparkline { height: 2; }
    """

    BINDINGS = [
        Binding("colon", "prompt('command')", "cmd", show=True),
        Binding("slash", "prompt('filter')", "filter", show=True),
        Binding("question_mark", "help", "help", show=True),
        Binding("escape", "back", "back", show=True),
        Binding("q", "quit", "quit", show=True),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("d", "describe(False)", "describe", show=True),
        Binding("y", "describe(True)", "json", show=False),
        Binding("space", "marks('toggle_mark')", "mark", show=False),
        Binding("ctrl+space", "marks('mark_range')", "mark range", show=False),
        Binding("asterisk", "marks('mark_all')", "mark all", show=False),
        Binding("u", "marks('clear_marks')", "unmark", show=False),
        Binding("ctrl+d", "act('delete')", "delete", show=True),
        Binding("t", "act('transfer')", "transfer", show=False),
        Binding("p", "view_key('p')", "promote/pause", show=False),
        Binding("a", "add_learner", "add learner", show=False),
        Binding("f", "act('force')", "force-claim", show=False),
        Binding("e", "put_key(False)", "edit", show=False),
        Binding("n", "put_key(True)", "new key", show=False),
        Binding("c", "act('compact')", "compact", show=False),
        Binding("v", "view_key('v')", "value mode", show=False),
        Binding("h", "history", "history", show=False),
        Binding("r", "view_key('r')", "refresh", show=False),
    ]

    def __init__(self, model: ClusterModel | None = None, client: AsyncClient | None = None,
                 *, read_only: bool = False, start_view: str = "members",
                 metrics_urls: list[str] | None = None) -> None:
        """`client` None: draw `model` as it is (snapshot tests); else feeds keep it live.
        `read_only`: the gate gets no writer, so nothing can change the cluster.
        `metrics_urls`: the members' /metrics, scraped for the pulse view."""
        super().__init__()
        self.model = model or ClusterModel()
        if metrics_urls:
            self.model.pulses = Pulses(metrics_urls)
        self.client = client
        self.feeds: Feeds | None = None
        writer = (Writer(client, self._leader_endpoint)
                  if client is not None and not read_only else None)
        self.gate = ActionGate(writer, self.model.has_quorum)
        self.views = {v.view: v for v in (MembersView(self.model), SessionsView(self.model),
                                          OwnersView(self.model), ProducersView(self.model),
                                          KeysView(self.model), EventsView(self.model),
                                          UsersView(self.model), RolesView(self.model),
                                          PulseView(self.model))}
        self.start_view = start_view
        self.back_stack: list[str] = []
        self.prompt_kind = ""
        self.last_message = ""  # what the console last told the operator (tests read it)
        self.header = Static("", id="header")
        self.banner = Static("", id="banner")
        self._drawn = ("", "")
        self._denials = 0  # the model's refusals already flashed

    def _leader_endpoint(self) -> str | None:
        leader = self.model.leader()
        return leader.endpoint if leader is not None else None

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.header
        yield self.banner
        with ContentSwitcher(initial=f"view-{self.start_view}", id="switcher"):
            yield from self.views.values()
        yield Input(id="prompt")
        yield Footer()

    async def on_mount(self) -> None:
        if self.client is not None:
            self.feeds = Feeds(self.client, self.model)
            self.feeds.start()
            self.set_interval(INTERVAL_S, self.scrape_pulses)
        self.set_interval(DRAW_S, self.draw)
        self.set_interval(TICK_S, self.tick)
        self.draw()
        self.focus_view()

    def scrape_pulses(self) -> None:
        """One scrape of every member's metrics, unless the last round is still running
        (each scrape ends within its timeout)."""
        running = any(w.group == "pulses" and not w.is_finished for w in self.workers)
        if self.model.pulses.urls and not running:
            self.run_worker(scrape_round(self.model), group="pulses", exit_on_error=False)

    async def on_unmount(self) -> None:
        if self.feeds is not None:
            await self.feeds.stop()

    @property
    def view_name(self) -> str:
        return (self.query_one("#switcher", ContentSwitcher).current or "view-").removeprefix(
            "view-")

    @property
    def view(self) -> Any:
        return self.views[self.view_name]

    def focus_view(self) -> None:
        view = self.view
        target = (view.tree if isinstance(view, KeysView) else view.focus_target
                  if isinstance(view, PulseView) else view.data_table)
        target.focus()

    def draw(self) -> None:
        """Apply what changed to the view shown, the header and the banner."""
        if not self.is_running or not self.header.is_attached:
            return
        self.view.sync()
        m = self.model
        leader = m.leader()
        served = m.member_for(m.serving)
        parts = [f"[b]coord[/b] cluster {m.cluster_id:x}" if m.cluster_id else "[b]coord[/b]",
                 f"via {m.serving}" + (f" ({served.name})" if served else ""),
                 f"leader {leader.name} term {leader.term}" if leader else "[red]no leader[/]",
                 f"rev {m.revision}", f":{self.view_name}"]
        if self.gate.read_only:
            parts.append("[reverse] READ-ONLY CONSOLE [/]")
        header, trouble = " │ ".join(parts), m.trouble()
        if (header, trouble) != self._drawn:  # an idle console redraws nothing
            self._drawn = (header, trouble)
            self.header.update(header)
            self.banner.update(escape(trouble))
            self.banner.set_class(bool(trouble), "shown")
        if m.denials != self._denials:
            self._denials = m.denials
            newest = next((e.text for e in m.events if e.kind == "denied"), "")
            self.say(f"refused: {newest}", error=True)
            self.view.update_title()

    def tick(self) -> None:
        if self.is_running and self.header.is_attached:
            self.view.tick()

    def say(self, message: str, error: bool = False) -> None:
        self.last_message = message
        self.notify(message, severity="error" if error else "information",
                    timeout=6 if error else 3)

    # -- switching views ------------------------------------------------------------------
    def show_view(self, name: str, remember: bool = True) -> None:
        if name == self.view_name:
            return
        if remember:
            self.back_stack.append(self.view_name)
        self.query_one("#switcher", ContentSwitcher).current = f"view-{name}"
        self.view.sync()
        self.view.update_title()
        if name in ("users", "roles"):
            self.read_auth(name)
        self.draw()
        self.focus_view()

    def action_prompt(self, kind: str) -> None:
        prompt = self.query_one("#prompt", Input)
        self.prompt_kind = kind
        prompt.value = "" if kind == "command" else str(self.view.filter)
        prompt.placeholder = (":view (members sessions owners pids keys events users roles"
                              " pulses)"
                              " or :q"
                              if kind == "command" else "/filter  (/!text inverts)")
        prompt.add_class("shown")
        prompt.focus()

    def hide_prompt(self) -> None:
        self.query_one("#prompt", Input).remove_class("shown")
        self.focus_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "prompt":
            return
        self.hide_prompt()
        if self.prompt_kind == "filter":
            self.view.set_filter(Filter.parse(event.value))
            return
        what, arg = commands.parse(event.value)
        if what == "quit":
            self.exit()
        elif what == "view":
            self.show_view(arg)
        else:
            self.say(arg, error=True)

    def action_back(self) -> None:
        prompt = self.query_one("#prompt", Input)
        if prompt.has_class("shown"):
            self.hide_prompt()
            return
        view = self.view
        if view.filter:
            view.set_filter(Filter())
        elif view.scope is not None:
            view.set_scope(None)
        elif getattr(view, "marked", None):
            view.clear_marks()
        elif self.back_stack:
            self.show_view(self.back_stack.pop(), remember=False)

    def action_help(self) -> None:
        lines = ["[b]Every view[/b]"] + [f"  [b]{escape(k):<12}[/b] {escape(w)}"
                                         for k, w in COMMON_KEYS]
        for name, view in self.views.items():
            lines.append(f"\n[b]:{name}[/b]  (aliases: "
                         f"{', '.join(commands.ALIASES[name][1:])})")
            lines += [f"  [b]{escape(k):<12}[/b] {escape(w)}" for k, w in view.help]
        if self.gate.read_only:
            lines.append("\nThis console was started with --read-only: every action is off.")
        self.push_screen(TextScreen("Keys", "\n".join(lines), markup=True))

    # -- rows -----------------------------------------------------------------------------
    def action_describe(self, as_json: bool) -> None:
        rows = self.view.selected()
        if not rows:
            return
        d = self.view.describe(rows[0])
        text = (json.dumps(d, indent=2, default=str) if as_json
                else "\n".join(f"{k:>16}: {v}" for k, v in d.items()))
        self.push_screen(TextScreen(f"{self.view_name}: describe", text))

    def action_marks(self, method: str) -> None:
        """space / ctrl+space / * / u on a table view (the keys tree has no marks)."""
        mark = getattr(self.view, method, None)
        if mark is not None:
            mark()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter: owners → the owning session; sessions → that session's owners."""
        view = self.view
        row = view.current()
        if row is None:
            return
        if isinstance(view, OwnersView):
            self.show_view("sessions")
            if not self.views["sessions"].select(row.session_id):
                self.say(f"session {row.session_id} is not listed (yet)", error=True)
        elif isinstance(view, SessionsView):
            sid = row.id
            owners = self.views["owners"]
            owners.set_scope((f"session {sid}", lambda o: o.session_id == sid))
            self.show_view("owners")
        else:
            self.action_describe(False)

    def action_view_key(self, key: str) -> None:
        view = self.view
        if key == "p" and isinstance(view, EventsView):
            view.toggle_pause()
        elif key == "p":
            self.action_act("promote")
        elif key == "v" and isinstance(view, KeysView):
            view.cycle_value_mode()
        elif key == "r" and isinstance(view, UsersView | RolesView):
            self.read_auth(view.view)
        elif key == "r" and self.feeds is not None:
            self.feeds.relist()
            self.feeds.kick_status()

    def read_auth(self, view: str) -> None:
        """Read the users or the roles again (their views show them; no stream does)."""
        if self.feeds is not None:
            self.run_worker(self.feeds.read_auth(view), group="auth", exclusive=True)

    # -- actions --------------------------------------------------------------------------
    def action_act(self, kind: str) -> None:
        request = getattr(self.view, "request", lambda k: None)(kind)
        self.request(request)

    def request(self, request: Action | str | None) -> None:
        """Ask the operator, then run the action through the gate (which may refuse)."""
        if request is None:
            return
        if isinstance(request, str):
            self.say(request, error=True)
            return
        refusal = self.gate.refusal()
        if refusal is not None:
            self.say(f"refused: {refusal}", error=True)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._run(request), exclusive=False)

        self.push_screen(ConfirmScreen(request.describe), answered)

    async def _run(self, action: Action) -> None:
        try:
            message = await self.gate.run(action)
        except ActionRefused as e:
            self.say(f"refused: {e}", error=True)
            return
        except CoordError as e:
            # PERMISSION_DENIED's message names the permission the user lacks
            verb = "refused" if e.reason == "PERMISSION_DENIED" else "failed"
            self.say(f"{verb}: {e.reason}: {e.message or e}", error=True)
            return
        self.say(message)
        view = self.view
        if getattr(view, "marked", None):
            view.clear_marks()
        if self.feeds is not None:
            self.feeds.kick_status()  # sessions and producers follow by their streams

    def action_put_key(self, new: bool) -> None:
        view = self.view
        if not isinstance(view, KeysView):
            return
        row = None if new else view.current()
        if not new and row is None:
            self.say("select a key to edit (n puts a new one)", error=True)
            return
        key = key_text(row.key) if row is not None else view.current_prefix()
        value = row.value.decode(errors="replace") if row is not None else ""

        def entered(fields: dict | None) -> None:
            if not fields or not fields["key"]:
                return
            k, v = fields["key"].encode(), fields["value"].encode()
            self.request(Action(f"Put {fields['key']!r} = {short_value(v)!r}?",
                                partial(Writer.put, key=k, value=v)))

        self.push_screen(PromptScreen("Put a key", [("key", "key", key),
                                                    ("value", "value", value)]), entered)

    def action_add_learner(self) -> None:
        if not isinstance(self.view, MembersView):
            return

        def entered(fields: dict | None) -> None:
            if not fields or not fields["name"] or not fields["peer"]:
                return
            name, peer = fields["name"], fields["peer"]
            self.request(Action(f"Add {name} (peers at {peer}) as a learner? It receives "
                                "the log but does not vote until promoted.",
                                partial(Writer.add_learner, name=name, peer_address=peer,
                                        client_address=fields["client"])))

        self.push_screen(PromptScreen("Add a learner", [
            ("name", "member name", ""), ("peer", "peer address (host:port)", ""),
            ("client", "client address (host:port)", "")]), entered)

    def action_history(self) -> None:
        view = self.view
        if not isinstance(view, KeysView) or self.client is None:
            return
        row = view.current()
        if row is None:
            return
        self.run_worker(self._history(row.key, row.mod_revision))

    async def _history(self, key: bytes, upto: int) -> None:
        """Every revision of `key` the cluster still keeps (a watch replaying from
        revision 1, or from the compaction point), oldest first."""
        assert self.client is not None
        lines: list[str] = []
        start, note = 1, ""
        for _ in range(2):
            stream = self.client.watch(key, from_revision=start)
            try:
                while True:
                    ev = await asyncio.wait_for(stream.__anext__(), HISTORY_ITEM_S)
                    lines.append(f"rev {ev.kv.mod_revision:>8}  {ev.type:<6} version "
                                 f"{ev.kv.version:<4} {short_value(ev.kv.value, 60)}")
                    if ev.kv.mod_revision >= upto:
                        break
                break
            except CompactedError as e:
                start, note = e.compact_revision, (
                    f"(history before revision {e.compact_revision} was compacted)\n")
                lines.clear()
            except (TimeoutError, CoordError) as e:
                note += f"(stopped: {type(e).__name__})\n"
                break
            finally:
                stream.cancel()
        self.push_screen(TextScreen(f"history of {key_text(key)}", note + "\n".join(lines)))


async def run(endpoints: list[str], read_only: bool = False,
              tls: TLS | Literal[False] | None = None, user: str | None = None,
              password: str | None = None, metrics_urls: list[str] | None = None) -> None:
    """`coord tui`: the console on a client of `endpoints` until the operator quits; `tls`
    as the client library's (None: $COORD_CACERT...), logged in as `user` (with
    `password`) on a cluster with auth on."""
    # One operator, one client: the member listed first is the one asked first.
    async with AsyncClient(endpoints, read_only_ok=True, randomize_endpoints=False,
                           tls=tls, user=user, password=password) as client:
        await CoordApp(client=client, read_only=read_only,
                       metrics_urls=metrics_urls).run_async()
