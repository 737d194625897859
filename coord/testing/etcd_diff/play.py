"""Play one generated sequence (`coord.testing.etcd_diff.generate`) against one etcd-API server and
write down every answer in a form two systems can be compared in: revisions relative to
the sequence's start, lease ids as the generator's slots, no cluster/member ids or terms.

Watches are made deterministic without sleeping: before a watch is canceled, and at the
end of the sequence, its key is written (a put, then a delete) and the player waits —
bounded in time — until the watch has reported that write (or was canceled). etcd sends
the events of a canceled watch only if they were already queued, so without the flush
the events of a canceled watch would be a race, not a fact.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from coord.etcdpb import rpc_pb2 as pb
from coord.etcdpb import rpc_pb2_grpc as stubs
from coord.sm.kv_history import in_range
from coord.testing.etcd_diff.generate import Step, prefix_end, prefix_of

T = 10.0  # every call's deadline
WATCH_WAIT = 5.0  # how long a watch may take to report a write
TTL_SLACK = 15  # a remaining TTL is right if within this many seconds of the granted TTL
EXPLICIT_IDS = 1 << 40  # far above any id coord's counter reaches in a run
REV_FIELDS = frozenset({"revision", "create_revision", "mod_revision", "compact_revision"})
W = pb.WatchCreateRequest


class System:
    """One server under test."""

    def __init__(self, name: str, endpoint: str) -> None:
        self.name = name
        self.channel = grpc.insecure_channel(endpoint)
        self.kv = stubs.KVStub(self.channel)
        self.lease = stubs.LeaseStub(self.channel)
        self.watch = stubs.WatchStub(self.channel)

    def revision(self) -> int:
        return self.kv.Range(pb.RangeRequest(key=b"\0"), timeout=T).header.revision

    def close(self) -> None:
        self.channel.close()


@dataclass
class Revisions:
    """Real revisions <-> revisions relative to `base` (0 stays 0: "none" or "now"). Both
    systems move the revision for exactly the same operations, so no revision is skipped."""

    base: int

    def relative(self, real: int) -> int:
        return 0 if real == 0 else real - self.base

    def real(self, rel: int) -> int:
        return 0 if rel == 0 else self.base + rel


Metadata = tuple[tuple[str, str], ...] | None


def call(fn: Callable, req: Any, metadata: Metadata = None) -> Any:
    """The response, or ("error", code, message) — errors are compared exactly."""
    try:
        return fn(req, timeout=T, metadata=metadata)
    except grpc.RpcError as e:
        return ("error", e.code().name, e.details())


class WatchStream:
    """One Watch call; a thread files its responses by watch id."""

    def __init__(self, stub: stubs.WatchStub, metadata: Metadata = None) -> None:
        self.requests: queue.Queue[pb.WatchRequest | None] = queue.Queue()
        self.cond = threading.Condition()
        self.created: list[pb.WatchResponse] = []
        self.reports: dict[int, Report] = {}  # by watch id: of its newest watch
        self.failure: str = ""
        self.call = stub.Watch(iter(self.requests.get, None), metadata=metadata)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for r in self.call:
                with self.cond:
                    self._file(r)
                    self.cond.notify_all()
        except grpc.RpcError as e:
            with self.cond:
                if e.code() != grpc.StatusCode.CANCELLED:
                    self.failure = f"{e.code().name}: {e.details()}"
                self.cond.notify_all()

    def _file(self, r: pb.WatchResponse) -> None:
        """A created response starts a new report: an id may be reused after a cancel."""
        if r.created:
            self.created.append(r)
            if not r.canceled:
                self.reports[r.watch_id] = Report()
            return
        report = self.reports.setdefault(r.watch_id, Report())
        if r.canceled:
            report.cancels.append(r)
        elif r.events:
            report.events.extend(r.events)
            report.last = max(e.kv.mod_revision for e in r.events)

    def wait(self, done: Callable[[], bool], timeout: float = WATCH_WAIT) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not done() and not self.failure:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return done()

    def send(self, req: pb.WatchRequest) -> None:
        self.requests.put(req)

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


@dataclass
class Report:
    """What one watch reported."""

    events: list = field(default_factory=list)
    cancels: list[pb.WatchResponse] = field(default_factory=list)
    last: int = 0  # the newest event's revision


@dataclass
class _Watch:
    req: pb.WatchCreateRequest  # as sent
    id: int | None = None  # None: not created
    live: bool = False
    report: Report = field(default_factory=Report)


class Player:
    """Plays one sequence on one system; `play` returns the transcript."""

    def __init__(self, system: System, seed: int) -> None:
        self.sys = system
        self.seed = seed
        self.prefix = prefix_of(seed)
        self.revs = Revisions(system.revision())
        self.ids: dict[int, int] = {}  # slot -> lease id granted for it
        self.slots: dict[int, int] = {}  # every lease id granted -> its slot
        self.watches: list[_Watch] = []
        self.stream: WatchStream | None = None
        self.transcript: list[tuple[str, Any]] = []

    # -- placeholders --------------------------------------------------------------------

    def lease_id(self, slot: int) -> int:
        if slot == 0:
            return 0
        return self.ids.get(slot, EXPLICIT_IDS + self.seed * 16 + slot)

    def materialise(self, step: Step) -> Any:
        req = type(step.req)()
        req.CopyFrom(step.req)
        self._resolve(req)
        if step.kind == "grant":
            req.ID = self.lease_id(req.ID) if req.ID % 2 else 0
        elif step.kind in ("revoke", "ttl"):
            req.ID = self.lease_id(req.ID)
        return req

    def _resolve(self, m: Any) -> None:
        """Relative revisions -> real ones, slots -> lease ids, in place (nested too)."""
        for fd, value in m.ListFields():
            if fd.message_type is not None:
                for sub in (value if fd.is_repeated else [value]):
                    self._resolve(sub)
            elif fd.name in REV_FIELDS or fd.name in ("start_revision", "min_mod_revision",
                                                      "max_mod_revision", "min_create_revision",
                                                      "max_create_revision"):
                setattr(m, fd.name, self.revs.real(value))
            elif fd.name == "lease":
                setattr(m, fd.name, self.lease_id(value))

    # -- answers in comparable form ------------------------------------------------------

    def lease_label(self, lease_id: int) -> int | str:
        slot = self.slots.get(lease_id)
        return lease_id if slot is None else f"L{slot}"

    def norm(self, m: Any) -> Any:
        if isinstance(m, tuple):
            return m  # an error
        out: dict[str, Any] = {}
        for fd, value in m.ListFields():
            name = fd.name
            if name == "header":
                out["rev"] = self.revs.relative(value.revision)
            elif fd.message_type is not None:
                out[name] = [self.norm(v) for v in value] if fd.is_repeated \
                    else self.norm(value)
            elif name in REV_FIELDS:
                out[name] = self.revs.relative(value)
            elif name in ("lease", "ID"):
                out[name] = self.lease_label(value)
            elif fd.is_repeated:
                out[name] = list(value)
            else:
                out[name] = value
        return out

    def norm_ttl(self, r: Any) -> Any:
        out = self.norm(r)
        if isinstance(out, dict):
            granted = out.get("grantedTTL", 0)
            if out.get("TTL", 0) > 0 and granted - TTL_SLACK <= out["TTL"] <= granted:
                out["TTL"] = "within the granted TTL"  # a clock reading, compared loosely
            out["keys"] = sorted(out.get("keys", []))  # etcd's order is a Go map's
        return out

    def norm_leases(self, r: Any) -> Any:
        """Only this sequence's leases (others' may still be alive), by slot."""
        out = self.norm(r)
        if isinstance(out, dict):
            mine = [x["ID"] for x in out.get("leases", []) if isinstance(x.get("ID"), str)]
            out["leases"] = sorted(mine)
        return out

    def record(self, label: str, answer: Any) -> None:
        self.transcript.append((label, answer))

    def metadata(self, step: Step) -> Metadata:
        """What goes with a step's call: nothing here (auth sequences send tokens)."""
        return None

    # -- steps ---------------------------------------------------------------------------

    def play(self, steps: list[Step]) -> list[tuple[str, Any]]:
        try:
            for i, step in enumerate(steps):
                getattr(self, "do_" + step.kind)(f"{i}:{step.kind}", step)
            self.flush([w for w in self.watches if w.live], "end")
            self.record_watches()
        finally:
            if self.stream is not None:
                self.stream.close()
        return self.transcript

    def do_put(self, label: str, step: Step) -> None:
        self.record(label, self.norm(call(self.sys.kv.Put, self.materialise(step),
                                          self.metadata(step))))

    def do_range(self, label: str, step: Step) -> None:
        self.record(label, self.norm(call(self.sys.kv.Range, self.materialise(step),
                                          self.metadata(step))))

    def do_delete(self, label: str, step: Step) -> None:
        self.record(label, self.norm(call(self.sys.kv.DeleteRange, self.materialise(step),
                                          self.metadata(step))))

    def do_txn(self, label: str, step: Step) -> None:
        self.record(label, self.norm(call(self.sys.kv.Txn, self.materialise(step),
                                          self.metadata(step))))

    def do_compact(self, label: str, step: Step) -> None:
        # etcd sends a watch's past events from a loop every 100 ms; a compaction before
        # then cancels the watch. That is timing, not a fact: let every watch catch up.
        self.flush([w for w in self.watches if w.live], label)
        self.record(label, self.norm(call(self.sys.kv.Compact, self.materialise(step))))

    def do_grant(self, label: str, step: Step) -> None:
        r = call(self.sys.lease.LeaseGrant, self.materialise(step), self.metadata(step))
        if not isinstance(r, tuple):
            self.ids[step.req.ID] = r.ID
            self.slots[r.ID] = step.req.ID
        self.record(label, self.norm(r))

    def do_revoke(self, label: str, step: Step) -> None:
        self.record(label, self.norm(call(self.sys.lease.LeaseRevoke, self.materialise(step),
                                          self.metadata(step))))

    def do_ttl(self, label: str, step: Step) -> None:
        self.record(label, self.norm_ttl(call(self.sys.lease.LeaseTimeToLive,
                                              self.materialise(step))))

    def do_leases(self, label: str, step: Step) -> None:
        self.record(label, self.norm_leases(call(self.sys.lease.LeaseLeases,
                                                 self.materialise(step))))

    def do_watch(self, label: str, step: Step) -> None:
        if self.stream is None:
            self.stream = WatchStream(self.sys.watch)
        s = self.stream
        w = _Watch(self.materialise(step))
        self.watches.append(w)
        n = len(s.created)
        s.send(pb.WatchRequest(create_request=w.req))
        if not s.wait(lambda: len(s.created) > n):
            self.record(label, ("no created response", s.failure))
            return
        with s.cond:
            r = s.created[n]
            w.id, w.live = r.watch_id, not r.canceled
            if w.live:
                w.report = s.reports[w.id]
        self.record(label, self.norm(r))

    def do_cancel(self, label: str, step: Step) -> None:
        s = self.stream
        w = self.watches[step.watch] if step.watch < len(self.watches) else None
        if s is None or w is None or w.id is None:
            return  # nothing to cancel on either system (or a difference already recorded)
        if w.live:
            self.flush([w], label)
        n = len(w.report.cancels)
        s.send(pb.WatchRequest(cancel_request=pb.WatchCancelRequest(watch_id=w.id)))
        if w.live:  # only a live watch answers a cancel
            got = s.wait(lambda: len(w.report.cancels) > n)
            self.record(label, "canceled" if got else ("no cancel response", s.failure))
            w.live = False

    # -- watches -------------------------------------------------------------------------

    def flush(self, watches: list[_Watch], label: str) -> None:
        """Write each watch's key (put, then delete) and wait until the watch reported
        the last of the two it can see, or was canceled."""
        if not watches or self.stream is None:
            return
        s = self.stream
        revs: dict[bytes, tuple[int, int]] = {}
        for w in watches:
            if w.req.key in revs:
                continue
            put = call(self.sys.kv.Put, pb.PutRequest(key=w.req.key, value=b"flush"))
            gone = call(self.sys.kv.DeleteRange, pb.DeleteRangeRequest(key=w.req.key))
            self.record(f"{label}:flush", (self.norm(put), self.norm(gone)))
            if isinstance(put, tuple) or isinstance(gone, tuple):
                return
            revs[w.req.key] = (put.header.revision, gone.header.revision)
        for w in watches:
            # the newest flush write in the watch's range that its filters let through
            seen = in_range(w.req.key, w.req.range_end)
            visible = [rev for key, (put, gone) in revs.items() if seen(key)
                       for rev, kind in ((put, W.NOPUT), (gone, W.NODELETE))
                       if kind not in w.req.filters]
            target = max(visible, default=0)
            if target == 0 or w.req.start_revision > target:
                continue  # it cannot report any of them

            def reported(w: _Watch = w, target: int = target) -> bool:
                return w.report.last >= target or bool(w.report.cancels)

            if not s.wait(reported):
                self.record(f"{label}:watch {w.id}", ("did not report the flush", s.failure))

    def record_watches(self) -> None:
        if self.stream is None:
            return
        s = self.stream
        with s.cond:
            for i, w in enumerate(self.watches):
                if w.id is None:
                    continue
                events = [self.norm(e) for e in w.report.events]
                cancels = [self.norm(r) for r in w.report.cancels]
                self.record(f"watch {i} (id {w.id}) events", events)
                self.record(f"watch {i} (id {w.id}) cancels", cancels)
            if s.failure:
                self.record("watch stream", s.failure)

    def cleanup(self) -> None:
        """Leave nothing behind for the next sequence (not compared)."""
        for lease_id in self.slots:
            call(self.sys.lease.LeaseRevoke, pb.LeaseRevokeRequest(ID=lease_id))
        call(self.sys.kv.DeleteRange,
             pb.DeleteRangeRequest(key=self.prefix, range_end=prefix_end(self.prefix)))


def play(system: System, seed: int, steps: list[Step],
         player_type: type[Player] = Player) -> tuple[Player, list]:
    """Play `steps` on `system` and clean up after; the player and its transcript."""
    player = player_type(system, seed)
    try:
        return player, player.play(steps)
    finally:
        player.cleanup()

