"""A "broker" of KafScale's partition-ownership specification (etcd leases), run as its own process
by test_partition_leases.py, using the `etcd3` package (a client nobody here wrote):
one lease with a TTL for all its partitions, kept alive by heartbeats; each partition
claimed with a create-if-absent Txn bound to that lease; a prefix watch that claims a
partition the moment its key is deleted; on SIGTERM (graceful shutdown) the lease is
revoked, so its keys vanish at once. Prints one JSON line per claim.

usage: partition_broker.py NAME HOST PORT TTL PARTITIONS(comma-separated)
"""

from __future__ import annotations

import json
import signal
import sys
import threading

import etcd3

PREFIX = "/kafscale/partition-leases/orders/"
POLL_S = 0.5  # a safety net only: the watch claims freed partitions at once


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def main(name: str, host: str, port: int, ttl: int, partitions: list[int]) -> None:
    client = etcd3.client(host=host, port=port, timeout=5)
    lease = client.lease(ttl)
    stop = threading.Event()
    owned: set[int] = set()
    lock = threading.Lock()

    def claim(p: int) -> None:
        key = f"{PREFIX}{p}"
        with lock:
            if p in owned or stop.is_set():
                return
            ok, _ = client.transaction(
                compare=[client.transactions.create(key) == 0],
                success=[client.transactions.put(key, name, lease)],
                failure=[],
            )
            if ok:
                owned.add(p)
                say(broker=name, claimed=p, lease=lease.id)

    def on_watch(response: object) -> None:
        for event in getattr(response, "events", []):
            if isinstance(event, etcd3.events.DeleteEvent):
                p = int(event.key.decode().rsplit("/", 1)[1])
                if p in partitions:
                    claim(p)

    client.add_watch_prefix_callback(PREFIX, on_watch)

    def heartbeat() -> None:
        while not stop.wait(ttl / 3):
            for _ in lease.refresh():
                pass

    threading.Thread(target=heartbeat, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    say(broker=name, started=True, lease=lease.id)
    while not stop.is_set():
        for p in partitions:
            claim(p)
        stop.wait(POLL_S)
    with lock:
        lease.revoke()
    say(broker=name, revoked=lease.id)


if __name__ == "__main__":
    n, h, port_, ttl_, parts = sys.argv[1:6]
    main(n, h, int(port_), int(ttl_), [int(p) for p in parts.split(",")])
