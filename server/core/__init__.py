"""The request path both APIs share: `coordinator` (writes through Raft, linearizable and
read-only reads), `forward` (to the leader), `events` (watch fan-out), `session_tracker`
(leader-side expiry), `liveness`, `mode` (read-only mode)."""
