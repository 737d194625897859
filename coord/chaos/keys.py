"""Register keys that rotate (Jepsen's independent keys): a few hot keys at a time, a
fresh set every `ops_per_key` ops per key, so each key's oplog stays small enough for
the linearizability search. Shared by the native and the etcd register workloads (this
module imports nothing of the client, which the etcd worker's process must not load)."""

from __future__ import annotations

import itertools
import random
import threading


class RotatingKeys:
    def __init__(self, prefix: str, hot_keys: int = 3, ops_per_key: int = 250) -> None:
        self.prefix = prefix
        self.hot_keys = hot_keys
        self.ops_per_key = ops_per_key
        self._ops = itertools.count()
        self._lock = threading.Lock()
        self.used: set[str] = set()  # every key handed out: the final reads read them

    def next(self, rng: random.Random) -> str:
        batch = next(self._ops) // (self.ops_per_key * self.hot_keys)
        key = f"{self.prefix}{batch}/{rng.randrange(self.hot_keys)}"
        with self._lock:
            self.used.add(key)
        return key
