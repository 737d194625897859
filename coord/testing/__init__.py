"""Real coord clusters for tests, benchmarks, `coord dev` and other projects' test rigs.

`cluster()` / `LocalCluster` (in `local_cluster`) start members on free 127.0.0.1 ports,
as `coord serve` processes or in this process (`embedded`); `pytest_plugin` is the
`coord_cluster` fixture; `netfault` (TCP gates that partition members), `ports`,
`peer_etcd` (a real etcd beside coord) and `etcd_diff` (the differential test) are the
tools the project's own tests and benchmarks use.
"""

from coord.testing.local_cluster import ClusterError, LocalCluster, MemberProcess, cluster

__all__ = ["ClusterError", "LocalCluster", "MemberProcess", "cluster"]
