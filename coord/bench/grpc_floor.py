"""The floor under any Python unary gRPC server on this box: etcd's KV Put and Range,
each answered at once (no Raft, no state), on the event loop and gRPC a member runs.

`coord bench etcd` drives it with the same driver as coord and etcd, in the same run, so
its figures say how much of the etcd API's gap to etcd no coord code can close: what a
Python server pays per unary call before it does anything. Run as a process of its own
(`python -m coord.bench.grpc_floor --listen HOST:PORT`), as a member is."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc

from coord import event_loop
from coord.etcdpb import kv_pb2
from coord.etcdpb import rpc_pb2 as epb
from coord.etcdpb import rpc_pb2_grpc as erpc
from coord.testing.ports import free_port
from coord.testing.processes import stop_processes

START_TIMEOUT_S = 15.0
VALUE = b"x" * 16  # what the driver puts


class FloorKV(erpc.KVServicer):
    """Answers each call at once: a put at revision 1, a get with the key at VALUE."""

    async def Put(self, request, context):  # noqa: N802
        return epb.PutResponse(header=epb.ResponseHeader(revision=1))

    async def Range(self, request, context):  # noqa: N802
        kv = kv_pb2.KeyValue(key=request.key, value=VALUE, create_revision=1, mod_revision=1,
                             version=1)
        return epb.RangeResponse(header=epb.ResponseHeader(revision=1), kvs=[kv], count=1)


async def serve(address: str) -> None:
    # Bound exclusively, as a member's servers are: with gRPC's default SO_REUSEPORT it
    # would share a port another server took since free_port(), not fail to start.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    erpc.add_KVServicer_to_server(FloorKV(), server)
    server.add_insecure_port(address)  # RuntimeError if it cannot bind
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(0)


@contextlib.contextmanager
def floor_server() -> Iterator[tuple[str, int]]:
    """A floor server process on a free loopback port: yields (address, pid) once it
    answers, and stops it on the way out."""
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-m", "coord.bench.grpc_floor", "--listen", address])
    try:
        _wait_answering(address, proc)
        yield address, proc.pid
    finally:
        stop_processes([proc])


def _wait_answering(address: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with grpc.insecure_channel(address) as channel:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the gRPC floor server exited with {proc.returncode}")
            try:
                erpc.KVStub(channel).Put(epb.PutRequest(key=b"ready"), timeout=1.0)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the gRPC floor server did not answer on {address} "
                                       f"within {START_TIMEOUT_S:g}s") from None
                time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m coord.bench.grpc_floor",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, help="address to serve on, HOST:PORT")
    args = p.parse_args(argv)
    event_loop.run(serve(args.listen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
