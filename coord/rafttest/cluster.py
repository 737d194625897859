"""The simulated cluster: N members (plus one spare id that membership changes may add)
driven through the `RawNode` API only, over the simulated network. Every live member is
ticked once per tick, then messages that are due are delivered and every member's Ready
is handled, in a seeded random order, the way a careful driver does (persist, send,
apply, advance). A member crashes where the faults say: between `ready()` and the write,
between the write and the send, between the send and the apply, or before `advance`;
every crash is a power loss (`Disk.power_loss`), and a restart builds a new RawNode from
the disk and replays the committed entries. Each event goes to the checker."""

from __future__ import annotations

import random
import sys
from typing import TextIO

from coord.raft.raft import Config, bootstrap_entries
from coord.raft.rawnode import RawNode, conf_change_of
from coord.raft.types import NONE, Entry, EntryType, HardState, Message, MessageType, Role, Snapshot
from coord.rafttest.checker import Checker
from coord.rafttest.member import Disk, SimNode, StateMachine
from coord.rafttest.network import SUBSTEPS, Network
from coord.rafttest.outcome import InvariantViolation, Stats
from coord.rafttest.profile import Profile
from coord.rafttest.trace import fmt_message, show_ready

CRASH_STAGES = ("before persisting", "after persisting", "after sending", "after applying")


class Cluster:
    def __init__(self, seed: int, nodes: int = 3, verbose: int = 0,
                 out: TextIO | None = None) -> None:
        if nodes < 1:
            raise ValueError("need at least one node")
        self.seed = seed
        self.n = nodes
        self.verbose = verbose
        self.out = out or sys.stdout
        self.rng = random.Random(seed)
        self.p = Profile.draw(self.rng)
        self.pool = list(range(1, nodes + 2))  # the last id is a spare for membership changes
        self.nodes = {i: SimNode(i) for i in self.pool}
        self.tick = 0
        self.now = 0
        self.final = False  # the healing phase: no more faults
        self.counter = 0  # makes every payload and read context unique
        self.stats = Stats(seed, nodes)
        self.net = Network(self.rng, self.p, self.stats)
        self.check = Checker(self.stats, self.trace, verbose)

    # -- tracing ----------------------------------------------------------------------------
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

    def setup(self) -> None:
        voters = self.pool[: self.n]
        boot = bootstrap_entries(voters)
        self.check.bootstrap(boot)
        for i in voters:
            node = self.nodes[i]
            node.disk = Disk(HardState(term=1, vote=NONE, commit=len(boot)), Snapshot(), boot)
            self.start(node)
        self.trace(f"profile {self.p}")

    def start(self, node: SimNode) -> None:
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
            self.check.snapshot_state(node, disk.snapshot, node.sm)
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
        self.observe(node)

    def crash(self, node: SimNode, why: str) -> None:
        node.raw = None
        assert node.disk is not None
        node.disk.power_loss()  # the worst crash: what was not fsync'd is gone too
        node.restart_at = self.tick + self.rng.randint(1, self.p.downtime)
        self.stats.crashes += 1
        self.trace(f"CRASH {node.id} {why}; restart at tick {node.restart_at}")

    def restart(self, node: SimNode) -> None:
        self.start(node)
        d = node.disk
        assert d is not None and node.raw is not None
        self.trace(
            f"RESTART {node.id} from disk: {d.hard_state}, snapshot@{d.snapshot.meta.index}, "
            f"log..{d.last_index()}"
        )

    # -- what the checker sees ----------------------------------------------------------------
    def observe(self, node: SimNode) -> None:
        """Called after anything that may have changed `node`'s role, term or commit. A new
        leader, or a leader whose commit moved, may be doomed to crash at its next Ready."""
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
                self.check.took_office(node)
                node.led_from = (r.log.last_index(), r.log.last_term())
                if not self.final and self.rng.random() < self.p.crash_on_elect:
                    node.crash_stage = self.rng.randrange(2)
        elif r.role is Role.LEADER:
            self.check.leads_on(node)
        c = r.log.committed
        if c != node.seen_commit:
            self.check.commit_moved(node, node.seen_commit, c)
            node.seen_commit = c
            if (
                r.role is Role.LEADER
                and not self.final
                and self.rng.random() < self.p.crash_on_commit
            ):
                node.crash_stage = self.rng.randrange(2)

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
            return self.crash(node, f"{CRASH_STAGES[0]} a Ready ({show_ready(rd)})")
        # 1. persist
        if rd.entries:
            self.check.new_entries(node, rd.entries)
        disk.save(rd)
        hs = rd.hard_state
        if hs is not None and hs.commit > node.seen_commit:
            # A lone voter's entries are committed once durable: its hard state says so
            # before `advance` moves the core's commit index, and this Ready applies them.
            self.check.commit_moved(node, node.seen_commit, hs.commit)
            node.seen_commit = hs.commit
        if stage == 1 and rd.messages:
            return self.crash(node, f"{CRASH_STAGES[1]} a Ready ({show_ready(rd)})")
        # 2. send
        for m in rd.messages:
            self._send(node, m)
        if stage == 2 and (rd.committed_entries or rd.snapshot):
            return self.crash(node, f"{CRASH_STAGES[2]} a Ready ({show_ready(rd)})")
        # 3. apply
        if rd.snapshot is not None:
            node.sm = self.check.restored(node, rd.snapshot)
            self.stats.snapshots_restored += 1
            self.trace(f"{node.id} restores snapshot at {node.sm.index}")
        for e in rd.committed_entries:
            self._apply(node, e)
        for rs in rd.read_states:
            self.check.read_answered(node, rs.context, rs.index)
        if stage == 3 and rd.committed_entries:
            return self.crash(node, f"{CRASH_STAGES[3]} a Ready ({show_ready(rd)})")
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
        self.observe(node)

    def _apply(self, node: SimNode, e: Entry) -> None:
        self.check.apply(node, e)
        if e.type is EntryType.CONF_CHANGE:
            cc = conf_change_of(e)
            conf = node.raw.apply_conf_change(cc)  # type: ignore[union-attr]
            self.stats.conf_changes += 1
            self.trace(
                f"{node.id} applies {cc.type.name} {cc.node_id} at {e.index}: "
                f"voters={sorted(conf.voters)} learners={sorted(conf.learners)}"
            )

    # -- the network -----------------------------------------------------------------------------
    def _send(self, src: SimNode, m: Message) -> None:
        dst = self.nodes.get(m.to)
        if dst is None or dst.disk is None:
            return  # nobody listens at that address
        if not self.net.send(m, src.incarnation, self.now):
            self._dropped(m, src.incarnation, "lost")

    def _dropped(self, m: Message, inc: int, why: str) -> None:
        self.stats.dropped += 1
        if self.verbose > 1:
            self.trace(f"drop ({why}) {fmt_message(m)}")
        if m.type is MessageType.SNAP:
            self.net.report(m.frm, inc, m.to, False, self.now)
        elif m.type is MessageType.APP and why != "lost" and self.rng.random() < 0.3:
            src = self.nodes[m.frm]
            if src.raw is not None and src.incarnation == inc:
                src.raw.report_unreachable(m.to)
                self.observe(src)

    def _deliver(self) -> None:
        for m, inc in self.net.due(self.now):
            dst = self.nodes[m.to]
            if dst.raw is None:
                self._dropped(m, inc, "down")
                continue
            if self.net.blocks(m.frm, m.to):
                self._dropped(m, inc, "partition")
                continue
            self.stats.delivered += 1
            if self.verbose > 1:
                self.trace(f"deliver {fmt_message(m)}")
            self._step(dst, m)
            if m.type is MessageType.SNAP:
                self.net.report(m.frm, inc, m.to, True, self.now)
        for frm, inc, to, ok in self.net.due_reports(self.now):
            src = self.nodes[frm]
            if src.raw is not None and src.incarnation == inc:
                src.raw.report_snapshot(to, ok)
                self.observe(src)

    def _step(self, node: SimNode, m: Message) -> None:
        try:
            node.raw.step(m)  # type: ignore[union-attr]
        except InvariantViolation:
            raise
        except Exception as e:  # noqa: BLE001
            raise InvariantViolation(
                "core error", f"node {node.id} raised {e!r} on {fmt_message(m)}"
            ) from e
        self.observe(node)

    # -- running ----------------------------------------------------------------------------------
    def alive(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raw is not None]

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raw is not None and n.raw.is_leader]

    def stable_leader(self) -> SimNode | None:
        """The leader of the highest term, if it committed in its term and transfers to
        nobody."""
        leaders = self.leaders()
        if not leaders:
            return None
        leader = max(leaders, key=lambda n: n.raw.raft.term)  # type: ignore[union-attr]
        r = leader.raw.raft  # type: ignore[union-attr]
        if not r.committed_in_current_term() or r.lead_transferee != NONE:
            return None
        return leader

    def round(self) -> None:
        """One tick: tick everyone, then SUBSTEPS rounds of delivery and Ready handling."""
        rng = self.rng
        for sub in range(SUBSTEPS):
            self.now = self.tick * SUBSTEPS + sub
            alive = self.alive()
            rng.shuffle(alive)
            if sub == 0:
                skew = 0.0 if self.final else self.p.skew
                for node in alive:
                    ticks = 1
                    if skew and rng.random() < skew:
                        ticks = rng.choice((0, 2))
                    for _ in range(ticks):
                        node.raw.tick()  # type: ignore[union-attr]
                        self.observe(node)
            self._deliver()
            for node in alive:
                self._drain(node)
