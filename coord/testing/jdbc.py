"""Debian's JDBC drivers (`make database-servers`: libpostgresql-jdbc-java,
libxerial-sqlite-jdbc-java), for Spark's own `df.write.jdbc` — the baseline the fenced
writer is tested and benchmarked against on the same databases. Spark loads them from
`spark.jars` when its session starts, so a session that may write over JDBC names them
up front."""

from __future__ import annotations

from pathlib import Path

__all__ = ["JARS", "jars_conf", "missing_jars", "sqlite_jdbc_url"]

JARS = {"postgres": "/usr/share/java/postgresql.jar",
        "sqlite": "/usr/share/java/sqlite-jdbc.jar"}
BUSY_TIMEOUT_MS = 60_000  # concurrent tasks wait for SQLite's write lock, as the sink does


def missing_jars() -> list[str]:
    """The drivers not installed (as their Debian packages' jar paths)."""
    return [jar for jar in JARS.values() if not Path(jar).exists()]


def jars_conf() -> dict[str, str]:
    """`spark.jars` naming the installed drivers (nothing if none is)."""
    jars = [jar for jar in JARS.values() if Path(jar).exists()]
    return {"spark.jars": ",".join(jars)} if jars else {}


def sqlite_jdbc_url(path: str) -> str:
    """The xerial driver's URL for a database file, waiting for a busy writer as long
    as coord's SQLite sink does instead of failing the task at once."""
    return f"jdbc:sqlite:{path}?busy_timeout={BUSY_TIMEOUT_MS}"
