"""One trial of `coord bench readonly`, the same procedure on coord and on ZooKeeper: a
healthy 3-member cluster, a read-only client whose first endpoint is the survivor, the
two other members SIGSTOPped and then SIGCONTed, and the times in between (readonly.py
says what each figure is)."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import grpc

from coord.bench import log
from coord.client import Client, CoordError
from coord.testing import ClusterError, LocalCluster
from coord.testing.peer_zookeeper import ZkEnsemble
from coord.v1 import coord_pb2 as pb

POLL_S = 0.005  # between probe writes
FIRE_S = 0.01  # between fresh probe reads (each in flight up to its 1 s deadline)
PHASE_S = 20.0  # bound on each phase of a trial (quorum loss, notification, recovery)
READY_S = 60.0  # bound on waiting for a healthy cluster between trials
SESSION_TTL_S = 4.0  # coord session TTL = kazoo session timeout (= ZK's max: 20 ticks)


@dataclass
class Trial:
    """One trial's figures in ms (None: not observed within the phase bound)."""

    system: str
    survivor_role: str
    trial: int
    survivor: str
    values: dict[str, float | None] = field(default_factory=dict)
    note: str = ""


def _ms(start: float, end: float | None) -> float | None:
    return None if end is None else round((end - start) * 1000, 1)


_COORD_SWITCH = re.compile(
    r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \S+\s+(\S+): (\S+) -> (read-only|read-write|no-quorum)"
)
_ZK_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def clock_to_epoch(h: int, m: int, s: int, ms: int, ref: float) -> float:
    """A local time of day (coord's log has no date) as the epoch second closest to
    `ref`, so a trial that crosses midnight still gets the right day."""
    base = datetime.fromtimestamp(ref)
    at = base.replace(hour=h, minute=m, second=s, microsecond=ms * 1000)
    if (at - base) > timedelta(hours=12):
        at -= timedelta(days=1)
    elif (base - at) > timedelta(hours=12):
        at += timedelta(days=1)
    return at.timestamp()


def coord_switch_time(text: str, member: str, mode: str, ref: float) -> float | None:
    """When `member` logged its first switch to `mode` in `text` (ModeMonitor logs
    "n1: read-write -> read-only (...)" at WARNING), as an epoch second."""
    for line in text.splitlines():
        mt = _COORD_SWITCH.match(line)
        if mt and mt.group(5) == member and mt.group(7) == mode:
            h, m, s, ms = (int(mt.group(i)) for i in range(1, 5))
            return clock_to_epoch(h, m, s, ms, ref)
    return None


def zk_switch_time(text: str, marker: str = "Read-only server started") -> float | None:
    """When a ZooKeeper server logged `marker` first in `text` (log4j ISO8601 local time,
    "2025-01-31 12:00:00,123 ..."), as an epoch second."""
    for line in text.splitlines():
        if marker not in line:
            continue
        mt = _ZK_LINE.match(line)
        if mt:
            t = time.mktime(time.strptime(mt.group(1), "%Y-%m-%d %H:%M:%S"))
            return t + int(mt.group(2)) / 1000
    return None


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _poll(until: float, step: Callable[[], float | None]) -> float | None:
    """Run `step` every POLL_S until it returns a time or `until` passes."""
    while time.time() < until:
        got = step()
        if got is not None:
            return got
        time.sleep(POLL_S)
    return None


def _wait_for(events: list[float], until: float) -> float | None:
    while not events and time.time() < until:
        time.sleep(0.002)
    return events[0] if events else None


def _fire_until_first(fire: Callable[[list[float]], None], until: float) -> float | None:
    """Call `fire(hits)` every FIRE_S without waiting for earlier calls to finish; each
    call starts one asynchronous read that appends its completion time to `hits` if it
    was served read-only. Returns the earliest hit, or None at `until`."""
    hits: list[float] = []
    while time.time() < until and not hits:
        fire(hits)
        time.sleep(FIRE_S)
    time.sleep(0.05)  # a read fired a moment earlier may complete a moment later
    return min(hits) if hits else None


class _BlockingReader(threading.Thread):
    """An application thread reading back to back through the client's blocking API
    until a read comes back read-only (or `until`)."""

    def __init__(self, read_is_ro: Callable[[], bool], until: float) -> None:
        super().__init__(daemon=True, name="bench-blocking-reader")
        self.read_is_ro, self.until, self.first_ro = read_is_ro, until, None

    def run(self) -> None:
        while time.time() < self.until:
            try:
                if self.read_is_ro():
                    self.first_ro = time.time()
                    return
            except Exception:  # noqa: BLE001 - any failure: try again
                time.sleep(POLL_S)


# -- coord ----------------------------------------------------------------------------------


def _coord_ready(cluster: LocalCluster, timeout: float = READY_S) -> str:
    """A leader, and every member with a quorum in read-write mode."""
    deadline = time.monotonic() + timeout
    leader = cluster.wait_for_leader(timeout=timeout)
    while time.monotonic() < deadline:
        sts = cluster.statuses()
        if len(sts) == len(cluster.members) and all(
            s.has_quorum and s.mode == "read-write" for s in sts.values()
        ):
            return cluster.wait_for_leader(timeout=max(1.0, deadline - time.monotonic()))
        time.sleep(0.05)
    raise ClusterError(f"cluster not read-write everywhere after {timeout}s: "
                       f"{cluster.describe()} (leader was {leader})")


def coord_trial(cluster: LocalCluster, role: str, index: int) -> Trial:
    """One trial on a running coord cluster (see the module docstring)."""
    leader = _coord_ready(cluster)
    names = sorted(cluster.members)
    survivor = leader if role == "leader" else next(n for n in names if n != leader)
    others = [n for n in names if n != survivor]
    trial = Trial("coord", role, index, survivor)
    endpoints = [cluster.members[n].listen for n in [survivor, *others]]
    # Both start at the survivor: the trial times a client whose first member is cut off.
    client = Client(endpoints, read_only_ok=True, timeout=1.0, randomize_endpoints=False)
    api_client = Client(endpoints, read_only_ok=True,  # default timeout, for ro_read_api
                        randomize_endpoints=False)
    ro_events: list[float] = []

    def on_event(ev) -> None:
        if ev.type == "mode_changed" and ev.mode == "read-only":
            ro_events.append(time.time())

    log_path = cluster.members[survivor].log_path
    late: dict = {}  # the session opened while read-only -> its client
    registered: list[float] = []
    opened: float | None = None
    try:
        client.put(b"bench/ro", b"before")
        session = client.session(ttl=SESSION_TTL_S, on_event=on_event)
        client.range(b"bench/ro")
        offset = _size(log_path)
        t0 = time.time()
        for n in others:
            cluster.pause(n)

        api = _BlockingReader(lambda: api_client.range(b"bench/ro").header.read_only,
                              t0 + PHASE_S)
        api.start()
        _, stubs = client._channel(endpoints[0])  # the client's own connection to it
        request = pb.RangeRequest(key=b"bench/ro")
        pending: list[grpc.Future] = []

        def fire(hits: list[float]) -> None:
            fut = stubs.KV.Range.future(request, timeout=1.0, metadata=client.metadata)

            def done(f: grpc.Future) -> None:
                if not f.cancelled() and f.exception() is None and f.result().header.read_only:
                    hits.append(time.time())

            fut.add_done_callback(done)
            pending.append(fut)

        ro_read = _fire_until_first(fire, t0 + PHASE_S)
        for fut in pending:
            fut.cancel()
        api.join(PHASE_S)
        event = _wait_for(ro_events, time.time() + (PHASE_S if ro_read else 5.0))
        switch = coord_switch_time(_read_from(log_path, offset), survivor, "read-only", t0)
        if ro_read is not None:
            opened = _open_coord_local(late, endpoints[0], registered)
        t1 = time.time()
        for n in others:
            cluster.resume(n)

        def write_ok() -> float | None:
            try:
                client.put(b"bench/ro", b"after")
            except CoordError:
                return None
            return time.time()

        write = _poll(t1 + PHASE_S, write_ok)
        trial.values = _values(t0, t1, ro_read, api.first_ro, switch, event, write)
        trial.values["ro_open"] = opened
        trial.values["ro_rw"] = _ms(t1, _wait_for(registered, t1 + PHASE_S))
        with contextlib.suppress(CoordError):
            session.close()
        for s in list(late):
            with contextlib.suppress(CoordError):
                s.close()
    finally:
        for n in others:
            if cluster.members[n].paused:
                cluster.resume(n)
        client.close()
        api_client.close()
        for c in late.values():
            c.close()
    return trial


def _open_coord_local(late: dict, endpoint: str, registered: list[float]) -> float | None:
    """ms to open a session through a new read-only client given the read-only member
    alone (a member-local session); its `registered` event's time goes to `registered`.
    `late` keeps the session and client, to close them after the trial."""
    opener = Client([endpoint], read_only_ok=True, timeout=2.0)

    def on_event(ev) -> None:
        if ev.type == "registered":
            registered.append(time.time())

    start = time.time()
    try:
        session = opener.session(ttl=SESSION_TTL_S, on_event=on_event)
    except CoordError as e:
        log(f"coord: opening a session on the read-only member failed: {e}")
        opener.close()
        return None
    took = _ms(start, time.time())
    late[session] = opener
    return took


def _values(t0: float, t1: float, ro_read: float | None, ro_read_api: float | None,
            switch: float | None, event: float | None,
            write: float | None) -> dict[str, float | None]:
    return {
        "ro_read": _ms(t0, ro_read),
        "ro_read_api": _ms(t0, ro_read_api),
        "switch": _ms(t0, switch),
        "notify": _ms(switch, event) if switch is not None else None,
        "notify_vs_read": _ms(ro_read, event) if ro_read is not None else None,
        "event": _ms(t0, event),
        "write": _ms(t1, write),
    }


def run_coord(trials: int, roles: list[str], out: list[Trial]) -> None:
    log("coord: starting a 3-member cluster on 127.0.0.1 (default timings: tick 50 ms, "
        "election timeout 12 ticks = 600 ms) ...")
    with LocalCluster(3) as cluster:
        _coord_ready(cluster)
        for role in roles:
            for i in range(1, trials + 1):
                t = coord_trial(cluster, role, i)
                out.append(t)
                log(f"coord survivor={role} trial {i}/{trials} ({t.survivor}): "
                    + _brief(t.values))


def _brief(values: dict[str, float | None]) -> str:
    return " ".join(f"{k}={'-' if v is None else f'{v:.0f}'}" for k, v in values.items())


# -- ZooKeeper ------------------------------------------------------------------------------


@contextlib.contextmanager
def _kazoo(hosts: str, read_only: bool) -> Iterator[object]:
    from kazoo.client import KazooClient

    # Reconnect pauses 0.1 s doubling to 2 s: the same as coord's client prober.
    zk = KazooClient(hosts=hosts, timeout=SESSION_TTL_S, read_only=read_only,
                     randomize_hosts=False,
                     connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2,
                                       "max_delay": 2.0})
    try:
        yield zk
    finally:
        with contextlib.suppress(Exception):
            zk.stop()
        with contextlib.suppress(Exception):
            zk.close()


def zk_trial(ens: ZkEnsemble, role: str, index: int) -> Trial:
    """One trial on the running ensemble, the same procedure as coord_trial."""
    from kazoo.client import KazooState
    from kazoo.protocol.states import KeeperState

    leader = ens.wait_ready()
    survivor = leader if role == "leader" else next(s for s in ens.servers if s is not leader)
    others = [s for s in ens.servers if s is not survivor]
    trial = Trial("zk", role, index, f"zk{survivor.sid}")
    hosts = ",".join(s.hostport for s in [survivor, *others])
    ro_events: list[float] = []
    path = "/bench-ro"
    late = contextlib.ExitStack()  # the client opened while read-only
    rw_times: list[float] = []
    opened: tuple[float | None, object, int] = (None, None, 0)
    try:
        with _kazoo(hosts, read_only=True) as zk:

            def listener(state: str) -> None:
                # Called in kazoo's connection thread right after client_state is set.
                if state == KazooState.CONNECTED and zk.client_state == KeeperState.CONNECTED_RO:
                    ro_events.append(time.time())

            zk.add_listener(listener)
            zk.start(timeout=15)
            if zk.exists(path) is None:
                zk.create(path, b"before")
            zk.set(path, b"before")
            zk.get(path)
            offset = _size(survivor.log_path)
            t0 = time.time()
            for s in others:
                ens.pause(s)

            def api_read() -> bool:
                zk.get(path)
                return zk.client_state == KeeperState.CONNECTED_RO

            api = _BlockingReader(api_read, t0 + PHASE_S)
            api.start()

            def fire(hits: list[float]) -> None:
                result = zk.get_async(path)

                def done(r: object) -> None:
                    if result.successful() and zk.client_state == KeeperState.CONNECTED_RO:
                        hits.append(time.time())

                result.rawlink(done)

            ro_read = _fire_until_first(fire, t0 + PHASE_S)
            api.join(PHASE_S)
            event = _wait_for(ro_events, time.time() + (PHASE_S if ro_read else 5.0))
            switch = zk_switch_time(_read_from(survivor.log_path, offset))
            if ro_read is not None:
                opened = _open_zk_ro(late, survivor.hostport, rw_times)
            t1 = time.time()
            for s in others:
                ens.resume(s)

            def write_ok() -> float | None:
                try:
                    zk.set_async(path, b"after").get(timeout=1.0)
                except Exception:  # noqa: BLE001 - read-only, reconnecting, ...
                    return None
                return time.time()

            write = _poll(t1 + PHASE_S, write_ok)
            trial.values = _values(t0, t1, ro_read, api.first_ro, switch, event, write)
            took, zk2, ro_id = opened
            trial.values["ro_open"] = took
            trial.values["ro_rw"] = _ms(t1, _wait_for(rw_times, t1 + PHASE_S))
            trial.note = f"final client_state {zk.client_state}"
            if zk2 is not None and took is not None:
                trial.note += (f"; the session opened read-only kept its id: "
                               f"{zk2.client_id[0] == ro_id}")
    finally:
        late.close()
        for s in others:
            if s.paused:
                ens.resume(s)
    return trial


def _open_zk_ro(late: contextlib.ExitStack, hostport: str,
                rw_times: list[float]) -> tuple[float | None, object, int]:
    """(ms to open a session through a new read-only kazoo client given the read-only
    server alone, the client, its session id); the times it is CONNECTED read-write go
    to `rw_times`."""
    from kazoo.client import KazooState
    from kazoo.protocol.states import KeeperState

    zk = late.enter_context(_kazoo(hostport, read_only=True))

    def listener(state: str) -> None:
        if state == KazooState.CONNECTED and zk.client_state == KeeperState.CONNECTED:
            rw_times.append(time.time())

    zk.add_listener(listener)
    start = time.time()
    try:
        zk.start(timeout=PHASE_S)
    except Exception as e:  # noqa: BLE001 - reported, the row shows "-"
        log(f"zk: opening a session on the read-only server failed: {e!r}")
        return None, zk, 0
    return _ms(start, time.time()), zk, zk.client_id[0]


def run_zk(trials: int, roles: list[str], out: list[Trial], tick_ms: int, sync_limit: int,
           init_limit: int) -> None:
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # reconnect chatter
    log(f"zk: starting a 3-server ZooKeeper ensemble on 127.0.0.1 (tickTime {tick_ms} ms, "
        f"syncLimit {sync_limit} = {tick_ms * sync_limit} ms, initLimit {init_limit}) ...")
    with ZkEnsemble(tick_ms, sync_limit, init_limit) as ens:
        ens.wait_ready()
        for role in roles:
            for i in range(1, trials + 1):
                t = zk_trial(ens, role, i)
                out.append(t)
                log(f"zk survivor={role} trial {i}/{trials} ({t.survivor}): "
                    + _brief(t.values) + (f"; {t.note}" if t.note else ""))
