"""`CoordMachine`: the coordination state machine the Raft log replicates.

`apply` decodes a command, answers a retried request id from memory, dispatches, and
returns the result as an `Answer` (the value, and its bytes once asked for or
remembered under the request id). It is deterministic: no clocks, randomness or I/O; the
leader's clock arrives as `time_ms` (made monotonic here, so a new leader with a slower
clock cannot move time backwards; lifetimes run on `ElapsedClock` instead, which a
leader's clock error cannot move) and leader-drawn randomness arrives inside commands.
An empty machine is at revision 1, as etcd's empty store is (its first write lands at 2).
Every command that changes state moves the one global revision exactly once, except
those that as in etcd leave it where it is: a compaction, opening a session (a lease
grant) and ending a session that held nothing; a refused command changes nothing at all
(the snapshot bytes stay identical). A command made as a user (`actor`) is refused whole
when, at apply, auth is on and that user lacks an access it needs (`coord.sm.access`).
"""

from __future__ import annotations

import base64
import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from coord.sm import commands as c
from coord.sm import json_stream, kv_columns, snapshot_zlib
from coord.sm.access import denial_message, lacking
from coord.sm.alarms import AlarmTable, adds_state
from coord.sm.auth import AuthStore
from coord.sm.auth_commands import AuthCommand
from coord.sm.canonical_json import Lazy, from_plain, iter_dumps
from coord.sm.dedup import RecentRequests
from coord.sm.elapsed import ElapsedClock
from coord.sm.errors import (
    INVALID_ARGUMENT,
    NO_SPACE,
    PERMISSION_DENIED,
    REQUEST_ID_REUSED,
    TOO_LARGE,
)
from coord.sm.kv import KVStore
from coord.sm.ledger import Ledger
from coord.sm.limits import MAX_REQUEST_ID_BYTES, utf8_len
from coord.sm.owner_history import DEFAULT_HISTORY_LIMIT
from coord.sm.ownership import OwnershipTable
from coord.sm.pids import DEFAULT_PID_CAPACITY, DEFAULT_PID_LIFETIME_MS, PidAllocator
from coord.sm.records import Event
from coord.sm.results import (
    AlarmResult,
    Answer,
    CompactResult,
    DeleteRangeResult,
    EventsResult,
    ExpireResult,
    LeasePidResult,
    ListOwnersResult,
    OwnerEventsResult,
    OwnerResult,
    OwnResult,
    PidBlockResult,
    ProducerResult,
    PutResult,
    RangeResult,
    ReleaseResult,
    Result,
    SessionResult,
    TxnResult,
)
from coord.sm.sessions import Session, SessionTable

SNAPSHOT_FORMAT = 5
"""The one snapshot format this code writes and loads: the key space in columns, a
history event's previous record written as a flag when it is the record of the event
before it on its key (`coord.sm.kv_columns`), and the auth state (`coord.sm.auth`), its
permissions of every kind."""
RECORD_BYTES = 128  # a session, resource slot or ownership event
REQUEST_BYTES = 300  # a remembered request beyond its result's bytes (id, entry, tuple)
DEFAULT_REQUEST_CAPACITY = 100_000
DEFAULT_REQUEST_BYTES = 64 << 20  # remembered result bytes, all entries together

RESULT_TYPES: dict[type, type[Result]] = {
    c.Put: PutResult, c.Range: RangeResult, c.DeleteRange: DeleteRangeResult,
    c.Txn: TxnResult, c.Compact: CompactResult, c.EventsSince: EventsResult,
    c.OpenSession: SessionResult, c.CloseSession: SessionResult, c.ExpireSessions: ExpireResult,
    c.Own: OwnResult, c.Release: ReleaseResult, c.GetOwner: OwnerResult,
    c.ListOwners: ListOwnersResult, c.OwnerEventsSince: OwnerEventsResult,
    c.AllocatePidBlock: PidBlockResult,
    c.LeasePid: LeasePidResult, c.InitProducer: ProducerResult, c.CheckProducer: ProducerResult,
    c.Barrier: Result, c.Alarm: AlarmResult, c.NoteLeader: Result, c.NoteQuorumLost: Result,
    c.SetPidCapacity: Result,
    **dict.fromkeys(AuthCommand.__args__, Result),
}
# Commands whose actor's permissions apply checks (coord.sm.access).
CHECKED = frozenset({c.Put, c.DeleteRange, c.Txn, c.CloseSession, c.Compact, c.OpenSession,
                     c.Own, c.Release, c.InitProducer, c.AllocatePidBlock, c.LeasePid,
                     c.SetPidCapacity})


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The cyclic collector off while a snapshot's records are built. They are millions
    of acyclic objects, and the collector would otherwise make a full pass each time the
    heap grew by a quarter, over every record built so far: a third of a restore's time
    at 200k keys. Reference counting still frees everything meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class CoordMachine:
    def __init__(
        self,
        *,
        pid_lifetime_ms: int = DEFAULT_PID_LIFETIME_MS,
        pid_capacity: int = DEFAULT_PID_CAPACITY,
        request_capacity: int = DEFAULT_REQUEST_CAPACITY,
        request_bytes: int = DEFAULT_REQUEST_BYTES,
        owner_history_limit: int = DEFAULT_HISTORY_LIMIT,
    ) -> None:
        self.config = {"pid_lifetime_ms": pid_lifetime_ms, "pid_capacity": pid_capacity,
                       "request_capacity": request_capacity, "request_bytes": request_bytes,
                       "owner_history_limit": owner_history_limit}
        # told of every session opened, across restores (which rebuild the tables): the
        # leader's session tracker starts its clock from here (see SessionTable.add_opener)
        self.session_openers: list[Callable[[Session], None]] = []
        self._build(self.config)

    def _build(self, config: dict[str, int]) -> None:
        self.config = dict(config)
        self.ledger = Ledger()
        self.sessions = SessionTable(self.ledger)
        self.sessions.add_opener(self._session_opened)
        self.kv = KVStore(self.sessions)
        self.ownership = OwnershipTable(self.sessions, config["owner_history_limit"])
        self.pids = PidAllocator(self.ledger, pid_lifetime_ms=config["pid_lifetime_ms"],
                                 pid_capacity=config["pid_capacity"])
        self.alarms = AlarmTable(self.ledger)
        self.auth = AuthStore(self.ledger)
        self.clock_ms = 0  # the largest leader clock reading applied so far
        self.elapsed = ElapsedClock()  # leader time counted within terms: pid lease lifetimes
        self._elapsed_ms = 0  # the elapsed time of the command being applied
        self.leader_note: tuple[int, str] = (0, "")  # the latest NoteLeader: (term, member)
        # request_id -> (command tag, encoded result)
        self.recent: RecentRequests[str, tuple[int, bytes]] = RecentRequests(
            config["request_capacity"], config["request_bytes"], lambda v: len(v[1]))

    @property
    def revision(self) -> int:
        return self.ledger.revision

    def _session_opened(self, session: Session) -> None:
        for opener in self.session_openers:
            opener(session)

    # -- the StateMachine protocol -------------------------------------------------------

    def apply(self, index: int, term: int, time_ms: int, payload: bytes) -> Answer:
        try:
            cmd = c.decode_command(payload)
        except ValueError as exc:
            return Answer(Result(error=INVALID_ARGUMENT, message=f"undecodable command: {exc}",
                                 revision=self.revision))
        return self.apply_command(cmd, time_ms, term=term)

    def apply_command(self, cmd: c.Command, time_ms: int, *, term: int) -> Answer:
        """Apply a decoded command from an entry of `term`; its answer, as `apply`
        returns it (a repeated request id's is the remembered bytes)."""
        tag = c.command_tag(cmd)
        request_id = getattr(cmd, "request_id", "")
        # a str of n code points is at most 4n UTF-8 bytes: a short id needs no encoding
        if type(request_id) is not str or (len(request_id) > MAX_REQUEST_ID_BYTES // 4
                                           and utf8_len(request_id) > MAX_REQUEST_ID_BYTES):
            return Answer(RESULT_TYPES[type(cmd)](
                error=TOO_LARGE, revision=self.revision,
                message=f"request_id must be a str of at most {MAX_REQUEST_ID_BYTES} bytes"))
        if request_id:
            hit = self.recent.get(request_id)
            if hit is not None:
                if hit[0] == tag:
                    return Answer(data=hit[1])
                return Answer(RESULT_TYPES[type(cmd)](
                    error=REQUEST_ID_REUSED, revision=self.revision,
                    message=f"request_id {request_id!r:.60} was used by a different command"))
        now = max(self.clock_ms, time_ms) if type(time_ms) is int else self.clock_ms
        elapsed = self.elapsed
        if type(time_ms) is int and type(term) is int:
            elapsed = elapsed.at(term, time_ms)
        self._elapsed_ms = elapsed.now_ms
        before = self.ledger.changes
        answer = Answer(self._dispatch(cmd, now))
        if self.ledger.changes != before:
            self.clock_ms = now
            self.elapsed = elapsed
            if request_id:
                self.recent.put(request_id, (tag, answer.data))
        elif type(cmd) is c.NoteLeader and not answer.value.error:
            self.elapsed = elapsed  # a new leader's note starts its term on the elapsed clock
        return answer

    def execute(self, cmd: c.Command, time_ms: int = 0) -> Any:
        """Apply a command and return its result: the in-process path (tests, tools)."""
        return self.apply(0, 0, time_ms, c.encode_command(cmd)).value

    def query(self, cmd: c.Command) -> Any:
        """Serve a read command from local state (after a ReadIndex barrier)."""
        if type(cmd) not in c.READ_COMMANDS:
            return RESULT_TYPES.get(type(cmd), Result)(
                error=INVALID_ARGUMENT, revision=self.revision,
                message=f"{type(cmd).__name__} changes state; propose it instead")
        return self._dispatch(cmd, self.clock_ms)

    def drain_events(self) -> list[Event]:
        """Watch, ownership and session events produced since the last drain, in order."""
        return self.ledger.drain()

    def _dispatch(self, cmd: Any, now: int) -> Result:
        if type(cmd) in CHECKED and cmd.actor and self.auth.enabled:
            need = lacking(self.auth, self.sessions, cmd.actor, cmd)
            if need is not None:
                return RESULT_TYPES[type(cmd)](error=PERMISSION_DENIED, revision=self.revision,
                                               message=denial_message(cmd.actor, need))
        if self.alarms.no_space and adds_state(cmd):
            raised = ", ".join(f"member {m}" for m, _ in self.alarms.active())
            return RESULT_TYPES[type(cmd)](
                error=NO_SPACE, revision=self.revision,
                message=f"no space: the NOSPACE alarm is active ({raised} over its space "
                "quota); reads, deletes, releases and compaction still work — free space "
                "(delete, compact, `coord defrag`) and writes resume")
        handler: Callable[[Any, int], Result] = self._HANDLERS[type(cmd)]
        return handler(self, cmd, now)

    def _put(self, cmd: c.Put, now: int) -> Result:
        return self.kv.put_command(cmd)

    def _range(self, cmd: c.Range, now: int) -> Result:
        return self.kv.range(cmd.key, cmd.range_end, cmd.limit, cmd.revision)

    def _delete_range(self, cmd: c.DeleteRange, now: int) -> Result:
        return self.kv.delete_range(cmd.key, cmd.range_end, cmd.prev_kv)

    def _txn(self, cmd: c.Txn, now: int) -> Result:
        return self.kv.txn(cmd.compares, cmd.success, cmd.failure)

    def _compact(self, cmd: c.Compact, now: int) -> Result:
        """One compaction revision for the cluster: the KV history and the ownership
        history forget the same revisions."""
        result = self.kv.compact(cmd.revision)
        if result.ok:
            self.ownership.history.compact(cmd.revision)
        return result

    def _events_since(self, cmd: c.EventsSince, now: int) -> Result:
        return self.kv.events_since(cmd.revision, cmd.key, cmd.range_end)

    def _open(self, cmd: c.OpenSession, now: int) -> Result:
        return self.sessions.open(cmd.name, cmd.ttl_ms, cmd.read_only_ok, now, cmd.session_id)

    def _close(self, cmd: c.CloseSession, now: int) -> Result:
        return self.sessions.close(cmd.session_id)

    def _expire(self, cmd: c.ExpireSessions, now: int) -> Result:
        return self.sessions.expire(cmd.session_ids)

    def _own(self, cmd: c.Own, now: int) -> Result:
        return self.ownership.own(cmd.session_id, cmd.group, cmd.claims)

    def _release(self, cmd: c.Release, now: int) -> Result:
        return self.ownership.release(cmd.session_id, cmd.group, cmd.resources)

    def _owner_events_since(self, cmd: c.OwnerEventsSince, now: int) -> Result:
        return self.ownership.events_since(cmd.revision, cmd.group, cmd.prefix)

    def _get_owner(self, cmd: c.GetOwner, now: int) -> Result:
        return self.ownership.get_owner(cmd.group, cmd.resource)

    def _list_owners(self, cmd: c.ListOwners, now: int) -> Result:
        return self.ownership.list_owners(cmd.group, cmd.prefix)

    def _pid_block(self, cmd: c.AllocatePidBlock, now: int) -> Result:
        return self.pids.allocate_pid_block(cmd.requester, cmd.size, cmd.request_id)

    def _lease_pid(self, cmd: c.LeasePid, now: int) -> Result:
        return self.pids.lease_pid(cmd.topic, cmd.partition, cmd.pid,
                                   now_ms=self._elapsed_ms, wall_ms=now,
                                   random_generation=cmd.random_generation)

    def _pid_capacity(self, cmd: c.SetPidCapacity, now: int) -> Result:
        result = self.pids.set_capacity(cmd.capacity, now_ms=self._elapsed_ms)
        if result.ok:  # the snapshot's config carries it, and a restore builds it back
            self.config["pid_capacity"] = cmd.capacity
        return result

    def _init_producer(self, cmd: c.InitProducer, now: int) -> Result:
        return self.pids.init_producer(cmd.producer_key, cmd.request_id)

    def _check_producer(self, cmd: c.CheckProducer, now: int) -> Result:
        return self.pids.check_producer(cmd.producer_key, cmd.pid, cmd.generation)

    def _barrier(self, cmd: c.Barrier, now: int) -> Result:
        return Result(revision=self.revision)

    def _alarm(self, cmd: c.Alarm, now: int) -> Result:
        return self.alarms.change(cmd.action, cmd.member_id, cmd.kind)

    def _note(self, cmd: c.NoteLeader | c.NoteQuorumLost, now: int) -> Result:
        """A record for the history only: checked, then nothing changes."""
        if type(cmd.member) is not str or not cmd.member or utf8_len(cmd.member) > 256:
            return Result(error=INVALID_ARGUMENT, revision=self.revision,
                          message="member must be a non-empty str of at most 256 bytes")
        if isinstance(cmd, c.NoteQuorumLost) and not (
                type(cmd.since_ms) is int and type(cmd.until_ms) is int
                and 0 <= cmd.since_ms <= cmd.until_ms and cmd.mode in c.NOTE_MODES):
            return Result(error=INVALID_ARGUMENT, revision=self.revision,
                          message="a quorum-lost note needs 0 <= since_ms <= until_ms and a "
                          f"mode in {sorted(c.NOTE_MODES)}")
        if isinstance(cmd, c.NoteLeader):
            if type(cmd.term) is not int or cmd.term < 0:
                return Result(error=INVALID_ARGUMENT, revision=self.revision,
                              message="term must be a non-negative int")
            if cmd.term >= self.leader_note[0]:  # a deposed leader's late note is history
                self.leader_note = (cmd.term, cmd.member)
        return Result(revision=self.revision)

    def _auth(self, cmd: AuthCommand, now: int) -> Result:
        return self.auth.apply(cmd)

    _HANDLERS: dict[type, Callable[..., Result]] = {
        c.Put: _put, c.Range: _range, c.DeleteRange: _delete_range, c.Txn: _txn,
        c.Compact: _compact, c.EventsSince: _events_since, c.OpenSession: _open,
        c.CloseSession: _close, c.ExpireSessions: _expire, c.Own: _own, c.Release: _release,
        c.GetOwner: _get_owner, c.ListOwners: _list_owners,
        c.OwnerEventsSince: _owner_events_since, c.AllocatePidBlock: _pid_block,
        c.LeasePid: _lease_pid, c.InitProducer: _init_producer,
        c.CheckProducer: _check_producer, c.Barrier: _barrier, c.Alarm: _alarm,
        c.NoteLeader: _note, c.NoteQuorumLost: _note, c.SetPidCapacity: _pid_capacity,
        **dict.fromkeys(AuthCommand.__args__, _auth),
    }

    # -- snapshot ------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state as deterministic bytes: equal states give equal snapshots."""
        return b"".join(self.capture())

    def capture(self) -> Iterator[bytes]:
        """`snapshot` in pieces, which join to its bytes: the state is taken now, in a few
        milliseconds (the big parts, keys and histories, as copies of containers of
        records never changed once made), and converted, encoded and compressed a slice
        at a time as the pieces are asked for, while this machine goes on applying in
        between."""
        state = {
            "format": SNAPSHOT_FORMAT,
            "config": dict(self.config),
            "revision": self.revision,
            "clock_ms": self.clock_ms,
            "elapsed": self.elapsed.to_state(),
            "leader_note": list(self.leader_note),
            "sessions": self.sessions.capture(),
            "kv": self.kv.capture(),
            "ownership": self.ownership.capture(),
            "owner_history": self.ownership.history.capture(),
            "pids": self.pids.capture(),
            "recent": Lazy(list(self.recent.items()), _recent_row),
            "alarms": self.alarms.to_state(),
            "auth": self.auth.to_state(),
        }
        return snapshot_zlib.compressed(iter_dumps(state))

    def restore(self, data: bytes | memoryview | Iterable[bytes]) -> None:
        """Replace the whole state with a snapshot's (ValueError leaves it untouched)."""
        self.adopt(self.restored(data))

    def restored(self, data: bytes | memoryview | Iterable[bytes]) -> CoordMachine:
        """A new machine, with this one's settings, holding a snapshot's state (`data`:
        its bytes, or their blocks as a member reads them from its snapshot file;
        ValueError if it does not load). This machine is only read for its settings, which nothing
        but `adopt` changes, so this can run in another thread while this machine goes on
        serving reads: a member decodes a leader's snapshot (seconds at 1M keys) off its
        event loop that way, then `adopt`s the result on the loop."""
        fresh = CoordMachine(**self.config)
        with _cyclic_gc_paused():
            fresh._load(data)
        return fresh

    def adopt(self, other: CoordMachine) -> None:
        """Take over `other`'s whole state in one step (no copy: `other` is spent, so pass
        only what `restored` returned), as an in-place restore would have left it. Those
        who registered for session openings here (the leader's session tracker) keep
        being told: the adopted session table reports to this machine, not `other`."""
        other.sessions.remove_opener(other._session_opened)
        other.sessions.add_opener(self._session_opened)
        openers = self.session_openers
        self.__dict__.update(other.__dict__)
        self.session_openers = openers

    def _load(self, data: bytes | memoryview | Iterable[bytes]) -> None:
        """Rebuild this (new, unshared) machine from a snapshot: `restored`'s work."""
        chunks = kv_columns.KeySpaceLoader()
        try:
            text = json_stream.utf8_pieces(snapshot_zlib.decompressed(data))
            state = json_stream.load_pieces(text, KVStore.snapshot_hooks("kv", chunks))
            if type(state) is not dict:
                raise ValueError("not a snapshot")
            if state.get("format") != SNAPSHOT_FORMAT:
                raise ValueError(f"unknown snapshot format {state.get('format')!r} (this "
                                 f"coord loads format {SNAPSHOT_FORMAT})")
            config = {k: from_plain(int, v) for k, v in state["config"].items()}
            if config.keys() != self.config.keys():
                raise ValueError("snapshot config does not match")
            self._build(config)
            self.ledger.revision = from_plain(int, state["revision"])
            self.clock_ms = from_plain(int, state["clock_ms"])
            term, member = state["leader_note"]
            self.leader_note = (from_plain(int, term), from_plain(str, member))
            self.elapsed = ElapsedClock.from_state(state["elapsed"])
            self._elapsed_ms = self.elapsed.now_ms
            self.sessions.load_state(state["sessions"])
            self.kv.load_state(state["kv"], chunks)
            self.ownership.load_state(state["ownership"])
            self.ownership.history.load_state(state["owner_history"])
            self.pids.load_state(state["pids"])
            self.alarms.load_state(state["alarms"])
            self.auth.load_state(state["auth"])
            for rid, tag, data64 in state["recent"]:
                self.recent.put(from_plain(str, rid),
                                (from_plain(int, tag), from_plain(bytes, data64)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad snapshot: {exc}") from None

    def describe(self) -> dict:
        return {
            "revision": self.revision,
            "clock_ms": self.clock_ms,
            "elapsed_ms": self.elapsed.now_ms,
            **self.kv.describe(),
            **self.sessions.describe(),
            **self.ownership.describe(),
            **self.pids.describe(),
            **self.auth.describe(),
            "recent_requests": len(self.recent),
            "alarms": [f"{m}:{k}" for m, k in self.alarms.active()],
            "state_bytes": self.state_bytes(),
        }

    def state_bytes(self) -> int:
        """An estimate of the state's size in memory (the quota's state measure): the KV
        bytes kept (current values and history, with a per-record overhead) plus a flat
        cost per session, resource slot and ownership event, and per remembered request
        plus its result's bytes (100,000 of those, measured: ~35 MiB of RSS)."""
        records = (len(self.sessions) + self.ownership.slot_count()
                   + len(self.ownership.history))
        return (self.kv.bytes + RECORD_BYTES * records
                + REQUEST_BYTES * len(self.recent) + self.recent.weight)


def _recent_row(item: tuple[str, tuple[int, bytes]]) -> list:
    rid, (tag, data) = item
    return [rid, tag, base64.b64encode(data).decode("ascii")]
