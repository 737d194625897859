"""Free ports for test clusters come from below the kernel's ephemeral range, so no
outgoing connection (a member dialing a peer that does not listen yet) can take one as
its source port and hold it."""

from __future__ import annotations

import socket

from coord.testing import ports


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range():
    low, high = ports.ephemeral_range()
    picked = ports.free_ports(20)
    assert len(set(picked)) == 20
    assert all(not low <= p <= high for p in picked), (picked, low, high)
    for p in picked:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_port_in_use_is_not_handed_out(monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "_candidates", lambda: [port, free])
        assert ports.free_ports(1) == [free]


def test_the_range_falls_back_to_linuxs_default_when_unreadable(monkeypatch):
    monkeypatch.setattr(ports, "_RANGE_FILE", "/nonexistent/ip_local_port_range")
    assert ports.ephemeral_range() == (32768, 60999)
