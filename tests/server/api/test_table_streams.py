"""The sessions and producers streams' rounds, in-process over a real state machine and
event hub (the cluster tests are tests/tui/test_table_streams.py): a snapshot installed
under a stream makes it list again, a lease that expired is dropped, and a member that
has not applied the caller's index answers BEHIND instead of listing an older state."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import grpc
import pytest

from coord.server.api import table_streams
from coord.server.requests.events import EventHub
from coord.sm import commands as c
from coord.sm.machine import CoordMachine


class Aborted(Exception):
    pass


class Context:
    """What a stream handler uses of a gRPC context: abort."""

    async def abort_with_status(self, status) -> None:
        raise Aborted(status.code)


def member(applied: int = 1) -> SimpleNamespace:
    return SimpleNamespace(applied_index=applied, is_leader=False,
                           me=SimpleNamespace(name="n1"))


async def take(stream, until_kind: str | None = None, limit_s: float = 2.0) -> list:
    """Entries up to one of kind `until_kind` (None: the next one)."""
    out = []
    while True:
        out.append(await asyncio.wait_for(stream.__anext__(), limit_s))
        if until_kind is None or out[-1].kind == until_kind:
            return out


def test_a_snapshot_installed_under_the_stream_lists_again():
    async def main() -> None:
        m, node = CoordMachine(), member()
        hub = EventHub(m)
        a = m.execute(c.OpenSession("a", 10_000), time_ms=1000).session_id
        stream = table_streams.watch_sessions(node, m, hub, None, 0, Context())
        first = await take(stream, "listed")
        assert [(x.kind, x.session.id) for x in first[:-1]] == [("upsert", a)]
        assert all(x.snapshot for x in first) and first[0].session.remaining_ms == -1

        b = m.execute(c.OpenSession("b", 10_000), time_ms=1000).session_id
        hub.publish()
        (opened,) = await take(stream)
        assert (opened.kind, opened.session.id, opened.snapshot) == ("upsert", b, False)

        other = CoordMachine()  # a leader's snapshot where only "z" lives
        z = other.execute(c.OpenSession("z", 10_000, session_id=99), time_ms=1000).session_id
        m.adopt(m.restored(other.snapshot()))
        hub.publish()
        again = await take(stream, "listed")
        assert [(x.kind, x.session.id) for x in again[:-1]] == [("upsert", z)]
        assert all(x.snapshot for x in again)
        await stream.aclose()

    asyncio.run(main())


def test_producers_rounds_send_what_changed_and_drop_expired_leases():
    async def main() -> None:
        m, node = CoordMachine(pid_lifetime_ms=1000), member()
        hub = EventHub(m)
        m.execute(c.InitProducer("tx"), time_ms=1000)
        stream = table_streams.watch_producers(node, m, hub, 0, Context())
        first = await take(stream, "listed")
        assert [(x.kind, x.producer.producer_key) for x in first[:-1]] == [("producer", "tx")]

        lease = m.execute(c.LeasePid("t", 0), time_ms=1100)
        m.execute(c.InitProducer("tx"), time_ms=1100)  # an epoch bump
        hub.publish()
        got = await take(stream)
        got += await take(stream)
        assert sorted((x.kind, x.removed) for x in got) == [("lease", False),
                                                            ("producer", False)]
        assert next(x for x in got if x.kind == "producer").producer.epoch == 1

        m.execute(c.Put(b"k", b"v"), time_ms=2200)  # the elapsed clock passes the lease
        hub.publish()
        (gone,) = await take(stream)
        assert (gone.kind, gone.removed, gone.lease.pid) == ("lease", True, lease.pid)
        await stream.aclose()

    asyncio.run(main())


def test_a_member_behind_the_caller_answers_behind(monkeypatch):
    monkeypatch.setattr(table_streams, "CATCH_UP_S", 0.1)

    async def main() -> None:
        m = CoordMachine()
        stream = table_streams.watch_sessions(member(applied=5), m, EventHub(m), None, 10,
                                              Context())
        with pytest.raises(Aborted) as raised:
            await take(stream)
        assert raised.value.args[0] == grpc.StatusCode.UNAVAILABLE

    asyncio.run(main())
