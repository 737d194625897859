"""The etcd v3 gRPC API (etcdserverpb) served on the same request path: KV, Watch, Lease,
Cluster, Maintenance."""
