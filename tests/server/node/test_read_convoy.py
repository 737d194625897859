"""`ReadConvoy`'s rule, with the time given: when the next ReadIndex round starts."""

from __future__ import annotations

import pytest

from coord.server.node.read_convoy import ReadConvoy


def test_a_round_after_rounds_of_one_read_starts_at_once():
    convoy = ReadConvoy(0.002)
    for now in (1.0, 2.0, 3.0):
        convoy.arrived(now)
        assert convoy.hold_until(1, now) is None
        convoy.started(1)


def test_after_a_shared_round_the_next_waits_for_as_many_reads_or_the_window():
    convoy = ReadConvoy(0.002)
    convoy.arrived(10.0)
    assert convoy.hold_until(4, 10.0) is None
    convoy.started(4)

    convoy.arrived(20.0)
    assert convoy.hold_until(1, 20.0) == pytest.approx(20.002)
    assert convoy.hold_until(3, 20.001) == pytest.approx(20.002)
    assert convoy.hold_until(4, 20.001) is None  # the convoy is back
    assert convoy.hold_until(2, 20.002) is None  # the window has passed
    convoy.started(2)

    convoy.arrived(30.0)
    assert convoy.hold_until(2, 30.0) is None  # the last round carried two
    assert convoy.hold_until(1, 30.0) == pytest.approx(30.002)


def test_a_zero_window_never_holds():
    convoy = ReadConvoy(0.0)
    convoy.started(64)
    convoy.arrived(5.0)
    assert convoy.hold_until(1, 5.0) is None


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError):
        ReadConvoy(-0.001)
