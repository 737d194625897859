"""A full disk under one member, for real: its data dir on a small tmpfs this test
mounts (root only; skipped where mounting is not allowed), filled by a file beside the
store. Near full (under --disk-reserve-bytes free) the member raises NOSPACE: writes
are refused cluster-wide while it serves on, and resume once the file is gone. Full
(ENOSPC, no reserve) its log write fails and it stops, naming the failure; restarted
with space it comes back, nothing acknowledged lost."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from coord.client import Client
from coord.client.errors import NoSpaceError
from coord.server.upkeep.quota import free_bytes
from coord.testing import LocalCluster
from tests.cut_off import wait_until
from tests.server import crash_rig as rig

pytestmark = pytest.mark.cluster

MIB = 1 << 20
RESERVE = 8 * MIB


@contextmanager
def tmpfs(path: Path, size: int) -> Iterator[None]:
    """A tmpfs of `size` bytes mounted on `path`, always unmounted at the end."""
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                         capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {run.stderr.strip()}")
    try:
        yield
    finally:
        if subprocess.run(["umount", str(path)], timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], timeout=30, check=True)


def fill(filler: Path, leave: int) -> None:
    """Grow `filler` until at most `leave` bytes are free beside it (0: until ENOSPC)."""
    chunk = b"\0" * MIB
    with open(filler, "ab", buffering=0) as f:
        for _ in range(10_000):  # bounded: the tmpfs is a few dozen MiB
            room = free_bytes(filler.parent) - leave
            if room <= 0 and leave:
                return
            try:
                f.write(chunk[:max(4096, min(len(chunk), room))])
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    return
                raise
    raise AssertionError(f"{filler} never filled the disk")


def writes_refused(c: LocalCluster) -> bool:
    with Client(c.endpoints, timeout=2.0) as client:
        try:
            client.put(b"probe", b"x")
        except NoSpaceError:
            return True
    return False


def test_a_near_full_disk_raises_nospace_and_a_full_one_stops_the_member(tmp_path):
    root = tmp_path / "c"
    data = root / "n1"
    with tmpfs(data, 40 * MIB):
        c = LocalCluster(3, data_dir=root, extra_args=["--disk-reserve-bytes", str(RESERVE)])
        with c, rig.Writer(c) as w:
            w.wait_for(30)
            filler = data / "filler"
            fill(filler, leave=RESERVE // 2)
            wait_until("writes refused with NO_SPACE", lambda: writes_refused(c), 20)
            assert c.members["n1"].running
            assert "short of disk" in rig.member_log(c, "n1")
            filler.unlink()
            wait_until("writes to resume", lambda: not writes_refused(c), 20)
            w.wait_for(20)

            c.extra_args = ["--disk-reserve-bytes", "0"]  # nothing to warn it this time
            c.restart("n1")
            fill(filler, leave=0)
            assert rig.wait_exited(c, "n1", timeout=60) == 1
            log = rig.member_log(c, "n1").rpartition("serving clients")[2]
            assert "stopped serving, it cannot go on safely" in log and "full" in log, log
            filler.unlink()
            c.extra_args = ["--disk-reserve-bytes", str(RESERVE)]
            c.start_member("n1")
            w.wait_for(20)
            w.stop()
            rig.check_nothing_lost(c, w.acked, c.members)
