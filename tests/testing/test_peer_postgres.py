"""coord.testing.peer_postgres: a real server starts, serves and leaves nothing behind;
without PostgreSQL's binaries it says what to install instead of failing obscurely."""

from __future__ import annotations

import pytest

from coord.testing import peer_postgres
from coord.testing.peer_postgres import PostgresMissing, PostgresServer


def test_without_binaries_it_says_what_to_install(monkeypatch):
    monkeypatch.setattr(peer_postgres.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(peer_postgres.shutil, "which", lambda name: None)
    with pytest.raises(PostgresMissing, match="make database-servers"):
        PostgresServer()


def test_a_server_serves_and_is_removed(postgres):  # the run's (tests/conftest.py)
    import psycopg

    with psycopg.connect(postgres.url) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("coord",)
    server = PostgresServer().start()
    root = server.root
    server.stop()
    assert not root.exists() and server.proc is None
