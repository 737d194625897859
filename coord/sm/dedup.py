"""A bounded memory of recent request ids and the answers they got.

A client that lost a response retries with the same request id; the state machine must
answer with the first result instead of applying twice (a second PID block, a second
generation bump). The memory is replicated state, so it is bounded deterministically:
entries leave in the order they were recorded (a retry does not refresh one), once there
are more than `capacity` of them or their weights sum past `max_weight`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RecentRequests(Generic[K, V]):
    def __init__(
        self,
        capacity: int,
        max_weight: int = 0,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.max_weight = max_weight  # 0: unbounded by weight
        self._weigh = weigh or (lambda _v: 0)
        self._entries: OrderedDict[K, V] = OrderedDict()
        self.weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        if key in self._entries:
            self.weight -= self._weigh(self._entries.pop(key))
        self._entries[key] = value
        self.weight += self._weigh(value)
        while len(self._entries) > self.capacity or (
            self.max_weight and self.weight > self.max_weight and len(self._entries) > 1
        ):
            _, evicted = self._entries.popitem(last=False)
            self.weight -= self._weigh(evicted)

    def items(self) -> Iterator[tuple[K, V]]:
        """Oldest first: re-putting them in this order rebuilds the same memory."""
        return iter(list(self._entries.items()))
