"""The asyncio driver around the Raft core: one task owns the core, turns transport
input, ticks and requests into `step`/`tick` calls, and carries out each Ready in order
(persist, send, apply, advance).

Group commit falls out of the shape: while one Ready is being fsync'd in the storage
thread, new proposals and messages queue up and go into the next Ready together.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from coord.raft import (
    NONE,
    ConfChange,
    Config,
    RawNode,
    Ready,
    Status,
)
from coord.server import failpoints
from coord.server.node import snapshot_contents
from coord.server.node.apply import Applier
from coord.server.node.errors import (
    NodeError,
    NoLeader,
    NotLeader,
    Stopped,
    Timeout,
)
from coord.server.node.inbox import Inbox
from coord.server.node.members import MemberInfo
from coord.server.node.membership import Membership
from coord.server.node.persist import Persister
from coord.server.node.proposals import Applied, Proposals
from coord.server.node.reads import Reads
from coord.server.node.round_counts import CountingExecutor, RoundCounts
from coord.server.node.snapshots import Snapshots
from coord.server.node.soft_state import SoftStateWatch, StatusEvent
from coord.server.node.startup import FirstElection, open_core
from coord.server.node.statemachine import StateMachine
from coord.server.node.ticker import tick_every
from coord.server.node.wakeup import Wakeup
from coord.server.storage.log_store import LogStore
from coord.server.transport.peer import PeerTransport

log = logging.getLogger(__name__)


@dataclass(slots=True)
class NodeOptions:
    tick_ms: int = 50
    election_ticks: int = 12
    heartbeat_ticks: int = 2
    snapshot_every: int = 20_000
    # ...or after this many bytes of entries: big entries (txns of many puts) would
    # otherwise leave a long log to replay at restart before the member serves
    snapshot_bytes: int = 64 << 20
    max_inflight: int = 256
    max_batch: int = 4096
    # The longest a ReadIndex round waits for the reads of its convoy (read_convoy.py).
    read_convoy_ms: float = 2.0
    seed: int | None = None


def _nothing() -> None:
    pass


def _waited_on(rd: Ready) -> bool:
    """Does a leader's Ready carry messages to write now rather than in the transport's
    next turn (`PeerTransport.send`'s `at_once`)? Those of entries it is about to fsync
    (the storage thread waits for the GIL while the loop writes them), and those of a
    read round, the only ones with a context: its heartbeats and the answer to a
    follower's ReadIndex (a read waits on them). Not a commit broadcast: written at once it
    no longer shares a write with the next append, and puts from 16 and 64 clients made
    10-20 % less."""
    return rd.must_sync or any(m.context for m in rd.messages)


def _time_out(fut: asyncio.Future, what: str, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(Timeout(f"{what} not done within {timeout:.1f}s"))


class Node:
    """One member's replicated log and state machine.

    It is given its parts — the member's storage, its peer transport, the state machine
    and a snapshotter — by whoever wires the member (`coord.server.member`), drives the
    Raft core only through `RawNode`, and hands out nothing of them: callers ask the node
    (`status`, `propose`, `read_index`, ...), never its parts. The transport delivers
    received messages here from construction on; `stop` ends the driver and its storage
    thread, and the owner of the parts closes them afterwards."""

    def __init__(
        self,
        me: MemberInfo,
        store: LogStore,
        transport: PeerTransport,
        state_machine: StateMachine,
        initial_cluster: list[MemberInfo],
        cluster_id: int,
        options: NodeOptions | None = None,
        join: bool = False,
    ) -> None:
        self.me = me
        self.id = me.id
        self.options = options or NodeOptions()
        self.cluster_id = cluster_id
        self._sm = state_machine
        self._store = store
        self._transport = transport
        self._membership = Membership(me, initial_cluster, transport)
        self.round_counts = RoundCounts()
        self._io = CountingExecutor(self.round_counts, max_workers=1,
                                    thread_name_prefix=f"store-{me.name}")
        self._wake = Wakeup()
        self._loop: asyncio.AbstractEventLoop | None = None  # the driver's, from start
        self._raw, new_cluster = self._open(initial_cluster, join)
        self._first_election = FirstElection(self._raw, transport, new_cluster)
        self._persist = Persister(store, self._io, self.round_counts)
        self._snaps = Snapshots(me.name, self._raw, store, self._io,
                                lambda: snapshot_contents.capture(self._membership, state_machine),
                                self._wake.set, self.options.snapshot_every,
                                self.options.snapshot_bytes)
        self._inbox = Inbox(self.round_counts, self._wake.set)
        transport.receive_with(self._inbox.on_messages, self._inbox.on_unreachable)
        self.snapshot_listeners = self._snaps.listeners  # told (bytes, seconds) of each taken
        self._proposals = Proposals(self._raw, self.options.max_batch, lambda: self.leader)
        self._reads = Reads(self._raw, self.options.election_ticks,
                            self.options.read_convoy_ms / 1000, self._wake.set)
        self._tasks: list[asyncio.Task] = []
        self._soft_state = SoftStateWatch(me.name, self._raw, self.name_of)
        self._stopped = False
        self._applier = Applier(self._raw, state_machine, self._membership, self._proposals,
                                self._snaps)
        self.apply_listeners = self._applier.listeners  # told after each Ready's applies
        self.proposals_failed = 0  # proposals whose caller got an error (etcd's metric)

    # -- start-up -------------------------------------------------------------------------
    def _open(self, initial_cluster: list[MemberInfo], join: bool) -> tuple[RawNode, bool]:
        seed = self.options.seed if self.options.seed is not None else time.time_ns()
        config = Config(
            self.id,
            election_tick=self.options.election_ticks,
            heartbeat_tick=self.options.heartbeat_ticks,
            max_inflight_msgs=self.options.max_inflight,
            seed=seed,
        )
        raw, snapshot, new_cluster = open_core(self._store, config, initial_cluster, join)
        if not snapshot.is_empty:
            snapshot_contents.restore(snapshot, self._membership, self._sm)
        return raw, new_cluster

    async def start(self) -> None:
        """Replay the committed log into the state machine, then join the cluster."""
        self._membership.sync_peers()
        # Start the storage thread now, not at a follower's first big batch: it is part
        # of the member from start to stop (tests count a member's threads).
        await asyncio.get_running_loop().run_in_executor(self._io, _nothing)
        while self._raw.has_ready():
            await self._handle_ready(self._raw.ready())
        if set(self._raw.conf_state.voters) == {self.id}:
            # A sole voter needs nobody's vote: elect itself now rather than after an
            # election timeout, so a single-member cluster serves at once.
            self._raw.campaign()
            self._wake.set()
        loop = self._loop = asyncio.get_running_loop()
        self.failed = loop.create_future()
        self._tasks = [
            loop.create_task(self._run(), name=f"raft-{self.me.name}"),
            loop.create_task(tick_every(self.options.tick_ms / 1000, self._inbox.on_tick),
                             name=f"tick-{self.me.name}"),
        ]
        for t in self._tasks:
            t.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        """A driver task must never end on its own: if it does, the member is unusable."""
        if task.cancelled() or self._stopped or self.failed.done():
            return
        err = task.exception() or RuntimeError(f"{task.get_name()} ended unexpectedly")
        log.critical("%s: %s failed: %r", self.me.name, task.get_name(), err)
        self.failed.set_exception(err)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._reads.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._fail_all(Stopped("member is shutting down"))
        self._io.shutdown(wait=True)  # the storage call in flight, if any, finishes
        self._snaps.discard()
        self._inbox.close()

    # -- requests -------------------------------------------------------------------------
    def _check_running(self) -> None:
        if self._stopped:
            raise Stopped("member is shutting down")

    async def propose(self, command: bytes, timeout: float = 5.0) -> Applied:
        """Replicate and apply `command`; returns where it landed and its result.

        Leader only (raises NotLeader naming the leader). A ProposalLost or Timeout means
        the command may or may not have been applied: retry only if it is idempotent."""
        self._check_running()
        if not self._raw.is_leader:
            raise NotLeader(self.members.get(self._raw.leader))
        fut = self._armed(timeout, "proposal")
        self._proposals.add(command, fut)
        self._wake.set()
        try:
            return await fut
        except NodeError:
            self.proposals_failed += 1
            raise

    async def read_index(self, timeout: float = 5.0) -> int:
        """A linearizable read barrier: returns once this member has applied everything
        committed before the call, so a local read afterwards sees every prior write."""
        return await self.read_barrier(timeout)

    def read_barrier(self, timeout: float = 5.0) -> asyncio.Future[int]:
        """`read_index` as a future, ready to await or cancel: no task per read (the
        request path cancels a waiting read when the member is cut off). A leader that is
        the only voter needs no ReadIndex round (`immediate_read_index`), so its read costs
        no driver turn and no Ready, which a round would cost a one-member cluster (a
        test rig's) on every read."""
        self._check_running()
        if self._raw.leader == NONE:
            raise NoLeader(f"member {self.me.name} knows no leader (quorum lost?)")
        index = self._raw.immediate_read_index()
        if index is not None and index <= self.applied_index:
            # the only voter, caught up: no round, no driver turn, no timer
            fut = self._driver_loop().create_future()
            fut.set_result(index)
            return fut
        fut = self._armed(timeout, "read index")
        if index is None:
            self._reads.add(fut)  # a round, shared with the reads waiting for one
        else:  # the only voter, mid-turn between a commit and its apply
            self._reads.wait_applied(index, fut)
            self._wake.set()
        return fut

    async def wait_applied(self, index: int, timeout: float = 5.0) -> int:
        """Return once this member has applied the log up to `index`."""
        self._check_running()
        if index <= self.applied_index:
            return self.applied_index
        fut = self._armed(timeout, "apply")
        self._reads.wait_applied(index, fut)
        return await fut

    async def transfer_leader(self, target: int, timeout: float = 5.0) -> int:
        self._check_running()
        if target not in self.members:
            raise NodeError(f"no member with id {target:x}")
        self._raw.transfer_leader(target)
        self._wake.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._raw.leader == target:
                return target
            await asyncio.sleep(self.options.tick_ms / 1000)
        raise Timeout(f"leadership did not move to {target:x} within {timeout:.1f}s")

    async def change_membership(self, cc: ConfChange, timeout: float = 10.0) -> None:
        self._check_running()
        if not self._raw.is_leader:
            raise NotLeader(self.members.get(self._raw.leader))
        fut = self._armed(timeout, "membership change")
        self._proposals.add(b"", fut, conf_change=cc)
        self._wake.set()
        await fut

    def _driver_loop(self) -> asyncio.AbstractEventLoop:
        """The driver's own loop, kept at start: asking for the running loop is a getpid
        system call per request."""
        return self._loop or asyncio.get_running_loop()

    def _armed(self, timeout: float, what: str) -> asyncio.Future:
        """A future the driver resolves, failed with Timeout if it has not been by then.

        Awaited directly (no wait_for, no shield: two futures and a task switch fewer per
        request); a caller that is cancelled cancels it, and the driver skips what is
        done, so a proposal whose caller left before it was submitted is not proposed."""
        loop = self._driver_loop()
        fut = loop.create_future()
        timer = loop.call_later(timeout, _time_out, fut, what, timeout)
        fut.add_done_callback(lambda _fut: timer.cancel())
        return fut

    # -- the loop -------------------------------------------------------------------------
    async def _run(self) -> None:
        raw = self._raw
        counts = self.round_counts
        while True:
            await self._wake.wait()
            self._wake.clear()
            counts.driver_turns += 1
            self._inbox.step(raw)
            if self._first_election.waiting:
                self._first_election.advance()
            self._inbox.tick(raw)
            self._proposals.maybe_submit(self.applied_index)
            self._reads.maybe_start_round()
            while raw.has_ready():
                await self._handle_ready(raw.ready())
                self._proposals.maybe_submit(self.applied_index)
                self._reads.maybe_start_round()
            if self._snaps.done:
                await self._snaps.end()

    async def _handle_ready(self, rd: Ready) -> None:
        self.round_counts.readies += 1
        if rd.snapshot is not None and self._snaps.running:
            self._snaps.discard()  # the leader's snapshot supersedes ours
        # A leader may send while its own copy is being written (it counts itself only
        # once `advance` says persisted, as etcd's leader does); anyone else persists
        # first, since what it sends (votes, acks) promises that it did.
        early = not rd.vote_changed and self._raw.is_leader
        self.round_counts.messages_sent += len(rd.messages)
        if early and rd.messages:
            self._transport.send(rd.messages, at_once=_waited_on(rd))
        # Concurrent callers' appends go to the storage thread even when small: the loop
        # admits gRPC's next calls while the fsync runs (CONCURRENT_WINDOW_S).
        writing = self._persist.persist(rd, early, busy=early and self._proposals.concurrent)
        if writing is not None:
            await writing
        if not early and rd.messages:
            # Persisted first, so sent now: an append's ack (or a vote) is what the leader
            # waits on, and left to the transport's next turn it cost this member a turn
            # of its own per round. A follower sends one batch per Ready, to one leader:
            # nothing later would have shared its write.
            self._transport.send(rd.messages, at_once=True)
        if rd.snapshot is not None:
            failpoints.hit("snapshot-install")
            await snapshot_contents.install(self.me.name, rd.snapshot, self._membership, self._sm,
                                            self._io)
            self._membership.sync_peers()
            self._applier.installed(rd.snapshot.meta.index)
        self._applier.apply_all(rd.committed_entries, rd.snapshot is not None)
        self._reads.on_ready(rd)
        self._raw.advance(rd)
        self._reads.release(self.applied_index)
        self._soft_state.note(rd.soft_state)
        if self._snaps.after_apply(self.applied_index):
            await self._snaps.end()

    def _fail_all(self, err: Exception) -> None:
        for fut in self._proposals.take_futures() + self._reads.futures():
            if not fut.done():
                fut.set_exception(err)

    def request_snapshot(self) -> None:
        """Take a snapshot (and so truncate the log) at the next chance rather than after
        `snapshot_every` entries: the space guard asks when the log is what holds a
        member over its quota."""
        self._snaps.asked = True
        self._wake.set()

    # -- status ---------------------------------------------------------------------------
    def name_of(self, node: int) -> str:
        return self._membership.name_of(node)

    @property
    def members(self) -> dict[int, MemberInfo]:
        """The members in the cluster, by id, as this member's log has them."""
        return self._membership.members

    def status(self) -> Status:
        return self._raw.status()

    @property
    def is_leader(self) -> bool:
        return self._raw.is_leader

    @property
    def pending_proposals(self) -> int:
        """Proposals waiting to be proposed or, proposed, to be applied."""
        return len(self._proposals)

    @property
    def caught_up_leader(self) -> bool:
        """Leader, with an entry of its own term committed and everything committed
        applied: only then is a missing session/key really missing."""
        raw = self._raw
        return (
            raw.is_leader
            and raw.committed_in_current_term()
            and self.applied_index >= raw.committed
        )

    @property
    def leader(self) -> MemberInfo | None:
        return self.members.get(self._raw.leader)

    @property
    def applied_index(self) -> int:
        """The index of the last entry this member applied (or of its snapshot)."""
        return self._applier.applied_index

    @property
    def term(self) -> int:
        return self._raw.term

    @property
    def quorum_losses(self) -> int:
        """Times the quorum went away (a leader that had none may have missed
        keepalives: see SessionTracker)."""
        return self._soft_state.quorum_losses

    def quorum_lost_for(self) -> float:
        """Seconds since this member last saw a working quorum (0 while it sees one)."""
        return self._soft_state.quorum_lost_for()

    def events(self) -> AsyncIterator[StatusEvent]:
        """Leader and quorum changes, starting with the current state."""
        return self._soft_state.events()
