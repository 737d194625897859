"""Free loopback ports, without importing anything heavy (`coord serve --etcd-only` uses
it on its start-up path)."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on now (the OS picks
    them). Every probe socket stays bound until all are picked: probing one at a time can
    hand out the same port twice, and two members on one port is a cluster that talks to
    itself."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    return free_ports(1)[0]
