"""The etcd v3 gRPC API (etcdserverpb) served on the same core: KV, Watch, Lease, Cluster,
Maintenance."""
