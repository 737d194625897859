"""The driver-facing surface of the core: feed it `step`/`tick`, take one `Ready` batch,
do what it says, then `advance`. Mirrors etcd/raft's RawNode."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass, field

from .confchange import decode_conf_change
from .errors import ProposalDroppedError
from .log import RaftLog
from .raft import Config, Raft
from .types import (
    LOCAL_MESSAGES,
    NONE,
    ConfChange,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    SoftState,
)


@dataclass(slots=True, frozen=True)
class PeerStatus:
    match: int
    next: int
    state: str
    recent_active: bool
    learner: bool


@dataclass(slots=True, frozen=True)
class Status:
    id: int
    term: int
    vote: int
    leader: int
    role: Role
    has_quorum: bool
    commit: int
    applied: int
    first_index: int
    last_index: int
    snapshot_index: int
    conf_state: ConfState
    progress: dict[int, PeerStatus] = field(default_factory=dict)


class RawNode:
    MAX_APPLY_BATCH = 4096

    def __init__(
        self,
        config: Config,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: list[Entry] | None = None,
    ) -> None:
        self.raft = Raft(
            config, hard_state or HardState(), snapshot or Snapshot(), list(entries or [])
        )
        self._prev_hard = self.raft.hard_state()
        self._prev_soft = self.raft.soft_state()

    # -- input ----------------------------------------------------------------------------
    def tick(self) -> None:
        self.raft.tick()

    def step(self, m: Message) -> None:
        """A message from a peer. Local message types are refused: use the methods."""
        if m.type in LOCAL_MESSAGES and m.type is not MessageType.UNREACHABLE:
            raise ValueError(f"{m.type.name} is a local message")
        self.raft.step(m)

    def campaign(self) -> None:
        self.raft.step(Message(MessageType.HUP))

    def propose(self, payloads: list[bytes]) -> tuple[int, int]:
        """Append normal entries; returns (index of the first, term). Leader only."""
        if not payloads:
            raise ProposalDroppedError("empty proposal")
        return self.raft.propose([Entry(0, 0, EntryType.NORMAL, p) for p in payloads])

    def propose_conf_change(self, cc: ConfChange) -> tuple[int, int]:
        return self.raft.propose_conf_change(cc)

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        return self.raft.apply_conf_change(cc)

    def read_index(self, context: bytes) -> None:
        """Ask for a ReadState carrying `context`; it arrives in a later Ready (or never,
        if leadership is lost meanwhile: callers time out and retry)."""
        self.raft.step(Message(MessageType.READ_INDEX, context=context))

    def immediate_read_index(self) -> int | None:
        """The index a read may be served at now, with no ReadIndex round and no Ready:
        a leader that is the only voter has it at once. None: ask `read_index`."""
        return self.raft.immediate_read_index()

    def transfer_leader(self, target: int) -> None:
        self.raft.step(Message(MessageType.TRANSFER_LEADER, index=target))

    def report_unreachable(self, node: int) -> None:
        self.raft.step(Message(MessageType.UNREACHABLE, frm=node))

    def report_snapshot(self, node: int, ok: bool) -> None:
        self.raft.step(Message(MessageType.SNAP_STATUS, frm=node, reject=not ok))

    def compact(self, index: int, data: Sized, conf: ConfState | None = None) -> Snapshot:
        """The state machine captured its state at applied `index`; drop the log before it.
        `conf` is the configuration as of `index` (by default the current one: right for a
        state captured just now, not for one captured before later conf changes applied).
        Returns the snapshot for the driver to persist (``LogStore.compact``)."""
        log: RaftLog = self.raft.log
        if index > log.applied:
            raise ValueError(f"cannot snapshot at {index}: only {log.applied} applied")
        term = log.term(index)
        if term is None:
            raise ValueError(f"index {index} is already compacted")
        snap = Snapshot(SnapshotMeta(index, term, self.raft.conf if conf is None else conf), data)
        log.compact(snap)
        return snap

    # -- output ---------------------------------------------------------------------------
    @property
    def pending_snapshot(self) -> Snapshot | None:
        """The leader's snapshot Raft took and the next Ready hands over to store and
        restore (None if none): a received snapshot that is not this one was refused."""
        return self.raft.log.pending_snapshot

    def has_ready(self) -> bool:
        """Is there anything for the driver to do? Asked after every input and Ready, so
        the states are compared field by field, not built to be compared."""
        r = self.raft
        log = r.log
        hard, soft = self._prev_hard, self._prev_soft
        return bool(
            r.msgs
            or r.read_states
            or log.stable < log.last_index()
            or log.pending_snapshot is not None
            or log.has_next_committed_entries()
            or hard.term != r.term
            or hard.vote != r.vote
            or hard.commit != log.committed
            or soft.leader != r.lead
            or soft.role is not r.role
            or soft.has_quorum != r.has_quorum
        )

    def ready(self) -> Ready:
        r = self.raft
        rd = Ready(
            entries=r.log.unstable_entries(),
            snapshot=r.log.pending_snapshot,
            committed_entries=r.log.next_committed_entries(self.MAX_APPLY_BATCH),
            messages=r.msgs,
            read_states=r.read_states,
        )
        r.msgs = []
        r.read_states = []
        hs, prev = r.hard_state(), self._prev_hard
        if rd.entries and r.commits_alone(rd.entries[-1], rd.committed_entries):
            # What this Ready persists is committed once durable: written with the entries,
            # the commit index costs no write of its own after them (`commits_alone`).
            hs = HardState(hs.term, hs.vote, rd.entries[-1].index)
            self._apply_with_entries(rd)
        if hs != prev:
            rd.hard_state = hs
            rd.vote_changed = hs.term != prev.term or hs.vote != prev.vote
        ss = r.soft_state()
        if ss != self._prev_soft:
            rd.soft_state = ss
        return rd

    def _apply_with_entries(self, rd: Ready) -> None:
        """A lone voter's new entries are applied in the Ready that persists them, as
        etcd's raft hands out unstable committed entries when storage writes are
        synchronous: the driver persists a Ready before it applies it, so each is durable
        (and so committed) by then, and a lone put is one Ready, not a second one that
        only applies it. Only when they follow the entries this Ready applies without a
        gap, all within one apply batch, and none is a conf change (one that added a
        voter would leave the rest uncommitted, see `commits_alone`). It relies on the
        Ready contract that nothing steps the node between `ready()` and `advance()` (the
        driver steps only between Readies): a voter that stopped leading meanwhile would
        not commit what it applied, and `advance` would refuse (`applied_to`)."""
        applying, entries = rd.committed_entries, rd.entries
        follows = applying[-1].index if applying else self.raft.log.applied
        if (
            entries[0].index == follows + 1
            and len(applying) + len(entries) <= self.MAX_APPLY_BATCH
            and not any(e.type is EntryType.CONF_CHANGE for e in entries)
        ):
            rd.committed_entries = applying + entries

    def advance(self, rd: Ready) -> None:
        """The driver has done everything `rd` asked for."""
        r = self.raft
        if rd.hard_state is not None:
            self._prev_hard = rd.hard_state
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.snapshot is not None:
            r.log.snapshot_applied(rd.snapshot)
        if rd.entries:
            last = rd.entries[-1]
            r.on_persisted(last.index, last.term)
        if rd.committed_entries:
            r.log.applied_to(rd.committed_entries[-1].index)

    # -- inspection -----------------------------------------------------------------------
    def status(self) -> Status:
        r = self.raft
        progress = {}
        if r.role is Role.LEADER:
            progress = {
                node: PeerStatus(
                    pr.match, pr.next, pr.state.value, r._is_recent(node), pr.is_learner
                )
                for node, pr in r.prs.items()
            }
        return Status(
            id=r.id,
            term=r.term,
            vote=r.vote,
            leader=r.lead,
            role=r.role,
            has_quorum=r.has_quorum,
            commit=r.log.committed,
            applied=r.log.applied,
            first_index=r.log.first_index(),
            last_index=r.log.last_index(),
            snapshot_index=r.log.offset,
            conf_state=r.conf,
            progress=progress,
        )

    # Cheap reads for the driver's hot path (`status()` builds a whole Status; these read
    # one field each). The driver never touches `self.raft`: this is its whole view.
    @property
    def leader(self) -> int:
        return self.raft.lead

    @property
    def is_leader(self) -> bool:
        return self.raft.role is Role.LEADER and self.raft.lead == self.raft.id

    @property
    def term(self) -> int:
        return self.raft.term

    @property
    def now(self) -> int:
        """Ticks since this node started: the core's clock, for timeouts kept in ticks."""
        return self.raft.now

    @property
    def committed(self) -> int:
        return self.raft.log.committed

    @property
    def applied(self) -> int:
        return self.raft.log.applied

    @property
    def snapshot_index(self) -> int:
        """The index the log was last compacted to (0: never)."""
        return self.raft.log.offset

    @property
    def snapshot_bytes(self) -> int:
        """The size of the snapshot the log was last compacted to, or restored from (0:
        none)."""
        return len(self.raft.log.snapshot.data)

    @property
    def conf_state(self) -> ConfState:
        """The configuration in force (the last applied conf change)."""
        return self.raft.conf

    def soft_state(self) -> SoftState:
        return self.raft.soft_state()

    def committed_in_current_term(self) -> bool:
        """Has the leader committed an entry of its own term? Until then what it has
        applied may lag what an earlier leader committed (Raft §8)."""
        return self.raft.committed_in_current_term()

    def awaiting_first_election(self) -> bool:
        """A voter of a new cluster that has not seen a leader yet (term at most 1)."""
        r = self.raft
        return r.lead == NONE and r.term <= 1 and r.promotable

    def tick_to_election(self) -> None:
        """Tick until one tick short of the election timeout, so the first election waits
        only for its random part (etcd's initial election tick advance: a new cluster has
        no leader to hear from first)."""
        r = self.raft
        for _ in range(max(0, r.cfg.election_tick - 1 - r.election_elapsed)):
            r.tick()


def conf_change_of(entry: Entry) -> ConfChange:
    """Decode the payload of a CONF_CHANGE entry (for the driver's apply loop)."""
    return decode_conf_change(entry.data)


__all__ = ["RawNode", "Status", "PeerStatus", "conf_change_of", "NONE"]
