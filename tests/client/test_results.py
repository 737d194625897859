"""What the client returns, read from protobuf (coord.client.results): an own's grants
from their columns (an answer without them refused), a lease's error in its body."""

from __future__ import annotations

import pytest

from coord.client import CoordError
from coord.client.results import lease_result, own_result
from coord.v1 import coord_pb2 as pb


def test_own_answers_are_read_from_their_columns():
    answer = pb.OwnResponse(grant_columns=pb.GrantColumns(
        resources=["a", "b"], generations=[1, 4], revisions=[9, 9]))
    got = own_result(answer)
    assert [(g.resource, g.generation, g.revision) for g in got.grants] == [
        ("a", 1, 9), ("b", 4, 9)]


def test_lease_error_in_body_raises():
    with pytest.raises(CoordError) as e:
        lease_result(pb.LeasePidResponse(error="UNKNOWN_PID"))
    assert e.value.reason == "UNKNOWN_PID"
