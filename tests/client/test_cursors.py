"""Positions in server streams (coord.client.cursors): a watch resumed without loss or
repeat, an owners watch that lists again until it has seen a change."""

from __future__ import annotations

import pytest

from coord.client import CompactedError, InvalidArgumentError, UnavailableError
from coord.client.cursors import OwnersCursor, WatchCursor
from coord.client.results import Header, RangeResult
from coord.v1 import coord_pb2 as pb
from tests.client.fakes import wresp


def test_watch_cursor_pins_start_and_resumes_without_loss_or_repeat():
    cur = WatchCursor(b"a", b"b")
    start = cur.start_call()
    assert start is not None and start.request.limit == 1
    cur.started(RangeResult(Header(revision=10)))
    assert cur.request().from_revision == 11
    assert cur.start_call() is None
    got = cur.feed(wresp((b"a1", 11), (b"a2", 12)))
    assert [e.kv.key for e in got] == [b"a1", b"a2"]
    assert cur.request().from_revision == 12  # resume AT the last revision...
    got = cur.feed(wresp((b"a2", 12), (b"a3", 12), (b"a1", 13)))  # ...and drop repeats
    assert [(e.kv.key, e.revision) for e in got] == [(b"a3", 12), (b"a1", 13)]
    assert cur.feed(wresp((b"a0", 11))) == []
    with pytest.raises(CompactedError) as e:
        cur.feed(pb.WatchResponse(compact_revision=20))
    assert e.value.compact_revision == 20


def test_owners_cursor_relists_until_a_change_then_resumes():
    cur = OwnersCursor("g")
    snap = pb.OwnerChange(group="g", owner=pb.Owner(resource="r", session_id=1, revision=4),
                          snapshot=True)
    assert len(cur.feed(snap)) == 1
    assert cur.request().from_revision == 0  # no change yet: a fresh listing again
    change = pb.OwnerChange(group="g", owner=pb.Owner(resource="r", session_id=2, revision=9))
    assert len(cur.feed(change)) == 1
    assert cur.request().from_revision == 9
    assert cur.feed(change) == []
    assert cur.on_error(CompactedError("COMPACTED", ""))
    assert cur.request().from_revision == 0
    assert not cur.on_error(InvalidArgumentError("INVALID_ARGUMENT", ""))
    assert cur.on_error(UnavailableError("UNAVAILABLE", ""))
