"""Kubernetes-shaped traffic through etcd's v3 API, driven by `etcd3` in the etcd
worker's process (coord.chaos.etcd_worker), for coord.check.informers and the watch
checks.

What the Kubernetes API server does with etcd, in small:
- controllers keep objects under K8S_PREFIX: a create is a txn `create_revision == 0 ->
  put`, an update a txn `mod_revision == M -> put` (M: the revision the controller last
  saw the object at, the resourceVersion), a delete the same with a delete; a txn whose
  compare failed reads the object instead, so the controller learns its revision.
- informers list the prefix (at the cluster's current revision R), then watch it from
  R + 1; a stream that breaks is restarted from the last revision seen + 1; a watch the
  server says was compacted makes the informer list again (Kubernetes' "410 Gone").

Rows: `list` (value: [[key, value, mod_revision], ...], `revision`: the list's;
`informer` and `chain`: the watcher name its following watches carry), `create`
(value), `update` ([M, value]) and `remove` ([M, null]): ok carries the txn's revision,
fail means the compare failed. The watches are coord.check.watch_log's `watch` rows.

PLANT "blind-updates" makes updates and deletes plain puts and deletes with no compare
(recorded as if they had one): coord.check.informers must find one that overwrote a
newer revision."""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
from collections.abc import Callable
from typing import Any

from coord.chaos.etcd_watchers import LAG_S, STREAM_S, WatchStream
from coord.chaos.recorder import Process

K8S_PREFIX = "chaos/k8s/"
OBJECTS = 6
"""Object names per run (obj/0 ...): few, so controllers collide and compares fail."""
BLIND = "blind-updates"
RELIST = 0.25
"""The share of an informer's watch restarts that list again instead of resuming (an
informer restarted, or an error it cannot resume from), beside those a compaction
forces: so that every run checks caches rebuilt from several lists."""


class Controller:
    """One controller: creates, updates and deletes objects by compare-and-swap on what
    it last saw of each (key -> mod_revision, None: absent)."""

    def __init__(self, proc: Process, values: itertools.count, plant: str = "") -> None:
        self.proc = proc
        self.values = values
        self.blind = plant == BLIND
        self.seen: dict[str, int | None] = {}

    def step(self, client: Any, rng: random.Random) -> bool:
        """One op; False if the connection looks broken (the caller reconnects)."""
        key = f"{K8S_PREFIX}obj/{rng.randrange(OBJECTS)}"
        if key not in self.seen or rng.random() < 0.1:
            listed = list_prefix(self.proc, client, "controller")
            if listed is None:
                return False
            self.seen = {f"{K8S_PREFIX}obj/{n}": None for n in range(OBJECTS)}
            self.seen.update({k: mod for k, _, mod in listed[1]})
            return True
        mod = self.seen[key]
        value = next(self.values)
        if mod is None:
            f, asked = "create", value
        else:
            f, asked = rng.choices(("update", "remove"), (4, 1))[0], [mod, None]
            if f == "update":
                asked = [mod, value]
        self.proc.invoke(f, key, asked, endpoint=client.chaos_endpoint)
        try:
            ok, revision, current = self._txn(client, f, key, mod, value)
        except Exception as e:  # noqa: BLE001 - etcd3 raises grpc and its own errors
            self.proc.info(type(e).__name__)
            self.seen.pop(key, None)  # relearn it
            return False
        if ok:
            self.proc.ok(asked, revision=revision)
            self.seen[key] = None if f == "remove" else revision
        else:
            self.proc.fail("compare failed", asked, current=current)
            self.seen[key] = current
        return True

    def _txn(self, client: Any, f: str, key: str, mod: int | None, value: int
             ) -> tuple[bool, int, int | None]:
        """(succeeded, the txn's revision, the key's mod_revision when it failed)."""
        from etcd3 import etcdrpc

        t = client.transactions
        if f == "create":
            compare = [t.create(key) == 0]
        elif self.blind:
            compare = []
        else:
            compare = [t.mod(key) == mod]
        success = [t.delete(key) if f == "remove" else t.put(key, str(value))]
        request = etcdrpc.TxnRequest(
            compare=[c.build_message() for c in compare],
            success=client._ops_to_requests(success),
            failure=client._ops_to_requests([t.get(key)]))
        resp = client.kvstub.Txn(request, client.timeout, credentials=client.call_credentials,
                                 metadata=client.metadata)
        current = None
        if not resp.succeeded:
            kvs = resp.responses[0].response_range.kvs
            current = kvs[0].mod_revision if kvs else None
        return resp.succeeded, resp.header.revision, current


def list_prefix(proc: Process, client: Any, who: str, **fields: Any
                ) -> tuple[int, list[list[Any]]] | None:
    """A `list` op of K8S_PREFIX at the current revision: (the revision, [[key, value,
    mod_revision], ...]), or None if it failed."""
    proc.invoke("list", K8S_PREFIX, None, endpoint=client.chaos_endpoint, who=who, **fields)
    try:
        resp = client.get_prefix_response(K8S_PREFIX)
    except Exception as e:  # noqa: BLE001 - a read changes nothing: failed
        proc.fail(type(e).__name__)
        return None
    entries = [[kv.key.decode(), kv.value.decode(), kv.mod_revision] for kv in resp.kvs]
    proc.ok(entries, revision=resp.header.revision)
    return resp.header.revision, entries


def controller(j: int, connect: Callable[[int], Any], proc: Process,
               stop: threading.Event, seed: int, values: itertools.count,
               plant: str = "") -> None:
    rng = random.Random(f"{seed}-k8s-controller-{j}")
    ctl = Controller(proc, values, plant)
    attempt = j
    client = connect(attempt)
    while not stop.is_set():
        if not ctl.step(client, rng):
            attempt += 1
            with contextlib.suppress(Exception):  # reconnecting anyway
                client.close()
            stop.wait(0.1)
            client = connect(attempt)
        else:
            stop.wait(rng.uniform(0.0, 0.05))
    client.close()


def informer(j: int, connect: Callable[[int], Any], proc: Process, stop: threading.Event,
             seed: int) -> None:
    """Informer `j` until `stop`: list, then a chain of watches from the list's revision
    + 1, each restarted (on the next endpoint) from the last revision seen + 1, until
    one is told it was compacted (or, RELIST of the time, at a restart): then list
    again and start a new chain."""
    rng = random.Random(f"{seed}-k8s-informer-{j}")
    attempt = j
    for relist in itertools.count():
        if stop.is_set():
            return
        chain = f"k8s-{j}.{relist}"
        client = connect(attempt)
        try:
            listed = list_prefix(proc, client, "informer", informer=f"k8s-{j}", chain=chain)
        finally:
            with contextlib.suppress(Exception):
                client.close()
        attempt += 1
        if listed is None:
            stop.wait(0.2)
            continue
        start = listed[0] + 1
        while not stop.is_set():
            client = connect(attempt)
            stream = WatchStream(proc, client, chain, start, False, (), K8S_PREFIX)
            if stream.open():
                for _ in range(int(rng.uniform(*STREAM_S) / 0.2)):
                    if stop.is_set() or stream.broken.wait(0.2):
                        break
                stream.close()
            with contextlib.suppress(Exception):  # reconnecting anyway
                client.close()
            attempt += 1
            if getattr(stream.error, "compacted_revision", None) or rng.random() < RELIST:
                break
            start = stream.resume_at()
            stop.wait(0.1 if rng.random() < 2 / 3 else rng.uniform(*LAG_S))
