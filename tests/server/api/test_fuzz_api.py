"""Hostile input on every RPC of coord's native API (Sessions, Ownership, Producers, KV,
Pipeline, Admin, History) of a real member process: generated requests (valid, boundary,
hostile) and malformed bytes on each raw method. Each must be answered clearly, a refused
unary request must leave the state as it was, and the member must go on serving
(tests/server/fuzzing.py says what each means). The peer port's Forward service is
fuzzed with the peer port (tests/server/transport/test_fuzz_peer_port.py)."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from coord.v1 import admin_pb2, coord_pb2, history_pb2
from tests.server import fuzzing
from tests.server.fuzzing import FUZZ_SETTINGS, Method

pytestmark = pytest.mark.cluster

METHODS = fuzzing.methods(coord_pb2.DESCRIPTOR, admin_pb2.DESCRIPTOR, history_pb2.DESCRIPTOR,
                          skip=("Forward",))
MEMBERS = {"n1"}


@pytest.fixture(scope="module")
def member(tmp_path_factory):
    yield from fuzzing.running_member(tmp_path_factory.mktemp("fuzz-api"), "native API")


def tame(method: Method, request: Message) -> Message:
    """The one change made to a request: membership calls never remove or demote the
    member under test, nor add a voter without a process (either would take the
    one-member cluster's quorum: an operator's act, not input to refuse)."""
    if method.path.endswith("/AddMember"):
        request.learner = True
    elif method.path.endswith(("/RemoveMember", "/TransferLeader")):
        for field in ("name", "to_name"):
            if getattr(request, field, None) in MEMBERS:
                setattr(request, field, getattr(request, field) + "-not")
    return request


@pytest.mark.parametrize("method", METHODS, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_every_rpc_answers_generated_requests_clearly(member, method: Method, data) -> None:
    fuzzing.send_generated(member, method, data, tame)


@pytest.mark.parametrize("method", METHODS, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_every_raw_method_answers_malformed_bytes_clearly(member, method: Method, data) -> None:
    fuzzing.send_malformed(member, method, data, tame)
