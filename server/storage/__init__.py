"""Durable storage of one member: its Raft log in SQLite (`log_format`), written by
`log_store` and read, read-only, by `log_reader` (tools and the live export)."""
