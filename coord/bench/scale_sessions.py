"""`coord bench scale --phases sessions`: the members' CPU with N sessions kept alive,
beside etcd's leases.

Grows to --sessions native sessions (etcd: leases, LeaseGrant and LeaseKeepAlive) of
--session-ttl by decade, all kept alive every TTL/3 spread evenly, and at every decade
samples over --sample-s the leader's, a follower's and the driver's CPU %, RSS per
member, keepalive round-trip p50/p99, and how many sessions expired (the figures mean
something only at zero).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import grpc

from coord.bench.footprint import cpu_seconds, mib, per_member
from coord.bench.scale_common import Running, beside_etcd, decades, log, retrying
from coord.bench.stats import latency_ms
from coord.bench.tables import BenchTable
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.v1 import admin_pb2, admin_pb2_grpc
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as cpb

SESSION_STREAMS = 32  # keepalive streams every session's keepalives are spread over
SESSION_OPENERS = 32  # OpenSession calls in flight while growing
TICK_S = 0.05  # the keepalive sender's pace: one bucket of sessions every tick
SESSIONS_TIMEOUT_S = 3600.0  # the sessions phase fails rather than run longer
LATE_NOTE_MS = 1000.0  # a sender this far behind its schedule is named under the table
MAX_STREAM_ERRORS = 1000  # a keepalive stream reopened more often fails the run


class KeepAlives:
    """Keeps many sessions alive from one process, as a real client of each would: one
    KeepAliveRequest renews one session, so rather than one client (tasks, streams) per
    session, every session's keepalives are multiplexed over SESSION_STREAMS streams to
    the leader. Sessions sit in TTL/3 / TICK_S buckets, filled round-robin, and one
    bucket is sent every tick: each session is renewed every TTL/3, the load spread
    evenly over the interval whatever the count. Round trips are timed (while
    `sampling`) per session id, so they include any queueing behind the other sessions
    on the same stream, as the server reads each stream in order."""

    def __init__(self, system: str, channels: list[grpc.aio.Channel], interval_s: float) -> None:
        """Stream k goes to channels[k % len(channels)]: the leader alone, or every
        member in turn (clients spread over the members, as ZooKeeper's shuffle their
        server list)."""
        self.etcd = system == "etcd"  # a lease per session, LeaseKeepAlive its keepalive
        self.buckets: list[list[int]] = [[] for _ in range(max(1, round(interval_s / TICK_S)))]
        self.count = 0
        self.sent: dict[int, float] = {}
        self.rtts: list[float] = []
        self.sampling = False
        self.gone: set[int] = set()
        self.not_renewed = 0  # pending or read-only answers: not renewed that time
        self.late_s = 0.0  # how far the sender fell behind its ticks, at most (while sampling)
        self.starts = [erpc.LeaseStub(ch).LeaseKeepAlive if self.etcd
                       else cpb.SessionsStub(ch).KeepAlive for ch in channels]
        self.stream_errors = 0  # streams that ended in an error and were opened again
        self.unsent = 0  # keepalives not sent: their stream had just ended
        self.calls = [self.start(k) for k in range(SESSION_STREAMS)]
        self.tasks = [asyncio.ensure_future(self._read(k)) for k in range(SESSION_STREAMS)]
        self.tasks.append(asyncio.ensure_future(self._send()))

    def check(self) -> None:
        """Raises what ended a reader or the sender early: a silent driver would count
        every session expired and blame the server."""
        for t in self.tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise t.exception()

    def start(self, k: int) -> Any:
        return self.starts[k % len(self.starts)]()

    def add(self, session_id: int) -> None:
        self.buckets[self.count % len(self.buckets)].append(session_id)
        self.count += 1

    async def _read(self, k: int) -> None:
        """Stream k's answers; when the stream ends in an error (a member aborts a
        keepalive stream, e.g. UNAVAILABLE while it is briefly cut off from its quorum),
        it is opened again at once, as a real client would, and counted."""
        start = time.monotonic()
        for _ in range(MAX_STREAM_ERRORS):
            try:
                async for r in self.calls[k]:  # until the call is cancelled (close)
                    self._answer(r)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.CANCELLED:
                    return
                self.stream_errors += 1
                log(f"  keepalive stream {k} ended ({e.code().name}: {e.details()}); "
                     "opened again")
            if time.monotonic() - start > SESSIONS_TIMEOUT_S:
                return
            await asyncio.sleep(0.01)
            self.calls[k] = self.start(k)
        raise RuntimeError(f"keepalive stream {k} ended {MAX_STREAM_ERRORS} times")

    def _answer(self, r: epb.LeaseKeepAliveResponse | pb.KeepAliveResponse) -> None:
        sid = r.ID if self.etcd else r.session_id
        t0 = self.sent.pop(sid, None)
        if (r.TTL <= 0) if self.etcd else r.gone:
            self.gone.add(sid)
        elif not self.etcd and (r.pending or r.read_only):
            self.not_renewed += 1
        elif t0 is not None and self.sampling:
            self.rtts.append(time.perf_counter() - t0)

    async def _send(self) -> None:
        start = time.monotonic()
        tick = 0
        while time.monotonic() - start < SESSIONS_TIMEOUT_S:
            for sid in list(self.buckets[tick % len(self.buckets)]):
                if sid in self.gone:
                    continue
                self.sent[sid] = time.perf_counter()
                req = (epb.LeaseKeepAliveRequest(ID=sid) if self.etcd
                       else pb.KeepAliveRequest(session_id=sid))
                try:
                    await self.calls[sid % len(self.calls)].write(req)
                except (grpc.RpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
                    self.sent.pop(sid, None)  # the stream just ended: its reader reopens it;
                    self.unsent += 1  # this one goes next interval, well within the TTL
            tick += 1
            behind = time.monotonic() - (start + tick * TICK_S)
            if self.sampling:
                self.late_s = max(self.late_s, behind)
            await asyncio.sleep(max(0.0, -behind))

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        for c in self.calls:
            c.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _open_sessions(channel: grpc.aio.Channel, ka: KeepAlives, start: int, end: int,
                         ttl_s: float, errors: list[int]) -> None:
    """Opens sessions (etcd: grants leases) start..end-1, SESSION_OPENERS in flight, each
    handed to `ka` as soon as it is open. A request id per session makes a retried open
    safe; etcd has none, so a retried grant may leave a lease nobody renews: it expires
    and is counted, as errors are."""
    todo = iter(range(start, end))
    run = f"{time.time_ns():x}"
    sessions_stub, lease = cpb.SessionsStub(channel), erpc.LeaseStub(channel)

    async def opener() -> None:
        for i in todo:

            async def call(i: int = i) -> None:
                if ka.etcd:
                    res = await lease.LeaseGrant(epb.LeaseGrantRequest(TTL=round(ttl_s)),
                                                 timeout=30)
                    ka.add(res.ID)
                    return
                req = pb.OpenSessionRequest(name=f"bench-{i}", ttl_ms=round(ttl_s * 1000),
                                            request_id=f"bench-sessions-{run}-{i}")
                ka.add((await sessions_stub.OpenSession(req, timeout=30)).session_id)

            await retrying(call, errors)

    await asyncio.gather(*(opener() for _ in range(SESSION_OPENERS)))


async def _alive(run: Running, channel: grpc.aio.Channel) -> tuple[int, str]:
    """The sessions (etcd: leases) the leader holds now, and the leader's name (or
    "moved" for etcd when the member asked is no longer the leader)."""
    if run.system == "etcd":
        leases = await erpc.LeaseStub(channel).LeaseLeases(epb.LeaseLeasesRequest(),
                                                           timeout=30)
        st = await erpc.MaintenanceStub(channel).Status(epb.StatusRequest(), timeout=30)
        return len(leases.leases), (run.leader_name if st.leader == st.header.member_id
                                    else "moved")
    st = await admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=30)
    return json.loads(st.state_machine)["sessions"], st.leader_name


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {n: cpu_seconds(p) for n, p in pids.items()}


async def sessions(run: Running, total: int, ttl_s: float, sample_s: float,
                   spread: bool = False) -> list[dict]:
    """At each decade of sessions (etcd: leases) up to `total`, all kept alive every
    TTL/3 by one KeepAlives: CPU % of the leader, a follower and this driver (it shares the box, so
    its load is part of the figure), RSS per member and keepalive round trips over
    `sample_s`; then the leader's session count, so expiries are counted, not assumed.
    `spread`: the keepalive streams go to every member in turn, not the leader alone."""
    follower = next(n for n in run.pids if n != run.leader_name)
    pids = {"leader": run.pids[run.leader_name], "follower": run.pids[follower],
            "driver": os.getpid()}
    rows: list[dict] = []
    errors = [0]
    opened = 0
    big = [("grpc.max_receive_message_length", 64 << 20)]
    others = [grpc.aio.insecure_channel(e) for n, e in run.endpoints.items()
              if spread and n != run.leader_name]
    async with grpc.aio.insecure_channel(run.leader, options=big) as ch:
        ka = KeepAlives(run.system, [ch, *others], ttl_s / 3)
        try:
            for target in decades(total):
                t0 = time.monotonic()
                await _open_sessions(ch, ka, opened, target, ttl_s, errors)
                open_per_s = (target - opened) / (time.monotonic() - t0)
                opened = target
                await asyncio.sleep(1.0)  # the last opens' replication settles
                ka.rtts.clear()
                ka.late_s = 0.0
                ka.sampling = True
                c0, w0 = _cpu(pids), time.monotonic()
                await asyncio.sleep(sample_s)
                c1, w1 = _cpu(pids), time.monotonic()
                ka.sampling = False
                ka.check()
                fp = run.footprint()
                keepalives = len(ka.rtts)
                lat = latency_ms(ka.rtts)
                alive, leader = await _alive(run, ch)
                pct = {n: (c1[n] - c0[n]) / (w1 - w0) * 100 for n in pids}
                row = {"system": run.system, "sessions": target, "ttl_s": ttl_s,
                       "keepalives_to": "spread" if spread else "leader",
                       "open_per_s": open_per_s, "sample_s": w1 - w0,
                       "leader": leader, "leader_cpu_pct": pct["leader"],
                       "follower_cpu_pct": pct["follower"], "driver_cpu_pct": pct["driver"],
                       "rss": fp["rss"], "rss_max": fp["rss_max"],
                       "leader_rss": fp["rss"][run.leader_name],
                       "keepalives_per_s": keepalives / (w1 - w0),
                       "keepalive_p50_ms": lat["p50_ms"], "keepalive_p99_ms": lat["p99_ms"],
                       "sender_late_ms": ka.late_s * 1000, "alive": alive,
                       "expired": max(opened - alive, len(ka.gone)),
                       "not_renewed": ka.not_renewed, "stream_errors": ka.stream_errors,
                       "unsent": ka.unsent, "errors": errors[0]}
                rows.append(row)
                log(f"  {run.system} {target:>7d} sessions: CPU % leader {pct['leader']:.0f} "
                     f"follower {pct['follower']:.0f} driver {pct['driver']:.0f}, "
                     f"rss MiB {' '.join(mib(v) for v in fp['rss'].values())}, keepalive "
                     f"p50/p99 {lat['p50_ms']:.2f}/{lat['p99_ms']:.2f} ms, "
                     f"{row['keepalives_per_s']:.0f}/s, expired {row['expired']}")
                if leader != run.leader_name:
                    log(f"  the leader moved ({leader}): CPU figures are "
                         f"{run.leader_name}'s")
        finally:
            await ka.close()
            for other in others:
                await other.close()
    return rows


def sessions_table(rows: list[dict]) -> BenchTable:
    """A row per system and decade of sessions; below, what makes a row not a sustained
    load (expiries, renewals missed, a driver behind or saturated), and coord/etcd at
    each decade both reached."""
    notes = []
    for r in rows:
        at, upto = f"{r['system']} at {r['sessions']:,} sessions", \
            f"{r['system']} up to {r['sessions']:,} sessions"
        if r["expired"]:
            notes.append(f"{at}: {r['expired']} expired: the row does not show a sustained "
                         "load")
        if r["not_renewed"]:
            notes.append(f"{upto}: {r['not_renewed']} keepalives answered without a renewal "
                         "(no leader in time)")
        if r["sender_late_ms"] > LATE_NOTE_MS:
            notes.append(f"{at}: the driver fell up to {r['sender_late_ms'] / 1000:.1f} s "
                         "behind its keepalive schedule (its writes waited on the server): "
                         "fewer keepalives than due were sent in the window (ka/s)")
        if r.get("stream_errors"):
            notes.append(f"{upto}: {r['stream_errors']} keepalive streams ended in an error "
                         f"and were opened again ({r.get('unsent', 0)} keepalives not sent)")
        if r["driver_cpu_pct"] >= 90:
            notes.append(f"{at}: the driver used {r['driver_cpu_pct']:.0f}% of a core: it, "
                         "not coord, may be the limit (it shares the box with the members)")
    for r, e in beside_etcd(rows, "sessions"):
        notes.append(f"at {r['sessions']:,} sessions coord/etcd: leader CPU "
                     f"{r['leader_cpu_pct'] / max(e['leader_cpu_pct'], 1e-9):.2f}x, "
                     f"leader RSS {r['leader_rss'] / max(e['leader_rss'], 1):.2f}x, "
                     f"keepalive p99 "
                     f"{r['keepalive_p99_ms'] / max(e['keepalive_p99_ms'], 1e-9):.2f}x")
    return BenchTable(
        ["system", "sessions", "open/s", "CPU % leader", "follower", "driver",
         "rss MiB (per member)", "keepalive p50/p99 ms", "ka/s", "late ms", "expired"],
        [[r["system"], f"{r['sessions']:,}", f"{r['open_per_s']:,.0f}",
          f"{r['leader_cpu_pct']:.0f}", f"{r['follower_cpu_pct']:.0f}",
          f"{r['driver_cpu_pct']:.0f}", per_member(r["rss"]),
          f"{r['keepalive_p50_ms']:.2f}/{r['keepalive_p99_ms']:.2f}",
          f"{r['keepalives_per_s']:,.0f}", f"{r['sender_late_ms']:,.0f}", str(r["expired"])]
         for r in rows], notes)
