"""What talks to the other members on the request path's behalf: a follower forwards
commands, keepalives and TTL questions to the leader (`link`, batched by
`session_asks`), and the leader serves them (`service`). The Raft messages themselves
travel on the peer transport (server/transport)."""
