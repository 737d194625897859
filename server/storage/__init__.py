"""Durable storage of one member: the Raft log, hard state and snapshots in SQLite (`log_store`)."""
