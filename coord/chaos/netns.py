"""Real network partitions for the chaos harness: every member in a network namespace of
its own, joined by veth pairs to a bridge in a hub namespace, all created and removed by
the harness (addresses only inside those namespaces: 10.213.N.0/24).

A partition is a set of cut links. A cut link drops packets both ways (blackhole routes
in both members' namespaces); a one-way cut drops only what member a sends to member
b's peer port (a policy rule on the destination port), so b's messages still reach a.
Clients stay on 127.0.0.1: each member also listens on 127.0.0.1 inside its namespace,
and a TCP gate on the host's 127.0.0.1, same port, connects into the namespace
(coord.testing.netfault.TcpGate with a connect that enters it with setns(2)).

Needs root and `ip` (iproute2) with netns, veth and bridge support; `available()` says
whether this machine has them."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager, suppress
from typing import TypeVar

from coord.testing import LocalCluster
from coord.testing.netfault import TcpGate

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x40000000
DROP_TABLE = "77"  # the routing table one-way rules send packets to: a blackhole
T = TypeVar("T")


class NetnsError(RuntimeError):
    pass


def available() -> str:
    """"" if namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is missing"
    return ""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and p.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


_libc = ctypes.CDLL(None, use_errno=True)


@contextmanager
def entered(ns: str):
    """Run the block in network namespace `ns` (this thread only), then come back."""
    home = os.open(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise NetnsError(f"setns({ns}): {os.strerror(ctypes.get_errno())}")
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:  # pragma: no cover - cannot recover
                os._exit(f"setns back home failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(target)
        os.close(home)


def in_netns(ns: str, fn: Callable[[], T]) -> T:
    with entered(ns):
        return fn()


RUN_PREFIX = "cch"
"""Namespaces of a run are named `cch<the harness's pid>-<member>`."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _listed() -> list[str]:
    lines = _ip("netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in lines if line.strip()]


def namespaces_of(pid: int) -> list[str]:
    """The namespaces the run of harness `pid` made (and has not removed)."""
    return [ns for ns in _listed() if ns.startswith(f"{RUN_PREFIX}{pid}-")]


def sweep_dead_runs() -> list[str]:
    """Remove the namespaces a run killed with no chance to clean up (kill -9, a machine
    restart) left behind — ones named by the harness whose pid is no longer alive — and
    stop what still runs in them (that run's orphaned members). Returns what it removed."""
    removed = []
    for ns in _listed():
        tag = ns.split("-", 1)[0]
        pid = tag[len(RUN_PREFIX):]
        if not (ns.startswith(RUN_PREFIX) and "-" in ns and pid.isdigit()) or _alive(int(pid)):
            continue
        for inside in _ip("netns", "pids", ns, check=False).stdout.split():
            with suppress(ProcessLookupError, ValueError):
                os.kill(int(inside), 9)
        if _ip("netns", "del", ns, check=False).returncode == 0:
            removed.append(ns)
    if removed:
        log.warning("removed network namespaces of dead chaos runs: %s", ", ".join(removed))
    return removed


class Network:
    """The namespaces of one cluster. `create()`, then `attach(cluster)` before the
    cluster starts; `destroy()` always (it removes whatever exists)."""

    def __init__(self, names: list[str], tag: str | None = None) -> None:
        self.tag = tag or f"{RUN_PREFIX}{os.getpid()}"
        subnet = 10 + os.getpid() % 240
        self.hub = f"{self.tag}-hub"
        self.ns = {n: f"{self.tag}-{n}" for n in names}
        self.addr = {n: f"10.213.{subnet}.{i + 1}" for i, n in enumerate(names)}
        self.peer_port: dict[str, int] = {}
        self.cuts: set[tuple[str, str, bool]] = set()  # (a, b, one_way)
        self.gates: list[TcpGate] = []

    def create(self) -> Network:
        sweep_dead_runs()
        try:
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for i, (name, ns) in enumerate(self.ns.items()):
                _ip("netns", "add", ns)
                _ip("-n", self.hub, "link", "add", f"v{i}", "type", "veth", "peer", "name",
                    "eth0", "netns", ns)
                _ip("-n", self.hub, "link", "set", f"v{i}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.addr[name]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "route", "add", "blackhole", "default", "table", DROP_TABLE)
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        for gate in self.gates:
            gate.stop()
        self.gates = []
        for ns in [*self.ns.values(), self.hub]:
            _ip("netns", "del", ns, check=False)

    def attach(self, cluster: LocalCluster) -> None:
        """Point `cluster` (not started) at the namespaces: members run in theirs (the
        program the cluster was given, else `coord serve`), peers meet on the bridge,
        clients reach each member through a gate on 127.0.0.1."""
        program = cluster.member_command or (
            lambda name: [sys.executable, "-m", "coord", "serve"])
        cluster.member_command = lambda name: ["ip", "netns", "exec", self.ns[name],
                                               *program(name)]
        for name, m in cluster.members.items():
            port = int(m.peer_listen.rsplit(":", 1)[1])
            self.peer_port[name] = port
            m.peer_listen = f"{self.addr[name]}:{port}"
            client_port = int(m.listen.rsplit(":", 1)[1])
            ns = self.ns[name]
            self.gates.append(TcpGate(client_port, ("127.0.0.1", client_port),
                                      connect=lambda t, ns=ns: in_netns(
                                          ns, lambda: socket.create_connection(t, timeout=1))))

    # -- cutting links -----------------------------------------------------------------
    def cut(self, a: str, b: str, one_way: bool = False) -> None:
        """Drop a's packets to b and b's to a; `one_way`: only a's messages to b."""
        if one_way:
            _ip("-n", self.ns[a], "rule", "add", "to", self.addr[b], "dport",
                str(self.peer_port[b]), "lookup", DROP_TABLE, "prio", "100")
        else:
            _ip("-n", self.ns[a], "route", "add", "blackhole", f"{self.addr[b]}/32")
            _ip("-n", self.ns[b], "route", "add", "blackhole", f"{self.addr[a]}/32")
        self.cuts.add((a, b, one_way))

    def split(self, side_a: list[str], side_b: list[str]) -> None:
        for a in side_a:
            for b in side_b:
                self.cut(a, b)

    def heal(self) -> None:
        for a, b, one_way in sorted(self.cuts):
            if one_way:
                _ip("-n", self.ns[a], "rule", "del", "to", self.addr[b], "dport",
                    str(self.peer_port[b]), "lookup", DROP_TABLE, "prio", "100", check=False)
            else:
                _ip("-n", self.ns[a], "route", "del", "blackhole", f"{self.addr[b]}/32",
                    check=False)
                _ip("-n", self.ns[b], "route", "del", "blackhole", f"{self.addr[a]}/32",
                    check=False)
        self.cuts.clear()

    def describe(self) -> str:
        return ", ".join(f"{a}{'->' if o else '|'}{b}" for a, b, o in sorted(self.cuts))
