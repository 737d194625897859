"""Raft's safety properties, checked as they happen. The checker holds what is known of
the truth (the leader of every term, every committed entry and the earliest term known to
commit it, every entry id, the state after each index, each payload's index, every read's
lower bound) and the cluster hands it each event of a member: taking office, leading on,
a commit moving, new entries, a snapshot, an apply, a read answered. The first broken
property raises `InvariantViolation`.

* election safety: at most one leader per term (the durable vote: `Disk.save`);
* leader append-only: a leader never replaces what its log held when it took office;
* log matching: equal (index, term) means the same payload after the same previous term;
* leader completeness: a new leader of term T holds every entry committed in a term < T;
* state-machine safety: every member applies the same entry at each index, in order, to
  the same state (snapshots included); a payload is never applied at two indexes;
* commit monotonicity on a live member;
* ReadIndex linearizability: a read returns an index at least as large as every commit
  any member had seen before it was issued, and never an uncommitted one."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coord.raft.types import Entry, EntryType, Role, Snapshot
from coord.rafttest.member import SimNode, StateMachine
from coord.rafttest.outcome import InvariantViolation, Stats
from coord.rafttest.trace import show_entry


class Checker:
    def __init__(self, stats: Stats, trace: Callable[[str], None], verbose: int) -> None:
        self.stats, self.trace, self.verbose = stats, trace, verbose
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

    def bootstrap(self, boot: list[Entry]) -> None:
        """The bootstrap entries every voter starts with: committed before term 1."""
        prev = 0
        for e in boot:
            self.committed[e.index] = e
            self.commit_term[e.index] = 0
            self.entry_ids[(e.index, e.term)] = (e.type, e.data, prev)
            prev = e.term
        self.max_commit = len(boot)

    # -- what the workload asks --------------------------------------------------------------
    def proposed(self, node: SimNode, payloads: list[bytes], index: int) -> None:
        for i, payload in enumerate(payloads):
            self.proposals[payload] = (node.id, node.incarnation, index + i)

    def read_asked(self, node: SimNode, ctx: bytes) -> None:
        """A ReadIndex `ctx` at `node`: its answer must cover every commit seen so far."""
        self.reads[ctx] = self.max_commit
        raw = node.raw
        assert raw is not None
        if raw.is_leader:
            self.leader_reads[ctx] = (node.id, node.incarnation, raw.raft.term)

    def unanswered_reads(self, nodes: Mapping[int, SimNode]) -> list[str]:
        """Reads taken by a leader that still leads in the same term but never answered."""
        stuck = []
        for ctx, (node_id, inc, term) in self.leader_reads.items():
            node = nodes[node_id]
            raw = node.raw
            if ctx in self.served or raw is None or node.incarnation != inc:
                continue
            if raw.is_leader and raw.raft.term == term:
                stuck.append(f"{ctx.decode()}@{node_id}/t{term}")
        return stuck

    # -- roles and commits ---------------------------------------------------------------------
    def took_office(self, node: SimNode) -> None:
        r = node.raw.raft  # type: ignore[union-attr]
        other = self.leaders.setdefault(r.term, node.id)
        if other != node.id:
            raise InvariantViolation(
                "election safety", f"nodes {other} and {node.id} both led term {r.term}"
            )
        self.stats.leaders += 1
        self._check_leader_completeness(node)

    def leads_on(self, node: SimNode) -> None:
        r = node.raw.raft  # type: ignore[union-attr]
        index, term = node.led_from
        t = r.log.term(index)
        if t is not None and t != term:
            raise InvariantViolation(
                "leader append-only",
                f"node {node.id} leading term {r.term} replaced its entry at {index} "
                f"(term {term} -> {t})",
            )

    def commit_moved(self, node: SimNode, lo: int, hi: int) -> None:
        if hi < lo:
            raise InvariantViolation(
                "commit monotonicity", f"node {node.id} commit went from {lo} down to {hi}"
            )
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
                    self.trace(f"{node.id} commits {i} (t{e.term} {show_entry(e)})")
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

    # -- logs, snapshots and state machines -----------------------------------------------------
    def new_entries(self, node: SimNode, entries: list[Entry]) -> None:
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

    def snapshot_state(self, node: SimNode, snap: Snapshot, sm: StateMachine) -> None:
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

    def restored(self, node: SimNode, snap: Snapshot) -> StateMachine:
        """The state machine `node` restores from a snapshot it received."""
        sm = StateMachine.restore(snap)
        self.snapshot_state(node, snap, sm)
        if sm.index < node.sm.index:
            raise InvariantViolation(
                "state machine safety",
                f"node {node.id} restores snapshot {sm.index} over applied {node.sm.index}",
            )
        return sm

    def apply(self, node: SimNode, e: Entry) -> None:
        """Apply `e` to `node`'s state machine: the next index, the committed entry, the
        same state as every other member's after it."""
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
        if e.type is EntryType.CONF_CHANGE or not e.data:
            return
        at = self.payload_index.setdefault(e.data, e.index)
        if at != e.index:
            raise InvariantViolation(
                "state machine safety", f"payload {e.data!r} applied at {at} and {e.index}"
            )
        prop = self.proposals.get(e.data)
        if prop is not None and prop[0] == node.id and prop[1] == node.incarnation:
            self.stats.acked += 1  # the proposer applied it: the client hears "committed"

    def read_answered(self, node: SimNode, ctx: bytes, index: int) -> None:
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
