"""Member-to-member transport: authenticated gRPC peer streams (`peer`) carrying Raft
messages (`codec`)."""
