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


def test_as_root_the_server_is_postgres_itself_running_as_the_postgres_user():
    """The pid Popen returned is the server's (setpriv execs it; stopping that pid stops
    the server), and it runs as the postgres user, not as root."""
    import os
    import pwd

    if os.geteuid() != 0:
        pytest.skip("only root hands the server to another user")
    with PostgresServer() as server:
        pid = server.proc.pid
        status = dict(line.split(":", 1) for line in
                      open(f"/proc/{pid}/status").read().splitlines())
        assert status["Name"].strip() == "postgres"
        uid = pwd.getpwnam(peer_postgres.RUN_AS).pw_uid
        assert [int(u) for u in status["Uid"].split()] == [uid] * 4


def test_as_root_without_setpriv_it_says_what_is_missing(monkeypatch):
    import os

    if os.geteuid() != 0:
        pytest.skip("only root hands the server to another user")
    real_which = peer_postgres.shutil.which
    monkeypatch.setattr(peer_postgres.shutil, "which",
                        lambda name: None if name == "setpriv" else real_which(name))
    with pytest.raises(PostgresMissing, match="setpriv"):
        PostgresServer()
