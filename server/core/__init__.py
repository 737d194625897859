"""The request path both APIs share: `coordinator` (writes through Raft, linearizable and
read-only reads), `events` (watch fan-out), `session_tracker` (leader-side expiry),
`liveness` (keepalives and TTL questions, here or at the leader), `mode` (read-only
mode). What it asks of other members goes through server/forward."""
