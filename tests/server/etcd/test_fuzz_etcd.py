"""Hostile input on every RPC of the etcd v3 API (KV, Watch, Lease, Cluster,
Maintenance, Auth) of a real member process: generated requests (valid, boundary,
hostile) and malformed bytes on each raw method. Each must be answered clearly, a
refused unary request must leave the revision, HashKV, users and roles as they were,
and the member must go on serving (tests/server/fuzzing.py says what each means)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coord.etcdpb import rpc_pb2
from tests.server import fuzzing
from tests.server.fuzzing import FUZZ_SETTINGS, Method

pytestmark = [pytest.mark.cluster, pytest.mark.etcd]

METHODS = fuzzing.methods(rpc_pb2.DESCRIPTOR)


@pytest.fixture(scope="module")
def member(tmp_path_factory):
    yield from fuzzing.running_member(tmp_path_factory.mktemp("fuzz-etcd"), "etcd API")


@pytest.mark.parametrize("method", METHODS, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_every_rpc_answers_generated_requests_clearly(member, method: Method, data) -> None:
    fuzzing.send_generated(member, method, data)


@pytest.mark.parametrize("method", METHODS, ids=str)
@FUZZ_SETTINGS
@given(data=st.data())
def test_every_raw_method_answers_malformed_bytes_clearly(member, method: Method, data) -> None:
    fuzzing.send_malformed(member, method, data)
