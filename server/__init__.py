"""coord.server: the member process (transport, Raft messages as protobuf, services)."""
