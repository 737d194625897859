"""A large, realistic history from a seed, made by the real state machine.

`synthesize(n, seed)` plays a three-member cluster's leaders and its clients: sessions
open, keep alive, crash and expire (expiry proposed by the leader only once a session's
TTL ran out, restarted in full by every new leader and after every loss of quorum, as
coord's leader does), claims, takeovers at a higher generation, generation-0 resets,
releases, PID blocks, PID leases and producer bumps, KV puts, deletes and CAS txns,
compactions, leader changes (a no-op then a `note_leader`) and periods without a quorum
(nothing commits; a `note_quorum_lost` records them). Another client may join them (a
`Workload`: `coord.spark.synth`'s Spark jobs, whose sink log must match what they
claimed): it proposes through the same cluster, so its commands get the same leaders,
outages and expiries as synth's own clients. Every entry is applied by
`CoordMachine` through `Replayer`, so each row is what coord itself did; a command goes
to the replayer as the object proposed (`Replayer.apply_decoded`), not encoded for a log
that nobody reads and decoded back. The same seed gives the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from coord.history.replay import CONF_CHANGE, NORMAL, Replayer
from coord.history.rows import Row
from coord.sm import CoordMachine
from coord.sm import commands as c
from coord.sm.records import Claim

START_MS = 1_764_028_800_000  # 2025-11-25 00:00 UTC: a fixed start keeps a seed's rows fixed
MEMBERS = ("n1", "n2", "n3")
GROUPS = ("orders", "payments", "clicks", "audit")
RESOURCES = 200
PRODUCERS = 500
KEYS = 5_000


@dataclass
class _Client:
    session: int
    ttl_ms: int
    seen_ms: int = 0  # its last keepalive (what the leader's tracker knows; kept current
    # only from the crash on, the one time it is read)


@dataclass
class Cluster:
    """The synthesized cluster as its clients see it: the state machine (`machine`, for
    their reads), its clock and the commands they propose."""

    rng: random.Random
    replayer: Replayer = field(default_factory=Replayer)
    index: int = 0
    term: int = 0
    leader: str = MEMBERS[0]
    now_ms: int = START_MS
    leader_since_ms: int = START_MS  # deadlines restart at full TTL from here
    # The live clients in the order they opened (the one a command comes from is drawn
    # from them), the crashed ones the leader has not expired yet, and the earliest time
    # one of those is due (None: to be worked out again): each command checks the time
    # alone rather than every client's deadline.
    live: list[_Client] = field(default_factory=list)
    crashed: dict[int, _Client] = field(default_factory=dict)
    next_expiry_ms: int | None = None
    # the rows of the entries appended since the synthesizer last handed rows out
    rows: list[Row] = field(default_factory=list)

    @property
    def machine(self) -> CoordMachine:
        return self.replayer.machine

    def crash(self, session: int, ttl_ms: int) -> None:
        """The session's client is gone now: its last keepalive is this moment, and the
        leader expires it once its TTL has run out."""
        self.crashed[session] = _Client(session, ttl_ms, seen_ms=self.now_ms)
        self.next_expiry_ms = None

    def forget(self, session: int) -> None:
        """The client is gone (closed, expired or severed)."""
        if self.crashed.pop(session, None) is not None:
            self.next_expiry_ms = None
            return
        for i, x in enumerate(self.live):
            if x.session == session:
                del self.live[i]
                return

    def append(self, entry_type: int, data: bytes) -> None:
        """A no-op or membership entry; its rows join `rows`."""
        self.index += 1
        self.rows += self.replayer.apply(self.index, self.term, entry_type, data)[0]

    def propose(self, cmd: c.Command) -> Any:
        """A command's entry, applied: its rows join `rows`, its result is returned."""
        self.index += 1
        rows, result = self.replayer.apply_decoded(self.index, self.term, self.now_ms, cmd)
        self.rows += rows
        return result


class Workload(Protocol):
    """Another client of the synthesized cluster. The cluster offers it every tick on
    which no leader change, outage, compaction or expiry is due, before its own clients."""

    def step(self, cluster: Cluster) -> bool:
        """Propose at most one command (`cluster.propose(cmd)`, which keeps its rows and
        returns its result); False if it proposed none this tick (synth's own clients
        take the tick)."""
        ...

    @property
    def done(self) -> bool:
        """Nothing more to propose: the history may end."""
        ...


def synthesize(commands: int, seed: int = 0, workload: Workload | None = None) -> Iterator[Row]:
    """Rows of a history of `commands` raft entries (every entry counts, notes included),
    or more: with a `workload`, until it is done as well."""
    if commands < 0:
        raise ValueError("commands must be >= 0")
    rng = random.Random(seed)
    cl = Cluster(rng)

    def elect(leader: str) -> None:
        cl.term += 1
        cl.leader = leader
        cl.leader_since_ms = cl.now_ms
        cl.next_expiry_ms = None  # every crashed client's deadline restarts
        cl.append(NORMAL, b"")
        cl.propose(c.NoteLeader(leader, cl.term))

    # The cluster's first entries: its members, then the first leader.
    cl.term = 1
    for _member in MEMBERS:
        cl.append(CONF_CHANGE, b"")
    elect(MEMBERS[0])
    next_election = rng.randint(2_000, 20_000)
    next_outage = rng.randint(5_000, 40_000)
    next_compact = 50_000
    while cl.index < commands or (workload is not None and not workload.done):
        cl.now_ms += int(rng.expovariate(1 / 2.0)) + 1
        if cl.index >= next_election:
            next_election = cl.index + rng.randint(2_000, 20_000)
            elect(rng.choice([m for m in MEMBERS if m != cl.leader]))
        elif cl.index >= next_outage:
            next_outage = cl.index + rng.randint(5_000, 40_000)
            since = cl.now_ms
            cl.now_ms += rng.randint(2_000, 20_000)  # nothing commits meanwhile
            old = cl.leader
            elect(rng.choice(MEMBERS))
            cl.propose(c.NoteQuorumLost(old, since, cl.now_ms, "read-only"))
        elif cl.index >= next_compact and cl.replayer.machine.revision > 10_000:
            next_compact = cl.index + 50_000
            cl.propose(c.Compact(cl.replayer.machine.revision - 10_000))
        elif not _expire_due(cl) and not (workload is not None and workload.step(cl)):
            _client_command(cl, rng)
        if cl.rows:
            yield from cl.rows
            cl.rows = []
    yield from cl.replayer.flush()


def _expire_due(cl: Cluster) -> bool:
    """The leader expires crashed sessions whose TTL ran out (counted from their last
    keepalive or from when this leader took over, whichever is later)."""
    if not cl.crashed:
        return False
    since = cl.leader_since_ms
    if cl.next_expiry_ms is None:
        cl.next_expiry_ms = min(max(x.seen_ms, since) + x.ttl_ms for x in cl.crashed.values())
    if cl.now_ms < cl.next_expiry_ms:
        return False
    # in the order the clients opened (session ids rise with it)
    due = sorted(x.session for x in cl.crashed.values()
                 if cl.now_ms >= max(x.seen_ms, since) + x.ttl_ms)
    cl.propose(c.ExpireSessions(tuple(due[:50])))
    for sid in due[:50]:
        cl.forget(sid)
    return True


def _client_command(cl: Cluster, rng: random.Random) -> None:
    m = cl.replayer.machine
    live = cl.live
    roll = rng.random()
    rid = f"r{cl.index}"
    if len(live) < 20 or roll < 0.03:
        ttl = rng.choice((2_000, 5_000, 10_000))
        res = cl.propose(c.OpenSession(f"worker-{rng.randrange(1000)}", ttl,
                                       rng.random() < 0.3, rid))
        if res.ok:
            live.append(_Client(res.session_id, ttl, seen_ms=cl.now_ms))
        return
    who = rng.choice(live)
    if roll < 0.05:  # a client crashes: its session lingers until the leader expires it
        live.remove(who)
        cl.crash(who.session, who.ttl_ms)
        cl.propose(c.Barrier())
    elif roll < 0.07:
        cl.propose(c.CloseSession(who.session, rid))
        cl.forget(who.session)
    elif roll < 0.25:
        group, resource = rng.choice(GROUPS), f"p{rng.randrange(RESOURCES)}"
        owner = m.ownership.get_owner(group, resource)  # GetOwner's read, not dispatched
        if owner.owner and owner.owner != who.session:
            # A takeover (the previous owner stalled), now and then a generation-0 reset,
            # now and then a stale claim that must be refused.
            r = rng.random()
            gen = 0 if r < 0.03 else (owner.generation - 1 if r < 0.2 else owner.generation)
        else:
            gen = 1
        res = cl.propose(c.Own(who.session, group, (Claim(resource, max(gen, 0)),), rid))
        for sid in getattr(res, "severed", ()):
            cl.forget(sid)
    elif roll < 0.30:
        group = rng.choice(GROUPS)
        # what it holds in the group, sorted (ListOwners' order): read from its session,
        # not by listing the whole group's owners and keeping its own
        session = m.sessions.get(who.session)
        mine = sorted(r for g, r in session.owned if g == group) if session else []
        cl.propose(c.Release(who.session, group, tuple(mine[:3]) or ("p0",), rid))
    elif roll < 0.33:
        cl.propose(c.AllocatePidBlock(f"writer-{rng.randrange(50)}",
                                      rng.choice((100, 1_000)), rid))
    elif roll < 0.36:
        cl.propose(c.LeasePid(f"topic-{rng.randrange(20)}", rng.randrange(16), -1,
                              rng.randrange(1 << 31), rid))
    elif roll < 0.40:
        cl.propose(c.InitProducer(f"txn-{rng.randrange(PRODUCERS)}", rid))
    elif roll < 0.45:
        key = f"app/k{rng.randrange(KEYS)}".encode()
        cur = m.kv.get(key)  # a Range of the one key, read from the table
        version = cur.version if cur is not None else 0
        cl.propose(c.Txn.compare_and_set(key, version, rng.randbytes(rng.randint(8, 64)),
                                         rid))
    elif roll < 0.49:
        cl.propose(c.DeleteRange(f"app/k{rng.randrange(KEYS)}".encode(), request_id=rid))
    else:
        bound = who.session if rng.random() < 0.1 else 0
        cl.propose(c.Put(f"app/k{rng.randrange(KEYS)}".encode(),
                         rng.randbytes(rng.randint(8, 200)), bound, request_id=rid))
