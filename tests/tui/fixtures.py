"""A fixed picture of a cluster (fixed clocks, fixed rows) for the snapshot tests: what
the console draws must not depend on the time or on ports."""

from __future__ import annotations

from types import SimpleNamespace

from coord.tui.model import (
    ClusterModel,
    MemberRow,
    Producers,
    RoleRow,
    SessionRow,
    UserRow,
)
from coord.tui.pulse import Pulses, Sample

WALL = 1_764_028_800.0  # 2025-11-25 00:00:00 UTC
MONO = 1000.0


def picture(read_only: bool = False) -> ClusterModel:
    m = ClusterModel(wall=lambda: WALL, mono=lambda: MONO)
    m.cluster_id = 0x5EED
    m.serving = "127.0.0.1:2379"
    for i, name in enumerate(("n1", "n2", "n3")):
        cut_off = read_only and name != "n1"
        m.members.put(name, MemberRow(
            name=name, endpoint=f"127.0.0.1:{2379 + 10 * i}", id=i + 1,
            role="leader" if name == "n2" and not read_only else "follower",
            term=7, leader="" if read_only else "n2", commit=1200 - 3 * i, applied=1200 - 5 * i,
            has_quorum=not read_only, quorum_lost_ms=4200 if read_only else 0,
            mode="read-only" if read_only and name == "n1" else "read-write",
            version="0.1.0", data_bytes=(3 + i) * 1 << 20, reachable=not cut_off,
            error="DEADLINE_EXCEEDED" if cut_off else ""))
    for g, r, sid, gen, rev in (("jobs", "ingest-0", 11, 3, 1101),
                                ("jobs", "ingest-1", 12, 1, 1102),
                                ("shards", "s-07", 11, 9, 1150),
                                ("shards", "s-08", 13, 2, 1190)):
        m.owner_change(g, SimpleNamespace(resource=r, session_id=sid, generation=gen,
                                          revision=rev), "", True)
    for sid, name, ttl, left, owned, keys in (
            (11, "spark-driver", 10_000, 7_300, (("jobs", "ingest-0"), ("shards", "s-07")), ()),
            (12, "worker-b", 10_000, 1_500, (("jobs", "ingest-1"),), (b"locks/b",)),
            (13, "router", 30_000, -1, (("shards", "s-08"),), ())):
        m.sessions.put(sid, SessionRow(sid, name, ttl, sid == 13, left, MONO, owned, keys))
    for key, value, create, mod, version, sid in (
            (b"cfg/app.json", b'{"replicas": 3, "zone": "eu"}', 20, 1180, 4, 0),
            (b"cfg/flags/dark", b"on", 30, 30, 1, 0),
            (b"locks/b", b"worker-b", 1102, 1102, 1, 12),
            (b"raw", bytes(range(0, 40)), 40, 40, 1, 0)):
        m.key_change("PUT", SimpleNamespace(key=key, value=value, create_revision=create,
                                            mod_revision=mod, version=version, session_id=sid))
    m.producers = Producers(revision=1190, next_pid=5001, clock_ms=1_000_000)
    for block in (("spark-1", 1, 1000, 900), ("spark-2", 1001, 1000, 950)):
        m.producers.blocks.put(block[:2], block)
    for lease in ((2001, 0, 1_060_000, "orders", 0), (2002, 3, 1_500_000, "orders", 1)):
        m.producers.leases.put(lease[0], lease)
    for producer in (("tx-orders-0", 3001, 2), ("tx-orders-1", 3002, 0)):
        m.producers.producers.put(producer[0], producer)
    for name, roles in (("root", ("root",)), ("spark", ("pipeline", "inspector")),
                        ("viewer", ("inspector",))):
        m.users.put(name, UserRow(name, roles))
    for name, perms in (("root", ()), ("inspector", ("admin READ inspect",)),
                        ("pipeline", ("group READWRITE [jobs/, jobs0)",
                                      "producer WRITE [tx-orders-, tx-orders.)",
                                      "session WRITE [spark-, spark.)", "kv READ cfg/app.json"))):
        m.roles.put(name, RoleRow(name, perms))
    m.event("leader", "n2: leader is now n2 (term 7)")
    m.event("grant", "jobs/ingest-1 → session 12 (generation 1, revision 1102)")
    m.event("sever", "jobs/ingest-0 → session 11 (generation 3, revision 1101)")
    if read_only:
        m.event("mode", "n1: read-write → read-only")
    m.revision = 1190
    return m


def pulses() -> Pulses:
    """Three members' scrapes, planted: n1 and n2 busy, n2's fsync slower, one leader
    change seen, n3 not answering after a read-only spell."""
    p = Pulses([f"http://127.0.0.1:{7301 + i}" for i in range(3)])
    names = {i + 1: name for i, name in enumerate(("n1", "n2", "n3"))}
    inf = float("inf")
    for step in range(40):
        for i, url in enumerate(p.urls):
            fsyncs = 10 * step
            slow = fsyncs * (i + 1) // 4
            p.record(url, Sample(proposals=step * (200 + 15 * (step % 7)),
                                 leader_changes=1 + (step >= 25),
                                 read_only=float(i == 2 and 12 <= step < 20),
                                 nospace=float(i == 0 and step >= 30),
                                 fsync=((0.001, fsyncs - slow), (0.004, fsyncs), (inf, fsyncs)),
                                 server_id=i + 1), MONO + step * 2.0, names)
    p.record(p.urls[2], "no answer in 1.5s", MONO + 80.0, names)
    return p
