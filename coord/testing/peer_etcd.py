"""Real etcd (Debian's `etcd-server`, 3.4) on free 127.0.0.1 ports: the peer that
side-by-side benchmarks and differential tests measure coord against. Membership changes
go through Debian's `etcdctl` (etcd-client): coord's copy of etcd's API has only
MemberList."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc

from coord.etcdpb import rpc_pb2, rpc_pb2_grpc
from coord.testing.ports import free_ports
from coord.testing.processes import stop_processes

ETCD_BINARY = "etcd"
ETCDCTL_BINARY = "etcdctl"


class EtcdCluster:
    """`members` etcd processes on loopback, with their data in a temp dir. Use as a
    context manager; `endpoints` are the client addresses (HOST:PORT)."""

    def __init__(self, members: int = 3, extra_args: list[str] | None = None) -> None:
        binary = shutil.which(ETCD_BINARY)
        if binary is None:
            raise RuntimeError("etcd is not installed (Debian: apt-get install etcd-server)")
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="peer-etcd-"))
        self.extra_args = list(extra_args or [])
        self.names = [f"e{i + 1}" for i in range(members)]
        ports = free_ports(2 * len(self.names))
        self.client_ports = dict(zip(self.names, ports[::2], strict=True))
        self.peer_ports = dict(zip(self.names, ports[1::2], strict=True))
        self.procs: dict[str, subprocess.Popen] = {}  # running members only
        self._joined: set[str] = set()  # re-added members: they join an existing cluster

    @property
    def endpoints(self) -> list[str]:
        return [f"127.0.0.1:{self.client_ports[n]}" for n in self.names]

    def command(self, name: str) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_ports[name]}"
        client = f"http://127.0.0.1:{self.client_ports[name]}"
        initial = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in self.names)
        return [
            self.binary, "--name", name, "--data-dir", str(self.root / name),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", initial,
            "--initial-cluster-state", "existing" if name in self._joined else "new",
            "--initial-cluster-token", "coord-bench", "--log-level", "error",
            *self.extra_args,
        ]

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for name in self.names:
            self.start_member(name)
        self.wait_leader(timeout)
        return self

    def start_member(self, name: str) -> None:
        """Exec member `name` (its data dir as it is) and return at once: callers that
        time start-up take their clock before this call."""
        if name in self.procs and self.procs[name].poll() is None:
            raise RuntimeError(f"etcd {name} is already running")
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        self.procs[name] = subprocess.Popen(
            self.command(name), stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def kill(self, name: str) -> None:
        """kill -9 member `name`: no flush, no goodbye (as coord's LocalCluster.kill)."""
        proc = self.procs.pop(name, None)
        if proc is not None:
            proc.kill()
            proc.wait()

    def etcdctl(self, *args: str, timeout: float = 30.0) -> str:
        """`etcdctl ARGS` against the running members; its stdout. Raises on failure."""
        binary = shutil.which(ETCDCTL_BINARY)
        if binary is None:
            raise RuntimeError("etcdctl is not installed (Debian: apt-get install etcd-client)")
        live = [e for n, e in zip(self.names, self.endpoints, strict=True) if n in self.procs]
        out = subprocess.run(
            [binary, "--endpoints", ",".join(live), "--command-timeout", "10s", *args],
            capture_output=True, text=True, timeout=timeout, env=dict(os.environ, ETCDCTL_API="3"),
        )
        if out.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def member_id(self, name: str) -> int:
        """Member `name`'s id, from MemberList on the leader."""
        with grpc.insecure_channel(self.wait_leader()) as ch:
            members = rpc_pb2_grpc.ClusterStub(ch).MemberList(
                rpc_pb2.MemberListRequest(), timeout=5
            ).members
        for m in members:
            if m.name == name or (not m.name and m.peerURLs == [self._peer_url(name)]):
                return m.ID
        raise RuntimeError(f"etcd has no member {name}")

    def _peer_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.peer_ports[name]}"

    def _reconfigure(self, *args: str, timeout: float = 30.0) -> str:
        """A membership change, again while etcd refuses it (right after a restart its
        leader says `unhealthy cluster` until it has seen its peers for 5 s) until
        `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.etcdctl(*args)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def wipe_and_rejoin(self, name: str, timeout: float = 30.0) -> float:
        """Replace member `name` by an empty one, etcd's documented way: kill it, remove
        it, delete its data dir, add it back as a learner (same name and peer URL) and
        exec it with `--initial-cluster-state existing`. Returns the monotonic time of
        that exec, so a caller can time its catch-up; `promote()` makes it a voter."""
        self.kill(name)
        self._reconfigure("member", "remove", f"{self.member_id(name):x}", timeout=timeout)
        shutil.rmtree(self.root / name, ignore_errors=True)
        self._reconfigure("member", "add", name, "--peer-urls", self._peer_url(name),
                          "--learner", timeout=timeout)
        self._joined.add(name)
        started = time.monotonic()
        self.start_member(name)
        return started

    def promote(self, name: str, timeout: float = 60.0) -> None:
        """Make learner `name` a voter (etcd refuses until it is in sync with the leader)."""
        self._reconfigure("member", "promote", f"{self.member_id(name):x}", timeout=timeout)

    def wait_leader(self, timeout: float = 30.0) -> str:
        """The client endpoint of the leader, once a member reports one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, endpoint in zip(self.names, self.endpoints, strict=True):
                if name not in self.procs:  # killed on purpose
                    continue
                if self.procs[name].poll() is not None:
                    raise RuntimeError(f"etcd {name} exited; see {self.root / name}.log")
                try:
                    with grpc.insecure_channel(endpoint) as ch:
                        st = rpc_pb2_grpc.MaintenanceStub(ch).Status(
                            rpc_pb2.StatusRequest(), timeout=0.5
                        )
                except grpc.RpcError:
                    continue
                if st.leader and st.leader == st.header.member_id:
                    return endpoint
            time.sleep(0.05)
        raise RuntimeError(f"etcd elected no leader within {timeout}s")

    def stop(self) -> None:
        stop_processes(self.procs.values())
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
