"""Free loopback ports, without importing anything heavy (`coord serve --etcd-only` uses
it on its start-up path).

Ports are picked below the kernel's ephemeral range (`ip_local_port_range`), never in it:
a port the OS hands out for binding to 0 is one it may also hand out as the source port
of an outgoing connection. Members dial each other before every peer listens, and a
connection to 127.0.0.1:P that gets P as its own source port connects to itself (TCP's
simultaneous open) and holds P, so the member meant to listen there failed to start
("address already in use", seen in a suite run). Outside the range no outgoing
connection takes the port."""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack

LOWEST = 10_000  # below: well-known and registered services' usual ports
_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (Linux's default if
    it cannot be read)."""
    try:
        with open(_RANGE_FILE) as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _candidates() -> range:
    low, high = ephemeral_range()
    if low - LOWEST >= 1000:
        return range(LOWEST, low)
    return range(high + 1, 65536)  # a range moved down: take the ports above it


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on now, outside the
    ephemeral range. Every probe socket stays bound until all are picked: probing one at
    a time can hand out the same port twice, and two members on one port is a cluster
    that talks to itself."""
    candidates = _candidates()
    rng = random.SystemRandom()
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(50 * count + 100):  # bound: most ports are free
            if len(ports) == count:
                return ports
            port = rng.choice(candidates)
            if port in ports:
                continue
            s = stack.enter_context(socket.socket())
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
        if len(ports) == count:
            return ports
    raise OSError(f"found only {len(ports)} of {count} free ports in {candidates}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    return free_ports(1)[0]
