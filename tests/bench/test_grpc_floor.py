"""The gRPC floor of `coord bench etcd`: a real server process that answers etcd's Put and
Range at once, and is gone when its context ends."""

from __future__ import annotations

import os

import grpc
import pytest

from coord.bench.grpc_floor import VALUE, floor_server
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc


def test_the_floor_answers_puts_and_gets_and_stops_with_its_context():
    with floor_server() as (address, pid):
        with grpc.insecure_channel(address) as channel:
            kv = erpc.KVStub(channel)
            assert kv.Put(epb.PutRequest(key=b"k", value=VALUE), timeout=5).header.revision == 1
            got = kv.Range(epb.RangeRequest(key=b"bench/3/7"), timeout=5)
            assert [(x.key, x.value) for x in got.kvs] == [(b"bench/3/7", VALUE)]
            with pytest.raises(grpc.RpcError) as e:  # nothing else is served
                erpc.LeaseStub(channel).LeaseGrant(epb.LeaseGrantRequest(TTL=5), timeout=5)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
