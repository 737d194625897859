"""The skewed test build's clock, as the skew nemesis moves it: a member following a
skew file runs its wall clock off by what the file holds, and back once it holds 0;
the monotonic clock is not touched."""

from __future__ import annotations

import threading
import time

import pytest

from coord.chaos import skewed_member
from coord.chaos.skew_file import read_skew, write_skew
from coord.chaos.skewed_member import follow


@pytest.fixture
def real_clock():
    real = time.time, time.time_ns
    yield
    time.time, time.time_ns = real


def _off_by(target_s: float, real_s) -> float:
    """How far time.time() is from the real clock, once it is within 1 s of `target_s`
    (polled for at most 5 s)."""
    deadline = real_s() + 5
    while True:
        off = time.time() - real_s()
        if abs(off - target_s) < 1 or real_s() > deadline:
            return off
        time.sleep(0.01)


def test_a_member_following_its_skew_file_moves_its_wall_clock_and_back(tmp_path, real_clock):
    path = tmp_path / "n1"
    assert read_skew(path) == 0  # no file yet: no skew
    real_s = time.time
    stop = threading.Event()
    t = threading.Thread(target=follow, args=(path, stop), daemon=True)
    t.start()
    try:
        write_skew(path, -90_000)
        assert read_skew(path) == -90_000
        assert -91 < _off_by(-90, real_s) < -89
        assert abs(time.time_ns() / 1e9 - real_s() + 90) < 1
        write_skew(path, 0)
        assert abs(_off_by(0, real_s)) < 1
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()
    assert skewed_member._skew_ns == 0
