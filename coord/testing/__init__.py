"""Real coord clusters for tests, benchmarks, `coord dev` and other projects' test rigs.

`cluster()` / `LocalCluster` (in `local_cluster`) start members on free 127.0.0.1 ports,
as `coord serve` processes or in this process (`embedded`); `pytest_plugin` is the
`coord_cluster` fixture; `netfault` (TCP gates that partition members), `ports`,
`peer_etcd` and `peer_zookeeper` (a real etcd, a real ZooKeeper, beside coord) and
`etcd_diff` (the differential test) are the tools the project's own tests and benchmarks use.

The names below load `local_cluster` (and with it grpc and the client library) on first
use, not on import: pytest imports the plugin in this package at every start-up of every
project that has coord installed, and `coord serve --etcd-only` imports `ports`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coord.testing.local_cluster import ClusterError, LocalCluster, MemberProcess, cluster

__all__ = ["ClusterError", "LocalCluster", "MemberProcess", "cluster"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("coord.testing.local_cluster"), name)
    raise AttributeError(f"module 'coord.testing' has no attribute {name!r}")
