"""A follower restores a leader's snapshot off its event loop: while the restore runs it
still answers Status and serializable reads, from the state it had (it used to answer
nothing until the restore was over: 21.5 s for a wiped follower at 1M keys).

Real processes: a cluster that snapshots every 50 entries is loaded with enough keys for
the restore to take a while (~1 s), then a follower is wiped and rejoins, so the leader
sends it a snapshot. The proof is an ordering read in the member's own log: a Status sent
after the member logged that the restore started, answered before it logged that the
restore finished."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc

from coord.bench.scale_common import key, load
from coord.bench.scale_restart import caught_up
from coord.bench.startup import PROBE_OPTIONS
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster

KEYS = 40_000
DEADLINE_S = 60.0  # for the restore to start and end: it takes ~1-3 s here


async def _load(endpoint: str) -> None:
    errors = [0]
    async with grpc.aio.insecure_channel(endpoint) as ch:
        await load(erpc.KVStub(ch), 0, KEYS, 4, errors)


def _log_since(path: Path, offset: int) -> str:
    with path.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _revision(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as ch:
        return erpc.MaintenanceStub(ch).Status(epb.StatusRequest(), timeout=5).header.revision


def test_a_follower_answers_status_and_reads_while_it_restores_a_snapshot(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "cluster",
                      extra_args=["--snapshot-every", "50"]) as c:
        leader = c.wait_for_leader(20)
        asyncio.run(_load(c.members[leader].listen))
        leader = c.wait_for_leader(20)
        loaded = _revision(c.members[leader].listen)
        name = next(n for n in c.members if n != leader)
        m = c.members[name]
        offset = m.log_path.stat().st_size  # only what the rejoined process logs counts
        started_line = f"{name}: restoring a snapshot"
        ended_line = f"{name}: restored a snapshot"
        t0 = c.rejoin_member(name, timeout=30, wait=False)
        during: list[tuple[int, int]] = []  # (revision, keys read) answered mid-restore
        deadline = time.monotonic() + DEADLINE_S
        with grpc.insecure_channel(m.listen, options=PROBE_OPTIONS) as ch:
            status, kv = erpc.MaintenanceStub(ch), erpc.KVStub(ch)
            while True:
                assert time.monotonic() < deadline, f"no restore seen; see {m.log_path}"
                log = _log_since(m.log_path, offset)
                if ended_line in log:
                    break
                started = started_line in log  # before the requests are sent
                try:
                    st = status.Status(epb.StatusRequest(), timeout=0.5)
                    rng = kv.Range(epb.RangeRequest(key=key(0), serializable=True),
                                   timeout=0.5)
                except grpc.RpcError:
                    time.sleep(0.01)  # not serving yet (or stalled): ask again
                    continue
                if started and ended_line not in _log_since(m.log_path, offset):
                    during.append((st.header.revision, len(rng.kvs)))
        assert during, "the member answered nothing while it restored the snapshot"
        # answered from the state it had (a wiped member's: empty), not a half-built one
        assert all(rev < loaded and n == 0 for rev, n in during), during
        caught_up(m.listen, loaded, t0, 30)
        with grpc.insecure_channel(m.listen) as ch:
            rng = erpc.KVStub(ch).Range(
                epb.RangeRequest(key=key(KEYS - 1), serializable=True), timeout=5)
        assert len(rng.kvs) == 1
