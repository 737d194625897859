"""The gRPC floor of `coord bench etcd`: a real server process that answers etcd's Put and
Range at once, and is gone when its context ends."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

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


def test_the_floor_will_not_share_a_port_another_server_serves():
    """gRPC binds with SO_REUSEPORT by default: bound so, the floor would start on a taken
    port, and the driver would measure whichever server the kernel picked."""
    squatter = grpc.server(ThreadPoolExecutor(max_workers=1))  # default options
    port = squatter.add_insecure_port("127.0.0.1:0")
    squatter.start()
    try:
        out = subprocess.run([sys.executable, "-m", "coord.bench.grpc_floor", "--listen",
                              f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30)
    finally:
        squatter.stop(None)
    assert out.returncode != 0 and "RuntimeError" in out.stderr, out.stderr
