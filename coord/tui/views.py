"""The table views: members, sessions, owners, producers and events (keys are a tree:
`keys_view.py`). Each says its columns, how a row reads, and which actions its keys
describe (handed to the app, which asks for confirmation and runs them through the
gate)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Static

from coord.tui.actions import Action, Writer, batch
from coord.tui.format import clock, duration_ms, key_text, size
from coord.tui.model import (
    ClusterModel,
    EventRow,
    MemberRow,
    OwnerRow,
    SessionRow,
    Table,
)
from coord.tui.tables import TableView

Request = Action | str | None  # an action, or why not (shown), or nothing to do


class MembersView(TableView):
    view = "members"
    title = "Members"
    columns = (("name", "NAME"), ("endpoint", "ENDPOINT"), ("role", "ROLE"),
               ("term", "TERM"), ("leader", "LEADER"), ("commit", "COMMIT"),
               ("applied", "APPLIED"), ("lag", "LAG"), ("learner", "LEARNER"),
               ("quorum", "QUORUM"), ("mode", "MODE"), ("version", "VERSION"),
               ("data", "DATA"))
    help = (("t", "transfer leadership to the member"), ("p", "promote a learner"),
            ("a", "add a learner"), ("ctrl+d", "remove the member"))

    def table_of(self, model: ClusterModel) -> Table:
        return model.members

    def cells(self, m: MemberRow) -> tuple[Any, ...]:
        if not m.reachable:
            return (m.name, m.endpoint, Text("unreachable", style="bold red"), m.term,
                    m.leader, m.commit, m.applied, "", "yes" if m.learner else "",
                    Text(m.error or "?", style="red"), "", m.version, size(m.data_bytes))
        role = Text(m.role, style="bold green" if m.role == "leader" else "")
        quorum = Text("yes", style="green") if m.has_quorum else Text(
            f"lost {duration_ms(m.quorum_lost_ms)}", style="bold red")
        mode = Text(m.mode or "-", style="" if m.mode in ("read-write", "") else "bold red")
        lag = Text(str(m.lag), style="yellow" if m.lag > 100 else "")
        return (m.name, m.endpoint, role, m.term, m.leader or "-", m.commit, m.applied, lag,
                "yes" if m.learner else "", quorum, mode, m.version or "-", size(m.data_bytes))

    def row_id(self, key: Hashable) -> str:
        return str(key)

    def request(self, kind: str) -> Request:
        rows = self.selected()
        if not rows:
            return None
        m = rows[0]
        if kind == "transfer":
            if m.role == "leader":
                return f"{m.name} already leads"

            async def transfer(w: Writer) -> str:
                return await w.transfer_leader(m.name)
            return Action(f"Transfer leadership to {m.name}?", transfer)
        if kind == "promote":
            if not m.learner:
                return f"{m.name} is already a voter"

            async def promote(w: Writer) -> str:
                return await w.promote(m.name, m.peer_address, m.endpoint)
            return Action(f"Promote learner {m.name} to a voting member?", promote)
        if kind == "delete":
            names = [r.name for r in rows]

            def remove(name: str) -> Action:
                async def run(w: Writer) -> str:
                    return await w.remove_member(name)
                return Action(name, run)
            return batch(f"Remove member(s) {', '.join(names)} from the cluster? It stops "
                         "counting towards the quorum.", [remove(n) for n in names])
        return None


class SessionsView(TableView):
    view = "sessions"
    title = "Sessions"
    columns = (("id", "ID"), ("name", "CLIENT"), ("ttl", "TTL"), ("left", "LEFT"),
               ("ro", "READ-ONLY OK"), ("owned", "OWNS"), ("keys", "KEYS"))
    widths = {"id": 8, "name": 20, "ttl": 7, "left": 7, "ro": 12, "owned": 40, "keys": 24}
    help = (("enter", "the session's owners"), ("ctrl+d", "close (revoke) the session"))

    def table_of(self, model: ClusterModel) -> Table:
        return model.sessions

    def row_id(self, key: Hashable) -> str:
        return str(key)

    def cells(self, s: SessionRow) -> tuple[Any, ...]:
        owned = ", ".join(f"{g}/{r}" for g, r in s.owned[:3])
        owned += f" (+{len(s.owned) - 3})" if len(s.owned) > 3 else ""
        keys = ", ".join(key_text(k) for k in s.keys[:2])
        keys += f" (+{len(s.keys) - 2})" if len(s.keys) > 2 else ""
        left = s.left_ms(self.model.mono())
        left_text = Text(duration_ms(left), style="bold red" if 0 <= left < 2000 else "")
        return (s.id, s.name or "-", duration_ms(s.ttl_ms), left_text,
                "yes" if s.read_only_ok else "", owned or "-", keys or "-")

    def sort_key(self, key: Hashable) -> Any:
        return key

    def tick(self) -> None:
        table = self.data_table
        now = self.model.mono()
        for rid, key in self._ids.items():
            s = self.model.sessions.get(key)
            if s is not None and s.remaining_ms >= 0:
                left = s.left_ms(now)
                table.update_cell(rid, "left", Text(
                    duration_ms(left), style="bold red" if left < 2000 else ""))

    def describe(self, row: SessionRow) -> dict:
        d = super().describe(row)
        d["left_ms"] = row.left_ms(self.model.mono())
        d["keys"] = [key_text(k) for k in row.keys]
        d["owned"] = [f"{g}/{r}" for g, r in row.owned]
        return d

    def request(self, kind: str) -> Request:
        rows = self.selected()
        if kind != "delete" or not rows:
            return None

        def close(s: SessionRow) -> Action:
            async def run(w: Writer) -> str:
                return await w.close_session(s.id)
            return Action(str(s.id), run)
        held = sum(len(s.owned) + len(s.keys) for s in rows)
        ids = ", ".join(str(s.id) for s in rows)
        return batch(f"Close session(s) {ids}? Their {held} owned resource(s) and bound "
                     "key(s) are released at once, and their holders are fenced.",
                     [close(s) for s in rows])


class OwnersView(TableView):
    view = "owners"
    title = "Owners"
    columns = (("group", "GROUP"), ("resource", "RESOURCE"), ("session", "SESSION"),
               ("generation", "GENERATION"), ("revision", "SINCE REV"), ("since", "SINCE"))
    widths = {"group": 18, "resource": 32, "session": 10, "generation": 10, "revision": 10,
              "since": 8}
    help = (("enter", "the owning session"), ("ctrl+d", "release the resource"),
            ("f", "force-claim (generation 0) for the console's session"))

    def table_of(self, model: ClusterModel) -> Table:
        return model.owners

    def row_id(self, key: Hashable) -> str:
        group, resource = key  # type: ignore[misc]
        return f"{group}\x1f{resource}"

    def cells(self, o: OwnerRow) -> tuple[Any, ...]:
        return (o.group, o.resource, o.session_id, o.generation, o.revision, clock(o.seen_at))

    def request(self, kind: str) -> Request:
        rows = self.selected()
        if not rows:
            return None
        names = ", ".join(f"{o.group}/{o.resource}" for o in rows[:5])
        names += f" and {len(rows) - 5} more" if len(rows) > 5 else ""
        if kind == "delete":
            def release(o: OwnerRow) -> Action:
                async def run(w: Writer) -> str:
                    return await w.release(o.session_id, o.group, o.resource)
                return Action(o.resource, run)
            return batch(f"Release {names}? The owning session(s) lose them; the next "
                         "claim gets a higher generation.", [release(o) for o in rows])
        if kind == "force":
            def claim(o: OwnerRow) -> Action:
                async def run(w: Writer) -> str:
                    return await w.force_claim(o.group, o.resource)
                return Action(o.resource, run)
            return batch(f"Force-claim {names} with generation 0? The current owner(s) are "
                         "severed (fenced) and the console's own session holds them.",
                         [claim(o) for o in rows])
        return None


class EventsView(TableView):
    """Newest on top; `p` pauses (events keep arriving and are shown on resume)."""

    view = "events"
    title = "Events"
    columns = (("seq", "#"), ("time", "TIME"), ("kind", "KIND"), ("text", "WHAT"))
    widths = {"seq": 6, "time": 8, "kind": 8, "text": 90}
    help = (("p", "pause / resume the feed"),)
    SHOWN = 500  # the newest kept rows drawn; the model keeps more

    def __init__(self, model: ClusterModel) -> None:
        super().__init__(model)
        self.paused = False
        self._seq = -1

    def table_of(self, model: ClusterModel) -> Table:
        table: Table = Table()
        for e in model.events:
            table.rows[e.seq] = e
        table.version = model.events_seq
        return table

    def row_id(self, key: Hashable) -> str:
        return str(key)

    def cells(self, e: EventRow) -> tuple[Any, ...]:
        styles = {"leader": "bold cyan", "quorum": "bold red", "mode": "bold magenta",
                  "sever": "yellow", "reset": "yellow", "expire": "red", "member": "red"}
        return (e.seq, clock(e.at), Text(e.kind, style=styles.get(e.kind, "")), e.text)

    def rebuild(self) -> None:
        table = self.data_table
        table.clear()
        self._ids.clear()
        shown = 0
        for e in self.model.events:  # newest first
            if shown >= self.SHOWN:
                break
            if self.keeps(e):
                rid = str(e.seq)
                self._ids[rid] = e.seq
                table.add_row(*self._draw(e.seq, e), key=rid)
                shown += 1
        self._seq = self.model.events_seq
        self.update_title()

    def sync(self) -> None:
        if not self.paused and self.model.events_seq != self._seq:
            self.rebuild()

    def update_title(self) -> None:
        parts = [f"Events [{len(self._ids)} shown of {len(self.model.events)} kept]"]
        if self.filter:
            parts.append(f"/{self.filter}")
        if self.paused:
            parts.append(f"PAUSED ({self.model.events_seq - self._seq} new)")
        self.query_one(f"#title-{self.view}", Static).update("  ".join(parts))

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        self.sync()
        self.update_title()


class ProducersView(TableView):
    """Three tables: pid blocks handed out, live pid leases, producers by transactional
    id (read again when asked, `r`, and every few seconds: no stream announces them)."""

    view = "producers"
    title = "Producers"
    columns = (("producer", "TRANSACTIONAL ID"), ("pid", "PID"), ("epoch", "EPOCH"))
    help = (("r", "read the producer tables again"),)

    def compose(self):
        yield from super().compose()
        yield DataTable(id="table-pid-leases", cursor_type="row")
        yield DataTable(id="table-pid-blocks", cursor_type="row")

    @property
    def data_table(self) -> DataTable:
        return self.query_one("#table-producers", DataTable)

    def add_columns(self) -> None:
        super().add_columns()
        leases = self.query_one("#table-pid-leases", DataTable)
        for key, label in (("pid", "LEASED PID"), ("epoch", "EPOCH"), ("topic", "TOPIC"),
                           ("partition", "PARTITION"), ("expires", "EXPIRES IN")):
            leases.add_column(label, key=key)
        blocks = self.query_one("#table-pid-blocks", DataTable)
        for key, label in (("requester", "BLOCK REQUESTER"), ("start", "START"),
                           ("size", "SIZE"), ("revision", "REVISION")):
            blocks.add_column(label, key=key)

    def table_of(self, model: ClusterModel) -> Table:
        table: Table = Table()
        for key, pid, epoch in model.producers.producers:
            table.rows[key] = (key, pid, epoch)
        table.version = model.producers_version
        return table

    def cells(self, row: tuple) -> tuple[Any, ...]:
        return row

    def describe(self, row: tuple) -> dict:
        return {"transactional_id": row[0], "pid": row[1], "epoch": row[2]}

    def rebuild(self) -> None:
        super().rebuild()
        p = self.model.producers
        leases = self.query_one("#table-pid-leases", DataTable)
        leases.clear()
        for pid, epoch, expire_ms, topic, partition in p.leases:
            row = (pid, epoch, topic, partition, duration_ms(expire_ms - p.clock_ms))
            if self.filter.keeps(" ".join(map(str, row))):
                leases.add_row(*row, key=str(pid))
        blocks = self.query_one("#table-pid-blocks", DataTable)
        blocks.clear()
        for i, (requester, start, n, revision) in enumerate(p.blocks):
            row = (requester or "-", start, n, revision)
            if self.filter.keeps(" ".join(map(str, row))):
                blocks.add_row(*row, key=str(i))
        self.query_one(f"#title-{self.view}").update(
            f"Producers [{len(p.producers)}]   pid leases [{len(p.leases)}]   blocks "
            f"[{len(p.blocks)}]   next pid {p.next_pid}   at revision {p.revision}"
            + (f"  /{self.filter}" if self.filter else ""))

    def update_title(self) -> None:
        pass

    def sync(self) -> None:
        if self.model.producers_version != self._version:
            self.rebuild()
