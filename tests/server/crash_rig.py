"""What the crash-point and disk-fault tests share: a writer that records every write the
cluster acknowledged, a member killed by an armed failpoint and waited for, and the check
that after it all nothing acknowledged is missing — on the cluster and on each member
that came back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from coord.client import Client, UnavailableError
from coord.testing import LocalCluster
from tests.cut_off import wait_until

SNAPSHOT_ARGS = ["--snapshot-every", "20", "--snapshot-bytes", "4096"]
"""Members that snapshot (and compact their log) every few dozen puts, so the snapshot
points are passed within a second of traffic, and a restarted member's log replay holds
no bootstrap membership entries."""

MAX_WRITES = 20_000
"""A writer's bound: it never runs more puts than this, whatever the test does."""


class Writer:
    """Puts of fresh keys under `prefix`, one at a time, from a thread, through any
    member; `acked` holds each put the cluster answered, and nothing else."""

    def __init__(self, cluster: LocalCluster, prefix: bytes = b"crash/") -> None:
        self.cluster, self.prefix = cluster, prefix
        self.acked: dict[bytes, bytes] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the writer did not stop"

    def wait_for(self, more: int, timeout: float = 20.0) -> None:
        """Until `more` puts beyond those acknowledged now are acknowledged."""
        goal = len(self.acked) + more
        wait_until(f"{goal} puts acknowledged", lambda: len(self.acked) >= goal, timeout)

    def _run(self) -> None:
        with Client(self.cluster.endpoints, timeout=1.0) as client:
            for i in range(MAX_WRITES):
                if self._stop.is_set():
                    return
                key, value = self.prefix + b"%06d" % i, b"v%d" % i
                try:
                    client.put(key, value)
                except Exception:  # noqa: BLE001 - not acknowledged: may or may not be there
                    self.failed += 1
                    time.sleep(0.02)
                    continue
                self.acked[key] = value


def a_follower(cluster: LocalCluster) -> str:
    leader = cluster.wait_for_leader()
    return next(n for n in cluster.members if n != leader)


def make_leader(cluster: LocalCluster, name: str, timeout: float = 20.0) -> None:
    """Move leadership to `name` (again after a refusal, until `timeout`)."""
    def leads() -> bool:
        try:
            with cluster.client(cluster.wait_for_leader()) as admin:
                admin.transfer_leader(name, timeout=3)
            return cluster.wait_for_leader() == name
        except Exception:  # noqa: BLE001 - not caught up yet, or an election: again
            return False

    wait_until(f"leadership to move to {name}", leads, timeout)


def wait_exited(cluster: LocalCluster, name: str, timeout: float = 20.0) -> int:
    """Wait for member `name`'s process to end (a failpoint's doing); its exit code."""
    proc = cluster.members[name].proc
    assert proc is not None
    wait_until(f"{name} to exit", lambda: proc.poll() is not None, timeout)
    return proc.returncode


def member_log(cluster: LocalCluster, name: str) -> str:
    return cluster.members[name].log_path.read_text(errors="replace")


def keys_on(cluster: LocalCluster, name: str, prefix: bytes) -> dict[bytes, bytes]:
    """Member `name`'s own copy of the keys under `prefix` (a serializable read: no
    other member is asked)."""
    with Client([cluster.members[name].listen], timeout=2.0) as c:
        return {kv.key: kv.value for kv in c.range(prefix=prefix, serializable=True).kvs}


def missing(acked: dict[bytes, bytes], have: dict[bytes, bytes]) -> list[bytes]:
    return sorted(k for k, v in acked.items() if have.get(k) != v)


def check_nothing_lost(cluster: LocalCluster, acked: dict[bytes, bytes],
                       members: Iterable[str], prefix: bytes = b"crash/",
                       timeout: float = 20.0) -> None:
    """A linearizable read of the cluster holds every acknowledged put, and each of
    `members` (the one that crashed among them) catches up to hold them all too;
    AssertionError naming what is missing where, otherwise."""
    have: dict[bytes, bytes] = {}

    def read() -> bool:
        # A member held by a failpoint (a leader asleep sending a snapshot piece) can leave
        # the others without a quorum for a while: not an answer, so asked again.
        try:
            with Client(cluster.endpoints, timeout=2.0) as c:
                have.update((kv.key, kv.value) for kv in c.range(prefix=prefix).kvs)
        except UnavailableError:
            return False
        return True

    wait_until("a linearizable read of the cluster", read, timeout)
    lost = missing(acked, have)
    assert not lost, f"{len(lost)} acknowledged puts lost, first {lost[:5]}"
    for name in members:
        deadline, lost, why = time.monotonic() + timeout, list(acked), ""
        while lost and time.monotonic() < deadline:
            try:
                lost = missing(acked, keys_on(cluster, name, prefix))
            except Exception as e:  # noqa: BLE001 - still starting: asked again
                why = f" (last error: {e})"
            if lost:
                time.sleep(0.05)
        assert not lost, (f"{name} lacks {len(lost)} acknowledged puts after {timeout}s, "
                          f"first {lost[:5]}{why}")
