"""A watcher of the own workload's ownership changes through coord's native API
(`Client.watch_owners`), for coord.check.owner_stream.

It reads the cluster's revision R, watches the group from R + 1 (every change at or
after it is owed), and records each change as a `response` row of a `watch_owners` op.
The client's stream reopens itself on another member after a failure, resuming from
its cursor: that is part of what is checked. Every few seconds the watcher ends the
stream (ok) and starts the next from the last revision it saw (the server replays that
revision's changes again, to the new stream); a stream that raised is `info`, and the
next starts from the last revision too, or, told it was compacted, from a fresh R.

Rows: invoke `key` (the group), `from_revision`, `watcher`; each response's value a
list of one change {"kind", "resource", "session", "generation", "revision"}."""

from __future__ import annotations

import random
import threading

from coord.chaos.recorder import Process
from coord.client import Client, CompactedError, CoordError
from coord.tls.files import TLS

STREAM_S = (3.0, 8.0)
"""How long one stream lives before the watcher restarts it (uniform, seeded)."""


def _head(client: Client) -> int:
    return client.range(prefix="chaos/", limit=1).header.revision


def watch_owners(j: int, endpoints: list[str], tls: TLS | None, proc: Process,
                 stop: threading.Event, seed: int, group: str) -> None:
    rng = random.Random(f"{seed}-owners-watch-{j}")
    ordered = endpoints[j % len(endpoints):] + endpoints[:j % len(endpoints)]
    with Client(ordered, timeout=3.0, randomize_endpoints=False, tls=tls or False) as client:
        start: int | None = None
        while not stop.is_set():
            if start is None:
                try:
                    start = _head(client) + 1
                except CoordError:
                    stop.wait(0.5)
                    continue
            proc.invoke("watch_owners", group, None, from_revision=start,
                        watcher=f"owners-{j}")
            stream = client.watch_owners(group, from_revision=start)
            life = rng.uniform(*STREAM_S)
            threading.Thread(target=lambda s=stream, t=life: (stop.wait(t), s.cancel()),
                             daemon=True).start()
            last = None
            try:
                for change in stream:
                    if change.mode:  # the serving member's mode, not an ownership change
                        continue
                    o = change.owner
                    proc.respond([{"kind": change.kind, "resource": o.resource,
                                   "session": o.session_id, "generation": o.generation,
                                   "revision": o.revision}], revision=o.revision)
                    last = o.revision
            except CompactedError as e:
                proc.info(type(e).__name__, compacted=True)
                start = None
                continue
            except Exception as e:  # noqa: BLE001 - the stream broke: outcome unknown
                proc.info(getattr(e, "reason", "") or type(e).__name__)
            else:
                proc.ok()
            start = last if last is not None else start
