"""What an inspection stream learns from a member's event hub (server/requests/table_watch.py):
every change to a session's row names that session — an open (no event of its own), a
key bound or unbound, a grant, a release while it lives (the event names only the
resource) and its end with the reason — and the pid tables say when they moved."""

from __future__ import annotations

from coord.server.requests.events import EventHub
from coord.server.requests.table_watch import SessionsWatch
from coord.sm import commands as c
from coord.sm.machine import CoordMachine
from coord.sm.records import Claim


def run(m: CoordMachine, hub: EventHub, cmd: object) -> object:
    result = m.execute(cmd, time_ms=1000)
    hub.publish()
    return result


def test_every_change_of_a_session_row_names_it():
    m = CoordMachine()
    hub = EventHub(m)
    watch = hub.watch_tables(SessionsWatch())
    a = run(m, hub, c.OpenSession("a", 10_000)).session_id
    b = run(m, hub, c.OpenSession("b", 10_000)).session_id
    assert watch.take() == ([a, b], {}) and watch.wake.is_set()

    run(m, hub, c.Own(a, "g", (Claim("r1", 1), Claim("r2", 1))))
    assert watch.take() == ([a], {})
    run(m, hub, c.Release(a, "g", ("r1",)))  # the event names r1, not who held it
    assert watch.take() == ([a], {})
    run(m, hub, c.Put(b"k", b"v", session_id=b))
    assert watch.take() == ([b], {})
    run(m, hub, c.Put(b"k", b"w"))  # unbound from b
    assert watch.take() == ([b], {})
    run(m, hub, c.Own(b, "g", (Claim("r2", 5),)))  # takes r2 from a: a is severed
    dirty, ended = watch.take()
    assert dirty == [a, b] and ended == {a: "severed"}
    run(m, hub, c.CloseSession(b))
    assert watch.take() == ([b], {b: "released"})
    run(m, hub, c.Range(b"k", b""))  # refused or not, a read changes no row
    assert watch.take() == ([], {})

    hub.unwatch_tables(watch)
    run(m, hub, c.OpenSession("c", 10_000))
    assert watch.take() == ([], {})


def test_pid_changes_are_counted():
    m = CoordMachine()
    before = m.pids.changes
    m.execute(c.AllocatePidBlock("x", 10), time_ms=1000)
    m.execute(c.LeasePid("t", 0), time_ms=1000)
    lease = m.execute(c.InitProducer("p"), time_ms=1000)
    m.execute(c.InitProducer("p"), time_ms=1000)  # an epoch bump
    assert m.pids.changes == before + 4
    m.execute(c.CheckProducer("p", lease.pid, 1), time_ms=1000)  # a check changes nothing
    m.execute(c.AllocatePidBlock("x", 0), time_ms=1000)  # refused
    assert m.pids.changes == before + 4
