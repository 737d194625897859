"""The member `coord bench raft` runs: a normal coord Member (the same flags as `coord
serve`, the same `MemberConfig`) plus the RaftBench service on its own address
(`--bench-listen`), which runs proposers inside this process against its node.

Running the proposers inside the leader is what makes the benchmark measure the log —
batching, fsync, replication, apply — rather than the Python gRPC client stack. They
live here, in a benchmark-only entry point, so `coord serve` carries no load generator:

    python -m coord.bench.raft_member --bench-listen HOST:PORT COORD-SERVE-FLAGS...
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

import grpc

from coord.bench import raft_bench_pb2 as pb
from coord.bench import raft_bench_pb2_grpc as rpc
from coord.bench.stats import latency_ms
from coord.serve_flags import add_serve_flags, configure_logging, member_config
from coord.server import loop
from coord.server.api.errors import abort, abort_node_error
from coord.server.member import Member, listen
from coord.server.node.driver import Node
from coord.server.node.errors import NodeError
from coord.server.storage.log_store import StorageError
from coord.server.transport.grpc_options import EXCLUSIVE_BIND
from coord.sm.commands import Barrier, encode_command

MAX_CONCURRENCY = 4096
MAX_DURATION_MS = 120_000


class RaftBenchService(rpc.RaftBenchServicer):
    """Proposes no-op commands (a Barrier: a few bytes) through the node's normal
    proposal path, `concurrency` of them back to back, for `duration_ms`."""

    def __init__(self, node: Node) -> None:
        self.node = node

    async def ProposeLoad(  # noqa: N802 - the gRPC method name
        self, request: pb.ProposeLoadRequest, context: grpc.aio.ServicerContext
    ) -> pb.ProposeLoadResponse:
        concurrency, duration_ms = request.concurrency or 1, request.duration_ms
        if not 1 <= concurrency <= MAX_CONCURRENCY or not 0 < duration_ms <= MAX_DURATION_MS:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "BAD_BENCH",
                        f"concurrency 1..{MAX_CONCURRENCY}, duration 1..{MAX_DURATION_MS} ms")
        payload = encode_command(Barrier())
        latencies: list[float] = []
        deadline = time.monotonic() + duration_ms / 1000

        async def proposer() -> None:
            while time.monotonic() < deadline:  # bounded by the deadline
                t0 = time.perf_counter()
                await self.node.propose(payload)
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        try:
            await asyncio.gather(*(proposer() for _ in range(concurrency)))
        except NodeError as e:
            await abort_node_error(context, e)
        seconds = time.perf_counter() - t0
        return pb.ProposeLoadResponse(committed=len(latencies), seconds=seconds,
                                      **latency_ms(latencies))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m coord.bench.raft_member",
                                description=__doc__.split("\n\n")[0])
    add_serve_flags(p)
    p.add_argument("--bench-listen", required=True, help="RaftBench service address HOST:PORT")
    return p.parse_args(argv)


async def serve(member: Member, bench_listen: str) -> int:
    """The member until SIGINT/SIGTERM (as `coord serve`), with RaftBench beside it."""
    server = grpc.aio.server(options=[EXCLUSIVE_BIND])
    rpc.add_RaftBenchServicer_to_server(RaftBenchService(member.node), server)
    listen(server, bench_listen, "--bench-listen")  # as the member binds its own
    await server.start()
    try:
        return await member.serve_until_signalled()
    finally:
        await server.stop(0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    try:
        config = member_config(args)
    except ValueError as e:
        raise SystemExit(f"coord.bench.raft_member: {e}") from None

    async def run() -> int:
        return await serve(Member(config), args.bench_listen)

    try:
        return loop.run(run(), args.event_loop)
    except (StorageError, OSError, ValueError) as e:
        logging.getLogger("coord").error("%s: cannot start: %s", args.name, e)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
