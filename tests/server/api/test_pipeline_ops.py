"""The pipelined stream's three tables agree: the client's PIPELINED (which unary
methods travel on the stream), the proto's PipelineOp/PipelineResult oneofs, and the
server's OPS (what serves each)."""

from __future__ import annotations

from coord.client.aio_pipeline import PIPELINED
from coord.server.api.ops import OPS
from coord.v1 import coord_pb2 as pb


def test_every_pipelined_call_has_its_op_on_both_sides_with_the_unary_types():
    op_fields = {f.name: f for f in pb.PipelineOp.DESCRIPTOR.oneofs_by_name["request"].fields}
    result_fields = {f.name: f for f in
                     pb.PipelineResult.DESCRIPTOR.oneofs_by_name["response"].fields}
    assert set(PIPELINED.values()) == set(op_fields) == set(OPS)
    assert set(result_fields) == set(op_fields) | {"error"}
    for (service, method), field in PIPELINED.items():
        rpc = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
        assert op_fields[field].message_type is rpc.input_type, (service, method)
        assert result_fields[field].message_type is rpc.output_type, (service, method)
