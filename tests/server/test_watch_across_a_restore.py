"""A watch on a member that restores a snapshot misses nothing the snapshot covered.

A follower far enough behind is sent the leader's snapshot instead of the entries; it
never applies those entries one by one, so no event came for their revisions. Watches on
that member (the etcd API's, the native one and the native owner watch) must still
deliver every change since their start, read from the restored machine's history, as
etcd's watchable store resyncs its watchers after a restore. The chaos harness's
`watch-reliable` check found it: a watch restarted on such a member missed the
revisions the snapshot covered.

Three `coord serve` processes snapshotting every 50 entries; the watches open on a
follower, the follower is cut off from its peers (its client port still reachable) while
the leader writes and takes a snapshot (its log compacted past the follower), then
healed: its log says it restored a snapshot, and each of its watches delivers what the
same watch on the leader delivered, in order, once."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import grpc

from coord.client import Client
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing import LocalCluster
from tests.cut_off import wait_until

WRITES = 400  # eight times --snapshot-every, so the leader's log moves past the follower
OWNS = (WRITES - 1) // 10  # every tenth write an own of two resources
WAIT_S = 60.0  # catches a hang only: every wait is on what the members did


class _EtcdWatch:
    """An etcd-API watch of `prefix` from `start` on one member, its revisions collected
    by a thread until `close`."""

    def __init__(self, endpoint: str, prefix: bytes, start: int) -> None:
        self.revisions: list[int] = []
        self._done = threading.Event()
        self._channel = grpc.insecure_channel(endpoint)
        create = epb.WatchCreateRequest(key=prefix, range_end=prefix[:-1] + b"0",
                                        start_revision=start)
        self._call = erpc.WatchStub(self._channel).Watch(self._requests(create))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _requests(self, create: epb.WatchCreateRequest) -> Iterator[epb.WatchRequest]:
        yield epb.WatchRequest(create_request=create)
        self._done.wait(WAIT_S * 4)

    def _read(self) -> None:
        try:
            for resp in self._call:
                self.revisions += [e.kv.mod_revision for e in resp.events]
        except grpc.RpcError:
            pass  # closed by the test

    def close(self) -> None:
        self._done.set()
        self._call.cancel()
        self._channel.close()
        self._thread.join(WAIT_S)


def test_watches_on_a_follower_deliver_what_its_restored_snapshot_covered(tmp_path):
    with LocalCluster(3, data_dir=tmp_path / "cluster", partitionable=True,
                      extra_args=["--snapshot-every", "50"]) as c:
        leader = c.wait_for_leader(20)
        name = next(n for n in c.members if n != leader)
        follower = c.members[name]
        with Client([c.members[leader].listen], timeout=WAIT_S) as client, \
                Client([follower.listen], timeout=WAIT_S, read_only_ok=True) as on_follower:
            first = client.put("w/0", b"v").header.revision
            wait_until("the follower applies the first write", lambda: (
                on_follower.get("w/0", serializable=True) is not None), WAIT_S)
            etcd_watch = _EtcdWatch(follower.listen, b"w/", first)
            on_leader = _EtcdWatch(c.members[leader].listen, b"w/", first)  # never restores
            native = on_follower.watch(prefix="w/", from_revision=first)
            natives: queue.Queue[int] = queue.Queue()
            threading.Thread(target=lambda: [natives.put(e.revision) for e in native
                                             if e.type != "MODE"], daemon=True).start()
            owners = {n: (c_.watch_owners("g", from_revision=first), queue.Queue())
                      for n, c_ in (("follower", on_follower), ("leader", client))}
            for stream, q in owners.values():
                threading.Thread(target=lambda st=stream, q=q: [
                    q.put((ch.owner.revision, ch.owner.resource, ch.kind)) for ch in st
                    if not ch.snapshot and not ch.mode], daemon=True).start()
            session = client.session(ttl=WAIT_S)
            leader_log = c.members[leader].log_path
            try:
                snapshots = leader_log.read_text().count("took a snapshot")
                c.cut_off(name)
                for i in range(1, WRITES):
                    if i % 10 == 0:
                        session.own("g", [f"r{i}", f"s{i}"])  # two changes, one revision
                    elif i % 3:
                        client.put(f"w/{i % 40}", b"v%d" % i)
                    else:
                        client.delete(f"w/{(i - 1) % 40}")
                wait_until("the leader compacts its log past the cut-off follower", lambda: (
                    leader_log.read_text().count("took a snapshot") > snapshots), WAIT_S)
                c.heal(name)
                last = client.put("w/end", b"v").header.revision
                wait_until("the etcd watches reach the last write", lambda: (
                    etcd_watch.revisions[-1:] == on_leader.revisions[-1:] == [last]), WAIT_S)
                got_native: list[int] = []
                wait_until("the native watch reaches the last write", lambda: (
                    got_native.extend(_drain(natives)) or got_native[-1:] == [last]), WAIT_S)
                got_owners: dict[str, list] = {n: [] for n in owners}
                wait_until("both owner watches reach the last grant", lambda: all(
                    got_owners[n].extend(_drain(q)) or got_owners[n][-1:][:1] and
                    got_owners[n][-1][1] == f"s{OWNS * 10}"
                    for n, (_, q) in owners.items()), WAIT_S)
            finally:
                session.close()
                for stream, _ in owners.values():
                    stream.cancel()
                native.cancel()
                etcd_watch.close()
                on_leader.close()
        assert "restored a snapshot" in follower.log_path.read_text(), (
            "the follower caught up from entries: nothing here needed a restore")
        want = on_leader.revisions
        assert len(want) > WRITES // 2 and want == sorted(set(want))
        assert etcd_watch.revisions == want
        assert got_native == want
        assert len(got_owners["leader"]) == 2 * OWNS
        assert got_owners["follower"] == got_owners["leader"]


def _drain(q: queue.Queue) -> list:
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out
