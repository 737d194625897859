"""The Producers service: PID blocks, PID leases (the seed's lease_pid) and producer
initialisation with generation fencing."""

from __future__ import annotations

import secrets

from coord.server.api.common import check, read, write
from coord.server.core.coordinator import Coordinator
from coord.sm import commands as c
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc

DEFAULT_BLOCK = 1000


class ProducersService(coord_pb2_grpc.ProducersServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    async def AllocatePidBlock(self, request, context):  # noqa: N802
        size = request.size or DEFAULT_BLOCK
        cmd = c.AllocatePidBlock(request.requester, size, request.request_id)
        res = await write(context, self.coord, cmd)
        return pb.AllocatePidBlockResponse(
            header=self.coord.header(res.revision), start=res.start, size=res.size
        )

    async def LeasePid(self, request, context):  # noqa: N802
        # The serving member draws the random starting generation and puts it in the
        # command: apply itself never draws randomness.
        cmd = c.LeasePid(
            request.topic,
            request.partition,
            request.pid if request.pid else -1,
            random_generation=secrets.randbelow(2**31 - 1) + 1,
            request_id=request.request_id,
        )
        # lease_pid answers its own errors in-band, as the seed's response does.
        res = await write(context, self.coord, cmd, in_band=True)
        return pb.LeasePidResponse(
            header=self.coord.header(res.revision),
            error=res.error,
            pid=res.pid,
            generation=res.generation,
            sequence_number=res.sequence_number,
            expire_ms=res.expire_ms,
        )

    async def InitProducer(self, request, context):  # noqa: N802
        res = await write(
            context, self.coord, c.InitProducer(request.producer_key, request.request_id)
        )
        return pb.InitProducerResponse(
            header=self.coord.header(res.revision), pid=res.pid, generation=res.generation
        )

    async def CheckProducer(self, request, context):  # noqa: N802
        cmd = c.CheckProducer(request.producer_key, request.pid, request.generation)
        res = await read(context, self.coord, cmd)
        await check(context, res)
        return pb.CheckProducerResponse(header=self.coord.header())
