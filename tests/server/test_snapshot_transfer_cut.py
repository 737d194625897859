"""A member far behind, cut off while the leader is sending it a snapshot, then healed:
it must finish catching up and hold every acknowledged put. The leader is armed with
`snapshot-send=sleep(MS)`, which holds it still just after it wrote part of a snapshot,
so the cut lands inside the transfer rather than when a sleep happens to end: the
state is made larger than one snapshot piece (CHUNK_BYTES), so the leader stops after
the first piece and the member cannot hold the whole snapshot when it is cut off."""

from __future__ import annotations

import os
import re
import time

import pytest

from coord.client import Client, UnavailableError
from coord.server.transport.snapshot_pieces import CHUNK_BYTES
from coord.testing import LocalCluster
from tests.cut_off import wait_until
from tests.server import crash_rig as rig

# slow (make test-slow): tests/server/transport/test_snapshot_resume.py cuts a transfer in
# pieces over a real connection in the suite
pytestmark = [pytest.mark.cluster, pytest.mark.slow]

HOLD_MS = 2000
SENDING = "failpoint snapshot-send: sleep"
RESTORED = "restored a snapshot of"


def wait_for_line(c: LocalCluster, name: str, line: str, count: int,
                  timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while rig.member_log(c, name).count(line) < count:
        assert time.monotonic() < deadline, f"{name} never logged {line!r} {count} times"
        time.sleep(0.02)


def put(client: Client, key: bytes, value: bytes) -> bool:
    try:
        client.put(key, value)
    except UnavailableError:  # NO_QUORUM or no leader: not acknowledged
        return False
    return True


def test_a_member_cut_off_during_a_snapshot_transfer_catches_up_once_healed(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=rig.SNAPSHOT_ARGS,
                      partitionable=True) as c, rig.Writer(c) as w:
        w.wait_for(20)
        leader = rig.a_follower(c)
        c.restart(leader, failpoints=f"snapshot-send=sleep({HOLD_MS})")
        rig.make_leader(c, leader)
        lagging = next(n for n in c.members if n != leader and c.members[n].running)
        c.kill(lagging)
        big = {b"big/%d" % i: os.urandom(1_000_000) for i in range(CHUNK_BYTES // 1_000_000 + 2)}
        with Client(c.endpoints, timeout=10.0) as client:
            for key, value in big.items():
                # two members of three on a loaded machine may miss a quorum check: the
                # same put again (bounded) until one is acknowledged
                wait_until(f"{key!r} acknowledged", lambda k=key, v=value: put(client, k, v),
                           60)
        w.wait_for(100)  # past several snapshots: the lagging member needs one
        assert SENDING not in rig.member_log(c, leader)
        c.start_member(lagging, wait=False)
        wait_for_line(c, leader, SENDING, 1)  # the leader holds, a snapshot half sent
        c.cut_off(lagging)
        assert RESTORED not in rig.member_log(c, lagging)  # the transfer was not done
        w.wait_for(30)  # the cluster goes on without it
        c.heal(lagging)
        w.wait_for(10)
        w.stop()
        rig.check_nothing_lost(c, w.acked, c.members, timeout=90)
        rig.check_nothing_lost(c, big, c.members, prefix=b"big/", timeout=90)
        sizes = [int(n) for n in re.findall(RESTORED + r" (\d+) bytes", rig.member_log(c, lagging))]
        assert sizes and max(sizes) > CHUNK_BYTES, sizes  # it was sent in pieces
        assert "failpoints armed (COORD_FAILPOINTS): snapshot-send" in rig.member_log(c, leader)
