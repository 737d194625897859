"""`coord bench readonly`: issue 4's side-by-side benchmark of read-only mode, coord vs
ZooKeeper 3.8 (Debian's `zookeeper`, `-Dreadonlymode.enabled=true`, kazoo `read_only=True`).

One run measures both systems with the same procedure, one system at a time (so they do
not compete for the machine's 2 cores): a 3-member cluster, a read-only client whose first
endpoint is the survivor, a session on it; SIGSTOP the two other members at t0, SIGCONT
them at t1. Per trial, in milliseconds:

- `ro_read`: t0 -> the first read answered in read-only mode (coord: a response with
  `header.read_only`; ZooKeeper: a read that completed while kazoo's `client_state` was
  CONNECTED_RO, i.e. served by the survivor's ReadOnlyZooKeeperServer). Fresh reads are
  fired every `FIRE_S` without waiting for the previous ones (each on the client's own
  connection, 1 s deadline), so this is when the member first *can* answer, not when a
  read that was already waiting gets its answer.
- `ro_read_api`: the same, seen by an application thread calling the client's blocking
  read back to back with the client's default timeout (coord `Client.range`, 5 s per try;
  kazoo `get`): what a program that was reading at t0 experiences.
- `switch`: t0 -> the survivor's own switch, from its log (coord: "read-write ->
  read-only"; ZooKeeper: "Read-only server started"); log timestamps have 1 ms resolution.
- `notify`: that switch -> the connected session is told (coord: the session's
  `mode_changed` read-only event via `on_event`; ZooKeeper: kazoo's state listener firing
  CONNECTED while `client_state` is CONNECTED_RO — kazoo's listener only ever says
  CONNECTED, `client_state` is where read-only shows).
- `notify_vs_read`: session told - first read-only read observed (the client-only measure;
  negative when the event came first).
- `event`: t0 -> session told.
- `write`: t1 -> the first write that succeeds through the same client.
- `ro_open`: a new application's session on the read-only survivor (a second read-only
  client given the survivor alone, opened once the first read-only read was seen): the
  open's duration (coord: a member-local session, `Client.session`; ZooKeeper: kazoo
  `start()` until CONNECTED_RO).
- `ro_rw`: t1 -> that session is a read-write one (coord: its `registered` event, same
  id; ZooKeeper: kazoo's state CONNECTED with `client_state` CONNECTED — the trial's note
  says whether ZooKeeper kept the session id).

Client-side times are wall-clock (`time.time()`), because they are compared with the
members' log timestamps (same machine, same clock). Prints figures; asserts nothing."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import grpc

from coord.bench import log
from coord.bench.stats import ratio, summarize
from coord.client import Client, CoordError
from coord.testing import ClusterError, LocalCluster
from coord.testing.ports import free_ports
from coord.testing.processes import stop_processes
from coord.v1 import coord_pb2 as pb

POLL_S = 0.005  # between probe writes
FIRE_S = 0.01  # between fresh probe reads (each in flight up to its 1 s deadline)
PHASE_S = 20.0  # bound on each phase of a trial (quorum loss, notification, recovery)
READY_S = 60.0  # bound on waiting for a healthy cluster between trials
COORD_TICK_MS, COORD_ELECTION_TICKS = 50, 12  # coord serve's defaults
ZK_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
ZK_JAVA_DIR = Path("/usr/share/java")
SESSION_TTL_S = 4.0  # coord session TTL = kazoo session timeout (= ZK's max: 20 ticks)


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    target: str  # "election" (2 election timeouts), a number of ms, or "" for none


METRICS = (
    Metric("ro_read", "t0 -> first RO read (fresh reads)", "election"),
    Metric("ro_read_api", "t0 -> first RO read (blocking)", "election"),
    Metric("switch", "t0 -> member switch (its log)", ""),
    Metric("notify", "switch -> session notified", "100"),
    Metric("notify_vs_read", "notified - first RO read", ""),
    Metric("event", "t0 -> session notified", ""),
    Metric("write", "t1 (SIGCONT) -> first write OK", "1000"),
    Metric("ro_open", "open a session on the RO member", ""),
    Metric("ro_rw", "t1 -> that session read-write", ""),
)


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


# -- pure helpers: the table, log parsing (statistics are coord.bench.stats) ---------------


def _fmt(v: float | int | None, width: int = 7) -> str:
    return f"{'-':>{width}}" if v is None else f"{v:>{width}.0f}"


def render_table(trials: list[Trial], targets: dict[str, float], systems: list[str]) -> str:
    """The table: per metric and survivor role, each system's median / max (n), the
    coord/ZK ratio of medians and the issue's target. `targets` maps a metric's target
    kind ("election", or ms as text) to ms."""
    roles = sorted({t.survivor_role for t in trials}, key=lambda r: (r != "follower", r))
    head = f"{'metric (ms)':<33} {'survivor':<9} {'target':>7}"
    for s in systems:
        head += f"  {s + ' median/max (n)':>26}"
    if len(systems) == 2:
        head += f"  {'/'.join(systems) + ' med':>12}"
    lines = [head, "-" * len(head)]
    for m in METRICS:
        for role in roles:
            row = f"{m.label:<33} {role:<9} "
            target = targets.get(m.target) if m.target else None
            row += f"{'<=' + format(target, '.0f') if target is not None else '':>7}"
            medians = []
            for s in systems:
                vals = [t.values.get(m.key) for t in trials
                        if t.system == s and t.survivor_role == role]
                st = summarize(vals)
                medians.append(st["median"])
                miss = f"+{st['missing']}?" if st["missing"] else ""
                cell = f"{_fmt(st['median'])} / {_fmt(st['max'])} ({st['n']}{miss})"
                row += f"  {cell:>26}"
            if len(systems) == 2:
                r = ratio(medians[0], medians[1])
                row += f"  {'-' if r is None else format(r, '.2f'):>12}"
            lines.append(row)
    return "\n".join(lines)


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
    while time.time() < until:
        if events:
            return events[0]
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


@dataclass
class ZkServer:
    sid: int
    client_port: int
    quorum_port: int
    election_port: int
    cfg: Path
    log_path: Path
    proc: subprocess.Popen | None = None
    paused: bool = False

    @property
    def hostport(self) -> str:
        return f"127.0.0.1:{self.client_port}"


class ZkEnsemble:
    """Three ZooKeeper servers started here, on free 127.0.0.1 ports in a temp dir, with
    read-only mode and local sessions on (a 3.8 read-only server refuses global sessions,
    ZOOKEEPER-3864). Use as a context manager: stop() SIGCONTs, terminates, kills and
    removes the temp dir whatever happened."""

    def __init__(self, tick_ms: int, sync_limit: int, init_limit: int,
                 heap: str = "256m") -> None:
        self.tick_ms, self.sync_limit, self.init_limit = tick_ms, sync_limit, init_limit
        self.heap = heap
        java = shutil.which("java")
        jars = [ZK_JAVA_DIR / j for j in ZK_JARS]
        missing = [str(j) for j in jars if not j.exists()]
        if java is None or missing:
            raise ClusterError(
                "ZooKeeper needs Debian's package and a JDK: apt-get install -y zookeeper"
                f" (java: {java or 'not found'}; missing: {', '.join(missing) or 'none'})")
        self.java, self.classpath = java, ":".join(str(j) for j in jars)
        self.root = Path(tempfile.mkdtemp(prefix="coord-zkbench-"))
        ports = free_ports(9)
        self.servers = [
            ZkServer(i, *ports[3 * i - 3:3 * i], self.root / f"zk{i}.cfg",
                     self.root / f"zk{i}.log")
            for i in (1, 2, 3)
        ]

    def _write_config(self, s: ZkServer) -> None:
        data = self.root / f"data{s.sid}"
        data.mkdir(exist_ok=True)
        (data / "myid").write_text(f"{s.sid}\n")
        lines = [
            f"tickTime={self.tick_ms}",
            f"initLimit={self.init_limit}",
            f"syncLimit={self.sync_limit}",
            f"dataDir={data}",
            f"clientPort={s.client_port}",
            "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,isro",  # isro: kazoo's search for a r/w server
            "localSessionsEnabled=true",
            "localSessionsUpgradingEnabled=true",
            *(f"server.{o.sid}=127.0.0.1:{o.quorum_port}:{o.election_port}"
              for o in self.servers),
        ]
        s.cfg.write_text("\n".join(lines) + "\n")

    def command(self, s: ZkServer) -> list[str]:
        return [
            self.java, "-Xms64m", f"-Xmx{self.heap}", "-Dreadonlymode.enabled=true",
            f"-Dzookeeper.log.dir={self.root}",
            f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}",
            "-cp", self.classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(s.cfg),
        ]

    def start(self) -> ZkEnsemble:
        (self.root / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, CONSOLE\n"
            "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}]"
            " - %-5p [%t:%C{1}@%L] - %m%n\n")
        for s in self.servers:
            self._write_config(s)
        for s in self.servers:
            with open(s.log_path, "ab") as out:
                # Own session: a Ctrl-C at the terminal reaches only the bench, which then
                # stops the servers itself, in order.
                s.proc = subprocess.Popen(self.command(s), stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def stop(self) -> None:
        stop_processes([s.proc for s in self.servers if s.proc is not None])
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ZkEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pause(self, s: ZkServer) -> None:
        assert s.proc is not None
        s.proc.send_signal(signal.SIGSTOP)
        s.paused = True

    def resume(self, s: ZkServer) -> None:
        assert s.proc is not None
        s.proc.send_signal(signal.SIGCONT)
        s.paused = False

    def mode(self, s: ZkServer) -> str:
        """The server's `Mode:` from the srvr four-letter word (leader, follower,
        read-only, standalone), or "down"."""
        try:
            with socket.create_connection(("127.0.0.1", s.client_port), timeout=1.0) as sock:
                sock.settimeout(1.0)
                sock.sendall(b"srvr")
                buf = b""
                while len(buf) < 65536:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
        except OSError:
            return "down"
        for line in buf.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return "not-serving"

    def wait_ready(self, timeout: float = READY_S) -> ZkServer:
        """The leader, once one server leads and the other two follow."""
        deadline = time.monotonic() + timeout
        modes: list[str] = []
        while time.monotonic() < deadline:
            for s in self.servers:
                if s.proc is None or s.proc.poll() is not None:
                    raise ClusterError(f"zk{s.sid} exited; see {s.log_path}")
            modes = [self.mode(s) for s in self.servers]
            if sorted(modes) == ["follower", "follower", "leader"]:
                return self.servers[modes.index("leader")]
            time.sleep(0.1)
        raise ClusterError(f"ZooKeeper ensemble not ready within {timeout}s: {modes}")


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


# -- command --------------------------------------------------------------------------------


def run_readonly_bench(args: argparse.Namespace) -> int:
    """`coord bench readonly`: both systems in one run; table on stdout (on stderr with
    --json, which prints the raw trials on stdout)."""
    roles = [r for r in args.survivor.split(",") if r]
    if not roles or any(r not in ("follower", "leader") for r in roles):
        raise SystemExit("coord bench readonly: --survivor takes follower,leader")
    if args.zk:
        try:
            import kazoo  # noqa: F401
        except ImportError:
            raise SystemExit("coord bench readonly --zk needs kazoo: pip install -e '.[bench]'"
                             " (or pass --no-zk)") from None
    trials: list[Trial] = []
    started = time.time()
    load_before = os.getloadavg()
    errors: list[str] = []
    try:
        run_coord(args.trials, roles, trials)
        if args.zk:
            try:
                run_zk(args.trials, roles, trials, args.zk_tick_ms, args.zk_sync_limit,
                       args.zk_init_limit)
            except ClusterError as e:
                errors.append(f"zk: {e}")
                log(f"zk: {e}")
    except KeyboardInterrupt:
        log("interrupted: processes stopped and temp dirs removed; partial results follow")
    except (ClusterError, grpc.RpcError) as e:
        errors.append(f"coord: {e}")
        log(f"coord: {e}")
    load_after = os.getloadavg()
    election_ms = COORD_TICK_MS * COORD_ELECTION_TICKS
    targets = {"election": 2.0 * election_ms, "100": 100.0, "1000": 1000.0}
    systems = ["coord", "zk"] if any(t.system == "zk" for t in trials) else ["coord"]
    table = render_table(trials, targets, systems) if trials else "(no trials completed)"
    title = (
        f"coord bench readonly: {args.trials} trials per row, one system at a time, 127.0.0.1;"
        f" coord election timeout {election_ms} ms (target read-only <= 2x);"
        f" ZK tickTime {args.zk_tick_ms} ms x syncLimit {args.zk_sync_limit}"
        f" = {args.zk_tick_ms * args.zk_sync_limit} ms"
    )
    footer = (f"load average before {load_before[0]:.2f} after {load_after[0]:.2f};"
              f" {time.time() - started:.0f} s")
    text = "\n".join([title, table, footer, *errors])
    if args.json:
        log(text)
        print(json.dumps({
            "config": {"trials": args.trials, "survivor": roles,
                       "coord": {"tick_ms": COORD_TICK_MS,
                                 "election_ticks": COORD_ELECTION_TICKS},
                       "zk": {"tick_ms": args.zk_tick_ms, "sync_limit": args.zk_sync_limit,
                              "init_limit": args.zk_init_limit} if args.zk else None,
                       "session_ttl_s": SESSION_TTL_S, "poll_s": POLL_S},
            "loadavg": {"before": load_before, "after": load_after},
            "errors": errors,
            "trials": [asdict(t) for t in trials],
        }, indent=2))
    else:
        print(text)
    return 1 if errors else 0
