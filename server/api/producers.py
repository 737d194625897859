"""The Producers service: PID blocks, PID leases (Kafka's `lease_pid`) and producer
initialisation with generation fencing (the operations live in `ops`)."""

from __future__ import annotations

from coord.server.api import ops
from coord.server.api.common import Caller, serve
from coord.server.requests.coordinator import Coordinator
from coord.v1 import coord_pb2_grpc


class ProducersService(coord_pb2_grpc.ProducersServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    async def AllocatePidBlock(self, request, context):  # noqa: N802
        return await serve(context, ops.allocate_pid_block(self.coord, Caller.of(context), request))

    async def LeasePid(self, request, context):  # noqa: N802
        return await serve(context, ops.lease_pid(self.coord, Caller.of(context), request))

    async def InitProducer(self, request, context):  # noqa: N802
        return await serve(context, ops.init_producer(self.coord, Caller.of(context), request))

    async def CheckProducer(self, request, context):  # noqa: N802
        return await serve(context, ops.check_producer(self.coord, Caller.of(context), request))
