"""Watchers of the etcd workload's keys, through the `etcd3` client, for the watch
checkers (coord.check.watch_log has the rows they record).

Each watcher keeps a watch on the workload's prefix from the revision the run started
at, and restarts it (on the next endpoint) from the last revision it saw + 1 whenever
the stream breaks (a killed member ends it with an error) and, so that restarts happen
in every run and a stream stalled by a pause or a partition does not go quiet for the
rest of it, after a few seconds at most. Watchers differ in what they ask: prev_kv,
NOPUT, NODELETE (WATCH_OPTIONS)."""

from __future__ import annotations

import contextlib
import queue
import random
import threading
from collections.abc import Callable
from typing import Any

from coord.chaos.recorder import Process

WATCH_OPTIONS: tuple[tuple[bool, tuple[str, ...]], ...] = (
    (False, ()), (True, ()), (True, ("nodelete",)), (False, ("noput",)))
"""(prev_kv, filters) of watcher 0, 1, 2, 3, then round again."""

STREAM_S = (2.0, 6.0)
"""How long one watch stream lives before the watcher restarts it (uniform, seeded)."""
LAG_S = (0.5, 2.0)
"""A third of the restarts wait this long first (a slow client): the etcd workload's
compactor has often passed the revision to resume from by then, so the server says the
watch was compacted and the next starts at the compaction."""


def _text(b: bytes) -> str | None:
    return b.decode() if b else None


class WatchStream:
    """One watch: its invoke, a `response` row per message, its completion. Opened with
    etcd3's watch callback, or, for a watch with filters, on a Watch stream of etcd3's
    generated stub (etcd3 0.12 assigns `filters` to a repeated field, which protobuf
    refuses: its own filters raise AttributeError). Responses come on another thread
    than the one that completes the op: the lock orders them before the completion,
    and none comes after it."""

    def __init__(self, proc: Process, client: Any, watcher: str, start: int, prev_kv: bool,
                 filters: tuple[str, ...], prefix: str) -> None:
        self.proc = proc
        self.client = client
        self.prev_kv = prev_kv
        self.filters = filters
        self.last: int | None = None
        self.start = start
        self.error: BaseException | None = None
        self.broken = threading.Event()
        self._lock = threading.Lock()
        self._done = False
        self._watch_id = None
        self._call = None
        self._watcher = watcher
        self._prefix = prefix

    def open(self) -> bool:
        """Creates the watch; False (the op failed) if it was not created."""
        import etcd3

        end = etcd3.utils.increment_last_byte(self._prefix.encode()).decode()
        self.proc.invoke("watch", self._prefix, None, range_end=end,
                         start_revision=self.start, prev_kv=self.prev_kv,
                         filters=list(self.filters), watcher=self._watcher,
                         endpoint=self.client.chaos_endpoint)
        try:
            if self.filters:
                self._open_stream(end)
            else:
                self._watch_id = self.client.add_watch_prefix_callback(
                    self._prefix, self.on_response, start_revision=self.start,
                    prev_kv=self.prev_kv)
        except Exception as e:  # noqa: BLE001 - etcd3 raises grpc and its own errors
            with self._lock:
                self._done = True
                self.error = e
                self.proc.fail(_name(e), compacted=_compacted(e))
            self._cancel()
            return False
        return True

    def _open_stream(self, end: str) -> None:
        """A Watch call of its own, for the filters; raises as etcd3's callback watch
        does (RevisionCompactedError, WatchTimedOut, the call's error)."""
        from etcd3 import etcdrpc, exceptions

        kinds = {"noput": etcdrpc.WatchCreateRequest.NOPUT,
                 "nodelete": etcdrpc.WatchCreateRequest.NODELETE}
        create = etcdrpc.WatchRequest(create_request=etcdrpc.WatchCreateRequest(
            key=self._prefix.encode(), range_end=end.encode(), start_revision=self.start,
            prev_kv=self.prev_kv, filters=[kinds[f] for f in self.filters]))
        self._requests: queue.Queue = queue.Queue()
        self._requests.put(create)
        self._call = etcdrpc.WatchStub(self.client.channel).Watch(
            iter(self._requests.get, None), credentials=self.client.call_credentials,
            metadata=self.client.metadata)
        created: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(created,), daemon=True).start()
        try:
            first = created.get(timeout=self.client.timeout)
        except queue.Empty:
            raise exceptions.WatchTimedOut() from None
        if isinstance(first, BaseException):
            raise first
        if first.canceled:
            if first.compact_revision:
                raise exceptions.RevisionCompactedError(first.compact_revision)
            raise RuntimeError(f"watch refused: {first.cancel_reason}")

    def _pump(self, created: queue.Queue) -> None:
        """The stream's responses: the first (created) to `created`, the rest to
        on_response, as etcd3's watcher hands them to a callback."""
        import etcd3
        from etcd3 import exceptions

        try:
            for rs in self._call:
                if rs.created:
                    created.put(rs)
                elif rs.canceled:
                    self.on_response(exceptions.RevisionCompactedError(rs.compact_revision)
                                     if rs.compact_revision else RuntimeError(
                                         f"watch canceled: {rs.cancel_reason}"))
                    return
                else:
                    self.on_response(etcd3.watch.WatchResponse(
                        rs.header, [etcd3.events.new_event(e) for e in rs.events]))
        except Exception as e:  # noqa: BLE001 - the stream broke (or was canceled)
            created.put(e)
            self.on_response(e)

    def on_response(self, resp: Any) -> None:
        with self._lock:
            if self._done:
                return
            if isinstance(resp, BaseException):
                self.error = resp
                self.broken.set()
                return
            events = [self._event(e) for e in resp.events]
            if events:
                self.last = events[-1]["revision"]
            self.proc.respond(events, revision=resp.header.revision)

    def _event(self, e: Any) -> dict[str, Any]:
        import etcd3

        out = {"type": "put" if isinstance(e, etcd3.events.PutEvent) else "delete",
               "key": e.key.decode(), "value": _text(e.value), "revision": e.mod_revision}
        if self.prev_kv or e.prev_key:
            out["prev"] = _text(e.prev_value) if e.prev_key else None
        return out

    def close(self) -> None:
        """Completes the op: info if the stream broke, else cancels the watch (ok)."""
        with self._lock:
            if self._done:
                return
            self._done = True
            if self.error is not None:
                self.proc.info(_name(self.error), compacted=_compacted(self.error))
            else:
                self.proc.ok()
        self._cancel()

    def _cancel(self) -> None:
        with contextlib.suppress(Exception):  # the client is closed next anyway
            if self._call is not None:
                self._requests.put(None)
                self._call.cancel()
            elif self._watch_id is not None:
                self.client.cancel_watch(self._watch_id)

    def resume_at(self) -> int:
        """Where the next watch starts: after what this one saw (where it started, if it
        saw nothing or was not created), or at the compaction it was told of."""
        at = self.start if self.last is None else self.last + 1
        return max(at, _compacted(self.error) or 0)


def _name(e: BaseException) -> str:
    """An error's name: a gRPC status code's, else its type's."""
    code = getattr(e, "code", None)
    with contextlib.suppress(Exception):
        if callable(code):
            return code().name
    return type(e).__name__


def _compacted(e: BaseException | None) -> int | None:
    return getattr(e, "compacted_revision", None)


def watch(j: int, connect: Callable[[int], Any], proc: Process, stop: threading.Event,
          seed: int, start: int, prefix: str) -> None:
    """Watcher `j` until `stop`: a watch from `start`, restarted from where it left off
    on the next endpoint (`connect(n)`: an etcd3 client to the nth, round robin), each
    stream living at most STREAM_S."""
    rng = random.Random(f"{seed}-etcd-watch-{j}")
    prev_kv, filters = WATCH_OPTIONS[j % len(WATCH_OPTIONS)]
    attempt = j
    while not stop.is_set():
        client = connect(attempt)
        stream = WatchStream(proc, client, f"etcd-{j}", start, prev_kv, filters, prefix)
        if stream.open():
            for _ in range(int(rng.uniform(*STREAM_S) / 0.2)):
                if stop.is_set() or stream.broken.wait(0.2):
                    break
            stream.close()
        start = stream.resume_at()
        with contextlib.suppress(Exception):  # reconnecting anyway
            client.close()
        attempt += 1
        stop.wait(0.1 if rng.random() < 2 / 3 else rng.uniform(*LAG_S))
