"""How a member is configured: `MemberConfig`, everything `Member` needs to start. The
command line that fills one (`coord serve`'s flags) is coord.serve_flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coord.server.etcd.watch import DEFAULT_PROGRESS_NOTIFY_S
from coord.server.node.driver import NodeOptions
from coord.server.node.members import MemberInfo
from coord.server.upkeep.compaction import DEFAULT_MODE, DEFAULT_RETENTION, CompactionPolicy
from coord.server.upkeep.quota import DEFAULT_QUOTA_BYTES


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
    compaction: CompactionPolicy = field(
        default_factory=lambda: CompactionPolicy.parse(DEFAULT_MODE, DEFAULT_RETENTION))
