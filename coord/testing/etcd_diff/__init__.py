"""The differential test against real etcd 3.4: `generate` seeded operation sequences,
`play` them against one etcd-API server, `run` both systems and compare (`python -m
coord.testing.etcd_diff`)."""
