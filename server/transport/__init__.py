"""How messages travel: authenticated gRPC peer streams (`peer`) carrying Raft messages
(`raft_proto`), the gRPC servers' options (`grpc_options`), and the serving loop of a
pipelined stream (`tagged_stream`: the client API's and the forwarding stream)."""
