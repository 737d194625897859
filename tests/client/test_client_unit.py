"""Client library units that need no coord cluster: error mapping, the txn builder,
endpoint rotation and retry policy, request_id placement, stream and
session bookkeeping — plus a few checks against in-process fake servicers (failover
with one request_id, keepalive on another member, watch resume, fencing)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from types import SimpleNamespace

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from coord.client import (
    AsyncClient,
    Client,
    CompactedError,
    CoordError,
    DeadlineError,
    InvalidArgumentError,
    NoQuorumError,
    OwnedByHigherGenerationError,
    ProducerFencedError,
    ReadOnlyError,
    SessionGoneError,
    UnavailableError,
    from_rpc_error,
)
from coord.client.calls import (
    allocate_pid_block_call,
    check_producer_call,
    claim_columns,
    close_session_call,
    compact_call,
    compare_and_set_call,
    delete_call,
    finish,
    get_call,
    get_owner_call,
    init_producer_call,
    lease_pid_call,
    list_owners_call,
    open_session_call,
    own_call,
    put_call,
    put_if_absent_call,
    range_call,
    release_call,
    session_id_of,
    txn_call,
)
from coord.client.cursors import OwnersCursor, WatchCursor
from coord.client.endpoints import DEFAULT_ENDPOINTS, EndpointRing, parse_endpoints
from coord.client.errors import FutureRevisionError
from coord.client.keys import key_range, prefix_end
from coord.client.read_only import ModeChange
from coord.client.results import Header, RangeResult, SessionEvent, lease_result, own_result
from coord.client.retry import Attempts, RetryPolicy
from coord.client.session_state import SessionCore, describe_end
from coord.client.txn import TxnBuilder
from coord.sm.sessions import LOCAL_SESSION_IDS
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as pb_grpc

# -- fake failed calls --------------------------------------------------------------------


def status_of(
    code: grpc.StatusCode, reason: str | None, message: str, metadata: dict[str, str] | None = None
) -> grpc.Status:
    details = []
    if reason is not None:
        info = error_details_pb2.ErrorInfo(reason=reason, domain="coord.dev",
                                           metadata=metadata or {})
        detail = any_pb2.Any()
        detail.Pack(info)
        details.append(detail)
    st = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    return rpc_status.to_status(st)


class FakeRpcError(grpc.RpcError, grpc.Call):
    """What a failed unary call raises on the client: code, details, trailing metadata."""

    def __init__(self, status: grpc.Status) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status.code

    def details(self) -> str:
        return self._status.details

    def trailing_metadata(self):
        return self._status.trailing_metadata

    def initial_metadata(self):
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self):
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback) -> bool:
        return False


def rpc_error(code, reason, message="msg", metadata=None) -> FakeRpcError:
    return FakeRpcError(status_of(code, reason, message, metadata))


S = grpc.StatusCode


@pytest.mark.parametrize(
    "code,reason,cls",
    [
        (S.NOT_FOUND, "UNKNOWN_SESSION", SessionGoneError),
        (S.FAILED_PRECONDITION, "OWNED_BY_HIGHER_GENERATION", OwnedByHigherGenerationError),
        (S.INVALID_ARGUMENT, "INVALID_ARGUMENT", InvalidArgumentError),
        (S.INVALID_ARGUMENT, "TOO_LARGE", InvalidArgumentError),
        (S.OUT_OF_RANGE, "COMPACTED", CompactedError),
        (S.OUT_OF_RANGE, "FUTURE_REVISION", FutureRevisionError),
        (S.FAILED_PRECONDITION, "PRODUCER_FENCED", ProducerFencedError),
        (S.UNAVAILABLE, "NO_LEADER", UnavailableError),
        (S.UNAVAILABLE, "PROPOSAL_LOST", UnavailableError),
        (S.UNAVAILABLE, "UNAVAILABLE", UnavailableError),
        (S.UNAVAILABLE, "NO_QUORUM", NoQuorumError),
        (S.DEADLINE_EXCEEDED, "TIMEOUT", DeadlineError),
        (S.FAILED_PRECONDITION, "READ_ONLY", ReadOnlyError),
    ],
)
def test_error_mapping_by_reason(code, reason, cls):
    err = from_rpc_error(rpc_error(code, reason, "it failed"))
    assert type(err) is cls
    assert err.reason == reason
    assert err.code == code
    assert err.message == "it failed"
    assert isinstance(err.__cause__, grpc.RpcError)


def test_error_mapping_retryable_flags():
    assert from_rpc_error(rpc_error(S.UNAVAILABLE, "NO_QUORUM")).retryable
    assert from_rpc_error(rpc_error(S.UNAVAILABLE, "NO_LEADER")).retryable
    assert not from_rpc_error(rpc_error(S.FAILED_PRECONDITION, "READ_ONLY")).retryable
    assert not from_rpc_error(rpc_error(S.NOT_FOUND, "UNKNOWN_SESSION")).retryable


def test_error_mapping_owned_by_higher_generation_metadata():
    err = from_rpc_error(rpc_error(
        S.FAILED_PRECONDITION, "OWNED_BY_HIGHER_GENERATION", "held",
        {"resource": "p3", "owner": "42", "generation": "7"}))
    assert isinstance(err, OwnedByHigherGenerationError)
    assert (err.resource, err.owner, err.generation) == ("p3", 42, 7)
    assert err.metadata["resource"] == "p3"


@pytest.mark.parametrize(
    "code,cls",
    [
        (S.UNAVAILABLE, UnavailableError),
        (S.DEADLINE_EXCEEDED, DeadlineError),
        (S.INVALID_ARGUMENT, InvalidArgumentError),
        (S.NOT_FOUND, CoordError),
        (S.INTERNAL, CoordError),
    ],
)
def test_error_mapping_falls_back_to_status_code(code, cls):
    err = from_rpc_error(rpc_error(code, None, "failed to connect to all addresses"))
    assert type(err) is cls
    assert err.reason == code.name


def test_error_mapping_unknown_reason_uses_code():
    err = from_rpc_error(rpc_error(S.UNAVAILABLE, "SOMETHING_NEW"))
    assert type(err) is UnavailableError and err.reason == "SOMETHING_NEW"


def test_error_mapping_survives_inconsistent_status():
    # The details message differs from the Status proto's: rpc_status refuses it.
    st = status_of(S.NOT_FOUND, "UNKNOWN_SESSION", "one message")
    e = FakeRpcError(st)
    e.details = lambda: "another message"  # type: ignore[method-assign]
    err = from_rpc_error(e)
    assert type(err) is CoordError and err.reason == "NOT_FOUND"


def test_error_mapping_plain_rpc_error():
    err = from_rpc_error(grpc.RpcError())
    assert type(err) is CoordError and err.reason == "UNKNOWN"


# -- txn builder --------------------------------------------------------------------------


def test_txn_builder_builds_request():
    req = (
        TxnBuilder()
        .if_version("k", "=", 0)
        .if_value(b"v", "!=", "x")
        .if_mod("m", ">", 5)
        .if_create("cr", "<", 9)
        .then_put("k", "v1", session=7, prev_kv=True)
        .then_get(prefix="jobs/", limit=3)
        .else_get("k")
        .else_delete("a", "b", prev_kv=True)
        .build(request_id="rid")
    )
    expected = pb.TxnRequest(
        compares=[
            pb.Compare(key=b"k", target="version", op="=", number=0),
            pb.Compare(key=b"v", target="value", op="!=", value=b"x"),
            pb.Compare(key=b"m", target="mod", op=">", number=5),
            pb.Compare(key=b"cr", target="create", op="<", number=9),
        ],
        success=[
            pb.RequestOp(put=pb.PutRequest(key=b"k", value=b"v1", session_id=7, prev_kv=True)),
            pb.RequestOp(range=pb.RangeRequest(key=b"jobs/", range_end=b"jobs0", limit=3)),
        ],
        failure=[
            pb.RequestOp(range=pb.RangeRequest(key=b"k")),
            pb.RequestOp(delete_range=pb.DeleteRangeRequest(key=b"a", range_end=b"b",
                                                            prev_kv=True)),
        ],
        request_id="rid",
    )
    assert req == expected


def test_txn_builder_fresh_request_id_and_validation():
    t = TxnBuilder().if_version("k", "==", 0).then_put("k", "v")
    a, b = t.build(), t.build()
    assert a.request_id and b.request_id and a.request_id != b.request_id
    assert a.compares[0].op == "="
    with pytest.raises(ValueError):
        TxnBuilder().if_version("k", "<=", 1)
    with pytest.raises(TypeError):
        TxnBuilder().if_version("k", "=", "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TxnBuilder().compare("k", "lease", "=", 1)
    with pytest.raises(ValueError):
        txn_call(pb.TxnRequest())


def test_session_object_accepted_wherever_an_id_is():
    class S:
        id = 12

    assert put_call("k", "v", session=S()).request.session_id == 12
    assert own_call(S(), "g", ["a"]).request.session_id == 12
    with pytest.raises(TypeError):
        session_id_of("12")  # type: ignore[arg-type]


# -- keys ---------------------------------------------------------------------------------


def test_prefix_end_and_key_range():
    assert prefix_end(b"a") == b"b"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"
    assert key_range(prefix="") == (b"\0", b"\0")
    assert key_range("k") == (b"k", b"")
    assert key_range("a", "\0") == (b"a", b"\0")
    with pytest.raises(ValueError):
        key_range("a", prefix="b")
    with pytest.raises(ValueError):
        key_range()


# -- endpoints and retry policy -----------------------------------------------------------


def test_parse_endpoints(monkeypatch):
    monkeypatch.delenv("COORD_ENDPOINTS", raising=False)
    assert parse_endpoints(None) == list(DEFAULT_ENDPOINTS)
    monkeypatch.setenv("COORD_ENDPOINTS", "h1:1, h2:2,h1:1")
    assert parse_endpoints(None) == ["h1:1", "h2:2"]
    assert parse_endpoints(["a:1", "b:2,c:3"]) == ["a:1", "b:2", "c:3"]
    with pytest.raises(ValueError):
        parse_endpoints(" , ")


def test_endpoint_ring_rotates_once_per_failure_of_the_current_member():
    ring = EndpointRing(["a", "b", "c"])
    i, ep = ring.current()
    assert (i, ep) == (0, "a")
    ring.failed(0)
    ring.failed(0)  # a second caller saw the same member fail: no double skip
    assert ring.current() == (1, "b")
    ring.failed(1)
    ring.failed(2)
    assert ring.current() == (0, "a")  # wraps around


def test_endpoint_rings_start_at_a_random_member_when_asked():
    """Clients given the same list must not all land on its first member (ZooKeeper's
    and kazoo's clients shuffle theirs). 300 rings of 3: each start is missed by all of
    them with probability (2/3)^300."""
    starts = {EndpointRing(["a", "b", "c"], randomize=True).current() for _ in range(300)}
    assert starts == {(0, "a"), (1, "b"), (2, "c")}
    assert {EndpointRing(["a", "b", "c"]).current() for _ in range(50)} == {(0, "a")}
    ring = EndpointRing(["a", "b", "c"], randomize=True)
    index, _ = ring.current()
    ring.failed(index)  # failover goes on in the list's order from wherever it started
    assert ring.current()[0] == (index + 1) % 3


def test_clients_randomize_their_start_by_default_and_not_when_told():
    lists = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    assert {AsyncClient(lists).ring.current()[0] for _ in range(300)} == {0, 1, 2}
    assert {AsyncClient(lists, randomize_endpoints=False).ring.current()[0]
            for _ in range(50)} == {0}


def test_retry_policy_is_bounded():
    p = RetryPolicy(rounds=2, min_attempts=3, backoff=0.05, max_backoff=1.0)
    assert p.attempts(3) == 6
    assert p.attempts(1) == 3
    delays = [p.delay(f, 3) for f in range(1, 40)]
    assert all(0 < d <= 1.0 for d in delays)
    assert max(p.delay(1, 3) for _ in range(50)) <= 0.05  # first pass: short
    assert min(p.delay(4, 3) for _ in range(50)) >= 0.05  # next pass: doubled


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_attempts_only_repeat_what_is_safe():
    unavailable = UnavailableError("UNAVAILABLE", "member down")
    no_leader = UnavailableError("NO_LEADER", "")
    deadline = DeadlineError("TIMEOUT", "")
    invalid = InvalidArgumentError("INVALID_ARGUMENT", "")
    policy = RetryPolicy()

    def fresh() -> Attempts:
        return Attempts(policy, 3, timeout=5.0, clock=FakeClock())

    assert fresh().next_delay(unavailable, safe=True) is not None
    assert fresh().next_delay(deadline, safe=True) is not None
    assert fresh().next_delay(invalid, safe=True) is None
    # Not safe to repeat: only errors proving "not applied" fail over.
    assert fresh().next_delay(unavailable, safe=False) is None
    assert fresh().next_delay(deadline, safe=False) is None
    assert fresh().next_delay(no_leader, safe=False) is not None
    assert fresh().next_delay(NoQuorumError("NO_QUORUM", ""), safe=False) is not None
    # A read-only member refusing a write goes to the caller at once (the prober moves on).
    assert fresh().next_delay(ReadOnlyError("READ_ONLY", ""), safe=True) is None


def test_giving_up_after_no_quorum_says_no_quorum():
    a = Attempts(RetryPolicy(), 3, timeout=5.0, clock=FakeClock())
    a.next_delay(NoQuorumError("NO_QUORUM", "member n1 has no quorum"), safe=True)
    final = a.final(DeadlineError("TIMEOUT", "n2 did not answer"))
    assert isinstance(final, NoQuorumError)
    assert "n1 has no quorum" in final.message and "n2 did not answer" in final.message
    # Without a NO_QUORUM answer, the last error stands.
    b = Attempts(RetryPolicy(), 3, timeout=5.0, clock=FakeClock())
    unavailable = UnavailableError("UNAVAILABLE", "down")
    assert b.final(unavailable) is unavailable


def test_attempts_run_out_by_count_and_by_time():
    a = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=FakeClock())
    err = UnavailableError("UNAVAILABLE", "")
    delays = [a.next_delay(err, True) for _ in range(10)]
    assert delays.count(None) == 5 and delays[:5] == [d for d in delays[:5] if d is not None]
    clock = FakeClock()
    b = Attempts(RetryPolicy(rounds=100), 3, timeout=1.0, clock=clock)
    assert b.call_timeout() == 1.0
    clock.now = 2.5
    assert b.call_timeout() == pytest.approx(0.5)
    clock.now = 3.0
    assert b.next_delay(err, True) is None  # 3 x timeout spent


def test_attempts_ride_out_an_election_within_the_time_budget():
    clock = FakeClock()
    a = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=clock)
    no_quorum = NoQuorumError("NO_QUORUM", "")
    delays = [a.next_delay(no_quorum, True) for _ in range(30)]
    assert None not in delays[:23] and delays[23:] == [None] * 7  # 4 x 6 tries, not 6
    b = Attempts(RetryPolicy(rounds=2), 3, timeout=1.0, clock=clock)
    clock.now += 3.0
    assert b.next_delay(no_quorum, True) is None  # still bounded by 3 x timeout
    # The dead leader refusing connections does not cut the patience short.
    mixed = Attempts(RetryPolicy(rounds=2), 3, timeout=5.0, clock=FakeClock())
    refused = UnavailableError("UNAVAILABLE", "connection refused")
    errors = [no_quorum, refused, no_quorum] * 7
    assert None not in [mixed.next_delay(e, True) for e in errors[:20]]


def test_attempts_give_up_once_every_answer_says_no_quorum_for_an_election_timeout():
    clock = FakeClock()
    a = Attempts(RetryPolicy(), 2, timeout=5.0, clock=clock)

    def no_quorum(member: str) -> NoQuorumError:
        return NoQuorumError("NO_QUORUM", f"member {member} has no quorum",
                             metadata={"member": member})

    refused = UnavailableError("UNAVAILABLE", "connection refused")
    delays = []
    for err in [no_quorum("n1"), refused, no_quorum("n2")] * 3:
        delays.append(a.next_delay(err, True))
        if delays[-1] is None:
            break
        clock.now += 0.25
    # 0.0 .. 1.0 s: still riding it out; at 1.25 s (>= 1.2 s of NO_QUORUM) it gives up.
    assert len(delays) == 6 and None not in delays[:5]
    final = a.final(no_quorum("n2"))
    assert isinstance(final, NoQuorumError)
    assert final.message.startswith("the cluster has no quorum: for 1.2s")  # 1.25 s
    assert "n1: member n1 has no quorum" in final.message and "n2:" in final.message
    # An election under way (NO_LEADER) starts the streak again: no early give-up.
    b = Attempts(RetryPolicy(), 2, timeout=5.0, clock=clock)
    for err in [no_quorum("n1"), UnavailableError("NO_LEADER", "")] * 4:
        assert b.next_delay(err, True) is not None
        clock.now += 0.25


# -- request ids --------------------------------------------------------------------------

WRITES = [
    lambda: put_call("k", "v"),
    lambda: delete_call("k"),
    lambda: txn_call(TxnBuilder().then_put("k", "v").build()),
    lambda: put_if_absent_call("k", "v"),
    lambda: compare_and_set_call("k", 0, "v"),
    lambda: open_session_call("n", 10, False),
    lambda: own_call(1, "g", ["r"]),
    lambda: release_call(1, "g", ["r"]),
    lambda: allocate_pid_block_call("me", 10),
    lambda: lease_pid_call("t", 0),
    lambda: init_producer_call("pk"),
]
READS = [
    lambda: get_call("k"),
    lambda: range_call(prefix="k"),
    lambda: get_owner_call("g", "r"),
    lambda: list_owners_call("g"),
    lambda: check_producer_call("pk", 1, 1),
]


@pytest.mark.parametrize("make", WRITES)
def test_every_write_carries_a_fresh_request_id(make):
    a, b = make(), make()
    assert a.safe
    assert len(a.request.request_id) == 32 and a.request.request_id != b.request.request_id


@pytest.mark.parametrize("make", READS)
def test_reads_carry_no_request_id_and_are_safe(make):
    call = make()
    assert call.safe and call.linearizable
    assert "request_id" not in call.request.DESCRIPTOR.fields_by_name


def test_writes_without_request_id():
    compact = compact_call(5)
    assert not compact.safe  # repeated only when the error proves it was not applied
    assert "request_id" not in compact.request.DESCRIPTOR.fields_by_name
    assert close_session_call(3).safe  # a repeat answers UNKNOWN_SESSION: treated as closed
    assert not range_call("k", serializable=True).linearizable


def test_stale_linearizable_read_fails_over_unless_read_only_ok():
    call = get_call("k")
    resp = pb.RangeResponse(header=pb.ResponseHeader(read_only=True, member="n3"))
    with pytest.raises(NoQuorumError):
        finish(call, resp, read_only_ok=False)
    assert finish(call, resp, read_only_ok=True) is None


def cols(*pairs: tuple[str, int]) -> pb.ClaimColumns:
    return pb.ClaimColumns(resources=[r for r, _ in pairs], generations=[g for _, g in pairs])


def test_claims_forms():
    # A bare name claims at generation 1 (never the resetting generation 0).
    assert claim_columns("a") == cols(("a", 1))
    assert claim_columns(["a", ("b", 3)]) == cols(("a", 1), ("b", 3))
    assert claim_columns([("z", 0)]) == cols(("z", 0))
    assert claim_columns({"x": 2}) == cols(("x", 2))
    assert claim_columns([pb.Claim(resource="p", generation=4)]) == cols(("p", 4))
    with pytest.raises(TypeError):
        claim_columns([(7, 1)])  # a resource is a string


def test_own_answers_are_read_from_their_columns():
    answer = pb.OwnResponse(grant_columns=pb.GrantColumns(
        resources=["a", "b"], generations=[1, 4], revisions=[9, 9]))
    got = own_result(answer)
    assert [(g.resource, g.generation, g.revision) for g in got.grants] == [
        ("a", 1, 9), ("b", 4, 9)]


def test_lease_error_in_body_raises():
    with pytest.raises(CoordError) as e:
        lease_result(pb.LeasePidResponse(error="UNKNOWN_PID"))
    assert e.value.reason == "UNKNOWN_PID"


# -- stream cursors -----------------------------------------------------------------------


def kv(key: bytes, rev: int) -> pb.KeyValue:
    return pb.KeyValue(key=key, value=b"v", mod_revision=rev, create_revision=rev, version=1)


def wresp(*events: tuple[bytes, int]) -> pb.WatchResponse:
    return pb.WatchResponse(events=[pb.WatchEvent(type="PUT", kv=kv(k, r)) for k, r in events])


def test_watch_cursor_pins_start_and_resumes_without_loss_or_repeat():
    cur = WatchCursor(b"a", b"b")
    start = cur.start_call()
    assert start is not None and start.request.limit == 1
    cur.started(RangeResult(Header(revision=10)))
    assert cur.request().from_revision == 11
    assert cur.start_call() is None
    got = cur.feed(wresp((b"a1", 11), (b"a2", 12)))
    assert [e.kv.key for e in got] == [b"a1", b"a2"]
    assert cur.request().from_revision == 12  # resume AT the last revision...
    got = cur.feed(wresp((b"a2", 12), (b"a3", 12), (b"a1", 13)))  # ...and drop repeats
    assert [(e.kv.key, e.revision) for e in got] == [(b"a3", 12), (b"a1", 13)]
    assert cur.feed(wresp((b"a0", 11))) == []
    with pytest.raises(CompactedError) as e:
        cur.feed(pb.WatchResponse(compact_revision=20))
    assert e.value.compact_revision == 20


def test_owners_cursor_relists_until_a_change_then_resumes():
    cur = OwnersCursor("g")
    snap = pb.OwnerChange(group="g", owner=pb.Owner(resource="r", session_id=1, revision=4),
                          snapshot=True)
    assert len(cur.feed(snap)) == 1
    assert cur.request().from_revision == 0  # no change yet: a fresh listing again
    change = pb.OwnerChange(group="g", owner=pb.Owner(resource="r", session_id=2, revision=9))
    assert len(cur.feed(change)) == 1
    assert cur.request().from_revision == 9
    assert cur.feed(change) == []
    assert cur.on_error(CompactedError("COMPACTED", ""))
    assert cur.request().from_revision == 0
    assert not cur.on_error(InvalidArgumentError("INVALID_ARGUMENT", ""))
    assert cur.on_error(UnavailableError("UNAVAILABLE", ""))


def test_session_core():
    clock = FakeClock()
    core = SessionCore(5, ttl=9.0, clock=clock)
    assert core.interval == 3.0
    assert core.remaining() == 9.0
    clock.now = 4.0
    assert core.acked(2.0, pb.KeepAliveResponse(session_id=5, ttl_ms=12000)) is None
    assert core.ttl == 12.0 and core.remaining() == 10.0
    assert not core.stalled(None) and not core.stalled(3.0)
    # Answered but not renewed (no leader in time; a read-only member): the TTL runs on.
    assert core.acked(5.0, pb.KeepAliveResponse(session_id=5, pending=True)) is None
    assert core.remaining() == 10.0 and core.mode == "read-write"
    assert core.acked(5.0, pb.KeepAliveResponse(session_id=5, ttl_ms=12000, read_only=True)) is None
    assert core.remaining() == 10.0 and core.mode == "read-write"  # the client tells it
    told = core.entered_read_only("n1")
    assert told is not None and (told.type, told.mode, told.member) == (
        "mode_changed", "read-only", "n1")
    core.observe(told)
    assert core.mode == "read-only" and core.entered_read_only("n1") is None
    assert core.already_told(SessionEvent("mode_changed", 5, mode="read-only", member="n1"))
    assert not core.already_told(SessionEvent("mode_changed", 5, mode="read-write"))
    core.mode = "read-write"
    assert core.moved(ModeChange("read-write", "n2", "e", True)) is None  # knew already
    core.mode = "read-only"
    moved = core.moved(ModeChange("read-write", "n2", "e", True))
    assert moved is not None and (moved.type, moved.mode, moved.member) == (
        "mode_changed", "read-write", "n2")
    clock.now = 8.0
    assert core.stalled(3.0)
    gone = core.acked(8.0, pb.KeepAliveResponse(session_id=5, gone=True))
    assert gone is not None and gone.type == "gone"
    assert core.observe(SessionEvent("mode_changed", 5, mode="read-only")) is False
    assert core.mode == "read-only"
    assert core.observe(SessionEvent("severed", 5))
    assert core.observe(SessionEvent("released", 5))  # closed by another client
    assert core.end(gone) and not core.end(gone)


def test_session_core_of_a_member_local_session():
    clock = FakeClock()
    core = SessionCore(7, ttl=3.0, clock=clock, local=True)
    clock.now = 2.0
    # Its member renews it (read-only or not): the TTL starts again.
    local_ack = pb.KeepAliveResponse(session_id=7, ttl_ms=3000, read_only=True, local=True)
    assert core.acked(2.0, local_ack) is None and core.remaining() == 3.0
    clock.now = 9.0  # silence: remaining() stops at 0, the silence goes on counting
    assert core.remaining() == 0.0 and core.unanswered_for() == 7.0
    assert not core.observe(SessionEvent("mode_changed", 7, mode="read-write", member="n3"))
    assert core.local  # the mode alone changes nothing: registration does
    assert not core.observe(SessionEvent("registered", 7, member="n3"))
    assert not core.local
    dropped = SessionEvent("dropped", 7, member="n3", message="refused: SESSION_EXISTS: ...")
    assert core.observe(dropped)  # terminal
    assert describe_end(dropped) == "session 7 dropped: refused: SESSION_EXISTS: ..."


def test_writes_bound_to_a_member_local_session_are_refused_until_it_is_registered():
    local = SimpleNamespace(id=LOCAL_SESSION_IDS.start + 1, local=True)
    for make in (lambda: own_call(local, "g", ["r"]),
                 lambda: release_call(local, "g", ["r"]),
                 lambda: put_call(b"k", b"v", session=local),
                 lambda: TxnBuilder().then_put(b"k", b"v", session=local)):
        with pytest.raises(ReadOnlyError) as refused:
            make()
        assert "member-local" in refused.value.message
    # Closing it is not a write bound to it; once registered it is a session like any.
    assert close_session_call(local).request.session_id == local.id
    local.local = False
    assert own_call(local, "g", ["r"]).request.session_id == local.id


# -- against in-process fake servicers ----------------------------------------------------


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, reason: str, msg: str) -> None:
    context.abort_with_status(status_of(code, reason, msg))


class FakeMember(pb_grpc.KVServicer, pb_grpc.SessionsServicer):
    """A scripted member: `behaviour[method]` decides each answer. It serves unary calls
    only (no Pipeline stream): its clients are made with `stream=False`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[str, list] = {}
        self.behaviour: dict = {}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        pb_grpc.add_KVServicer_to_server(self, self.server)
        pb_grpc.add_SessionsServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _record(self, method: str, request) -> None:
        self.requests.setdefault(method, []).append(request)

    def header(self, revision: int = 1) -> pb.ResponseHeader:
        return pb.ResponseHeader(revision=revision, member=self.name)

    def Put(self, request, context):
        self._record("Put", request)
        if self.behaviour.get("Put") == "no_leader":
            abort(context, S.UNAVAILABLE, "NO_LEADER", "no leader")
        return pb.PutResponse(header=self.header())

    def Compact(self, request, context):
        self._record("Compact", request)
        abort(context, S.DEADLINE_EXCEEDED, "TIMEOUT", "proposal timed out")

    def Range(self, request, context):
        self._record("Range", request)
        return pb.RangeResponse(header=self.header(10))

    def Watch(self, request, context):
        self._record("Watch", request)
        for resp in self.behaviour.get("Watch", []):
            if resp == "abort":
                abort(context, S.UNAVAILABLE, "UNAVAILABLE", "member stopping")
            if resp == "broke":  # as gRPC's core ends a stream whose member was killed
                context.abort(S.INTERNAL, "Internal error from Core")
            if resp == "export_failed":  # coord's own INTERNAL carries its reason
                abort(context, S.INTERNAL, "EXPORT_FAILED", "disk gone")
            yield resp
        while context.is_active():
            time.sleep(0.02)

    def OpenSession(self, request, context):
        self._record("OpenSession", request)
        if self.behaviour.get("OpenSession") == "went_read_only":
            if len(self.requests["OpenSession"]) == 1 or not request.read_only_ok:
                abort(context, S.FAILED_PRECONDITION, "READ_ONLY", "member a is read-only")
            return pb.OpenSessionResponse(header=self.header(), session_id=(1 << 62) + 5,
                                          ttl_ms=request.ttl_ms, local=True)
        return pb.OpenSessionResponse(header=self.header(), session_id=77,
                                      ttl_ms=request.ttl_ms)

    def KeepAlive(self, request_iterator, context):
        if self.behaviour.get("KeepAlive") == "down":
            abort(context, S.UNAVAILABLE, "NO_QUORUM", "no quorum")
        for req in request_iterator:
            self._record("KeepAlive", req)
            gone = self.behaviour.get("KeepAlive") == "gone"
            yield pb.KeepAliveResponse(session_id=req.session_id, ttl_ms=3000, gone=gone)

    def CloseSession(self, request, context):
        self._record("CloseSession", request)
        return pb.CloseSessionResponse(header=self.header())

    def Events(self, request, context):
        self._record("Events", request)
        script = self.behaviour.get("Events")
        if script == "down":
            abort(context, S.UNAVAILABLE, "NO_QUORUM", "no quorum")
        if isinstance(script, threading.Event):
            script.wait(5)
            yield pb.SessionEvent(type="severed", session_id=request.session_id, revision=9,
                                  group="g", resource="p0", generation=3, new_owner=78)
            return
        while context.is_active():
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.stop(0)


@pytest.fixture
def members() -> Iterator[list[FakeMember]]:
    ms = [FakeMember("a"), FakeMember("b")]
    yield ms
    for m in ms:
        m.stop()


FAST = RetryPolicy(backoff=0.01, max_backoff=0.05)


def eventually(predicate, timeout: float = 5.0) -> bool:
    """`fenced` is set before on_severed runs (fencing must not wait for a callback)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_write_fails_over_with_the_same_request_id(members):
    a, b = members
    a.behaviour["Put"] = "no_leader"
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        result = client.put("k", "v")
        assert result.header.member == "b"
        assert a.requests["Put"][0].request_id == b.requests["Put"][0].request_id != ""
        assert client.ring.current()[1] == b.endpoint  # later calls go to b directly


def test_ambiguous_failure_of_unsafe_write_is_not_repeated(members):
    a, b = members
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        with pytest.raises(DeadlineError):
            client.compact(3)
    assert len(a.requests["Compact"]) == 1 and "Compact" not in b.requests


def test_unreachable_member_is_skipped(members):
    a, b = members
    with Client(["127.0.0.1:1", b.endpoint], timeout=2, policy=FAST, stream=False) as client:
        assert client.put("k", "v").header.member == "b"
        assert client.get("k") is None


@pytest.mark.parametrize("end", ["abort", "broke"])
def test_watch_resumes_on_another_member_without_loss_or_repeat(members, end):
    """The first member's stream ends UNAVAILABLE (it stops) or with gRPC's INTERNAL (it
    was killed mid-stream); the watch goes on from the second."""
    a, b = members
    a.behaviour["Watch"] = [wresp((b"k1", 11)), wresp((b"k2", 12)), end]
    b.behaviour["Watch"] = [wresp((b"k2", 12), (b"k3", 12)), wresp((b"k4", 13))]
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        stream = client.watch(prefix="k")
        got = [(e.kv.key, e.revision) for _, e in zip(range(4), stream, strict=False)]
        stream.cancel()
    assert got == [(b"k1", 11), (b"k2", 12), (b"k3", 12), (b"k4", 13)]
    assert a.requests["Watch"][0].from_revision == 11  # pinned: Range said revision 10
    assert b.requests["Watch"][0].from_revision == 12


def test_a_watch_ended_by_coords_own_internal_error_is_not_resumed(members):
    """An INTERNAL that carries coord's reason is the member's answer, not a break:
    the caller gets it rather than the watch moving to another member."""
    a, b = members
    a.behaviour["Watch"] = [wresp((b"k1", 11)), "export_failed"]
    b.behaviour["Watch"] = [wresp((b"k2", 12))]
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        stream = client.watch(prefix="k")
        assert next(stream).kv.key == b"k1"
        with pytest.raises(CoordError) as raised:
            next(stream)
        stream.cancel()
    assert raised.value.reason == "EXPORT_FAILED" and "Watch" not in b.requests


def test_an_open_refused_as_the_member_went_read_only_is_opened_again_there(members):
    """The member switched to read-only while the open waited (READ_ONLY: not applied);
    a read-only client opens again and gets the member-local session; others are told."""
    a = members[0]
    a.behaviour["OpenSession"] = "went_read_only"
    with Client([a.endpoint], read_only_ok=True, timeout=2.0, policy=FAST, stream=False) as client:
        info = client.open_session("x", 3.0)
        assert info.local and info.session_id == (1 << 62) + 5
        first, again = a.requests["OpenSession"]
        assert first.request_id == again.request_id and again.read_only_ok
        with pytest.raises(ReadOnlyError):
            client.open_session("y", 3.0, read_only_ok=False)
    assert len(a.requests["OpenSession"]) == 3


def test_session_keeps_its_id_across_members_and_is_fenced_at_once(members):
    a, b = members
    a.behaviour["KeepAlive"] = "down"
    a.behaviour["Events"] = "down"
    sever = threading.Event()
    b.behaviour["Events"] = sever
    severed: list = []
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False) as client:
        session = client.session(ttl=3, on_severed=severed.append)
        assert session.id == 77
        deadline = time.monotonic() + 5
        while not b.requests.get("KeepAlive") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.requests["KeepAlive"][0].session_id == 77
        assert not session.fenced.is_set()
        sever.set()
        assert session.fenced.wait(5)
        assert session.ended is not None and session.ended.type == "severed"
        assert eventually(lambda: severed)
        assert [e.type for e in severed] == ["severed"] and severed[0].new_owner == 78
        assert [e.type for e in session.events(timeout=1)] == ["severed"]
        session.close()  # already over: no CloseSession needed, no error
        assert "CloseSession" not in b.requests
        assert len(severed) == 1


def test_session_close_closes_on_server_and_keepalive_gone_fences(members):
    a, b = members
    with Client([a.endpoint], timeout=2, policy=FAST, stream=False) as client:
        with client.session(ttl=3) as s:
            assert not s.fenced.is_set()
        assert s.fenced.is_set()
        assert a.requests["CloseSession"][0].session_id == 77
        a.behaviour["KeepAlive"] = "gone"
        gone: list = []
        s2 = client.session(ttl=3, on_severed=gone.append)
        assert s2.fenced.wait(5)
        assert eventually(lambda: gone) and gone[0].type == "gone"
        s2.close()


def test_async_client_fails_over_and_watches(members):
    a, b = members
    a.behaviour["Put"] = "no_leader"
    b.behaviour["Watch"] = [wresp((b"k1", 11))]

    async def main() -> None:
        async with AsyncClient([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                               randomize_endpoints=False) as client:
            assert (await client.put("k", "v")).header.member == "b"
            async with client.watch("k1") as stream:
                event = await stream.__anext__()
                assert event.kv.key == b"k1"
            sever = threading.Event()
            b.behaviour["Events"] = sever
            severed: list = []
            async with client.session(ttl=3, on_severed=severed.append) as s:
                assert s.id == 77
                sever.set()
                await asyncio.wait_for(s.fenced.wait(), 5)
                assert [e.type async for e in s.events(timeout=1)] == ["severed"]
            assert [e.type for e in severed] == ["severed"]

    asyncio.run(main())
    assert a.requests["Put"][0].request_id == b.requests["Put"][0].request_id


def test_a_stream_that_fails_fails_its_operations_retryably():
    """What an operation in flight raises when its pipelined stream fails: the stream's
    status mapped as a unary call's, except that a cancellation we did not ask for (a
    member ending its streams) or gRPC's INTERNAL (a member killed mid-stream) is
    UNAVAILABLE — go to the next member — and a closed client stays closed."""
    from coord.client.aio_pipeline import _stream_error
    from coord.client.transport import CallEnded, TransportClosed

    S = grpc.StatusCode
    cancelled = _stream_error(rpc_error(S.CANCELLED, None, "cancelled by the member"))
    assert isinstance(cancelled, UnavailableError) and cancelled.reason == "UNAVAILABLE"
    # A member killed mid-stream: gRPC's core ends the stream with INTERNAL.
    killed = _stream_error(rpc_error(S.INTERNAL, None, "Internal error from Core"))
    assert isinstance(killed, UnavailableError) and "INTERNAL" in killed.message
    # coord's own INTERNAL carries its reason: the member's answer, passed on as it is.
    answered = _stream_error(rpc_error(S.INTERNAL, "EXPORT_FAILED", "disk gone"))
    assert answered.code == S.INTERNAL and answered.reason == "EXPORT_FAILED"
    down = _stream_error(rpc_error(S.UNAVAILABLE, "NO_LEADER", "no leader"))
    assert isinstance(down, UnavailableError) and down.reason == "NO_LEADER"
    assert isinstance(_stream_error(CallEnded()), UnavailableError)
    assert isinstance(_stream_error(TransportClosed()), TransportClosed)
