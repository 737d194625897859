"""The fenced sink the ownership workload writes to: a stand-in for an external store
that embeds fencing, as a Kafka broker or a Delta table would. It accepts a write only
if its (generation, revision) token is not older than the last one it accepted for
that resource; the ownership checker then verifies what it accepted. A sink made with
`fencing=False` accepts every write (a planted bug, `--plant unfenced-sink`: a store that
trusts its writers), so the checker's own fencing checks are seen to fire."""

from __future__ import annotations

import threading


class FencedSink:
    def __init__(self, fencing: bool = True) -> None:
        self.fencing = fencing
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], tuple[int, int]] = {}
        self._sequence = 0

    def write(self, group: str, resource: str, generation: int, revision: int
              ) -> tuple[bool, int | str]:
        """(True, acceptance sequence number) or (False, why it was refused)."""
        token = (generation, revision)
        with self._lock:
            last = self._last.get((group, resource))
            if self.fencing and last is not None and token < last:
                return False, f"stale token {token}: the sink accepted {last}"
            self._last[(group, resource)] = token
            self._sequence += 1
            return True, self._sequence
