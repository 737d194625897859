"""Every limit on a client's request, refused by a real member process in etcd's words
(etcd API) or with an ErrorInfo naming the limit (native API), with nothing changed:
--max-request-bytes (gRPC's message limit 512 KiB past it, and a write request over it,
refused before anything is proposed), --max-txn-ops, key and value sizes,
resources per own, pids per block, watchers per etcd Watch stream, operations per
pipelined message, and --max-concurrent-streams (HTTP/2 streams per connection, on the
client port and the peer port's gRPC). The figures etcd 3.4 answers with for the same
requests (--max-request-bytes 1.5 MiB, --max-txn-ops 128) are the defaults' here."""

from __future__ import annotations

import socket
import struct
import time

import grpc
import pytest

from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as estubs
from coord.serve_flags import member_config, parse_serve_args
from coord.server.etcd.watch import MAX_WATCHERS_PER_STREAM, TOO_MANY_WATCHERS
from coord.server.requests.request_limits import DEFAULT_MAX_CONCURRENT_STREAMS, RequestLimits
from coord.server.transport.grpc_options import PEER_MAX_CONCURRENT_STREAMS
from coord.sm import commands as c
from coord.sm import limits
from coord.tagged_calls import MAX_BATCH
from coord.testing import LocalCluster
from coord.v1 import admin_pb2, admin_pb2_grpc, coord_pb2, coord_pb2_grpc
from coord.wire import ApiError
from tests.sm.test_canonical_json import nested_txn_payload

pytestmark = pytest.mark.cluster

T = 20.0
MiB = 1 << 20
IA, RE = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED
TOO_LARGE = "etcdserver: request is too large"
RAISED_TXN_OPS = 200  # the second member's --max-txn-ops, past apply's old fixed 128
STREAMS = 4  # the second member's --max-concurrent-streams


class Member:
    """One member's channel, stubs of both APIs and its log's last index."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.channel = grpc.insecure_channel(cluster.endpoints[0], options=[
            ("grpc.max_receive_message_length", 64 * MiB)])
        self.kv = estubs.KVStub(self.channel)
        self.watch = estubs.WatchStub(self.channel)
        self.native = coord_pb2_grpc.KVStub(self.channel)
        self.own = coord_pb2_grpc.OwnershipStub(self.channel)
        self.sessions = coord_pb2_grpc.SessionsStub(self.channel)
        self.producers = coord_pb2_grpc.ProducersStub(self.channel)
        self.pipeline = coord_pb2_grpc.PipelineStub(self.channel)
        self.admin = admin_pb2_grpc.AdminStub(self.channel)

    def log_and_revision(self) -> tuple[int, int]:
        """(the last log index, the revision): both unchanged after a refusal before
        proposing."""
        st = self.admin.Status(admin_pb2.StatusRequest(), timeout=T)
        rev = self.kv.Range(epb.RangeRequest(key=b"\0"), timeout=T).header.revision
        return st.last_index, rev


def _member(root, *flags: str):
    c = LocalCluster(1, data_dir=root / "cluster",
                     extra_args=["--auto-compaction-retention", "0", *flags])
    try:
        c.start()
        c.wait_for_leader()
        m = Member(c)
        yield m
        m.channel.close()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    """etcd's defaults: --max-request-bytes 1.5 MiB, --max-txn-ops 128."""
    yield from _member(tmp_path_factory.mktemp("limits-default"))


@pytest.fixture(scope="module")
def raised(tmp_path_factory):
    """Room for apply's own bounds (8 MiB requests), more txn ops, fewer streams."""
    yield from _member(tmp_path_factory.mktemp("limits-raised"),
                       "--max-request-bytes", str(8 * MiB),
                       "--max-txn-ops", str(RAISED_TXN_OPS),
                       "--max-concurrent-streams", str(STREAMS))


def refused(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def error_info(e: grpc.RpcError) -> ApiError:
    return ApiError.of_rpc_error(e)


def puts(n: int, size: int) -> list[epb.RequestOp]:
    return [epb.RequestOp(request_put=epb.PutRequest(key=b"big/%d" % i, value=b"v" * size))
            for i in range(n)]


def native_puts(n: int, size: int) -> list[coord_pb2.RequestOp]:
    return [coord_pb2.RequestOp(put=coord_pb2.PutRequest(key=b"nbig/%d" % i, value=b"v" * size))
            for i in range(n)]


# -- --max-request-bytes -----------------------------------------------------------------


def test_a_message_past_max_request_bytes_and_grpcs_overhead_is_refused_by_grpc(default):
    """etcd answers a 2 MiB put "grpc: received message larger than max (2097160 vs.
    2097152)"; coord's gRPC, its own words for the same limit."""
    before = default.log_and_revision()
    e = refused(lambda: default.kv.Put(epb.PutRequest(key=b"k", value=b"v" * 2 * MiB),
                                       timeout=T))
    assert e.code() == RE and "larger than max" in e.details() and "2097152" in e.details()
    e = refused(lambda: default.native.Put(coord_pb2.PutRequest(key=b"k", value=b"v" * 2 * MiB),
                                           timeout=T))
    assert e.code() == RE and "2097152" in e.details()
    assert default.log_and_revision() == before


def test_a_write_past_max_request_bytes_is_refused_before_it_is_proposed(default):
    """16 puts of 100 KiB: each within every other limit, 1.6 MiB together. etcd: "request
    is too large"; native: TOO_LARGE naming --max-request-bytes. Nothing reaches the log;
    14 of them (1.4 MiB) are served."""
    before = default.log_and_revision()
    e = refused(lambda: default.kv.Txn(epb.TxnRequest(success=puts(16, 100 * 1024)), timeout=T))
    assert (e.code(), e.details()) == (IA, TOO_LARGE)
    e = refused(lambda: default.native.Txn(
        coord_pb2.TxnRequest(success=native_puts(16, 100 * 1024)), timeout=T))
    err = error_info(e)
    assert (err.code, err.reason) == (IA, "TOO_LARGE")
    assert err.metadata == {"limit": "max-request-bytes", "max": str(1536 * 1024)}
    assert "the limit is --max-request-bytes 1572864" in err.message
    assert default.log_and_revision() == before
    assert default.kv.Txn(epb.TxnRequest(success=puts(14, 100 * 1024)), timeout=T).succeeded


def test_the_pipelined_stream_answers_an_oversized_write_in_band(default):
    op = coord_pb2.PipelineOp(id=1, txn=coord_pb2.TxnRequest(success=native_puts(16, 100 * 1024)))
    (answer,) = default.pipeline.Stream(iter([coord_pb2.PipelineRequest(ops=[op])]), timeout=T)
    (result,) = answer.results
    assert (result.error.reason, result.error.metadata["limit"]) == ("TOO_LARGE",
                                                                     "max-request-bytes")


# -- --max-txn-ops -------------------------------------------------------------------------


def test_max_txn_ops_is_etcds_128_by_default_and_a_flag(default, raised):
    ok = [epb.RequestOp(request_range=epb.RangeRequest(key=b"k"))]
    for m, top in ((default, limits.DEFAULT_MAX_TXN_OPS), (raised, RAISED_TXN_OPS)):
        before = m.log_and_revision()
        assert m.kv.Txn(epb.TxnRequest(success=ok * top), timeout=T).succeeded
        e = refused(lambda m=m, top=top: m.kv.Txn(epb.TxnRequest(success=ok * (top + 1)),
                                                   timeout=T))
        assert (e.code(), e.details()) == (IA, "etcdserver: too many operations in txn request")
        nested = epb.RequestOp(request_txn=epb.TxnRequest(success=ok * top))
        e = refused(lambda m=m, nested=nested: m.kv.Txn(epb.TxnRequest(success=[nested]),
                                                        timeout=T))
        assert e.code() == IA  # one at the top leaves top - 1 below
        cmp = coord_pb2.Compare(key=b"k", target="version", op="=")
        e = refused(lambda m=m, top=top, cmp=cmp: m.native.Txn(
            coord_pb2.TxnRequest(compares=[cmp] * (top + 1)), timeout=T))
        err = error_info(e)
        assert (err.reason, err.metadata) == ("TOO_LARGE", {"limit": "max-txn-ops",
                                                            "max": str(top)})
        assert m.log_and_revision()[1] == before[1]


# -- sizes apply refuses on every member alike -------------------------------------------


def test_keys_and_values_past_their_limits_are_refused(default):
    """coord's own key limit (etcd has none but --max-request-bytes) and value limit,
    judged in apply on every member alike; etcd's clients hear etcd's words for both."""
    before = default.log_and_revision()[1]
    for key, value, limit in ((b"k" * (limits.MAX_KEY_BYTES + 1), b"", limits.MAX_KEY_BYTES),
                              (b"k", b"v" * (limits.MAX_VALUE_BYTES + 1), limits.MAX_VALUE_BYTES)):
        e = refused(lambda key=key, value=value: default.kv.Put(
            epb.PutRequest(key=key, value=value), timeout=T))
        assert (e.code(), e.details()) == (IA, TOO_LARGE)
        e = refused(lambda key=key, value=value: default.native.Put(
            coord_pb2.PutRequest(key=key, value=value), timeout=T))
        assert error_info(e).reason == "TOO_LARGE" and f"the limit is {limit}" in e.details()
    assert default.log_and_revision()[1] == before
    default.kv.Put(epb.PutRequest(key=b"k" * limits.MAX_KEY_BYTES,
                                  value=b"v" * limits.MAX_VALUE_BYTES), timeout=T)


def test_an_own_of_more_resources_than_the_limit_is_refused(raised):
    s = raised.sessions.OpenSession(coord_pb2.OpenSessionRequest(name="big", ttl_ms=60_000),
                                    timeout=T)
    n = limits.MAX_CLAIMS + 1
    cols = coord_pb2.ClaimColumns(resources=[f"r{i}" for i in range(n)], generations=[0] * n)
    before = raised.log_and_revision()[1]
    e = refused(lambda: raised.own.Own(coord_pb2.OwnRequest(
        session_id=s.session_id, group="g", claim_columns=cols), timeout=T))
    assert error_info(e).reason == "TOO_LARGE" and f"more than {limits.MAX_CLAIMS}" in e.details()
    assert raised.log_and_revision()[1] == before
    cols = coord_pb2.ClaimColumns(resources=cols.resources[:-1], generations=[0] * (n - 1))
    got = raised.own.Own(coord_pb2.OwnRequest(session_id=s.session_id, group="g",
                                              claim_columns=cols), timeout=T)
    assert len(got.grant_columns.resources) == limits.MAX_CLAIMS


def test_a_pid_block_past_the_limit_is_refused(default):
    e = refused(lambda: default.producers.AllocatePidBlock(
        coord_pb2.AllocatePidBlockRequest(requester="b", size=limits.MAX_PID_BLOCK + 1),
        timeout=T))
    assert e.code() == IA and f"[1, {limits.MAX_PID_BLOCK}]" in e.details()
    got = default.producers.AllocatePidBlock(
        coord_pb2.AllocatePidBlockRequest(requester="b", size=limits.MAX_PID_BLOCK), timeout=T)
    assert got.size == limits.MAX_PID_BLOCK


def test_a_deeply_nested_raw_command_is_refused_and_the_member_stays_up(default):
    """Txns 250 levels deep, written as JSON by hand and proposed raw: refused as
    undecodable the same way on every member (apply itself used to raise)."""
    got = default.admin.Propose(admin_pb2.ProposeRequest(data=nested_txn_payload(250)),
                                timeout=T)
    result = c.decode_result(got.result)
    assert result.error == "INVALID_ARGUMENT" and "nested deeper than" in result.message
    assert default.cluster.members["n1"].running
    default.kv.Put(epb.PutRequest(key=b"after-deep", value=b"v"), timeout=T)


# -- per stream and per connection -------------------------------------------------------


def test_an_etcd_watch_stream_holds_at_most_its_limit_of_watchers(default):
    creates = [epb.WatchRequest(create_request=epb.WatchCreateRequest(key=b"w%d" % i))
               for i in range(MAX_WATCHERS_PER_STREAM + 1)]
    answers = default.watch.Watch(iter(creates), timeout=T)
    created, last = 0, None
    for answer in answers:
        if answer.canceled:
            last = answer
            break
        created += answer.created
    answers.cancel()
    assert created == MAX_WATCHERS_PER_STREAM
    assert (last.watch_id, last.created, last.cancel_reason) == (-1, True, TOO_MANY_WATCHERS)


def test_a_pipelined_message_of_more_operations_than_the_limit_ends_the_stream(default):
    ops = [coord_pb2.PipelineOp(id=i + 1, get_owner=coord_pb2.GetOwnerRequest(group="g",
                                                                              resource="r"))
           for i in range(MAX_BATCH + 1)]
    e = refused(lambda: list(default.pipeline.Stream(iter([coord_pb2.PipelineRequest(ops=ops)]),
                                                     timeout=T)))
    err = error_info(e)
    assert (err.code, err.reason, err.metadata["max"]) == (RE, "LIMIT_EXCEEDED", str(MAX_BATCH))
    answers = default.pipeline.Stream(
        iter([coord_pb2.PipelineRequest(ops=ops[:MAX_BATCH])]), timeout=T)
    assert sum(len(a.results) for a in answers) == MAX_BATCH


def _h2_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    """An HPACK header field, literal without indexing, new name (both under 127 bytes)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def _h2_headers(path: bytes) -> bytes:
    # :method POST (static 3), :scheme http (static 6), :path by the name of static 4
    return b"\x83\x86\x04" + bytes([len(path)]) + path + _literal(b":authority", b"x") + \
        _literal(b"content-type", b"application/grpc") + _literal(b"te", b"trailers")


class RawH2:
    """An HTTP/2 connection by hand: what a client that ignores the server's settings
    sends, and every frame the server answers with."""

    SETTINGS, RST_STREAM, HEADERS = 4, 3, 1
    MAX_CONCURRENT_STREAMS, REFUSED_STREAM = 3, 7

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=T)
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2_frame(self.SETTINGS, 0, 0))
        self._buf = b""

    def settings(self) -> dict[int, int]:
        """The server's first SETTINGS (acknowledged)."""
        kind, flags, _, payload = self.next_frame()
        while kind != self.SETTINGS or flags & 1:
            kind, flags, _, payload = self.next_frame()
        self.sock.sendall(_h2_frame(self.SETTINGS, 1, 0))
        return {int.from_bytes(payload[i:i + 2], "big"): int.from_bytes(payload[i + 2:i + 6], "big")
                for i in range(0, len(payload), 6)}

    def open(self, stream: int, path: bytes) -> None:
        self.sock.sendall(_h2_frame(self.HEADERS, 4, stream, _h2_headers(path)))  # END_HEADERS

    def next_frame(self) -> tuple[int, int, int, bytes]:
        while len(self._buf) < 9 or len(self._buf) < 9 + int.from_bytes(self._buf[:3], "big"):
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self._buf += chunk
        n = int.from_bytes(self._buf[:3], "big")
        frame, self._buf = self._buf[:9 + n], self._buf[9 + n:]
        return frame[3], frame[4], int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF, frame[9:]

    def refused_stream(self) -> int:
        """The first stream the server refuses (RST_STREAM REFUSED_STREAM)."""
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            kind, _, stream, payload = self.next_frame()
            if kind == self.RST_STREAM and int.from_bytes(payload, "big") == self.REFUSED_STREAM:
                return stream
        raise AssertionError("no stream was refused")


def test_a_connection_holds_at_most_max_concurrent_streams(raised):
    h2 = RawH2(raised.cluster.endpoints[0])
    try:
        assert h2.settings()[RawH2.MAX_CONCURRENT_STREAMS] == STREAMS
        for i in range(STREAMS + 1):  # never-ending Watch streams: all stay open
            h2.open(1 + 2 * i, b"/etcdserverpb.Watch/Watch")
        assert h2.refused_stream() == 1 + 2 * STREAMS
    finally:
        h2.sock.close()
    assert raised.kv.Range(epb.RangeRequest(key=b"k"), timeout=T).header.revision > 0


def test_the_peer_ports_grpc_holds_few_streams_per_connection(default):
    h2 = RawH2(default.cluster.members["n1"].peer_listen)
    try:
        assert h2.settings()[RawH2.MAX_CONCURRENT_STREAMS] == PEER_MAX_CONCURRENT_STREAMS
    finally:
        h2.sock.close()


def test_the_flags_make_the_members_limits_and_a_bad_value_names_its_flag(monkeypatch):
    monkeypatch.setenv("COORD_CLUSTER_SECRET", "s" * 32)
    base = ["--name", "n1", "--data-dir", "/tmp/x", "--listen", "127.0.0.1:1",
            "--peer-listen", "127.0.0.1:2", "--initial-cluster", "n1=127.0.0.1:2"]
    assert member_config(parse_serve_args(base)).limits == RequestLimits(
        1536 * 1024, limits.DEFAULT_MAX_TXN_OPS, DEFAULT_MAX_CONCURRENT_STREAMS)
    got = member_config(parse_serve_args([*base, "--max-request-bytes", "100",
                                          "--max-txn-ops", "7",
                                          "--max-concurrent-streams", "3"])).limits
    assert got == RequestLimits(100, 7, 3)
    for flag, value in (("--max-request-bytes", 0), ("--max-concurrent-streams", 0),
                        ("--max-txn-ops", 0), ("--max-txn-ops", limits.MAX_TXN_OPS + 1)):
        with pytest.raises(ValueError, match=flag):
            member_config(parse_serve_args([*base, flag, str(value)]))


def test_numbers_past_what_coord_stores_are_refused_not_failed(default):
    """A uint64 session id past int64, an alarm type etcd does not define: INVALID_ARGUMENT
    and an empty answer, not a handler's UNKNOWN (both found by the fuzz tests)."""
    for call in (
        lambda: default.sessions.CloseSession(
            coord_pb2.CloseSessionRequest(session_id=(1 << 64) - 2), timeout=T),
        lambda: default.own.Own(coord_pb2.OwnRequest(
            session_id=1 << 63, group="g", claims=[coord_pb2.Claim(resource="r")]), timeout=T),
    ):
        e = refused(call)
        assert e.code() == IA and "int64" in e.details()
    maintenance = estubs.MaintenanceStub(default.channel)
    got = maintenance.Alarm(epb.AlarmRequest(action=epb.AlarmRequest.GET, alarm=99), timeout=T)
    assert list(got.alarms) == []
    e = refused(lambda: maintenance.Alarm(epb.AlarmRequest(action=epb.AlarmRequest.ACTIVATE,
                                                           alarm=99), timeout=T))
    assert e.code() == IA
