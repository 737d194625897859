"""The Producers service: PID blocks, PID leases (Kafka's `lease_pid`) and producer
initialisation with generation fencing (the operations live in `ops`)."""

from __future__ import annotations

from coord.server.api import ops
from coord.server.api.ops import unary
from coord.server.requests.coordinator import Coordinator
from coord.v1 import coord_pb2_grpc


class ProducersService(coord_pb2_grpc.ProducersServicer):
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord

    AllocatePidBlock = unary(ops.allocate_pid_block)
    LeasePid = unary(ops.lease_pid)
    InitProducer = unary(ops.init_producer)
    CheckProducer = unary(ops.check_producer)
