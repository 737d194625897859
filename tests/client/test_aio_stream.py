"""A watch that outlives the member serving it (coord.client.aio_stream), against
scripted members (tests.client.fakes): a stream that breaks resumes on the next member
without loss or repeat; one ended by coord's own error reaches the caller."""

from __future__ import annotations

import pytest

from coord.client import Client, CoordError
from tests.client.fakes import FAST, wresp


@pytest.mark.parametrize("end", ["abort", "broke"])
def test_watch_resumes_on_another_member_without_loss_or_repeat(members, end):
    """The first member's stream ends UNAVAILABLE (it stops) or with gRPC's INTERNAL (it
    was killed mid-stream); the watch goes on from the second."""
    a, b = members
    a.behaviour["Watch"] = [wresp((b"k1", 11)), wresp((b"k2", 12)), end]
    b.behaviour["Watch"] = [wresp((b"k2", 12), (b"k3", 12)), wresp((b"k4", 13))]
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        stream = client.watch(prefix="k")
        got = [(e.kv.key, e.revision) for _, e in zip(range(4), stream, strict=False)]
        stream.cancel()
    assert got == [(b"k1", 11), (b"k2", 12), (b"k3", 12), (b"k4", 13)]
    assert a.requests["Watch"][0].from_revision == 11  # pinned: Range said revision 10
    assert b.requests["Watch"][0].from_revision == 12


def test_a_watch_ended_by_coords_own_internal_error_is_not_resumed(members):
    """An INTERNAL that carries coord's reason is the member's answer, not a break:
    the caller gets it rather than the watch moving to another member."""
    a, b = members
    a.behaviour["Watch"] = [wresp((b"k1", 11)), "export_failed"]
    b.behaviour["Watch"] = [wresp((b"k2", 12))]
    with Client([a.endpoint, b.endpoint], timeout=2, policy=FAST, stream=False,
                randomize_endpoints=False) as client:
        stream = client.watch(prefix="k")
        assert next(stream).kv.key == b"k1"
        with pytest.raises(CoordError) as raised:
            next(stream)
        stream.cancel()
    assert raised.value.reason == "EXPORT_FAILED" and "Watch" not in b.requests
