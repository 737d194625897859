"""The request path both client APIs share: `coordinator` (writes through Raft,
linearizable and read-only reads), `events` (watch fan-out), `table_watch` (what a table
stream learns from each applied batch), `liveness` (keepalives and TTL questions, here or
at the leader), `local_sessions` (sessions a read-only member opens for its clients).
What it asks of other members goes through server/forward; the member's own jobs, and
the mode it serves in, are server/upkeep."""
