"""coord's etcd v3 API over the wire (this project's generated stubs of etcd's
messages) on real `coord serve` processes: etcd's exact errors for bad input, which
changes nothing; what etcdctl cannot express (LEASE compares, nested txns, count_only,
revision filters, watch filters/cancel/progress/duplicate ids); leases as sessions,
across a leader failover; native and etcd watches seeing the same revisions."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest

from coord.client import Client
from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]
T = 10.0  # every call's deadline


class Etcd:
    def __init__(self, endpoint: str) -> None:
        self.channel = grpc.insecure_channel(endpoint)
        self.kv = stubs.KVStub(self.channel)
        self.watch = stubs.WatchStub(self.channel)
        self.lease = stubs.LeaseStub(self.channel)

    def put(self, key: bytes, value: bytes = b"v", **kw) -> pb.PutResponse:
        return self.kv.Put(pb.PutRequest(key=key, value=value, **kw), timeout=T)

    def get(self, key: bytes, **kw) -> pb.RangeResponse:
        return self.kv.Range(pb.RangeRequest(key=key, **kw), timeout=T)

    def revision(self) -> int:
        return self.get(b"\0").header.revision


@pytest.fixture(scope="module")
def etcd(etcd_cluster3):
    e = Etcd(etcd_cluster3.endpoints[0])
    yield e
    e.channel.close()


def refused(call, code: grpc.StatusCode, message: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert (info.value.code(), info.value.details()) == (code, message)


IA, NF, OOR, FP = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                   grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.FAILED_PRECONDITION)


def op_put(key: bytes, value: bytes = b"v") -> pb.RequestOp:
    return pb.RequestOp(request_put=pb.PutRequest(key=key, value=value))


def test_bad_input_gets_etcds_error_and_changes_nothing(etcd):
    etcd.put(b"bad/k")
    before = etcd.revision()
    kv, lease = etcd.kv, etcd.lease
    refused(lambda: etcd.put(b""), IA, "etcdserver: key is not provided")
    refused(lambda: etcd.get(b""), IA, "etcdserver: key is not provided")
    refused(lambda: kv.DeleteRange(pb.DeleteRangeRequest(), timeout=T), IA,
            "etcdserver: key is not provided")
    refused(lambda: etcd.put(b"bad/k", b"x", ignore_value=True), IA,
            "etcdserver: value is provided")
    refused(lambda: etcd.put(b"bad/k", b"", lease=5, ignore_lease=True), IA,
            "etcdserver: lease is provided")
    refused(lambda: etcd.put(b"bad/none", b"", ignore_value=True), IA,
            "etcdserver: key not found")
    refused(lambda: etcd.put(b"bad/k", lease=123456789), NF,
            "etcdserver: requested lease not found")
    cmp = pb.Compare(key=b"bad/k", target=pb.Compare.VERSION, version=1)
    refused(lambda: kv.Txn(pb.TxnRequest(compare=[cmp] * 129), timeout=T), IA,
            "etcdserver: too many operations in txn request")
    refused(lambda: kv.Txn(pb.TxnRequest(success=[op_put(b"bad/d"), op_put(b"bad/d")]),
                           timeout=T), IA, "etcdserver: duplicate key given in txn request")
    nested = pb.RequestOp(request_txn=pb.TxnRequest(success=[op_put(b"bad/d")]))
    refused(lambda: kv.Txn(pb.TxnRequest(success=[nested, op_put(b"bad/d")]), timeout=T),
            IA, "etcdserver: duplicate key given in txn request")
    refused(lambda: etcd.get(b"bad/k", revision=before + 1000), OOR,
            "etcdserver: mvcc: required revision is a future revision")
    refused(lambda: kv.Compact(pb.CompactionRequest(revision=before + 1000), timeout=T), OOR,
            "etcdserver: mvcc: required revision is a future revision")
    granted = lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30, ID=0x5eed), timeout=T)
    assert granted.ID == 0x5eed  # a client-chosen id is honoured
    before = etcd.revision()
    refused(lambda: lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30, ID=0x5eed), timeout=T), FP,
            "etcdserver: lease already exists")
    refused(lambda: lease.LeaseGrant(pb.LeaseGrantRequest(TTL=10**7), timeout=T), OOR,
            "etcdserver: too large lease TTL")
    refused(lambda: lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=0x5eee), timeout=T), NF,
            "etcdserver: requested lease not found")
    assert etcd.revision() == before
    lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=0x5eed), timeout=T)


def test_lease_compares_nested_txns_and_range_options(etcd):
    lid = etcd.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=30), timeout=T).ID
    etcd.put(b"nt/a", b"1", lease=lid)
    etcd.put(b"nt/b", b"2")
    etcd.put(b"nt/c", b"3")
    inner = pb.TxnRequest(
        compare=[pb.Compare(key=b"nt/b", target=pb.Compare.VALUE, value=b"2")],
        success=[op_put(b"nt/inner", b"then"),
                 pb.RequestOp(request_range=pb.RangeRequest(key=b"nt/a", keys_only=True))],
        failure=[op_put(b"nt/inner", b"else")])
    resp = etcd.kv.Txn(pb.TxnRequest(
        compare=[pb.Compare(key=b"nt/a", target=pb.Compare.LEASE, lease=lid),
                 pb.Compare(key=b"nt/b", target=pb.Compare.LEASE, lease=0,
                            result=pb.Compare.EQUAL)],
        success=[op_put(b"nt/b", b"22"), pb.RequestOp(request_txn=inner)]), timeout=T)
    assert resp.succeeded and resp.responses[1].response_txn.succeeded  # pre-txn state
    nested = resp.responses[1].response_txn.responses
    assert nested[1].response_range.kvs[0].key == b"nt/a"
    assert nested[1].response_range.kvs[0].value == b""
    assert etcd.get(b"nt/inner").kvs[0].value == b"then"
    assert etcd.get(b"nt/inner").kvs[0].mod_revision == resp.header.revision
    end = b"nt0"
    count = etcd.get(b"nt/", range_end=end, count_only=True)
    assert count.count == 4 and not count.kvs
    a_rev = etcd.get(b"nt/a").kvs[0].mod_revision
    newer = etcd.get(b"nt/", range_end=end, min_mod_revision=a_rev + 1)
    assert [kv.key for kv in newer.kvs] == [b"nt/b", b"nt/c", b"nt/inner"]
    assert newer.count == 4  # etcd: count ignores the filters
    older = etcd.get(b"nt/", range_end=end, max_create_revision=a_rev, limit=1)
    assert [kv.key for kv in older.kvs] == [b"nt/a"] and not older.more
    top = etcd.get(b"nt/", range_end=end, sort_target=pb.RangeRequest.CREATE, limit=2,
                   sort_order=pb.RangeRequest.DESCEND)
    assert [kv.key for kv in top.kvs] == [b"nt/inner", b"nt/c"] and top.more
    etcd.lease.LeaseRevoke(pb.LeaseRevokeRequest(ID=lid), timeout=T)
    assert etcd.get(b"nt/a").count == 0


def test_compares_over_a_key_range_hold_for_every_key_in_it(etcd):
    """etcd 3.3+'s Compare.range_end (python-etcd3's own suite uses it): true iff every
    key in the range passes; a range with no key is judged as one missing key (a value
    compare fails, version/create/mod/lease compare against 0); "\\0" is every key on."""
    etcd.put(b"rc/1", b"same")
    etcd.put(b"rc/2", b"same")
    etcd.put(b"rd", b"other")

    def holds(key: bytes, end: bytes, **compare) -> bool:
        cmp = pb.Compare(key=key, range_end=end, **compare)
        return etcd.kv.Txn(pb.TxnRequest(compare=[cmp]), timeout=T).succeeded

    value, version = pb.Compare.VALUE, pb.Compare.VERSION
    assert holds(b"rc/", b"rc0", target=value, value=b"same")
    assert not holds(b"rc/", b"re", target=value, value=b"same")  # rd differs
    assert holds(b"rc/", b"re", target=version, version=1)
    etcd.put(b"rc/2", b"same")
    assert not holds(b"rc/", b"rc0", target=version, version=1)  # rc/2 is at 2 now
    assert holds(b"rc/", b"rc0", target=version, version=0, result=pb.Compare.GREATER)
    assert not holds(b"rc/", b"\0", target=version, version=2, result=pb.Compare.LESS)
    assert not holds(b"rx/", b"rx0", target=value, value=b"")  # no key: a value fails
    assert holds(b"rx/", b"rx0", target=pb.Compare.CREATE, create_revision=0)
    assert holds(b"rx/", b"rc/", target=version, version=0)  # backwards: no key


class WatchStream:
    """A bidirectional watch call, requests in and responses out, read with deadlines."""

    def __init__(self, etcd: Etcd) -> None:
        self.requests: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()

        def gen():
            while (r := self.requests.get()) is not None:
                yield r

        self.call = etcd.watch.Watch(gen(), timeout=60)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for r in self.call:
                self.responses.put(r)
        except grpc.RpcError:
            pass

    def send(self, **kw) -> None:
        self.requests.put(pb.WatchRequest(**kw))

    def next(self, timeout: float = 10.0) -> pb.WatchResponse:
        return self.responses.get(timeout=timeout)

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


def test_watch_filters_cancel_progress_duplicate_ids_and_compaction(etcd):
    ws = WatchStream(etcd)
    try:
        ws.send(create_request=pb.WatchCreateRequest(
            key=b"wf/", range_end=b"wf0", filters=[pb.WatchCreateRequest.NOPUT], prev_kv=True))
        created = ws.next()
        assert created.created and created.watch_id == 0  # etcd's ids start at 0
        ws.send(create_request=pb.WatchCreateRequest(key=b"wf/x", watch_id=7))
        assert ws.next().watch_id == 7
        ws.send(create_request=pb.WatchCreateRequest(key=b"wf/x", watch_id=7))
        dup = ws.next()
        assert dup.created and dup.canceled and "duplicate watch ID" in dup.cancel_reason
        assert dup.watch_id == -1  # etcd's id for a watch it refused
        ws.send(create_request=pb.WatchCreateRequest(key=b"wf/x", range_end=b"wf/a"))
        empty = ws.next()
        assert (empty.watch_id, empty.created, empty.canceled, empty.cancel_reason) == \
            (-1, True, True, "mvcc: watcher range is empty")
        etcd.put(b"wf/x", b"1")
        r = ws.next()
        assert r.watch_id == 7 and [e.kv.value for e in r.events] == [b"1"]
        etcd.kv.DeleteRange(pb.DeleteRangeRequest(key=b"wf/x"), timeout=T)
        got = {}
        while len(got) < 2:
            r = ws.next()
            got[r.watch_id] = r
        assert got[0].events[0].type == 1 and got[0].events[0].prev_kv.value == b"1"
        assert got[7].events[0].type == 1
        ws.send(cancel_request=pb.WatchCancelRequest(watch_id=7))
        r = ws.next()
        assert r.watch_id == 7 and r.canceled
        last = etcd.put(b"wf/y", b"2").header.revision  # NOPUT: watcher 0 stays quiet
        ws.send(progress_request=pb.WatchProgressRequest())
        p = ws.next()
        assert p.watch_id == -1 and not p.events and p.header.revision >= last
        rev = etcd.put(b"wf/z", b"3").header.revision
        etcd.kv.Compact(pb.CompactionRequest(revision=rev), timeout=T)
        ws.send(create_request=pb.WatchCreateRequest(key=b"wf/z", start_revision=rev - 1))
        dead = ws.next()
        assert dead.created
        r = ws.next()
        assert r.canceled and r.compact_revision == rev and r.watch_id == dead.watch_id
        assert r.header.revision == 0 and not r.cancel_reason  # etcd's shape exactly
        ws.send(cancel_request=pb.WatchCancelRequest(watch_id=dead.watch_id))
        r = ws.next()  # the compacted watch kept its id until canceled, as in etcd
        assert r.watch_id == dead.watch_id and r.canceled and not r.compact_revision
        ws.send(create_request=pb.WatchCreateRequest(key=b"wf/z", start_revision=rev))
        at = ws.next()
        assert at.created and not at.canceled  # a watch may start at the compact revision
        r = ws.next()
        assert r.watch_id == at.watch_id and [e.kv.mod_revision for e in r.events] == [rev]
    finally:
        ws.close()


def test_native_and_etcd_watches_see_the_same_revisions(etcd, etcd_cluster3):
    start = etcd.revision() + 1
    ws = WatchStream(etcd)
    try:
        ws.send(create_request=pb.WatchCreateRequest(key=b"same/", range_end=b"same0",
                                                     start_revision=start))
        assert ws.next().created
        with Client(etcd_cluster3.endpoints) as native:
            native.put(b"same/1", b"n")  # written natively
            etcd.put(b"same/2", b"e")  # written through etcd
            etcd_revs = []
            while len(etcd_revs) < 2:
                etcd_revs += [e.kv.mod_revision for e in ws.next().events]
            native_revs = []
            with native.watch(prefix=b"same/", from_revision=start) as stream:
                for event in stream:
                    native_revs.append(event.revision)
                    if len(native_revs) >= 2:
                        break
        assert etcd_revs == native_revs == [start, start + 1]
    finally:
        ws.close()


def test_a_lease_is_a_session_and_survives_a_leader_failover(etcd_cluster3):
    c = etcd_cluster3
    leader = c.wait_for_leader()
    follower = next(n for n in c.members if n != leader)
    e = Etcd(c.members[follower].listen)
    try:
        lid = e.lease.LeaseGrant(pb.LeaseGrantRequest(TTL=4), timeout=T).ID
        e.put(b"fo/k", lease=lid)
        leases = e.lease.LeaseLeases(pb.LeaseLeasesRequest(), timeout=T)
        assert lid in [x.ID for x in leases.leases]
        ttl = e.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lid, keys=True), timeout=T)
        assert ttl.grantedTTL == 4 and 0 < ttl.TTL <= 4 and list(ttl.keys) == [b"fo/k"]
        c.kill(leader)
        t0 = time.monotonic()
        c.wait_for_leader(timeout=15, among=[n for n in c.members if n != leader])
        # No keepalives at all: the new leader restarts the lease at its full TTL, so it
        # is alive after the failover, and expires afterwards (never during it).
        assert e.get(b"fo/k").count == 1
        ttl = e.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lid), timeout=T)
        assert ttl.TTL >= 0
        deadline = t0 + 30
        while e.get(b"fo/k").count and time.monotonic() < deadline:
            time.sleep(0.1)
        assert e.get(b"fo/k").count == 0
        gone = e.lease.LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=lid), timeout=T)
        assert gone.TTL == -1
    finally:
        e.channel.close()
        if not c.members[leader].running:
            c.start_member(leader)


def test_etcd_listen_and_progress_notifications(tmp_path):
    from coord.testing import LocalCluster
    from coord.testing.ports import free_port

    extra = f"127.0.0.1:{free_port()}"
    with LocalCluster(1, data_dir=tmp_path / "c", extra_args=[
            "--etcd-listen", extra, "--etcd-progress-notify-ms", "300"]) as c:
        c.wait_for_leader()
        e = Etcd(extra)  # the second address serves the etcd API too
        ws = WatchStream(e)
        try:
            rev = e.put(b"pn/k").header.revision
            ws.send(create_request=pb.WatchCreateRequest(key=b"pn/", range_end=b"pn0",
                                                         progress_notify=True))
            ws.send(create_request=pb.WatchCreateRequest(key=b"other"))  # did not ask
            assert ws.next().created and ws.next().created
            notes = [ws.next(timeout=5) for _ in range(2)]  # bounded: two intervals
            assert all(n.watch_id == 0 and not n.events and n.header.revision >= rev
                       for n in notes)
        finally:
            ws.close()
            e.channel.close()
