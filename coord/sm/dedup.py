"""A bounded memory of recent request ids and the answers they got.

A client that lost a response retries with the same request id; the state machine must
answer with the first result instead of applying twice (a second PID block, a second
generation bump). The memory is replicated state, so it is bounded deterministically:
entries leave in the order they were recorded (a retry does not refresh one), once there
are more than `capacity` of them or their weights sum past `max_weight`.

Weighing a value can cost more than keeping it (the state machine's weight is a result's
encoded length: encoding it is most of what remembering costs). Given `bound`, a cheap
upper bound of a value's weight, an entry is weighed only when its exact weight could
matter: while the bounds of the entries not weighed yet, added to the weights known,
stay within `max_weight`, no eviction by weight can be due, so none is decided; past it,
every entry is weighed and the eviction runs on exact weights. Entries leave exactly as
they would if each were weighed on arrival, and most leave by count unweighed.
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
        bound: Callable[[V], int] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.max_weight = max_weight  # 0: unbounded by weight
        self._weigh = weigh or (lambda _v: 0)
        self._bound = bound
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._known = 0  # the exact weights of the entries weighed, summed
        self._unweighed: dict[K, int] = {}  # entries not weighed yet: their bounds
        self._bounds = 0  # those bounds, summed

    @property
    def weight(self) -> int:
        """The entries' weights, summed (weighing those not weighed yet)."""
        self._weigh_all()
        return self._known

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._forget(key, old)
        self._entries[key] = value
        if self._bound is None:
            self._known += self._weigh(value)
        else:
            b = self._unweighed[key] = self._bound(value)
            self._bounds += b
        # The oldest leave first, while there are too many or they weigh too much:
        # which ones is the same whichever limit is looked at first.
        while len(self._entries) > self.capacity:
            self._forget(*self._entries.popitem(last=False))
        if self.max_weight and self._known + self._bounds > self.max_weight:
            self._weigh_all()
            while self._known > self.max_weight and len(self._entries) > 1:
                self._forget(*self._entries.popitem(last=False))

    def _forget(self, key: K, value: V) -> None:
        """An entry left: its weight (or its bound, unweighed) leaves the sums."""
        b = self._unweighed.pop(key, None)
        if b is None:
            self._known -= self._weigh(value)
        else:
            self._bounds -= b

    def _weigh_all(self) -> None:
        for key in self._unweighed:
            self._known += self._weigh(self._entries[key])
        self._unweighed.clear()
        self._bounds = 0

    def items(self) -> Iterator[tuple[K, V]]:
        """Oldest first: re-putting them in this order rebuilds the same memory."""
        return iter(list(self._entries.items()))
