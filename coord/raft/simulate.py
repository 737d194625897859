"""A deterministic cluster simulator for the Raft core: Jepsen in a for-loop.

Runs N members (3 or 5, plus one spare id that membership changes may add) through the
`RawNode` API only, over a simulated network and simulated disks, and checks Raft's safety
properties after every single step. There is no wall clock, no thread and no I/O: every
choice comes from one ``random.Random(seed)``, so a seed replays exactly.

The model
---------
* Time is ticks; each tick has ``SUBSTEPS`` network sub-steps. Every live member is ticked
  once per tick, then messages that are due are delivered and every member's Ready is
  handled, in a seeded random order.
* The network loses, delays (in sub-steps, sometimes for many ticks), duplicates and so
  reorders messages. Partitions (a member isolated, often the leader, the cluster split in
  two, one-way links) come and heal. Snapshot deliveries and failures are reported back to
  the sender the way a transport would (``report_snapshot``), and some undeliverable
  appends are reported as ``report_unreachable``. Clocks may skew (a member skips a tick or
  runs one ahead).
* Each member has a disk (hard state, snapshot, entries) and an in-memory state machine (a
  running digest over the applied entries; its snapshot is the serialized digest). A crash
  throws away the RawNode and the state machine. It may hit between ``ready()`` and the
  write (the unsynced tail, its hard state and its messages are lost), between the write and
  the send, between the send and the apply, or before ``advance``. Every crash is a power
  loss: a hard state written without fsync (a Ready that only moved the commit index, see
  ``Ready.must_sync``) is lost as well. A restart builds a new RawNode from the disk and
  replays the committed entries. Besides random crashes, leaders
  are sometimes killed right after winning an election or right after their commit index
  moved, which is where the subtle commit rules matter (Raft's figure 8).
* Each seed draws its own profile (see `Profile`): calm, mixed or stormy.
* Workload: proposals at whoever believes it leads (unique payloads), ReadIndex requests at
  any member, leadership transfers, compactions at the applied index (so lagging and
  restarted members catch up by snapshot), and membership changes (remove a voter, add it
  back, add a learner, promote it; the core refusing a change while one is pending is fine).

Invariants (checked continuously; the first violation stops the run)
-----------------------------------------------------------------
* election safety: at most one leader per term over the whole history, and a member's
  durable vote never changes within a term;
* leader append-only: a leader never replaces what its log held when it took office;
* log matching: an entry is identified by (index, term): every copy anywhere carries the
  same payload and follows the same previous term, so equal (index, term) means equal logs
  up to there;
* leader completeness: a new leader of term T holds every entry committed in a term < T;
* state-machine safety: every member applies the same entry at each index, in order, and a
  restarted member re-applies exactly what it applied before (checked through the digest,
  snapshots included); a payload is never applied at two indexes;
* durability: a committed entry is never overwritten on disk, the persisted commit never
  points past the persisted log, a restarted member's commit is what it persisted;
* commit monotonicity on a live member;
* ReadIndex linearizability: a read returns an index at least as large as every commit
  index any member had seen before the read was issued, and never an uncommitted index;
* liveness at the end: with the network healed and every member restarted, within a bounded
  number of ticks a single leader exists and a fresh proposal is applied by every member of
  its configuration; and every read handed to a leader that still leads in the same term
  has been answered (a lost heartbeat must not strand a read).

Usage::

    python -m coord.raft.simulate --seeds 10000 [--start 0] [--nodes 3|5|both] [--steps N]
    python -m coord.raft.simulate --seed S --nodes N -v      # replay one seed with a trace

``-v`` traces events (faults, roles, commits, workload); ``-vv`` adds every message.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import random
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from .errors import NotLeaderError, ProposalDroppedError
from .raft import Config, bootstrap_entries
from .rawnode import RawNode, conf_change_of
from .types import (
    NONE,
    ConfChange,
    ConfChangeType,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Ready,
    Role,
    Snapshot,
)

SUBSTEPS = 4
"""Network sub-steps per tick: message delays are counted in these."""

DEFAULT_STEPS = 600
"""Ticks of faults and workload per seed before the healing phase."""

MT = MessageType


class InvariantViolation(AssertionError):
    """A safety or liveness property failed. ``str()`` names the invariant, the seed and the
    command that replays the run with a trace."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(invariant, detail)
        self.invariant = invariant
        self.detail = detail
        self.seed: int | None = None
        self.nodes: int | None = None
        self.steps: int = DEFAULT_STEPS
        self.where = ""

    def replay_command(self) -> str:
        cmd = f"python -m coord.raft.simulate --seed {self.seed} --nodes {self.nodes}"
        if self.steps != DEFAULT_STEPS:
            cmd += f" --steps {self.steps}"
        return cmd + " -v"

    def __str__(self) -> str:
        head = f"invariant violated: {self.invariant}"
        if self.seed is not None:
            head += f" (seed {self.seed}, {self.nodes} nodes, {self.where})"
            return f"{head}\n  {self.detail}\n  replay: {self.replay_command()}"
        return f"{head}\n  {self.detail}"


# -- the driver's side: a disk and a state machine per member ------------------------------


class Disk:
    """What survives a crash. `save` is step 1 of the Ready contract, done the way a careful
    store does it; it refuses (as a violation) anything that would lose committed data."""

    __slots__ = ("hard_state", "snapshot", "entries", "synced_hard_state")

    def __init__(
        self,
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
        entries: list[Entry] | None = None,
    ) -> None:
        self.hard_state = hard_state or HardState()
        self.synced_hard_state = self.hard_state  # what survives a power loss
        self.snapshot = snapshot or Snapshot()
        self.entries: list[Entry] = list(entries or [])

    def power_loss(self) -> None:
        """Lose what was written without fsync: a hard state of a Ready that did not
        `must_sync` (entries and snapshots always sync, so only the commit index goes)."""
        self.hard_state = self.synced_hard_state

    def last_index(self) -> int:
        return self.snapshot.meta.index + len(self.entries)

    def save(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            if rd.snapshot.meta.index <= self.hard_state.commit:
                raise InvariantViolation(
                    "durability",
                    f"snapshot at {rd.snapshot.meta.index} would replace a log committed "
                    f"to {self.hard_state.commit}",
                )
            self.snapshot = rd.snapshot
            self.entries = []
        if rd.entries:
            first = rd.entries[0].index
            pos = first - self.snapshot.meta.index - 1
            if pos < 0 or pos > len(self.entries):
                raise InvariantViolation(
                    "ready contract",
                    f"entries from {first} do not follow the persisted log "
                    f"({self.snapshot.meta.index + 1}..{self.last_index()})",
                )
            if pos < len(self.entries) and first <= self.hard_state.commit:
                raise InvariantViolation(
                    "durability",
                    f"entries from {first} overwrite the persisted log committed to "
                    f"{self.hard_state.commit}",
                )
            del self.entries[pos:]
            self.entries.extend(rd.entries)
        if rd.hard_state is not None:
            old, new = self.hard_state, rd.hard_state
            if new.term < old.term or new.commit < old.commit:
                raise InvariantViolation("durability", f"hard state went back: {old} -> {new}")
            if new.term == old.term and old.vote != NONE and new.vote != old.vote:
                raise InvariantViolation(
                    "election safety",
                    f"durable vote in term {new.term} changed from {old.vote} to {new.vote}",
                )
            self.hard_state = new
        if rd.must_sync:
            self.synced_hard_state = self.hard_state
        if self.hard_state.commit > self.last_index():
            raise InvariantViolation(
                "durability",
                f"persisted commit {self.hard_state.commit} is past the persisted log "
                f"(last index {self.last_index()})",
            )

    def compact(self, snap: Snapshot) -> None:
        index, offset = snap.meta.index, self.snapshot.meta.index
        if index <= offset:
            return
        if index > self.last_index():
            raise InvariantViolation(
                "durability", f"compaction at {index} beyond persisted {self.last_index()}"
            )
        del self.entries[: index - offset]
        self.snapshot = snap


_ENTRY_HEADER = struct.Struct(">QQB")
_SM_HEADER = struct.Struct(">QQ")
_ZERO_DIGEST = bytes(16)


class StateMachine:
    """The replicated state: how many entries were applied and a digest chained over all of
    them (so two members with equal digests applied exactly the same sequence)."""

    __slots__ = ("index", "digest", "payloads")

    def __init__(self, index: int = 0, digest: bytes = _ZERO_DIGEST, payloads: int = 0) -> None:
        self.index = index
        self.digest = digest
        self.payloads = payloads

    def apply(self, e: Entry) -> None:
        h = hashlib.blake2b(self.digest, digest_size=16)
        h.update(_ENTRY_HEADER.pack(e.index, e.term, int(e.type)))
        h.update(e.data)
        self.digest = h.digest()
        self.index = e.index
        if e.type is EntryType.NORMAL and e.data:
            self.payloads += 1

    def snapshot_data(self) -> bytes:
        return _SM_HEADER.pack(self.index, self.payloads) + self.digest

    @classmethod
    def restore(cls, snap: Snapshot) -> StateMachine:
        if snap.is_empty:
            return cls()
        index, payloads = _SM_HEADER.unpack_from(snap.data)
        start = _SM_HEADER.size
        return cls(index, bytes(snap.data[start : start + len(_ZERO_DIGEST)]), payloads)


def fmt_message(m: Message) -> str:
    s = f"{m.frm}->{m.to} {m.type.name} t{m.term}"
    if m.type in (MT.APP, MT.VOTE, MT.PRE_VOTE):
        s += f" i{m.index} lt{m.log_term}"
    elif m.type in (MT.APP_RESP, MT.READ_INDEX_RESP, MT.TRANSFER_LEADER):
        s += f" i{m.index}"
    if m.type in (MT.APP, MT.HEARTBEAT):
        s += f" c{m.commit}"
    if m.entries:
        s += f" ents={m.entries[0].index}..{m.entries[-1].index}"
    if m.snapshot is not None:
        s += f" snap@{m.snapshot.meta.index}/t{m.snapshot.meta.term}"
    if m.reject:
        s += f" REJECT hint={m.reject_hint}/t{m.log_term}"
    if m.context:
        s += f" ctx={m.context.decode(errors='replace')}"
    return s


# -- the simulated cluster ------------------------------------------------------------------


@dataclass(slots=True)
class Profile:
    """Per-seed knobs, so that seeds differ in how hostile their world is."""

    election_tick: int
    heartbeat_tick: int
    pre_vote: bool
    check_quorum: bool
    max_inflight: int
    max_bytes: int
    loss: float  # per message
    dup: float  # per message
    max_delay: int  # sub-steps
    long_delay: float  # chance that a message is held for several ticks
    skew: float  # chance per tick that a member's clock skips a tick or runs one ahead
    propose: float  # the rest are chances per tick
    read: float
    transfer: float
    compact: float
    compact_gap: int
    conf: float
    partition: float
    crash: float
    downtime: int  # a crashed member restarts within this many ticks
    crash_on_elect: float  # chance that a new leader dies in its next Ready
    crash_on_commit: float  # chance that a leader dies right after its commit advanced
    isolate_proposer: float  # chance that a leader is cut off right after a proposal

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        """Most seeds get a random mix. A few are calm (no faults: the happy path must work
        too) and a few are stormy: leaders keep dying right after being elected or after
        committing, which is where the subtle commit rules (Raft's figure 8) matter."""
        kind = rng.random()
        calm, stormy = kind < 0.12, kind > 0.75
        # PreVote or CheckQuorum (or both) stay on: with neither, a removed member that
        # never learnt of its removal can disrupt the cluster forever (a known Raft trait).
        pre_vote, check_quorum = rng.choice(
            [(True, True), (True, True), (True, False), (False, True)]
        )
        return cls(
            election_tick=10,
            heartbeat_tick=rng.choice([1, 1, 2, 3]),
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            max_inflight=rng.choice([1, 4, 256]),
            max_bytes=48 if stormy else rng.choice([48, 200, 1 << 20]),
            loss=0.0 if calm else rng.choice([0.0, 0.02, 0.05, 0.15]),
            dup=0.0 if calm else rng.choice([0.0, 0.02, 0.1]),
            max_delay=rng.choice([1, 3, 6]),
            long_delay=0.0 if calm else rng.choice([0.0, 0.01, 0.04]),
            skew=0.0 if calm else rng.choice([0.0, 0.0, 0.05, 0.2]),
            propose=rng.choice([0.3, 0.6, 0.9]),
            read=rng.choice([0.05, 0.2, 0.5]),
            transfer=rng.choice([0.0, 0.02, 0.05]),
            compact=rng.choice([0.02, 0.08, 0.2]),
            compact_gap=rng.choice([3, 10, 30]),
            conf=0.0 if stormy else rng.choice([0.0, 0.03, 0.08]),
            partition=0.0 if calm else rng.choice([0.02, 0.05, 0.1]),
            crash=0.0 if calm else rng.choice([0.1, 0.2] if stormy else [0.01, 0.03, 0.06]),
            downtime=2 * 10 if stormy else 4 * 10,
            crash_on_elect=0.0 if calm else rng.choice([0.3, 0.5] if stormy else [0.0, 0.05]),
            crash_on_commit=0.0 if calm else rng.choice([0.2, 0.5] if stormy else [0.0, 0.01]),
            isolate_proposer=0.1 if stormy else 0.0,
        )


class SimNode:
    __slots__ = (
        "id",
        "raw",
        "disk",
        "sm",
        "incarnation",
        "seen_commit",
        "seen_role",
        "seen_term",
        "led_from",
        "crash_stage",
        "restart_at",
    )

    def __init__(self, node_id: int) -> None:
        self.id = node_id
        self.raw: RawNode | None = None  # None: down (or never started)
        self.disk: Disk | None = None  # None: never started
        self.sm = StateMachine()
        self.incarnation = 0
        self.seen_commit = 0
        self.seen_role = Role.FOLLOWER
        self.seen_term = 0
        self.led_from = (0, 0)  # (index, term) of its last entry when it took office
        self.crash_stage = -1  # >= 0: crash at that stage of the next Ready
        self.restart_at = -1


CRASH_STAGES = ("before persisting", "after persisting", "after sending", "after applying")


@dataclass(slots=True)
class Stats:
    seed: int
    nodes: int
    ticks: int = 0
    leaders: int = 0
    committed: int = 0
    proposed: int = 0
    acked: int = 0
    reads: int = 0
    reads_served: int = 0
    crashes: int = 0
    torn_readies: int = 0
    snapshots_sent: int = 0
    snapshots_restored: int = 0
    conf_changes: int = 0
    transfers: int = 0
    partitions: int = 0
    delivered: int = 0
    dropped: int = 0


class Simulation:
    def __init__(
        self,
        seed: int,
        nodes: int = 3,
        steps: int = DEFAULT_STEPS,
        verbose: int = 0,
        out: TextIO | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError("need at least one node")
        self.seed = seed
        self.n = nodes
        self.steps = steps
        self.verbose = verbose
        self.out = out or sys.stdout
        self.rng = random.Random(seed)
        self.p = Profile.draw(self.rng)
        self.pool = list(range(1, nodes + 2))  # the last id is a spare for membership changes
        self.nodes = {i: SimNode(i) for i in self.pool}
        self.tick = 0
        self.now = 0
        self.final = False
        self.net: list[tuple[int, int, Message, int]] = []  # (due, seq, message, sender inc.)
        self.seq = 0
        self.reports: list[tuple[int, int, int, int, bool]] = []  # due, from, inc, to, ok
        self.partitions: list[tuple[int, frozenset[tuple[int, int]]]] = []
        self.blocked: frozenset[tuple[int, int]] = frozenset()
        # What the checker knows about the truth.
        self.leaders: dict[int, int] = {}  # term -> leader
        self.committed: dict[int, Entry] = {}  # index -> the committed entry
        self.commit_term: dict[int, int] = {}  # index -> earliest term known to commit it
        self.max_commit = 0
        self.entry_ids: dict[tuple[int, int], tuple[EntryType, bytes, int | None]] = {}
        self.digest_at: dict[int, bytes] = {}
        self.payload_index: dict[bytes, int] = {}
        self.proposals: dict[bytes, tuple[int, int, int]] = {}  # payload -> node, inc, index
        self.reads: dict[bytes, int] = {}  # context -> lower bound for its index
        self.leader_reads: dict[bytes, tuple[int, int, int]] = {}  # ctx -> node, inc, term
        self.served: set[bytes] = set()
        self.counter = 0
        self.stats = Stats(seed, nodes)

    # -- tracing and failing ---------------------------------------------------------------
    def trace(self, text: str) -> None:
        if self.verbose:
            print(f"[{self.tick:4d}.{self.now % SUBSTEPS}] {text}", file=self.out)

    def describe(self) -> str:
        lines = []
        for node in self.nodes.values():
            if node.disk is None:
                continue
            if node.raw is None:
                lines.append(f"    {node.id}: down (restart at tick {node.restart_at})")
                continue
            r = node.raw.raft
            lines.append(
                f"    {node.id}: {r.role.label} term={r.term} vote={r.vote} lead={r.lead} "
                f"commit={r.log.committed} applied={r.log.applied} "
                f"log={r.log.first_index()}..{r.log.last_index()} "
                f"voters={sorted(r.conf.voters)} learners={sorted(r.conf.learners)}"
            )
        return "\n".join(lines)

    # -- setup, crash, restart --------------------------------------------------------------
    def _config(self, node: SimNode) -> Config:
        p = self.p
        return Config(
            id=node.id,
            election_tick=p.election_tick,
            heartbeat_tick=p.heartbeat_tick,
            max_bytes_per_msg=p.max_bytes,
            max_inflight_msgs=p.max_inflight,
            pre_vote=p.pre_vote,
            check_quorum=p.check_quorum,
            seed=self.seed * 7919 + node.incarnation,
        )

    def _setup(self) -> None:
        voters = self.pool[: self.n]
        boot = bootstrap_entries(voters)
        prev = 0
        for e in boot:
            self.committed[e.index] = e
            self.commit_term[e.index] = 0
            self.entry_ids[(e.index, e.term)] = (e.type, e.data, prev)
            prev = e.term
        self.max_commit = len(boot)
        for i in voters:
            node = self.nodes[i]
            node.disk = Disk(HardState(term=1, vote=NONE, commit=len(boot)), Snapshot(), boot)
            self._start(node)
        self.trace(f"profile {self.p}")

    def _start(self, node: SimNode) -> None:
        disk = node.disk
        assert disk is not None
        node.incarnation += 1
        node.crash_stage = -1
        try:
            node.raw = RawNode(self._config(node), disk.hard_state, disk.snapshot, disk.entries)
        except Exception as e:  # noqa: BLE001 - any refusal of its own disk is a bug
            raise InvariantViolation(
                "restart", f"node {node.id} cannot load its disk: {e!r}"
            ) from e
        node.sm = StateMachine.restore(disk.snapshot)
        if not disk.snapshot.is_empty:
            self._check_snapshot_state(node, disk.snapshot, node.sm)
        r = node.raw.raft
        expect = max(disk.hard_state.commit, disk.snapshot.meta.index)
        if r.log.committed != expect:
            raise InvariantViolation(
                "durability", f"node {node.id} restarted with commit {r.log.committed}, "
                f"persisted {expect}"
            )
        node.seen_commit = 0
        node.seen_role = Role.FOLLOWER
        node.seen_term = r.term
        self._observe(node)

    def _crash(self, node: SimNode, why: str) -> None:
        node.raw = None
        assert node.disk is not None
        node.disk.power_loss()  # the worst crash: what was not fsync'd is gone too
        node.restart_at = self.tick + self.rng.randint(1, self.p.downtime)
        self.stats.crashes += 1
        self.trace(f"CRASH {node.id} {why}; restart at tick {node.restart_at}")

    def _restart(self, node: SimNode) -> None:
        self._start(node)
        d = node.disk
        assert d is not None and node.raw is not None
        self.trace(
            f"RESTART {node.id} from disk: {d.hard_state}, snapshot@{d.snapshot.meta.index}, "
            f"log..{d.last_index()}"
        )

    # -- checks -----------------------------------------------------------------------------
    def _observe(self, node: SimNode) -> None:
        """Called after anything that may have changed `node`'s role, term or commit."""
        raw = node.raw
        if raw is None:
            return
        r = raw.raft
        if r.role is not node.seen_role or r.term != node.seen_term:
            if r.role is not node.seen_role:
                self.trace(f"{node.id} is {r.role.label} in term {r.term}")
            node.seen_role = r.role
            node.seen_term = r.term
            if r.role is Role.LEADER:
                other = self.leaders.setdefault(r.term, node.id)
                if other != node.id:
                    raise InvariantViolation(
                        "election safety", f"nodes {other} and {node.id} both led term {r.term}"
                    )
                self.stats.leaders += 1
                self._check_leader_completeness(node)
                node.led_from = (r.log.last_index(), r.log.last_term())
                if not self.final and self.rng.random() < self.p.crash_on_elect:
                    node.crash_stage = self.rng.randrange(2)
        elif r.role is Role.LEADER:
            index, term = node.led_from
            t = r.log.term(index)
            if t is not None and t != term:
                raise InvariantViolation(
                    "leader append-only",
                    f"node {node.id} leading term {r.term} replaced its entry at {index} "
                    f"(term {term} -> {t})",
                )
        c = r.log.committed
        if c != node.seen_commit:
            if c < node.seen_commit:
                raise InvariantViolation(
                    "commit monotonicity",
                    f"node {node.id} commit went from {node.seen_commit} down to {c}",
                )
            self._record_commit(node, node.seen_commit, c)
            node.seen_commit = c
            if (
                r.role is Role.LEADER
                and not self.final
                and self.rng.random() < self.p.crash_on_commit
            ):
                node.crash_stage = self.rng.randrange(2)

    def _record_commit(self, node: SimNode, lo: int, hi: int) -> None:
        r = node.raw.raft  # type: ignore[union-attr]
        log = r.log
        off = log.offset
        leading = r.role is Role.LEADER
        if lo < off <= hi:
            known = self.committed.get(off)
            if known is not None and known.term != log.snapshot.meta.term:
                raise InvariantViolation(
                    "state machine safety",
                    f"node {node.id} snapshot at {off} has term {log.snapshot.meta.term}, "
                    f"committed entry has term {known.term}",
                )
        committed, commit_term = self.committed, self.commit_term
        for i in range(max(lo, off) + 1, hi + 1):
            e = log.entries[i - off - 1]
            known = committed.get(i)
            if known is None:
                committed[i] = e
                commit_term[i] = r.term
                if self.verbose and leading:
                    self.trace(f"{node.id} commits {i} (t{e.term} {_show(e)})")
            elif known != e:
                raise InvariantViolation(
                    "state machine safety",
                    f"node {node.id} commits {e} at {i}, but {known} was committed there",
                )
            elif leading and r.term < commit_term[i]:
                commit_term[i] = r.term
        if hi > self.max_commit:
            self.max_commit = hi

    def _check_leader_completeness(self, node: SimNode) -> None:
        r = node.raw.raft  # type: ignore[union-attr]
        log, term = r.log, r.term
        off, last = log.offset, log.last_index()
        for i in range(off + 1, self.max_commit + 1):
            ct = self.commit_term.get(i)
            if ct is None or ct >= term:
                continue
            e = self.committed[i]
            if i > last or log.entries[i - off - 1] != e:
                have = log.entries[i - off - 1] if i <= last else "nothing"
                raise InvariantViolation(
                    "leader completeness",
                    f"node {node.id} leads term {term} but holds {have} at {i}; "
                    f"{e} was committed in term {ct}",
                )

    def _check_new_entries(self, node: SimNode, entries: list[Entry]) -> None:
        log = node.raw.raft.log  # type: ignore[union-attr]
        prev = log.term(entries[0].index - 1)
        ids = self.entry_ids
        for e in entries:
            key = (e.index, e.term)
            val = (e.type, e.data, prev)
            old = ids.setdefault(key, val)
            if old != val:
                raise InvariantViolation(
                    "log matching",
                    f"node {node.id} holds ({e.index}, t{e.term}) = {e.data!r} after term "
                    f"{prev}; elsewhere it is {old[1]!r} after term {old[2]}",
                )
            prev = e.term

    def _check_snapshot_state(self, node: SimNode, snap: Snapshot, sm: StateMachine) -> None:
        if sm.index != snap.meta.index:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} snapshot at {snap.meta.index} holds state at {sm.index}",
            )
        want = self.digest_at.get(sm.index)
        if want is not None and want != sm.digest:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} snapshot at {sm.index} differs from the state applied there",
            )
        known = self.committed.get(sm.index)
        if known is not None and known.term != snap.meta.term:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} snapshot at {sm.index} claims term {snap.meta.term}, "
                f"committed entry there has term {known.term}",
            )

    # -- the Ready loop -----------------------------------------------------------------------
    def _drain(self, node: SimNode) -> None:
        for _ in range(8):
            if node.raw is None or not node.raw.has_ready():
                return
            self._handle_ready(node)

    def _handle_ready(self, node: SimNode) -> None:
        raw, disk = node.raw, node.disk
        assert raw is not None and disk is not None
        rd = raw.ready()
        stage = node.crash_stage
        if stage == 0 and (rd.entries or rd.hard_state or rd.snapshot):
            self.stats.torn_readies += 1
            return self._crash(node, f"{CRASH_STAGES[0]} a Ready ({_show_ready(rd)})")
        # 1. persist
        if rd.entries:
            self._check_new_entries(node, rd.entries)
        disk.save(rd)
        if stage == 1 and rd.messages:
            return self._crash(node, f"{CRASH_STAGES[1]} a Ready ({_show_ready(rd)})")
        # 2. send
        for m in rd.messages:
            self._send(node, m)
        if stage == 2 and (rd.committed_entries or rd.snapshot):
            return self._crash(node, f"{CRASH_STAGES[2]} a Ready ({_show_ready(rd)})")
        # 3. apply
        if rd.snapshot is not None:
            sm = StateMachine.restore(rd.snapshot)
            self._check_snapshot_state(node, rd.snapshot, sm)
            if sm.index < node.sm.index:
                raise InvariantViolation(
                    "state machine safety",
                    f"node {node.id} restores snapshot {sm.index} over applied {node.sm.index}",
                )
            node.sm = sm
            self.stats.snapshots_restored += 1
            self.trace(f"{node.id} restores snapshot at {sm.index}")
        for e in rd.committed_entries:
            self._apply(node, e)
        for rs in rd.read_states:
            self._check_read(node, rs.context, rs.index)
        if stage == 3 and rd.committed_entries:
            return self._crash(node, f"{CRASH_STAGES[3]} a Ready ({_show_ready(rd)})")
        # 4. advance
        try:
            raw.advance(rd)
        except InvariantViolation:
            raise
        except Exception as e:  # noqa: BLE001
            raise InvariantViolation(
                "core error", f"node {node.id} advance raised {e!r}"
            ) from e
        if raw.raft.log.applied != node.sm.index:
            raise InvariantViolation(
                "ready contract",
                f"node {node.id} core says applied {raw.raft.log.applied}, "
                f"state machine is at {node.sm.index}",
            )
        self._observe(node)

    def _apply(self, node: SimNode, e: Entry) -> None:
        sm = node.sm
        if e.index != sm.index + 1:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} applies {e.index} right after {sm.index}",
            )
        known = self.committed.get(e.index)
        if known != e:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} applies {e} at {e.index}; committed there: {known}",
            )
        sm.apply(e)
        want = self.digest_at.setdefault(e.index, sm.digest)
        if want != sm.digest:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} state after applying {e.index} differs from another member's",
            )
        if e.type is EntryType.CONF_CHANGE:
            cc = conf_change_of(e)
            conf = node.raw.apply_conf_change(cc)  # type: ignore[union-attr]
            self.stats.conf_changes += 1
            self.trace(
                f"{node.id} applies {cc.type.name} {cc.node_id} at {e.index}: "
                f"voters={sorted(conf.voters)} learners={sorted(conf.learners)}"
            )
        elif e.data:
            at = self.payload_index.setdefault(e.data, e.index)
            if at != e.index:
                raise InvariantViolation(
                    "state machine safety", f"payload {e.data!r} applied at {at} and {e.index}"
                )
            prop = self.proposals.get(e.data)
            if prop is not None and prop[0] == node.id and prop[1] == node.incarnation:
                self.stats.acked += 1  # the proposer applied it: the client hears "committed"

    def _check_read(self, node: SimNode, ctx: bytes, index: int) -> None:
        bound = self.reads.get(ctx)
        if bound is None:
            raise InvariantViolation("linearizable read", f"node {node.id} got a read {ctx!r} "
                                     "nobody asked for")
        if index < bound:
            raise InvariantViolation(
                "linearizable read",
                f"read {ctx.decode()} at node {node.id} returned index {index}, but {bound} was "
                "already committed when it was issued",
            )
        if index > self.max_commit:
            raise InvariantViolation(
                "linearizable read",
                f"read {ctx.decode()} at node {node.id} returned index {index}, beyond any "
                f"commit ({self.max_commit})",
            )
        self.stats.reads_served += 1
        self.served.add(ctx)
        self.trace(f"{node.id} read {ctx.decode()} -> index {index} (needed >= {bound})")

    # -- the network -----------------------------------------------------------------------------
    def _send(self, src: SimNode, m: Message) -> None:
        dst = self.nodes.get(m.to)
        if dst is None or dst.disk is None:
            return  # nobody listens at that address
        rng, p = self.rng, self.p
        if m.type is MT.SNAP:
            self.stats.snapshots_sent += 1
        if not self.final and rng.random() < p.loss:
            self._dropped(m, src.incarnation, "lost")
            return
        copies = 2 if not self.final and rng.random() < p.dup else 1
        for _ in range(copies):
            if not self.final and rng.random() < p.long_delay:
                delay = rng.randint(2 * SUBSTEPS, 15 * SUBSTEPS)
            else:
                delay = 1 + rng.randrange(p.max_delay if not self.final else 2)
            self.seq += 1
            heapq.heappush(self.net, (self.now + delay, self.seq, m, src.incarnation))

    def _dropped(self, m: Message, inc: int, why: str) -> None:
        self.stats.dropped += 1
        if self.verbose > 1:
            self.trace(f"drop ({why}) {fmt_message(m)}")
        if m.type is MT.SNAP:
            self._report(m.frm, inc, m.to, False)
        elif m.type is MT.APP and why != "lost" and self.rng.random() < 0.3:
            src = self.nodes[m.frm]
            if src.raw is not None and src.incarnation == inc:
                src.raw.report_unreachable(m.to)
                self._observe(src)

    def _report(self, frm: int, inc: int, to: int, ok: bool) -> None:
        """The sender's transport learns how a snapshot went, a little later."""
        self.reports.append((self.now + 1, frm, inc, to, ok))

    def _deliver(self) -> None:
        net, now, blocked = self.net, self.now, self.blocked
        while net and net[0][0] <= now:
            _, _, m, inc = heapq.heappop(net)
            dst = self.nodes[m.to]
            if dst.raw is None:
                self._dropped(m, inc, "down")
                continue
            if (m.frm, m.to) in blocked:
                self._dropped(m, inc, "partition")
                continue
            self.stats.delivered += 1
            if self.verbose > 1:
                self.trace(f"deliver {fmt_message(m)}")
            self._step(dst, m)
            if m.type is MT.SNAP:
                self._report(m.frm, inc, m.to, True)
        if self.reports:
            due = [r for r in self.reports if r[0] <= now]
            if due:
                self.reports = [r for r in self.reports if r[0] > now]
                for _, frm, inc, to, ok in due:
                    src = self.nodes[frm]
                    if src.raw is not None and src.incarnation == inc:
                        src.raw.report_snapshot(to, ok)
                        self._observe(src)

    def _step(self, node: SimNode, m: Message) -> None:
        try:
            node.raw.step(m)  # type: ignore[union-attr]
        except InvariantViolation:
            raise
        except Exception as e:  # noqa: BLE001
            raise InvariantViolation(
                "core error", f"node {node.id} raised {e!r} on {fmt_message(m)}"
            ) from e
        self._observe(node)

    # -- faults and workload ---------------------------------------------------------------------
    def _alive(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raw is not None]

    def _leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raw is not None and n.raw.is_leader]

    def _chaos(self) -> None:
        rng, p = self.rng, self.p
        self.now = self.tick * SUBSTEPS
        for node in self.nodes.values():
            if node.raw is None and node.disk is not None and node.restart_at <= self.tick:
                self._restart(node)
        if self.partitions and any(h <= self.tick for h, _ in self.partitions):
            self.partitions = [(h, links) for h, links in self.partitions if h > self.tick]
            self._set_blocked()
            self.trace("partition heals" + (" (some remain)" if self.partitions else ""))
        if rng.random() < p.propose:
            self._propose()
        if rng.random() < p.read:
            self._read()
        if rng.random() < p.transfer:
            self._transfer()
        if rng.random() < p.transfer / 2:
            self._campaign()
        if rng.random() < p.compact:
            self._compact()
        if rng.random() < p.conf:
            self._change_membership()
        if rng.random() < p.partition:
            self._partition()
        if rng.random() < p.crash:
            alive = self._alive()
            leaders = self._leaders()
            if alive:
                node = rng.choice(leaders if leaders and rng.random() < 0.5 else alive)
                if rng.random() < 0.5:
                    self._crash(node, "while idle")
                else:
                    node.crash_stage = rng.randrange(len(CRASH_STAGES))

    def _propose(self) -> None:
        leaders = self._leaders()
        if not leaders:
            return
        node = self.rng.choice(leaders)
        payloads = []
        for _ in range(self.rng.choice([1, 1, 1, 2, 4])):
            self.counter += 1
            payloads.append(b"p%d" % self.counter)
        try:
            index, term = node.raw.propose(payloads)  # type: ignore[union-attr]
        except (NotLeaderError, ProposalDroppedError) as e:
            self.trace(f"{node.id} refuses proposal: {e}")
            return
        for i, payload in enumerate(payloads):
            self.proposals[payload] = (node.id, node.incarnation, index + i)
        self.stats.proposed += len(payloads)
        if self.rng.random() < self.p.isolate_proposer:
            self._partition(victim=node.id)  # its new entries stay on its log alone
        self.trace(f"{node.id} proposes {len(payloads)} at {index} (term {term})")

    def _read(self) -> None:
        alive = self._alive()
        if not alive:
            return
        node = self.rng.choice(alive)
        self.counter += 1
        ctx = b"r%d" % self.counter
        self.reads[ctx] = self.max_commit
        self.stats.reads += 1
        self.trace(f"{node.id} read-index {ctx.decode()} (committed so far: {self.max_commit})")
        raw = node.raw
        assert raw is not None
        if raw.is_leader:
            self.leader_reads[ctx] = (node.id, node.incarnation, raw.raft.term)
        raw.read_index(ctx)
        self._observe(node)

    def _transfer(self) -> None:
        alive = self._alive()
        if not alive:
            return
        node = self.rng.choice(alive)
        voters = sorted(node.raw.raft.conf.voters)  # type: ignore[union-attr]
        if not voters or self.rng.random() < 0.1:
            voters = self.pool  # anyone, even a learner or a stranger: must be ignored
        target = self.rng.choice(voters)
        self.stats.transfers += 1
        self.trace(f"{node.id} asked to transfer leadership to {target}")
        node.raw.transfer_leader(target)  # type: ignore[union-attr]
        self._observe(node)

    def _campaign(self) -> None:
        alive = self._alive()
        if alive:
            node = self.rng.choice(alive)
            self.trace(f"{node.id} asked to campaign")
            node.raw.campaign()  # type: ignore[union-attr]
            self._observe(node)

    def _compact(self) -> None:
        p = self.p
        ready = [
            n for n in self._alive()
            if n.sm.index - n.disk.snapshot.meta.index >= p.compact_gap  # type: ignore[union-attr]
        ]
        if not ready:
            return
        node = self.rng.choice(ready)
        raw, disk = node.raw, node.disk
        assert raw is not None and disk is not None
        index = raw.raft.log.applied
        snap = raw.compact(index, node.sm.snapshot_data())
        if snap.meta.conf_state != raw.raft.conf:
            raise InvariantViolation("snapshot", "snapshot conf state is not the applied one")
        disk.compact(snap)
        self.trace(f"{node.id} compacts at {index}")

    def _change_membership(self) -> None:
        leaders = self._leaders()
        if not leaders:
            return
        rng = self.rng
        leader = rng.choice(leaders)
        conf = leader.raw.raft.conf  # type: ignore[union-attr]
        options: list[ConfChange] = []
        for learner in sorted(conf.learners):
            options.append(ConfChange(ConfChangeType.ADD_VOTER, learner))
            options.append(ConfChange(ConfChangeType.REMOVE_NODE, learner))
        for outsider in self.pool:
            if outsider not in conf.members:
                options.append(ConfChange(ConfChangeType.ADD_LEARNER, outsider))
                options.append(ConfChange(ConfChangeType.ADD_VOTER, outsider))
        if len(conf.voters) > max(1, self.n - 2):
            for voter in sorted(conf.voters):
                options.append(ConfChange(ConfChangeType.REMOVE_NODE, voter))
        if not options:
            return
        cc = rng.choice(options)
        try:
            index, _ = leader.raw.propose_conf_change(cc)  # type: ignore[union-attr]
        except (NotLeaderError, ProposalDroppedError) as e:
            self.trace(f"{leader.id} refuses {cc.type.name} {cc.node_id}: {e}")
            return
        self.trace(f"{leader.id} proposes {cc.type.name} {cc.node_id} at {index}")
        target = self.nodes[cc.node_id]
        if target.disk is None:  # a brand-new member starts empty and learns everything
            target.disk = Disk()
            self._start(target)
            self.trace(f"START {target.id} (empty)")

    def _partition(self, victim: int | None = None) -> None:
        rng = self.rng
        ids = [i for i in self.pool if self.nodes[i].disk is not None]
        kind = 0.0 if victim is not None else rng.random()
        links: set[tuple[int, int]] = set()
        if kind < 0.4:
            leaders = [n.id for n in self._leaders()]
            if victim is not None:
                a = victim
            elif leaders and rng.random() < 0.5:
                a = rng.choice(leaders)  # cutting off the leader is the interesting case
            else:
                a = rng.choice(ids)
            links = {(a, b) for b in ids if b != a} | {(b, a) for b in ids if b != a}
            what = f"isolate {a}"
        elif kind < 0.75:
            shuffled = ids[:]
            rng.shuffle(shuffled)
            cut = rng.randint(1, len(ids) - 1)
            left, right = shuffled[:cut], shuffled[cut:]
            links = {(a, b) for a in left for b in right} | {(b, a) for a in left for b in right}
            what = f"split {sorted(left)} | {sorted(right)}"
        else:
            a = rng.choice(ids)
            others = [b for b in ids if b != a]
            targets = rng.sample(others, rng.randint(1, len(others)))
            if rng.random() < 0.5:
                links = {(a, b) for b in targets}
                what = f"one-way: {a} cannot reach {sorted(targets)}"
            else:
                links = {(b, a) for b in targets}
                what = f"one-way: {sorted(targets)} cannot reach {a}"
        heal = self.tick + rng.randint(self.p.election_tick // 2, 8 * self.p.election_tick)
        self.partitions.append((heal, frozenset(links)))
        self._set_blocked()
        self.stats.partitions += 1
        self.trace(f"PARTITION {what} until tick {heal}")

    def _set_blocked(self) -> None:
        blocked: set[tuple[int, int]] = set()
        for _, links in self.partitions:
            blocked |= links
        self.blocked = frozenset(blocked)

    # -- running ----------------------------------------------------------------------------------
    def _round(self) -> None:
        """One tick: tick everyone, then SUBSTEPS rounds of delivery and Ready handling."""
        rng = self.rng
        for sub in range(SUBSTEPS):
            self.now = self.tick * SUBSTEPS + sub
            alive = self._alive()
            rng.shuffle(alive)
            if sub == 0:
                skew = 0.0 if self.final else self.p.skew
                for node in alive:
                    ticks = 1
                    if skew and rng.random() < skew:
                        ticks = rng.choice((0, 2))
                    for _ in range(ticks):
                        node.raw.tick()  # type: ignore[union-attr]
                        self._observe(node)
            self._deliver()
            for node in alive:
                self._drain(node)

    def _stable_leader(self) -> SimNode | None:
        leaders = self._leaders()
        if not leaders:
            return None
        leader = max(leaders, key=lambda n: n.raw.raft.term)  # type: ignore[union-attr]
        r = leader.raw.raft  # type: ignore[union-attr]
        if not r.committed_in_current_term() or r.lead_transferee != NONE:
            return None
        return leader

    def _settle(self) -> None:
        """Heal everything and demand progress within a bounded time."""
        self.final = True
        self.partitions = []
        self._set_blocked()
        for node in self.nodes.values():
            node.crash_stage = -1
            if node.disk is not None and node.raw is None:
                self._restart(node)
        self.trace("HEAL: network repaired, every member up; waiting for progress")
        limit = 60 * self.p.election_tick
        goal: tuple[bytes, int, int, int] | None = None  # payload, index, leader, term
        for _ in range(limit):
            self.tick += 1
            self._round()
            leader = self._stable_leader()
            if leader is None:
                continue
            term = leader.raw.raft.term  # type: ignore[union-attr]
            if goal is not None:
                payload, index, by, in_term = goal
                e = self.committed.get(index)
                if e is None and (by, in_term) != (leader.id, term):
                    goal = None  # its leader is gone; the entry may never commit: again
                elif e is not None and e.data != payload:
                    goal = None  # overwritten by a newer leader before committing: again
                elif e is not None:
                    members = leader.raw.raft.conf.members  # type: ignore[union-attr]
                    if all(self.nodes[i].sm.index >= index for i in members):
                        if len(self._leaders()) != 1:
                            continue
                        self.trace(f"progress: {payload.decode()} applied everywhere")
                        return self._settle_reads()
            if goal is None:
                self.counter += 1
                payload = b"final%d" % self.counter
                try:
                    index, _ = leader.raw.propose([payload])  # type: ignore[union-attr]
                except ProposalDroppedError:
                    continue
                goal = (payload, index, leader.id, term)
                self.trace(f"{leader.id} proposes {payload.decode()} at {index}")
        leaders = [n.id for n in self._leaders()]
        raise InvariantViolation(
            "liveness",
            f"no progress {limit} ticks after healing (leaders: {leaders}, goal: {goal})\n"
            + self.describe(),
        )

    def _unanswered_reads(self) -> list[str]:
        """Reads taken by a leader that still leads in the same term but never answered."""
        stuck = []
        for ctx, (node_id, inc, term) in self.leader_reads.items():
            node = self.nodes[node_id]
            raw = node.raw
            if ctx in self.served or raw is None or node.incarnation != inc:
                continue
            if raw.is_leader and raw.raft.term == term:
                stuck.append(f"{ctx.decode()}@{node_id}/t{term}")
        return stuck

    def _settle_reads(self) -> None:
        """A read handed to a leader is answered as long as that leader keeps leading: the
        client only has to retry after a leadership change, not after a lost message."""
        for _ in range(3 * self.p.election_tick):
            if not self._unanswered_reads():
                return
            self.tick += 1
            self._round()
        stuck = self._unanswered_reads()
        if stuck:
            raise InvariantViolation(
                "liveness", f"reads never answered by a leader still in office: {stuck[:5]}"
            )

    def run(self) -> Stats:
        try:
            self._setup()
            for t in range(self.steps):
                self.tick = t
                self._chaos()
                self._round()
            self._settle()
        except InvariantViolation as v:
            v.seed, v.nodes, v.steps = self.seed, self.n, self.steps
            v.where = f"tick {self.tick}"
            if self.verbose:
                self.trace(f"VIOLATION {v.invariant}: {v.detail}\n{self.describe()}")
            raise
        self.stats.ticks = self.tick
        self.stats.committed = self.max_commit
        return self.stats


def _show(e: Entry) -> str:
    if e.type is EntryType.CONF_CHANGE:
        cc = conf_change_of(e)
        return f"{cc.type.name} {cc.node_id}"
    return e.data.decode(errors="replace") or "<empty>"


def _show_ready(rd: Ready) -> str:
    parts = []
    if rd.entries:
        parts.append(f"entries {rd.entries[0].index}..{rd.entries[-1].index}")
    if rd.hard_state is not None:
        hs = rd.hard_state
        parts.append(f"hs t{hs.term} v{hs.vote} c{hs.commit}")
    if rd.snapshot is not None:
        parts.append(f"snapshot@{rd.snapshot.meta.index}")
    if rd.messages:
        parts.append(f"{len(rd.messages)} msgs")
    if rd.committed_entries:
        parts.append(f"apply {rd.committed_entries[0].index}..{rd.committed_entries[-1].index}")
    return ", ".join(parts) or "empty"


def run(seed: int, nodes: int = 3, steps: int = DEFAULT_STEPS, verbose: int = 0) -> Stats:
    """Simulate one seed; raises InvariantViolation on the first broken property."""
    return Simulation(seed, nodes, steps, verbose).run()


# -- command line --------------------------------------------------------------------------------


def _run_one(job: tuple[int, int, int]) -> tuple[int, int, str | None]:
    seed, nodes, steps = job
    try:
        run(seed, nodes, steps)
    except InvariantViolation as v:
        return seed, nodes, str(v)
    return seed, nodes, None


def _jobs(seeds: range, sizes: list[int], steps: int) -> list[tuple[int, int, int]]:
    return [(s, n, steps) for s in seeds for n in sizes]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m coord.raft.simulate",
        description="Deterministic fault-injection simulator for coord's Raft core.",
    )
    ap.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--seed", type=int, help="run just this seed (use with -v to trace it)")
    ap.add_argument("--nodes", choices=["3", "5", "both"], default="both")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="ticks of faults per seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--progress", type=int, default=500, help="report every N seeds")
    ap.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="trace events (-vv: and every message)")
    args = ap.parse_args(argv)
    sizes = [3, 5] if args.nodes == "both" else [int(args.nodes)]

    if args.seed is not None:
        failed = 0
        for n in sizes:
            try:
                stats = run(args.seed, n, args.steps, args.verbose)
            except InvariantViolation as v:
                print(v, file=sys.stderr)
                failed += 1
            else:
                print(f"seed {args.seed}, {n} nodes: ok  {stats}")
        return 1 if failed else 0

    jobs = _jobs(range(args.start, args.start + args.seeds), sizes, args.steps)
    started = time.monotonic()
    failures: list[str] = []
    seeds_done = 0
    runner: Callable[[tuple[int, int, int]], tuple[int, int, str | None]] = _run_one
    pool = None
    if args.jobs > 1:
        import multiprocessing

        pool = multiprocessing.Pool(args.jobs)
        results = pool.imap(runner, jobs, chunksize=4)
    else:
        results = map(runner, jobs)
    try:
        for i, (seed, _, failure) in enumerate(results, 1):
            if failure is not None:
                failures.append(failure)
                print(failure, file=sys.stderr, flush=True)
                if args.fail_fast:
                    break
            if i % len(sizes) == 0:
                seeds_done += 1
                if args.progress and seeds_done % args.progress == 0:
                    rate = seeds_done / (time.monotonic() - started)
                    print(
                        f"... {seeds_done}/{args.seeds} seeds (up to {seed}), "
                        f"{len(failures)} failed, {rate:.1f} seeds/s",
                        flush=True,
                    )
    finally:
        if pool is not None:
            pool.terminate()
    elapsed = time.monotonic() - started
    print(
        f"{len(jobs)} runs ({args.seeds} seeds x {sizes} nodes, {args.steps} ticks) in "
        f"{elapsed:.1f}s: {len(failures)} failed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
