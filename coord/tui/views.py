"""The table views: members, sessions, owners, producers and events (keys are a tree:
`keys_view.py`). Each says its columns, how a row reads, and which actions its keys
describe (handed to the app, which asks for confirmation and runs them through the
gate)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from functools import partial
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
from coord.tui.tables import TableView, fill, refusal, update

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

    def request(self, kind: str) -> Request:
        rows = self.selected()
        if not rows:
            return None
        m = rows[0]
        if kind == "transfer":
            if m.role == "leader":
                return f"{m.name} already leads"
            return Action(f"Transfer leadership to {m.name}?",
                          lambda w: w.transfer_leader(m.name))
        if kind == "promote":
            if not m.learner:
                return f"{m.name} is already a voter"
            return Action(f"Promote learner {m.name} to a voting member?",
                          lambda w: w.promote(m.name, m.peer_address, m.endpoint))
        if kind == "delete":
            names = [r.name for r in rows]
            return batch(f"Remove member(s) {', '.join(names)} from the cluster? It stops "
                         "counting towards the quorum.",
                         [Action(n, partial(Writer.remove_member, name=n)) for n in names])
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

    def cells(self, s: SessionRow) -> tuple[Any, ...]:
        owned = ", ".join(f"{g}/{r}" for g, r in s.owned[:3])
        owned += f" (+{len(s.owned) - 3})" if len(s.owned) > 3 else ""
        keys = ", ".join(key_text(k) for k in s.keys[:2])
        keys += f" (+{len(s.keys) - 2})" if len(s.keys) > 2 else ""
        return (s.id, s.name or "-", duration_ms(s.ttl_ms), self.left(s, self.model.mono()),
                "yes" if s.read_only_ok else "", owned or "-", keys or "-")

    @staticmethod
    def left(s: SessionRow, now: float) -> Text:
        """The countdown from the leader's streamed deadline; "renewed" once a keepalive
        (which no stream tells of) must have moved it."""
        if s.renewed(now):
            return Text("renewed", style="dim")
        left = s.left_ms(now)
        return Text(duration_ms(left), style="bold red" if 0 <= left < 2000 else "")

    def tick(self) -> None:
        table = self.data_table
        now = self.model.mono()
        for rid, key in self._ids.items():
            s = self.model.sessions.get(key)
            if s is not None and s.remaining_ms >= 0:
                table.update_cell(rid, "left", self.left(s, now))

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
        held = sum(len(s.owned) + len(s.keys) for s in rows)
        ids = ", ".join(str(s.id) for s in rows)
        return batch(f"Close session(s) {ids}? Their {held} owned resource(s) and bound "
                     "key(s) are released at once, and their holders are fenced.",
                     [Action(str(s.id), partial(Writer.close_session, session_id=s.id))
                      for s in rows])


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
            return batch(f"Release {names}? The owning session(s) lose them; the next "
                         "claim gets a higher generation.",
                         [Action(o.resource, partial(Writer.release, session_id=o.session_id,
                                                     group=o.group, resource=o.resource))
                          for o in rows])
        if kind == "force":
            return batch(f"Force-claim {names} with generation 0? The current owner(s) are "
                         "severed (fenced) and the console's own session holds them.",
                         [Action(o.resource, partial(Writer.force_claim, group=o.group,
                                                     resource=o.resource)) for o in rows])
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

    def cells(self, e: EventRow) -> tuple[Any, ...]:
        styles = {"leader": "bold cyan", "quorum": "bold red", "mode": "bold magenta",
                  "sever": "yellow", "reset": "yellow", "expire": "red", "member": "red"}
        return (e.seq, clock(e.at), Text(e.kind, style=styles.get(e.kind, "")), e.text)

    def rebuild(self) -> None:
        table = self.data_table
        table.clear()
        self._ids.clear()
        kept = (e for e in self.model.events if self.keeps(e))  # newest first
        for e in itertools.islice(kept, self.SHOWN):
            self._ids[str(e.seq)] = e.seq
            table.add_row(*self._draw(e.seq, e), key=str(e.seq))
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
    """Three tables: producers by transactional id, live pid leases, pid blocks handed
    out; each updated row by row from the producers stream."""

    view = "producers"
    title = "Producers"
    columns = (("producer", "TRANSACTIONAL ID"), ("pid", "PID"), ("epoch", "EPOCH"))
    help = (("r", "read the producer tables again"),)
    SIDES = (("pid-leases", (("pid", "LEASED PID"), ("epoch", "EPOCH"), ("topic", "TOPIC"),
                             ("partition", "PARTITION"), ("expires", "EXPIRES IN"))),
             ("pid-blocks", (("requester", "BLOCK REQUESTER"), ("start", "START"),
                             ("size", "SIZE"), ("revision", "REVISION"))))

    def __init__(self, model: ClusterModel) -> None:
        super().__init__(model)
        self._drawn = -1
        self._side_ids: dict[str, dict[str, Any]] = {name: {} for name, _ in self.SIDES}

    def compose(self):
        yield from super().compose()
        for name, _ in self.SIDES:
            yield DataTable(id=f"table-{name}", cursor_type="row")

    @property
    def data_table(self) -> DataTable:
        return self.query_one("#table-producers", DataTable)

    def add_columns(self) -> None:
        super().add_columns()
        for name, columns in self.SIDES:
            side = self.query_one(f"#table-{name}", DataTable)
            for key, label in columns:
                side.add_column(label, key=key)

    def table_of(self, model: ClusterModel) -> Table:
        return model.producers.producers

    def cells(self, row: tuple) -> tuple[Any, ...]:
        return row

    def describe(self, row: tuple) -> dict:
        return {"transactional_id": row[0], "pid": row[1], "epoch": row[2]}

    def _sides(self) -> list[tuple[str, Table, Any, Any]]:
        """(name, table, row id of a key, cells of a kept row) of the lease and block
        tables."""
        p = self.model.producers
        now_ms = p.now_ms(self.model.mono())

        def kept(cells: tuple) -> tuple | None:
            return cells if self.filter.keeps(" ".join(map(str, cells))) else None

        def lease(_: int, x: tuple) -> tuple | None:
            pid, epoch, expire_ms, topic, partition = x
            return kept((pid, epoch, topic, partition, duration_ms(max(0, expire_ms - now_ms))))

        def block(_: tuple, x: tuple) -> tuple | None:
            requester, start, n, revision = x
            return kept((requester or "-", start, n, revision))
        return [("pid-leases", p.leases, str, lease),
                ("pid-blocks", p.blocks, lambda k: f"{k[0]}\x1f{k[1]}", block)]

    def rebuild(self) -> None:
        super().rebuild()
        for name, table, row_id, draw in self._sides():
            fill(self.query_one(f"#table-{name}", DataTable), table, self._side_ids[name],
                 row_id, draw)
        self._drawn = self.model.producers.version
        self.update_title()

    def sync(self) -> None:
        p = self.model.producers
        if p.version == self._drawn or self.view in self.model.loading:
            return
        self._drawn = p.version
        super().sync()
        for name, table, row_id, draw in self._sides():
            update(self.query_one(f"#table-{name}", DataTable), table, self._side_ids[name],
                   row_id, draw, dict(self.SIDES)[name])
        self.update_title()

    def tick(self) -> None:
        """Leases count down between entries of the stream."""
        p = self.model.producers
        now_ms = p.now_ms(self.model.mono())
        side = self.query_one("#table-pid-leases", DataTable)
        for rid, pid in self._side_ids["pid-leases"].items():
            lease = p.leases.get(pid)
            if lease is not None:
                side.update_cell(rid, "expires", duration_ms(max(0, lease[2] - now_ms)))

    def update_title(self) -> None:
        p = self.model.producers
        self.query_one(f"#title-{self.view}").update(
            f"Producers [{len(p.producers)}]   pid leases [{len(p.leases)}]   blocks "
            f"[{len(p.blocks)}]   next pid {p.next_pid}   at revision {p.revision}"
            + (f"  /{self.filter}" if self.filter else "")
            + "".join(f"  {r}" for r in refusal(self.model, self.view)))
