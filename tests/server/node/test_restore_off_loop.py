"""A follower restores a leader's snapshot off its event loop: while the restore runs it
still answers Status and serializable reads, from the state it had (it used to answer
nothing until the restore was over: 21.5 s for a wiped follower at 1M keys).

A cluster in this process (so that the test can hold the restore open) that snapshots
every 50 entries is loaded past a snapshot, then a follower is wiped and rejoins, so the
leader sends it a snapshot. The test holds the decoding of that snapshot
(`CoordMachine.restored`) at a gate: a Status and a read sent once the decoding has begun
are answered while it provably has not ended, and only then is it let go."""

from __future__ import annotations

import threading

import grpc

from coord.client import Client
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.sm.machine import CoordMachine
from coord.testing import LocalCluster
from tests.cut_off import wait_until

KEYS = 200  # four times --snapshot-every: the leader's log starts past a snapshot
WAIT_S = 30.0  # catches a hang only: every wait is on what the members did


def _key(i: int) -> bytes:
    return b"keys/%09d" % i


def _status(endpoint: str) -> epb.StatusResponse:
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.MaintenanceStub(ch).Status(epb.StatusRequest(), timeout=WAIT_S)


def _read(endpoint: str, key: bytes) -> epb.RangeResponse:
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.KVStub(ch).Range(epb.RangeRequest(key=key, serializable=True),
                                     timeout=WAIT_S)


def test_a_follower_answers_status_and_reads_while_it_restores_a_snapshot(
        tmp_path, monkeypatch):
    begun, let_go, over = threading.Event(), threading.Event(), threading.Event()
    decode = CoordMachine.restored

    def held(self: CoordMachine, data: bytes) -> CoordMachine:
        begun.set()
        try:
            assert let_go.wait(WAIT_S), "the test never let the restore go"
        finally:
            over.set()
        return decode(self, data)

    monkeypatch.setattr(CoordMachine, "restored", held)
    with LocalCluster(3, data_dir=tmp_path / "cluster", in_process=True,
                      extra_args=["--snapshot-every", "50"]) as c:
        leader = c.wait_for_leader(20)
        with Client(c.endpoints, timeout=WAIT_S) as client:
            for i in range(KEYS):
                client.put(_key(i), b"v")
        loaded = _status(c.members[leader].listen).header.revision
        name = next(n for n in c.members if n != leader)
        m = c.members[name]
        try:
            c.rejoin_member(name, timeout=WAIT_S, wait=False)
            assert begun.wait(WAIT_S), "the rejoined member was sent no snapshot"
            st, rng = _status(m.listen), _read(m.listen, _key(0))
            assert not over.is_set(), "answered only once the restore was over"
        finally:
            let_go.set()
        # answered from the state it had (a wiped member's: empty), not a half-built one
        assert st.header.revision < loaded and not rng.kvs
        wait_until("the rejoined member catches up",
                   lambda: _status(m.listen).header.revision >= loaded, WAIT_S)
        assert len(_read(m.listen, _key(KEYS - 1)).kvs) == 1
