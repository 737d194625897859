"""One `Call` per API method (coord.client.calls): which carry a fresh request_id and
which are safe to send again, the claim forms an own takes, a stale read refused to a
client that did not accept it, and writes bound to a member-local session refused
until it is registered."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coord.client import NoQuorumError, ReadOnlyError
from coord.client.calls import (
    allocate_pid_block_call,
    check_producer_call,
    claim_columns,
    close_session_call,
    compact_call,
    compare_and_set_call,
    delete_call,
    delete_request,
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
    range_request,
    release_call,
    session_id_of,
    txn_call,
)
from coord.client.txn import TxnBuilder
from coord.sm.sessions import LOCAL_SESSION_IDS
from coord.v1 import coord_pb2 as pb


def test_session_object_accepted_wherever_an_id_is():
    class S:
        id = 12

    assert put_call("k", "v", session=S()).request.session_id == 12
    assert own_call(S(), "g", ["a"]).request.session_id == 12
    with pytest.raises(TypeError):
        session_id_of("12")  # type: ignore[arg-type]


WRITES = [
    lambda: put_call("k", "v"),
    lambda: delete_call(delete_request("k")),
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
    lambda: range_call(range_request(prefix="k")),
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
    assert not range_call(range_request("k", serializable=True)).linearizable


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
