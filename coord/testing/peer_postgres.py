"""A throwaway PostgreSQL server (Debian's `postgresql`) on a free 127.0.0.1 port: the
database the Spark writer's PostgreSQL sink and Spark's own JDBC writer are tested and
benchmarked against.

initdb and postgres refuse to run as root: as root they run as the `postgres` user,
started through util-linux's `setpriv` (`as_user`), in a temp dir that user owns. The
server is tuned for throwaway data (fsync off, as for any test database): the sinks'
durability is the server's, not under test here. Connect as the superuser `coord`
(trust authentication, loopback only).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from coord.testing.ports import free_port
from coord.testing.processes import stop_processes

__all__ = ["PostgresMissing", "PostgresServer", "find_binaries"]

START_TIMEOUT_S = 60.0
USER = "coord"  # the superuser initdb creates
RUN_AS = "postgres"  # the system user the server runs as when we are root


def as_user(user: str) -> list[str]:
    """The command prefix that runs a program as `user` (and its group, no others).

    Not Popen's user=/group=: with them CPython forks the whole test process (vfork is
    used only when no ids change), and a forked copy of a process running gRPC's threads
    may crash before it reaches exec, which looks like initdb dying of SIGSEGV with no
    output. `setpriv` changes the ids in a process of its own, then execs the program, so the
    program keeps the pid Popen returned."""
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]


class PostgresMissing(RuntimeError):
    """The server's binaries (or, as root, the postgres user) are not here."""


def find_binaries() -> Path:
    """The directory holding initdb and postgres: Debian's newest
    /usr/lib/postgresql/<major>/bin, else wherever PATH has initdb."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise PostgresMissing("PostgreSQL is not installed: `make database-servers` (run by "
                              "`make venv`) installs Debian's postgresql (as root)")
    return Path(initdb).parent


class PostgresServer:
    """One server with its data in a temp dir, started by `start()` (or `with`), stopped
    and removed by `stop()`. `url` is a libpq URL, `jdbc_url` the same for Spark's JDBC
    writer."""

    def __init__(self) -> None:
        self.bin = find_binaries()
        self._as: list[str] = []  # the prefix that runs a program as RUN_AS, when we are root
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(RUN_AS)
            except KeyError:
                raise PostgresMissing(f"running as root, and there is no {RUN_AS!r} user to "
                                      f"run PostgreSQL as (Debian's postgresql makes it)") from None
            if shutil.which("setpriv") is None:
                raise PostgresMissing("running as root, and util-linux's setpriv (which runs "
                                      f"PostgreSQL as {RUN_AS!r}) is not on PATH")
            self._as = as_user(RUN_AS)
        self.root = Path(tempfile.mkdtemp(prefix="peer-postgres-"))
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres?user={USER}"

    def _run(self, *args: str) -> None:
        proc = subprocess.run([*self._as, *args], capture_output=True, text=True,
                              cwd=self.root, timeout=START_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed ({proc.returncode}): "
                               f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")

    def start(self) -> PostgresServer:
        if self._as:
            shutil.chown(self.root, RUN_AS, RUN_AS)
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", USER, "-A", "trust",
                  "-E", "UTF8", "--no-sync", "--locale=C")
        self.port = free_port()
        log = open(self.root / "server.log", "w")  # noqa: SIM115 (handed to the server)
        self.proc = subprocess.Popen(
            [*self._as, str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port),
             "-h", "127.0.0.1", "-k", str(self.root), "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}): "
                                   f"{(self.root / 'server.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not accept connections within "
                                       f"{START_TIMEOUT_S:.0f} s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None:
            stop_processes([self.proc])
            self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
