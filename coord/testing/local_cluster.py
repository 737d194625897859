"""Real coord clusters for tests, benchmarks, `coord dev` and other projects' test rigs:
members on free 127.0.0.1 ports, each its own `coord serve` process (kill -9, SIGSTOP,
restart) or, with `in_process=True`, all inside this process (coord.testing.embedded: serving in
a fraction of a second; kill and restart, but no pause). With `tls=True`, over TLS and
mTLS on both ports, with a CA and certificates made in the cluster's directory."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import grpc

from coord.client.admin import AdminClient
from coord.server.failpoints import ENV_VAR as FAILPOINTS_VAR
from coord.server.failpoints import POINTS as CRASH_POINTS
from coord.testing.netfault import TcpGate
from coord.testing.ports import free_port, free_ports
from coord.testing.processes import stop_processes
from coord.tls.files import TLS, write_private

if TYPE_CHECKING:
    from coord.testing.embedded import EmbeddedLoop, EmbeddedMember


@dataclass
class MemberProcess:
    name: str
    listen: str
    peer_listen: str
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen | None = None
    embedded: EmbeddedMember | None = field(default=None, repr=False)  # in_process
    paused: bool = False
    gate: TcpGate | None = field(default=None, repr=False)  # in front of peer_listen
    metrics_url: str = ""  # http://HOST:PORT of /metrics and /health (LocalCluster(metrics=))
    _pump: threading.Thread | None = field(default=None, repr=False)

    @property
    def peer_address(self) -> str:
        """Where the other members reach this one: its gate, if it has one."""
        if self.gate is None:
            return self.peer_listen
        host, port = self.gate.address
        return f"{host}:{port}"

    @property
    def running(self) -> bool:
        if self.embedded is not None:
            return self.embedded.running
        return self.proc is not None and self.proc.poll() is None


__all__ = ["CRASH_POINTS", "ClusterError", "LocalCluster", "MemberProcess", "cluster"]
"""CRASH_POINTS: the named points a member can be started armed at (`start_member`'s
`failpoints`), each with the moment it marks."""


class ClusterError(RuntimeError):
    pass


CLIENT_CN = "root"
"""The common name of a TLS cluster's client certificate: with auth on, the root user."""


class LocalCluster:
    """A cluster of `coord serve` processes. Use as a context manager."""

    def __init__(
        self,
        members: int = 3,
        data_dir: str | Path | None = None,
        base_port: int | None = None,
        tick_ms: int | None = None,
        election_ticks: int | None = None,
        extra_args: list[str] | None = None,
        echo: Callable[[str, str], None] | None = None,
        partitionable: bool = False,
        in_process: bool = False,
        member_command: Callable[[str], list[str]] | None = None,
        tls: bool = False,
        metrics: bool = False,
    ) -> None:
        """`partitionable`: members reach each other through TCP gates, so `cut_off()`
        and `heal()` can partition a member (coord.testing.netfault). `in_process`: members run in
        this process (coord.testing.embedded) instead of as `coord serve` processes.
        `member_command(name)`: the program member `name` runs instead of `python -m coord
        serve` (the serve flags follow it), for an entry point that runs a member plus
        something of its own (the raft benchmark's); processes only.

        `tls`: a CA and certificates in `root/tls` (kept there, and reused, with a
        `data_dir`), and members that serve both ports over TLS and require a
        certificate signed by the CA on both (--client-cert-auth,
        --peer-client-cert-auth). `client_tls` is the clients' TLS (its certificate's
        common name is "root": with auth on, the root user) and `client()` uses it;
        `issue_client(name)` makes another.

        `metrics`: each member serves /metrics and the health checks
        (--listen-metrics-urls) on a port of its own, its `metrics_url` (with a
        `base_port`, BASE+200 and up)."""
        if not 1 <= members <= 9:
            raise ValueError("members must be 1..9")
        if in_process and member_command is not None:
            raise ValueError("member_command runs processes: it cannot go with in_process")
        self.member_command = member_command
        self._tmp = data_dir is None
        self.root = Path(data_dir or tempfile.mkdtemp(prefix="coord-cluster-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.echo = echo
        self.extra_args = list(extra_args or [])
        if tick_ms is not None:
            self.extra_args += ["--tick-ms", str(tick_ms)]
        if election_ticks is not None:
            self.extra_args += ["--election-ticks", str(election_ticks)]
        self.secret_file = self.root / "cluster.secret"
        if not self.secret_file.exists():
            write_private(self.secret_file, secrets.token_hex(32).encode())
        self.tls_dir = (self.root / "tls").resolve()  # printed for clients to copy
        self.client_tls: TLS | None = None
        if tls:
            from coord.tls.certs import CA_CERT, make_ca  # cryptography: only when asked

            if not (self.tls_dir / CA_CERT).exists():
                make_ca(self.tls_dir, "coord test CA")
            self.client_tls = self.issue_client(CLIENT_CN, keep=True)
        self.members: dict[str, MemberProcess] = {}
        self._joined: set[str] = set()
        self._loop: EmbeddedLoop | None = None
        if in_process:
            from coord.testing.embedded import EmbeddedLoop

            self._loop = EmbeddedLoop.shared()
        per = 4 if metrics else 3  # client, peer, gate (and metrics) ports of a member
        ports = free_ports(per * members) if base_port is None else []
        for i in range(members):
            name = f"n{i + 1}"
            if base_port is None:
                client, peer = ports[per * i], ports[per * i + 1]
                metrics_port = ports[per * i + 3] if metrics else 0
            else:
                client, peer = base_port + i, base_port + 100 + i
                metrics_port = base_port + 200 + i
            self.members[name] = MemberProcess(
                name,
                f"127.0.0.1:{client}",
                f"127.0.0.1:{peer}",
                self.root / name,
                self.root / f"{name}.log",
                metrics_url=f"http://127.0.0.1:{metrics_port}" if metrics else "",
            )
            if partitionable:
                host, port = self.members[name].peer_listen.rsplit(":", 1)
                gate_port = ports[per * i + 2] if ports else free_port()
                self.members[name].gate = TcpGate(gate_port, (host, int(port)))

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def initial_cluster(self) -> str:
        return ",".join(f"{m.name}={m.peer_address}" for m in self.members.values())

    @property
    def endpoints(self) -> list[str]:
        return [m.listen for m in self.members.values()]

    @property
    def etcd_endpoints(self) -> list[str]:
        """Where etcd clients connect: every member serves the etcd v3 API on its client
        port (`--etcd-listen` can add another address)."""
        return self.endpoints

    def command(self, name: str) -> list[str]:
        """The command line that runs member `name` as a process."""
        if self.member_command is not None:
            return [*self.member_command(name), *self.serve_args(name)]
        return [sys.executable, "-m", "coord", "serve", *self.serve_args(name)]

    def issue_client(self, name: str, keep: bool = False, **kwargs: Any) -> TLS:
        """A client certificate with common name `name`, signed by the cluster's CA (made
        anew unless `keep` and it exists); kwargs go to `coord.tls.certs.issue`
        (`not_after`: an expired one)."""
        from coord.tls.certs import CA_CERT, issue

        cert, key = self.tls_dir / f"{name}.pem", self.tls_dir / f"{name}.key"
        if not (keep and cert.exists() and key.exists()):
            issue(self.tls_dir, name, client=True, force=True, **kwargs)
        return TLS(str(self.tls_dir / CA_CERT), str(cert), str(key))

    def _tls_args(self, m: MemberProcess) -> list[str]:
        """A member's TLS flags; its certificate is made on first use, for the addresses
        it has then (a chaos rig may move members to other addresses before starting)."""
        if self.client_tls is None:
            return []
        from coord.tls.certs import CA_CERT, issue

        cert, key, ca = (str(self.tls_dir / f) for f in (f"{m.name}.pem", f"{m.name}.key",
                                                          CA_CERT))
        if not Path(cert).exists():
            hosts = {a.rpartition(":")[0] for a in (m.listen, m.peer_listen, m.peer_address)}
            issue(self.tls_dir, m.name, sorted(hosts), force=True)
        return ["--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca,
                "--client-cert-auth", "--peer-cert-file", cert, "--peer-key-file", key,
                "--peer-trusted-ca-file", ca, "--peer-client-cert-auth"]

    def serve_args(self, name: str) -> list[str]:
        """Member `name`'s `coord serve` flags, for a process and an in-process member."""
        m = self.members[name]
        return [
            "--name",
            name,
            "--data-dir",
            str(m.data_dir),
            "--listen",
            m.listen,
            "--peer-listen",
            m.peer_listen,
            "--initial-cluster",
            self.initial_cluster,
            "--cluster-secret-file",
            str(self.secret_file),
            *(["--initial-cluster-state", "existing"] if name in self._joined else []),
            *self._tls_args(m),
            *(["--listen-metrics-urls", m.metrics_url] if m.metrics_url else []),
            *self.extra_args,
        ]

    def start(self, wait: bool = True, timeout: float = 20.0) -> LocalCluster:
        for name in self.members:
            self.start_member(name, wait=False)
        if wait:
            for name in self.members:
                self.wait_serving(name, timeout)
        return self

    def start_member(self, name: str, wait: bool = True, timeout: float = 20.0,
                     failpoints: str = "") -> None:
        """`failpoints`: the member's crash points armed (``COORD_FAILPOINTS``'s value,
        coord.server.failpoints), for this start only; processes only."""
        m = self.members[name]
        if m.running:
            raise ClusterError(f"{name} is already running")
        if self._loop is not None:
            if failpoints:
                raise ClusterError("failpoints arm a process: not with in_process=True")
            self._start_embedded(m, timeout)
            return
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop(FAILPOINTS_VAR, None)
        if failpoints:
            env[FAILPOINTS_VAR] = failpoints
        if self.echo is None:
            out: IO | int = open(m.log_path, "ab")  # noqa: SIM115 - owned by the child
            m.proc = subprocess.Popen(
                self.command(name), stdout=out, stderr=subprocess.STDOUT, env=env
            )
            out.close()
        else:
            m.proc = subprocess.Popen(
                self.command(name),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                text=True,
                bufsize=1,
            )
            m._pump = threading.Thread(target=self._pump_output, args=(m,), daemon=True)
            m._pump.start()
        m.paused = False
        if wait:
            self.wait_serving(name, timeout)

    def _start_embedded(self, m: MemberProcess, timeout: float) -> None:
        """The same member `command()` would run, its flags parsed and turned into a config
        as `coord serve` does (coord.serve_flags), in this process. Imported here so that
        process-only clusters never load the server."""
        from coord.serve_flags import member_config, parse_serve_args
        from coord.testing.embedded import EmbeddedMember

        assert self._loop is not None
        args = parse_serve_args(self.serve_args(m.name))
        m.embedded = EmbeddedMember(self._loop, member_config(args))
        m.embedded.start(timeout)

    def _pump_output(self, m: MemberProcess) -> None:
        assert m.proc is not None and m.proc.stdout is not None and self.echo is not None
        for line in m.proc.stdout:
            self.echo(m.name, line.rstrip("\n"))

    def wait_serving(self, name: str, timeout: float = 20.0) -> None:
        m = self.members[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not m.running:
                raise ClusterError(f"{name} exited with {m.proc.returncode}; see {m.log_path}")
            try:
                with AdminClient(m.listen, timeout=0.5, tls=self.client_tls or False) as c:
                    c.status()
                return
            except grpc.RpcError:
                time.sleep(0.05)
        raise ClusterError(f"{name} did not start serving within {timeout}s; see {m.log_path}")

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None:
            from coord.testing.embedded import stop_all

            stop_all([m.embedded for m in self.members.values() if m.embedded], 0, timeout)
        stop_processes([m.proc for m in self.members.values() if m.proc is not None], timeout)
        for m in self.members.values():
            if m.gate is not None:
                m.gate.stop()
        if self._tmp:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        # A start cut short (a member that never serves, Ctrl-C, SIGTERM) must not leave
        # the members already started running: `with` calls __exit__ only after this.
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def add_member(self, name: str, learner: bool = True, timeout: float = 20.0) -> None:
        """Add a member through the leader's Admin API, then start it: it joins the
        running cluster and catches up from the leader."""
        if name in self.members:
            raise ClusterError(f"{name} is already a member")
        client, peer = free_ports(2)
        m = MemberProcess(
            name,
            f"127.0.0.1:{client}",
            f"127.0.0.1:{peer}",
            self.root / name,
            self.root / f"{name}.log",
        )
        with self.client(self.wait_for_leader(timeout), timeout=timeout) as admin:
            admin.add_member(name, m.peer_listen, learner=learner)
        self.members[name] = m
        self._joined.add(name)
        self.start_member(name, wait=True, timeout=timeout)

    def rejoin_member(self, name: str, timeout: float = 30.0, wait: bool = True) -> float:
        """Membership churn on a member that exists: remove it through the leader, kill
        it, wipe its data, add it back as a learner (same name and addresses) and start
        it joining (`--initial-cluster-state existing`). `promote()` makes it a voter.
        Returns the monotonic time of its start, so a caller can time its catch-up
        (`wait=False`: return as soon as it is started, not once it serves)."""
        m = self.members[name]
        self._admin_on_leader(lambda a: a.remove_member(name), timeout)
        self.kill(name)
        shutil.rmtree(m.data_dir, ignore_errors=True)
        self._admin_on_leader(lambda a: a.add_member(name, m.peer_address, learner=True),
                              timeout)
        self._joined.add(name)
        started = time.monotonic()
        self.start_member(name, wait=wait, timeout=timeout)
        return started

    def promote(self, name: str, timeout: float = 30.0) -> None:
        """Make learner `name` a voter once it has caught up (the leader refuses before)."""
        m = self.members[name]
        self._admin_on_leader(lambda a: a.add_member(name, m.peer_address, learner=False),
                              timeout)

    def _admin_on_leader(self, call: Callable[[AdminClient], object], timeout: float) -> None:
        """`call` on the leader's Admin API, again on a new leader or a refusal (a learner
        not caught up, a change still in flight) until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.client(self.wait_for_leader(timeout), timeout=15) as admin:
                    call(admin)
                return
            except (grpc.RpcError, ClusterError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- faults -------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """kill -9: no chance to flush or say goodbye (in-process: every call in flight is
        cut off and the member stops at once)."""
        m = self.members[name]
        if m.embedded is not None:
            m.embedded.stop(grace=0)
        elif m.proc is not None:
            m.proc.kill()
            m.proc.wait()

    def pause(self, name: str) -> None:
        """SIGSTOP: the member freezes mid-step; its sockets stay open."""
        self._process(name).send_signal(signal.SIGSTOP)
        self.members[name].paused = True

    def resume(self, name: str) -> None:
        self._process(name).send_signal(signal.SIGCONT)
        self.members[name].paused = False

    def _process(self, name: str) -> subprocess.Popen:
        proc = self.members[name].proc
        if self._loop is not None or proc is None:
            raise ClusterError(
                f"{name} is not a process: pausing needs LocalCluster(in_process=False)"
            )
        return proc

    def cut_off(self, name: str) -> None:
        """Partition `name` off: no other member's message reaches it (its client port
        stays reachable). Needs `partitionable=True`."""
        gate = self.members[name].gate
        if gate is None:
            raise ClusterError("cut_off needs LocalCluster(partitionable=True)")
        gate.cut()

    def heal(self, name: str) -> None:
        gate = self.members[name].gate
        if gate is not None:
            gate.heal()

    def restart(self, name: str, timeout: float = 20.0, failpoints: str = "",
                wait: bool = True) -> None:
        """kill -9 and start again (`failpoints`: armed for the new start)."""
        self.kill(name)
        self.start_member(name, wait=wait, timeout=timeout, failpoints=failpoints)

    def restart_all(self, wait: bool = True, timeout: float = 20.0) -> float:
        """kill -9 of every member, then all started again together (a power cut): the
        monotonic time of the first start; with `wait`, returns once all serve."""
        for name in self.members:
            self.kill(name)
        started = time.monotonic()
        for name in self.members:
            self.start_member(name, wait=False)
        if wait:
            for name in self.members:
                self.wait_serving(name, timeout=timeout)
        return started

    # -- observation --------------------------------------------------------------------
    def client(self, name: str, timeout: float = 2.0) -> AdminClient:
        """An Admin client of member `name` (over TLS in a TLS cluster)."""
        return AdminClient(self.members[name].listen, timeout=timeout,
                           tls=self.client_tls or False)

    def status(self, name: str):
        with self.client(name) as c:
            return c.status()

    def statuses(self) -> dict[str, object]:
        out = {}
        for name, m in self.members.items():
            if m.running and not m.paused:
                try:
                    out[name] = self.status(name)
                except grpc.RpcError:
                    pass
        return out

    def wait_for_leader(self, timeout: float = 10.0, among: list[str] | None = None) -> str:
        """The name of a leader that a quorum of live members agrees on, once every
        member with a quorum serves writes again (read-write mode) and every member
        that answers and is not cut off knows it."""
        deadline = time.monotonic() + timeout
        names = among or list(self.members)
        while time.monotonic() < deadline:
            sts = {n: s for n, s in self.statuses().items() if n in names}
            leaders = {s.leader_name for s in sts.values() if s.leader_name and s.has_quorum}
            roles = [n for n, s in sts.items() if s.role == "leader" and s.has_quorum]
            serving = all(s.mode in ("", "read-write") for s in sts.values() if s.has_quorum)
            if len(leaders) == 1 and len(roles) == 1 and roles[0] in leaders and serving:
                reachable = [s for n, s in sts.items()
                             if (gate := self.members[n].gate) is None or gate.is_open]
                if all(s.leader_name == roles[0] for s in reachable):
                    return roles[0]
            time.sleep(0.05)
        raise ClusterError(f"no agreed leader within {timeout}s: {self.describe()}")

    def describe(self) -> str:
        parts = []
        for name, s in self.statuses().items():
            parts.append(
                f"{name}:{s.role}/t{s.term}/lead={s.leader_name or '-'}/q={s.has_quorum}"
                f"/{s.mode or '?'}"
            )
        return " ".join(parts) or "no member answering"


@contextmanager
def cluster(members: int = 3, timeout: float = 20.0, **kwargs) -> Iterator[LocalCluster]:
    """`with coord.testing.cluster(members=3) as c: ...` — a throwaway local cluster, handed
    over once it has a leader serving writes; its temp data is removed afterwards.
    kwargs go to LocalCluster (`in_process=True`, `tick_ms`, `partitionable`, ...)."""
    c = LocalCluster(members, **kwargs)
    try:
        c.start(timeout=timeout)
        c.wait_for_leader(timeout)
        yield c
    finally:
        c.stop()
