"""coord's committed history as rows: what every applied command did, for export and audit.

`schema` (the versioned row schema), `rows` (a command, its result and its effects as
rows), `replay` (entries through the real state machine, from a snapshot), `datadir` (a
member's log replayed page by page, stopped or live), `synth` (a large realistic history
from a seed, through the same replay), `sink` (Parquet partitioned by date and kind, or
JSONL, written idempotently with a manifest), `compact` (small runs into big ones),
`live_export` (a cluster's pages through `coord.client` into runs). Client-side: it
reads coord only through `coord.client`, a member's files (through the server's
read-only log reader, the format's one owner) and the state machine's public code;
nothing else of the server.
"""
