"""Real etcd (Debian's `etcd-server`, 3.4) on free 127.0.0.1 ports: the peer that
side-by-side benchmarks and differential tests measure coord against."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc

from coord.etcdpb import rpc_pb2, rpc_pb2_grpc
from coord.testing.ports import free_ports

ETCD_BINARY = "etcd"


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
        self.procs: dict[str, subprocess.Popen] = {}

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
            "--initial-cluster", initial, "--initial-cluster-state", "new",
            "--initial-cluster-token", "coord-bench", "--log-level", "error",
            *self.extra_args,
        ]

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for name in self.names:
            log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
            self.procs[name] = subprocess.Popen(
                self.command(name), stdout=log, stderr=subprocess.STDOUT
            )
            log.close()
        self.wait_leader(timeout)
        return self

    def wait_leader(self, timeout: float = 30.0) -> str:
        """The client endpoint of the leader, once a member reports one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, endpoint in zip(self.names, self.endpoints, strict=True):
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
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
