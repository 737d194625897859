"""`coord bench scale`: how coord's footprint grows, beside etcd 3.4 driven the same way.

Two phases, each on a fresh cluster per system (coord, then etcd; never together, so each
has both cores), through the same etcd-v3-API asyncio driver talking to the leader:

  soak  puts on one hot key for --seconds, with both systems under the same
        --auto-compaction-mode/--auto-compaction-retention; every --sample-s it prints
        each member's RSS and data-dir bytes. Flat memory means bounded history.
  keys  grows the key space to --keys distinct keys (100-byte values, 100 puts per txn
        so a million keys load in minutes on both systems); at every decade
        it prints RSS per member, RSS bytes per key, disk, and put/get p50/p99 from
        --probe-ops ops at that size.
  restart  grows the key space the same way and at every decade times (1) kill -9 of
        every member, then exec of all of them, to the first linearizable Range answered
        by any member, and (2) a follower replaced by an empty one (removed, its data dir
        deleted, added back as a learner, then promoted again), from its exec to its own
        Status reporting the leader's revision: restart and catch-up time per key count.
  sessions  grows to --sessions native sessions (etcd: leases, LeaseGrant and
        LeaseKeepAlive) of --session-ttl by decade, all kept alive every TTL/3 spread
        evenly, and at every decade samples over --sample-s the leader's, a follower's
        and the driver's CPU %, RSS per member, keepalive round-trip p50/p99, and how
        many sessions expired (the figures mean something only at zero).
  owners  grows to --owners owned resources (coord only; coord/bench/scale_owners.py).
  pids  grows to --pids live pid leases (coord only; coord/bench/scale_pids.py).

Figures only, nothing asserted; the box is shared, so print `uptime` beside them."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import grpc

from coord.bench.footprint import cpu_seconds, dir_bytes, mib, per_member
from coord.bench.scale_common import Running, decades, log, probe, retrying, running
from coord.bench.scale_owners import GROW_BATCH, owners, owners_table
from coord.bench.scale_pids import IN_FLIGHT, pids, pids_table
from coord.bench.startup import PROBE_OPTIONS
from coord.bench.stats import latency_ms
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.progress_bars import Phases, Step, on_terminal
from coord.testing import LocalCluster
from coord.testing.peer_etcd import EtcdCluster
from coord.v1 import admin_pb2, admin_pb2_grpc
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as cpb

VALUE = b"v" * 100

PHASES = ("soak", "keys", "restart", "sessions", "owners", "pids")


async def soak(run: Running, seconds: float, sample_s: float, clients: int,
               phases: Phases) -> list[dict]:
    """Puts on one key for `seconds`; a footprint row every `sample_s`."""
    rows: list[dict] = []
    t0 = time.monotonic()
    puts = errors = 0
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)

        async def writer() -> None:
            nonlocal puts, errors
            while time.monotonic() - t0 < seconds:
                try:
                    await kv.Put(epb.PutRequest(key=b"soak/hot", value=VALUE), timeout=10)
                    puts += 1
                except grpc.RpcError as e:  # counted and shown: a stall is a finding
                    errors += 1
                    log(f"  {run.system}: put failed: {e.code().name} {e.details()}")
                    await asyncio.sleep(0.1)

        tasks = [asyncio.ensure_future(writer()) for _ in range(clients)]
        try:
            async with phases.timed(f"{run.system} soak", seconds):
                await _samples(run, t0, seconds, sample_s, rows, lambda: (puts, errors))
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return rows


async def _samples(run: Running, t0: float, seconds: float, sample_s: float,
                   rows: list[dict], counts: Callable[[], tuple[int, int]]) -> None:
    """A footprint row every `sample_s` until `seconds` since `t0`."""
    while time.monotonic() - t0 < seconds:
        await asyncio.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - t0))))
        puts, errors = counts()
        row = {"system": run.system, "t_s": round(time.monotonic() - t0, 1),
               "puts": puts, "errors": errors, **run.footprint()}
        rows.append(row)
        log(f"  {run.system} t={row['t_s']:7.1f}s puts={puts:9d} errors={errors} "
             f"rss MiB {' '.join(mib(v) for v in row['rss'].values())} "
             f"disk MiB {' '.join(mib(v) for v in row['disk'].values())}")


LOAD_BATCH = 100  # keys per txn while growing the key space (etcd allows 128 ops)


def key(i: int) -> bytes:
    return b"keys/%09d" % i


async def load(kv: erpc.KVStub, start: int, end: int, clients: int, errors: list[int],
               step: Step | None = None) -> None:
    """Puts keys start..end-1 as txns of LOAD_BATCH puts shared by `clients` loaders: one
    loader for `keys` and `restart`, so both systems, and both phases, load the same way;
    `step(n)` hears of each txn's n keys."""
    todo = iter(range(start, end, LOAD_BATCH))

    async def loader() -> None:
        for first in todo:  # one txn of up to LOAD_BATCH puts: the same for both
            txn = epb.TxnRequest(success=[
                epb.RequestOp(request_put=epb.PutRequest(key=key(i), value=VALUE))
                for i in range(first, min(end, first + LOAD_BATCH))])
            await retrying(lambda txn=txn: kv.Txn(txn, timeout=30), errors)
            if step is not None:
                step(len(txn.success))

    await asyncio.gather(*(loader() for _ in range(clients)))


async def grow(run: Running, total: int, clients: int, probe_ops: int,
               phases: Phases) -> list[dict]:
    rows: list[dict] = []
    base = run.footprint()
    written = 0
    errors = [0]
    async with grpc.aio.insecure_channel(run.leader) as ch:
        kv = erpc.KVStub(ch)
        for target in decades(total):
            t0 = time.monotonic()
            with phases.phase(f"{run.system} keys to {target:,}", target - written,
                              "keys") as step:
                await load(kv, written, target, clients, errors, step)
            load_s = time.monotonic() - t0
            written = target
            fp = run.footprint()
            per = max(1, probe_ops // clients)

            async def put(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await retrying(lambda: kv.Put(epb.PutRequest(key=k, value=VALUE),
                                               timeout=10), errors)

            async def get(w: int, i: int, per: int = per, target: int = target) -> None:
                k = key((w * per + i) % target)
                await retrying(lambda: kv.Range(epb.RangeRequest(key=k), timeout=10), errors)

            puts = await probe(put, clients, per)
            gets = await probe(get, clients, per)
            grown = max(0, fp["rss_max"] - base["rss_max"])
            row = {"system": run.system, "keys": target, "load_per_s": (target - (rows[-1][
                "keys"] if rows else 0)) / load_s, **fp, "bytes_per_key": grown / target,
                "put_p50_ms": puts["p50_ms"], "put_p99_ms": puts["p99_ms"],
                "get_p50_ms": gets["p50_ms"], "get_p99_ms": gets["p99_ms"], "errors": errors[0],
                **(run.last_snapshot() or {"snapshot_s": None})}
            rows.append(row)
            log(f"  {run.system} {target:>9d} keys: rss max {mib(fp['rss_max'])} MiB "
                 f"({row['bytes_per_key']:.0f} B/key), disk max {mib(fp['disk_max'])} MiB, "
                 f"put p99 {puts['p99_ms']:.2f} ms, get p99 {gets['p99_ms']:.2f} ms")
    return rows


RESTART_TIMEOUT = 600.0  # seconds any one restart or catch-up may take before the run fails


class _CoordRig:
    """The restart phase's moves on a coord LocalCluster (real `coord serve` processes)."""

    system = "coord"

    def __init__(self, members: int, extra_args: list[str]) -> None:
        self.cluster = LocalCluster(members, extra_args=extra_args)
        self.names = list(self.cluster.members)

    def __enter__(self) -> _CoordRig:
        self.cluster.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.stop()

    def endpoint(self, name: str) -> str:
        return self.cluster.members[name].listen

    def leader(self) -> str:
        return self.cluster.wait_for_leader(timeout=RESTART_TIMEOUT)

    def disk_max(self) -> int:
        return max(dir_bytes(m.data_dir) for m in self.cluster.members.values())

    def kill_all_and_exec(self) -> float:
        return self.cluster.restart_all(wait=False)

    def settle(self) -> None:
        for name in self.names:
            self.cluster.wait_serving(name, timeout=RESTART_TIMEOUT)
        self.leader()

    def rejoin(self, name: str) -> float:
        return self.cluster.rejoin_member(name, timeout=60, wait=False)

    def promote(self, name: str) -> None:
        self.cluster.promote(name, timeout=60)


class _EtcdRig:
    """The same moves on an EtcdCluster (etcd 3.4 processes, etcdctl for membership)."""

    system = "etcd"

    def __init__(self, members: int, extra_args: list[str]) -> None:
        self.etcd = EtcdCluster(members, extra_args=extra_args)
        self.names = list(self.etcd.names)

    def __enter__(self) -> _EtcdRig:
        self.etcd.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.etcd.stop()

    def endpoint(self, name: str) -> str:
        return f"127.0.0.1:{self.etcd.client_ports[name]}"

    def leader(self) -> str:
        endpoint = self.etcd.wait_leader(timeout=RESTART_TIMEOUT)
        return next(n for n in self.names if self.endpoint(n) == endpoint)

    def disk_max(self) -> int:
        return max(dir_bytes(self.etcd.root / n) for n in self.names)

    def kill_all_and_exec(self) -> float:
        for name in self.names:
            self.etcd.kill(name)
        started = time.monotonic()
        for name in self.names:
            self.etcd.start_member(name)
        return started

    def settle(self) -> None:
        self.leader()
        for name in self.names:
            _status(self.endpoint(name), RESTART_TIMEOUT)

    def rejoin(self, name: str) -> float:
        return self.etcd.wipe_and_rejoin(name, timeout=60)

    def promote(self, name: str) -> None:
        self.etcd.promote(name, timeout=60)


def _status(endpoint: str, timeout: float) -> epb.StatusResponse:
    """The member's own Status (its applied revision in the header), once it answers."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
        stub = erpc.MaintenanceStub(ch)
        while True:
            try:
                return stub.Status(epb.StatusRequest(), timeout=1, wait_for_ready=True)
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


async def first_read(endpoints: list[str], k: bytes, t0: float, timeout: float) -> float:
    """Seconds from `t0` until any of `endpoints` answers a linearizable Range of `k`
    (one probe loop per member, so a member still electing does not delay the one that
    serves). A member that answers without `k` is a lost write, and fails the run."""
    deadline = t0 + timeout

    async def one(endpoint: str) -> float:
        async with grpc.aio.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
            kv = erpc.KVStub(ch)
            while time.monotonic() < deadline:
                try:
                    res = await kv.Range(epb.RangeRequest(key=k), timeout=1,
                                         wait_for_ready=True)
                except grpc.RpcError:
                    await asyncio.sleep(0.01)  # refused, or no leader yet
                    continue
                if not res.kvs:
                    raise RuntimeError(f"{endpoint} read {k!r} linearizably without it")
                return time.monotonic() - t0
        raise TimeoutError(endpoint)

    tasks = [asyncio.ensure_future(one(e)) for e in endpoints]
    try:
        for fut in asyncio.as_completed(tasks):
            try:
                return await fut
            except TimeoutError:
                continue
        raise RuntimeError(f"no member served a linearizable read within {timeout:g}s")
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def caught_up(endpoint: str, revision: int, t0: float, timeout: float) -> float:
    """Seconds from `t0` until the member at `endpoint` has applied `revision` (its own
    Status, answered from its local state: a learner answers it too)."""
    deadline = t0 + timeout
    with grpc.insecure_channel(endpoint, options=PROBE_OPTIONS) as ch:
        stub = erpc.MaintenanceStub(ch)
        while time.monotonic() < deadline:
            try:
                st = stub.Status(epb.StatusRequest(), timeout=1, wait_for_ready=True)
                if st.header.revision >= revision:
                    return time.monotonic() - t0
            except grpc.RpcError:
                pass
            time.sleep(0.01)
    raise RuntimeError(f"{endpoint} did not reach revision {revision} within {timeout:g}s")


async def _load_on(endpoint: str, start: int, end: int, clients: int,
                   errors: list[int]) -> None:
    async with grpc.aio.insecure_channel(endpoint) as ch:
        await load(erpc.KVStub(ch), start, end, clients, errors)


def restart(system: str, members: int, compaction: list[str], total: int,
            clients: int) -> list[dict]:
    """At each decade of keys up to `total`, on one fresh cluster: restart-to-serving
    after kill -9 of every member, then a wiped follower's catch-up (promoted again
    afterwards, so the next decade starts from the same 3 voters)."""
    if members < 3:
        raise SystemExit("coord bench scale: the restart phase needs --members 3 or more "
                         "(a wiped follower catches up from a quorum of the others)")
    rows: list[dict] = []
    errors = [0]
    written = 0
    rig = _CoordRig if system == "coord" else _EtcdRig
    with rig(members, compaction) as r:
        for target in decades(total):
            t0 = time.monotonic()
            asyncio.run(_load_on(r.endpoint(r.leader()), written, target, clients, errors))
            load_s = time.monotonic() - t0
            loaded, written = target - written, target
            disk = r.disk_max()
            exec_at = r.kill_all_and_exec()
            serving_s = asyncio.run(first_read([r.endpoint(n) for n in r.names], key(0),
                                               exec_at, RESTART_TIMEOUT))
            r.settle()
            leader = r.leader()
            revision = _status(r.endpoint(leader), 30).header.revision
            follower = next(n for n in r.names if n != leader)
            exec_at = r.rejoin(follower)
            catchup_s = caught_up(r.endpoint(follower), revision, exec_at, RESTART_TIMEOUT)
            r.promote(follower)
            row = {"system": system, "keys": target, "load_per_s": loaded / load_s,
                   "disk_max": disk, "revision": revision, "restart_serving_s": serving_s,
                   "catchup_s": catchup_s, "errors": errors[0]}
            rows.append(row)
            log(f"  {system} {target:>9d} keys (rev {revision}, disk max {mib(disk)} MiB): "
                 f"kill -9 all to serving {serving_s:.2f} s, wiped {follower} caught up in "
                 f"{catchup_s:.2f} s")
    return rows


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


def sessions_table(rows: list[dict]) -> list[str]:
    lines = ["system sessions  open/s  CPU % leader follower driver  rss MiB (per member)"
             "      keepalive p50/p99 ms    ka/s  late ms  expired"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['sessions']:>8d} {r['open_per_s']:7.0f} "
                     f"{r['leader_cpu_pct']:12.0f} "
                     f"{r['follower_cpu_pct']:8.0f} {r['driver_cpu_pct']:6.0f}  "
                     f"{per_member(r['rss']):24}  "
                     f"{r['keepalive_p50_ms']:9.2f}/{r['keepalive_p99_ms']:<9.2f} "
                     f"{r['keepalives_per_s']:7.0f} {r['sender_late_ms']:8.0f} "
                     f"{r['expired']:8d}")
    for r in rows:
        if r["expired"]:
            lines.append(f"{r['system']} at {r['sessions']} sessions: {r['expired']} expired: "
                         "the row does not show a sustained load")
        if r["not_renewed"]:
            lines.append(f"{r['system']} up to {r['sessions']} sessions: {r['not_renewed']} "
                         "keepalives answered without a renewal (no leader in time)")
        if r["sender_late_ms"] > LATE_NOTE_MS:
            lines.append(f"{r['system']} at {r['sessions']} sessions: the driver fell up to "
                         f"{r['sender_late_ms'] / 1000:.1f} s behind its keepalive schedule "
                         "(its writes waited on the server): fewer keepalives than due were "
                         "sent in the window (ka/s)")
        if r.get("stream_errors"):
            lines.append(f"{r['system']} up to {r['sessions']} sessions: {r['stream_errors']} "
                         "keepalive streams ended in an error and were opened again "
                         f"({r.get('unsent', 0)} keepalives not sent)")
        if r["driver_cpu_pct"] >= 90:
            lines.append(f"{r['system']} at {r['sessions']} sessions: the driver used "
                         f"{r['driver_cpu_pct']:.0f}% of a core: it, not coord, may be the "
                         "limit (it shares the box with the members)")
    etcd = {r["sessions"]: r for r in rows if r["system"] == "etcd"}
    for r in rows:
        e = etcd.get(r["sessions"])
        if r["system"] == "coord" and e:
            lines.append(f"at {r['sessions']} sessions coord/etcd: leader CPU "
                         f"{r['leader_cpu_pct'] / max(e['leader_cpu_pct'], 1e-9):.2f}x, "
                         f"leader RSS {r['leader_rss'] / max(e['leader_rss'], 1):.2f}x, "
                         f"keepalive p99 "
                         f"{r['keepalive_p99_ms'] / max(e['keepalive_p99_ms'], 1e-9):.2f}x")
    return lines


def restart_table(rows: list[dict]) -> list[str]:
    lines = ["system      keys  load/s  disk MiB   revision  restart->serving s  "
             "wiped catch-up s  errors"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['keys']:>9d} {r['load_per_s']:7.0f} "
                     f"{mib(r['disk_max']):>9} {r['revision']:>10d} "
                     f"{r['restart_serving_s']:19.2f} {r['catchup_s']:17.2f} "
                     f"{r.get('errors', 0):7d}")
    etcd = {r["keys"]: r for r in rows if r["system"] == "etcd"}
    for r in rows:
        e = etcd.get(r["keys"])
        if r["system"] == "coord" and e:
            lines.append(f"at {r['keys']} keys coord/etcd: restart to serving "
                         f"{r['restart_serving_s'] / max(e['restart_serving_s'], 1e-9):.2f}x, "
                         f"wiped catch-up {r['catchup_s'] / max(e['catchup_s'], 1e-9):.2f}x")
    return lines


def soak_table(rows: list[dict]) -> list[str]:
    lines = ["system    t_s       puts errors  rss MiB (per member)         "
             "disk MiB (per member)"]
    for r in rows:
        lines.append(f"{r['system']:6} {r['t_s']:7.1f} {r['puts']:9d} {r['errors']:6d}  "
                     f"{per_member(r['rss']):27}  "
                     f"{per_member(r['disk'])}")
    for system in sorted({r["system"] for r in rows}):
        mine = [r for r in rows if r["system"] == system]
        half = mine[len(mine) // 2:]
        if len(half) >= 2:
            lo, hi = min(r["rss_max"] for r in half), max(r["rss_max"] for r in half)
            lines.append(f"{system}: max-member RSS over the second half of the soak "
                         f"{mib(lo)}..{mib(hi)} MiB ({(hi - lo) / max(lo, 1) * 100:+.1f}%)")
    return lines


def keys_table(rows: list[dict]) -> list[str]:
    lines = ["system      keys  load/s  rss MiB  B/key  disk MiB  put p50/p99 ms  get p50/p99 ms"
             "  errors  snapshot s"]
    for r in rows:
        snap = r.get("snapshot_s")
        lines.append(f"{r['system']:6} {r['keys']:>9d} {r['load_per_s']:7.0f} "
                     f"{mib(r['rss_max']):>8} {r['bytes_per_key']:6.0f} {mib(r['disk_max']):>9} "
                     f"{r['put_p50_ms']:6.2f}/{r['put_p99_ms']:<7.2f} "
                     f"{r['get_p50_ms']:6.2f}/{r['get_p99_ms']:<7.2f} {r.get('errors', 0):7d}"
                     f"  {'-' if snap is None else f'{snap:10.2f}':>10}")
    etcd = {r["keys"]: r for r in rows if r["system"] == "etcd"}
    for r in rows:
        e = etcd.get(r["keys"])
        if r["system"] == "coord" and e and e["bytes_per_key"] > 0:
            lines.append(f"at {r['keys']} keys coord/etcd: RSS per key "
                         f"{r['bytes_per_key'] / e['bytes_per_key']:.2f}x, put p99 "
                         f"{r['put_p99_ms'] / max(e['put_p99_ms'], 1e-9):.2f}x")
    return lines


def run_scale_bench(args: argparse.Namespace) -> int:
    phases = [p for p in args.phases.split(",") if p]
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise SystemExit(f"coord bench scale: unknown phase(s) {bad}; choose from {PHASES}")
    systems = ["coord", "etcd"] if args.etcd else ["coord"]
    compaction = ["--auto-compaction-mode", args.auto_compaction_mode,
                  "--auto-compaction-retention", args.auto_compaction_retention]
    clients = max(int(x) for x in args.concurrency.split(",") if x)

    out: dict[str, list[dict]] = {p: [] for p in PHASES}
    for phase in phases:
        for system in systems:
            if phase in ("owners", "pids") and system != "coord":
                continue  # etcd has neither ownership nor pids
            log(f"{phase}: a {args.members}-member {system} on 127.0.0.1 "
                 f"({' '.join(compaction)}) ...")
            if phase == "restart":
                out["restart"] += restart(system, args.members, compaction, args.keys,
                                          clients)
                continue
            # No bar in the sessions phase: it measures this process's CPU too.
            shown = on_terminal(args) and phase in ("soak", "keys")
            with running(system, args.members, compaction) as run, \
                    Phases("scale", shown) as bars:
                if phase == "owners":
                    out["owners"] += asyncio.run(owners(run, args.owners, args.probe_ops))
                elif phase == "pids":
                    out["pids"] += asyncio.run(pids(run, args.pids, args.probe_ops))
                elif phase == "sessions":
                    out["sessions"] += asyncio.run(sessions(
                        run, args.sessions, args.session_ttl, args.sample_s,
                        spread=args.keepalives_to == "spread"))
                elif phase == "soak":
                    out["soak"] += asyncio.run(soak(run, args.seconds, args.sample_s, clients,
                                                    bars))
                else:
                    out["keys"] += asyncio.run(grow(run, args.keys, clients, args.probe_ops,
                                                    bars))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"coord bench scale: {args.members} member(s) per cluster on 127.0.0.1, "
          f"{clients} clients, {' '.join(compaction)}")
    sections = {
        "soak": lambda: (f"soak: puts of {len(VALUE)} B on one key for {args.seconds:g} s",
                         soak_table),
        "keys": lambda: (f"keys: {args.keys} distinct keys of {len(VALUE)} B values, "
                         f"{args.probe_ops} probe ops per decade", keys_table),
        "restart": lambda: (f"restart: at each decade up to {args.keys} keys, kill -9 of every "
                            "member to the first linearizable Range; a follower wiped and "
                            "re-added to its Status at the leader's revision", restart_table),
        "sessions": lambda: (
            f"sessions: up to {args.sessions} sessions (etcd: leases) of TTL "
            f"{args.session_ttl:g} s kept alive every TTL/3 over {SESSION_STREAMS} streams "
            f"{'spread over every member' if args.keepalives_to == 'spread' else 'to the leader'}"
            f" by one driver process on the same box; CPU % of one core over "
            f"{args.sample_s:g} s at each decade", sessions_table),
        "owners": lambda: (f"owners: coord grown to {args.owners} owned resources (claimed "
                           f"{GROW_BATCH:,} per own); one claim's latency from "
                           f"{args.probe_ops} claims", owners_table),
        "pids": lambda: (f"pids: coord grown to {args.pids} live pid leases ({IN_FLIGHT:,} at a "
                         f"time on one pipelined stream); one lease's latency from "
                         f"{args.probe_ops} leases", pids_table),
    }
    for phase in PHASES:
        if out[phase]:
            title, table = sections[phase]()
            print(title)
            for line in table(out[phase]):
                print("  " + line)
    return 0
