"""How a member is configured: `MemberConfig`, everything `Member` needs to start. The
command line that fills one (`coord serve`'s flags) is coord.serve_flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coord.server.etcd.watch import DEFAULT_PROGRESS_NOTIFY_S
from coord.server.node.driver import NodeOptions
from coord.server.node.members import MemberInfo
from coord.server.requests.request_limits import RequestLimits
from coord.server.requests.tokens import DEFAULT_TTL_S
from coord.server.upkeep.compaction import DEFAULT_MODE, DEFAULT_RETENTION, CompactionPolicy
from coord.server.upkeep.quota import DEFAULT_DISK_RESERVE_BYTES, DEFAULT_QUOTA_BYTES
from coord.tls.files import ServerTLS, is_loopback


@dataclass(slots=True)
class MemberConfig:
    name: str
    data_dir: Path
    listen: str
    peer_listen: str
    initial_cluster: list[MemberInfo]
    cluster_secret: bytes
    options: NodeOptions = field(default_factory=NodeOptions)
    join: bool = False
    cluster_token: str = "coord"
    read_only_mode: bool = True
    etcd_listen: str = ""  # a second address for the etcd API (it is on `listen` too)
    etcd_progress_notify_s: float = DEFAULT_PROGRESS_NOTIFY_S
    etcd_only: bool = False  # clients get the etcd v3 API only (no native or Admin API)
    quota_bytes: int = DEFAULT_QUOTA_BYTES  # 0: no space quota
    disk_reserve_bytes: int = DEFAULT_DISK_RESERVE_BYTES  # 0: free space not watched
    compaction: CompactionPolicy = field(
        default_factory=lambda: CompactionPolicy.parse(DEFAULT_MODE, DEFAULT_RETENTION))
    client_tls: ServerTLS | None = None  # TLS on `listen` and `etcd_listen`
    peer_tls: ServerTLS | None = None  # TLS on `peer_listen`, both ways
    limits: RequestLimits = field(default_factory=RequestLimits)  # on client requests
    auth_token_ttl_s: float = DEFAULT_TTL_S  # etcd's --auth-token-ttl: an idle token's life
    # etcd's --listen-metrics-urls: http://HOST:PORT for /metrics and the health checks
    listen_metrics_urls: list[str] = field(default_factory=list)


def plaintext_exposures(config: MemberConfig) -> list[str]:
    """One warning per address `config` serves beyond the loopback without TLS, naming
    the flags that fix it: anyone who reaches such a port can call it (and read and
    change what it carries)."""
    out = []
    client_fix = ("--cert-file/--key-file, and --trusted-ca-file with --client-cert-auth to"
                  " refuse clients without a certificate")
    ports = [("--listen", config.listen, config.client_tls, client_fix),
             ("--peer-listen", config.peer_listen, config.peer_tls,
              "--peer-cert-file/--peer-key-file/--peer-trusted-ca-file")]
    if config.etcd_listen:
        ports.insert(1, ("--etcd-listen", config.etcd_listen, config.client_tls, client_fix))
    for flag, address, tls, fix in ports:
        if tls is None and not is_loopback(address):
            out.append(f"{config.name}: {flag} {address} is reachable beyond this machine and"
                       f" is NOT encrypted or authenticated by TLS: give {fix}")
    return out
