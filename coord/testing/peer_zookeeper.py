"""Real ZooKeeper (Debian's `zookeeper`, 3.8, and a JDK) on free 127.0.0.1 ports: the peer
`coord bench readonly` measures coord's read-only mode against."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from coord.testing.local_cluster import ClusterError
from coord.testing.ports import free_ports
from coord.testing.processes import stop_processes

ZK_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
ZK_JAVA_DIR = Path("/usr/share/java")


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

    def wait_ready(self, timeout: float = 60.0) -> ZkServer:
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
