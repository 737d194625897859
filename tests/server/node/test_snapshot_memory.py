"""A snapshot crosses from a leader to a wiped follower without ever being one buffer in
memory on either side: the leader's Raft log and the follower's Ready carry a reference
to the snapshot's file, the leader reads it a piece at a time as it sends, and the
follower spools the pieces to its snapshot dir and decodes from there.

Counted, not timed: a cluster in this process holds a state whose compressed snapshot is
at least SNAPSHOT_MIB MiB (random values do not compress), a follower is wiped and
rejoins, and when its restore starts (`CoordMachine.restored`, patched to look) the test
lists every block of memory Python allocated since tracing began that is still alive
(tracemalloc: the whole process, so all three members). No block may come near the
snapshot's size: before the snapshot stayed in a file, every member's log held it as
one bytes object and the follower received it as another."""

from __future__ import annotations

import os
import tracemalloc

import grpc

from coord.client import Client
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.history import datadir
from coord.server.transport import snapshot_pieces
from coord.sm.machine import CoordMachine
from coord.testing import LocalCluster
from tests.cut_off import wait_until

SNAPSHOT_EVERY = 50
KEYS = 60
VALUE_BYTES = 64 * 1024  # random: the snapshot is as big as the values, or bigger
SNAPSHOT_MIB = (SNAPSHOT_EVERY - 4) * VALUE_BYTES >> 20
"""At least: the members snapshot at entry SNAPSHOT_EVERY (after the three members' conf
changes and a leader's empty entry: 46 puts), and not again before the log holds four
times that (`SNAPSHOT_EXPANSION`), so that is the snapshot the follower gets."""
PIECE_BYTES = 512 * 1024  # the transport's pieces, for this test (CHUNK_BYTES)
BIGGEST_BLOCK = 2 << 20
"""Under the snapshot; over a piece, and the 1 MiB blocks a snapshot file is read in
(`snapshot_file.READ_BLOCK`) and decompressed in (`snapshot_zlib.DECOMPRESS_PIECE`)."""
WAIT_S = 30.0  # catches a hang only: every wait is on what the members did


def _revision(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.MaintenanceStub(ch).Status(epb.StatusRequest(),
                                               timeout=WAIT_S).header.revision


def test_no_member_holds_a_snapshot_whole_while_it_is_sent_and_restored(
        tmp_path, monkeypatch):
    biggest: list[int] = []
    decode = CoordMachine.restored

    def looked_at(self: CoordMachine, data: object) -> CoordMachine:
        traces = tracemalloc.take_snapshot().traces
        biggest.append(max(t.size for t in traces))
        return decode(self, data)

    monkeypatch.setattr(CoordMachine, "restored", looked_at)
    monkeypatch.setattr(snapshot_pieces, "CHUNK_BYTES", PIECE_BYTES)
    tracemalloc.start(1)
    try:
        with LocalCluster(3, data_dir=tmp_path / "cluster", in_process=True,
                          extra_args=["--snapshot-every", str(SNAPSHOT_EVERY)]) as c:
            leader = c.wait_for_leader(20)
            with Client(c.endpoints, timeout=WAIT_S) as client:
                for i in range(KEYS):
                    client.put(b"keys/%06d" % i, os.urandom(VALUE_BYTES))
            loaded = _revision(c.members[leader].listen)
            # the leader takes its snapshot in the background: until it has stored it,
            # a rejoining member would catch up from the log, restoring nothing
            wait_until("the leader stores its snapshot",
                       lambda: datadir.info(c.members[leader].data_dir).snapshot_index > 0,
                       WAIT_S)
            name = next(n for n in c.members if n != leader)
            biggest.clear()  # the restarts' own restores (nothing yet) do not count
            c.rejoin_member(name, timeout=WAIT_S, wait=False)
            wait_until("the rejoined member catches up",
                       lambda: _revision(c.members[name].listen) >= loaded, WAIT_S)
    finally:
        tracemalloc.stop()
    assert biggest, "the rejoined member restored no snapshot"
    assert max(biggest) < BIGGEST_BLOCK, (
        f"a block of {max(biggest) >> 20} MiB was alive as a snapshot of at least "
        f"{SNAPSHOT_MIB} MiB was restored")
