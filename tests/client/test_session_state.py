"""A live session's bookkeeping (coord.client.session_state), on a clock the test moves:
its TTL, the cluster mode it tells, how it ends, and a member-local session's way to
registration."""

from __future__ import annotations

from coord.client.read_only import ModeChange
from coord.client.results import SessionEvent
from coord.client.session_state import SessionCore, describe_end
from coord.v1 import coord_pb2 as pb
from tests.clocks import FakeClock


def test_session_core():
    clock = FakeClock()
    core = SessionCore(5, ttl=9.0, clock=clock)
    assert core.interval == 3.0
    assert core.remaining() == 9.0
    clock.now = 4.0
    assert core.acked(2.0, pb.KeepAliveResponse(session_id=5, ttl_ms=12000)) is None
    assert core.ttl == 12.0 and core.remaining() == 10.0
    assert not core.stalled(None) and not core.stalled(3.0)
    # Answered but not renewed (no leader in time; a read-only member): the TTL runs on.
    assert core.acked(5.0, pb.KeepAliveResponse(session_id=5, pending=True)) is None
    assert core.remaining() == 10.0 and core.mode == "read-write"
    assert core.acked(5.0, pb.KeepAliveResponse(session_id=5, ttl_ms=12000, read_only=True)) is None
    assert core.remaining() == 10.0 and core.mode == "read-write"  # the client tells it
    told = core.entered_read_only("n1")
    assert told is not None and (told.type, told.mode, told.member) == (
        "mode_changed", "read-only", "n1")
    core.observe(told)
    assert core.mode == "read-only" and core.entered_read_only("n1") is None
    assert core.already_told(SessionEvent("mode_changed", 5, mode="read-only", member="n1"))
    assert not core.already_told(SessionEvent("mode_changed", 5, mode="read-write"))
    core.mode = "read-write"
    assert core.moved(ModeChange("read-write", "n2", "e", True)) is None  # knew already
    core.mode = "read-only"
    moved = core.moved(ModeChange("read-write", "n2", "e", True))
    assert moved is not None and (moved.type, moved.mode, moved.member) == (
        "mode_changed", "read-write", "n2")
    clock.now = 8.0
    assert core.stalled(3.0)
    gone = core.acked(8.0, pb.KeepAliveResponse(session_id=5, gone=True))
    assert gone is not None and gone.type == "gone"
    assert core.observe(SessionEvent("mode_changed", 5, mode="read-only")) is False
    assert core.mode == "read-only"
    assert core.observe(SessionEvent("severed", 5))
    assert core.observe(SessionEvent("released", 5))  # closed by another client
    assert core.end(gone) and not core.end(gone)


def test_session_core_of_a_member_local_session():
    clock = FakeClock()
    core = SessionCore(7, ttl=3.0, clock=clock, local=True)
    clock.now = 2.0
    # Its member renews it (read-only or not): the TTL starts again.
    local_ack = pb.KeepAliveResponse(session_id=7, ttl_ms=3000, read_only=True, local=True)
    assert core.acked(2.0, local_ack) is None and core.remaining() == 3.0
    clock.now = 9.0  # silence: remaining() stops at 0, the silence goes on counting
    assert core.remaining() == 0.0 and core.unanswered_for() == 7.0
    assert not core.observe(SessionEvent("mode_changed", 7, mode="read-write", member="n3"))
    assert core.local  # the mode alone changes nothing: registration does
    assert not core.observe(SessionEvent("registered", 7, member="n3"))
    assert not core.local
    dropped = SessionEvent("dropped", 7, member="n3", message="refused: SESSION_EXISTS: ...")
    assert core.observe(dropped)  # terminal
    assert describe_end(dropped) == "session 7 dropped: refused: SESSION_EXISTS: ..."
