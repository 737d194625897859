"""The Raft protocol for one member: roles, terms, elections (with PreVote and
CheckQuorum), replication, ReadIndex, leadership transfer and membership.

Driven only by `step(message)` and `tick()`; output accumulates in `msgs` and
`read_states` and is collected by `RawNode.ready()`. No I/O, no clocks, no threads:
the only nondeterminism is the seeded election-timeout jitter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import quorum
from .confchange import apply_to, decode_conf_change, encode_conf_change
from .errors import CompactedError, NotLeaderError, ProposalDroppedError
from .log import RaftLog
from .progress import Progress, ProgressState
from .readindex import ReadIndexQueue
from .types import (
    NONE,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadState,
    Role,
    Snapshot,
    SoftState,
)

MT = MessageType
TRANSFER_CONTEXT = b"coord-transfer-leader"


@dataclass(slots=True)
class Config:
    id: int
    election_tick: int = 10
    heartbeat_tick: int = 1
    max_bytes_per_msg: int = 1 << 20
    max_inflight_msgs: int = 256
    pre_vote: bool = True
    check_quorum: bool = True
    seed: int = 0

    def validate(self) -> None:
        if self.id == NONE:
            raise ValueError("node id must not be 0")
        if self.heartbeat_tick <= 0 or self.election_tick <= self.heartbeat_tick:
            raise ValueError("need 0 < heartbeat_tick < election_tick")
        if self.max_inflight_msgs <= 0:
            raise ValueError("max_inflight_msgs must be positive")


class Raft:
    def __init__(
        self, config: Config, hard_state: HardState, snapshot: Snapshot, entries: list[Entry]
    ) -> None:
        config.validate()
        self.cfg = config
        self.id = config.id
        self.rng = random.Random(config.seed * 1_000_003 + config.id)
        self.log = RaftLog(snapshot, entries, hard_state.commit)
        self.term = hard_state.term
        self.vote = hard_state.vote
        self.role = Role.FOLLOWER
        self.lead = NONE
        self.acked = 0  # the index this follower last acknowledged to its leader
        self.conf = snapshot.meta.conf_state
        self.prs: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.read_queue = ReadIndexQueue()
        self.pending_reads: list[Message] = []
        self.lead_transferee = NONE
        self.pending_conf_index = 0
        self.now = 0  # ticks since start; only used to age peer activity
        # quorum_active's answer and what it was worked out at: the tick, and the count of
        # changes to the voters (_set_progress) and to their activity (_active_now)
        self._activity = 0
        self._quorum_now = self._quorum_activity = -1
        self._quorum_was = False
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = config.election_tick
        self._set_progress(self.conf)
        self.become_follower(self.term, NONE)

    # -- configuration ----------------------------------------------------------------
    def _set_progress(self, conf: ConfState) -> None:
        old = self.prs
        self.prs = {}
        for node in conf.members:
            pr = old.get(node) or Progress(self.log.last_index() + 1, self.cfg.max_inflight_msgs)
            pr.is_learner = node in conf.learners
            self.prs[node] = pr
        self.conf = conf
        self._activity += 1

    @property
    def promotable(self) -> bool:
        return self.id in self.conf.voters

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Called by the driver when a conf-change entry is applied."""
        try:
            conf = apply_to(self.conf, cc)
        except ValueError:
            return self.conf  # refused at proposal time; an old log may still carry it
        self._set_progress(conf)
        if self.role is Role.LEADER:
            if self.id not in conf.voters:
                self.become_follower(self.term, NONE)
            else:
                if self.lead_transferee and self.lead_transferee not in conf.voters:
                    self.lead_transferee = NONE
                # The acks already collected for pending reads may be a quorum of the new
                # voters (when the leader is now the only voter, no ack will ever come).
                last_read = self.read_queue.last_context()
                if last_read is not None:
                    self._ack_read(self.id, last_read)
                if self._maybe_commit():
                    self._bcast_append()
                else:
                    for node in self.prs:
                        if node != self.id:
                            self._maybe_send_append(node, send_if_empty=True)
        return conf

    # -- role changes -----------------------------------------------------------------
    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.acked = 0
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = self.cfg.election_tick + self.rng.randrange(
            self.cfg.election_tick
        )
        self.lead_transferee = NONE
        self.votes = {}
        last = self.log.last_index()
        for node, pr in self.prs.items():
            fresh = Progress(last + 1, self.cfg.max_inflight_msgs, pr.is_learner)
            fresh.last_active_tick = pr.last_active_tick
            if node == self.id:
                fresh.match = self.log.stable
            self.prs[node] = fresh
        self.pending_conf_index = 0
        self.read_queue.clear()
        self.pending_reads = []

    def become_follower(self, term: int, lead: int) -> None:
        self._reset(term)
        self.lead = lead
        self.role = Role.FOLLOWER

    def _become_pre_candidate(self) -> None:
        # Does not touch term or vote: a pre-vote changes nothing if it fails.
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.lead = NONE

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.lead = self.id
        self.role = Role.LEADER
        for node, pr in self.prs.items():
            self._active_now(pr)
            if node == self.id:
                pr.become_replicate()
                pr.match = self.log.stable
                pr.next = self.log.last_index() + 1
        # Conf changes before this point may be uncommitted; do not stack another on them.
        self.pending_conf_index = self.log.last_index()
        self._append([Entry(self.term, 0)])

    # -- ticks --------------------------------------------------------------------------
    def tick(self) -> None:
        self.now += 1
        if self.role is Role.LEADER:
            self._tick_leader()
        else:
            self.election_elapsed += 1
            if self.promotable and self.election_elapsed >= self.randomized_election_timeout:
                self.election_elapsed = 0
                self.step(Message(MT.HUP))
            elif (
                self.role is Role.PRE_CANDIDATE
                and self.election_elapsed % self.cfg.heartbeat_tick == 0
            ):
                self._resend_pre_votes()

    def _tick_leader(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.cfg.check_quorum and not self.quorum_active():
            self.become_follower(self.term, NONE)
            # It has just gone a whole election timeout without a quorum, as long as a
            # follower waits before campaigning: ask for pre-votes from the next tick on
            # (they disrupt nobody), so that it leads again as soon as its links return.
            self.election_elapsed = self.randomized_election_timeout - 1
            return
        if self.election_elapsed >= self.cfg.election_tick:
            self.election_elapsed = 0
            self.lead_transferee = NONE  # a transfer that did not finish in time is abandoned
        if self.heartbeat_elapsed >= self.cfg.heartbeat_tick:
            self.heartbeat_elapsed = 0
            self.step(Message(MT.BEAT))

    def _is_recent(self, node: int) -> bool:
        """Heard from `node` within the last election timeout. Strictly fewer than
        election_tick ticks ago: a follower's lease (`election_elapsed < election_tick`) ends
        after exactly election_tick ticks of silence, so by then the leader must have given
        up too, or a new leader and the old one would both claim a quorum for a tick."""
        pr = self.prs.get(node)
        if node == self.id:
            return True
        return pr is not None and self.now - pr.last_active_tick < self.cfg.election_tick

    def _active_now(self, pr: Progress) -> None:
        """`pr`'s member counts as heard from now (it answered, or this node just became
        leader), for an election timeout: every change to a voter's activity comes here,
        so quorum_active knows its answer may have changed."""
        pr.last_active_tick = self.now
        self._activity += 1

    def quorum_active(self) -> bool:
        """CheckQuorum: has a majority of voters been heard from within an election timeout?
        Worked out again only after a tick or a change to the voters or their activity
        (`_activity`): a leader's soft state asks it several times per write round."""
        if self._quorum_now != self.now or self._quorum_activity != self._activity:
            self._quorum_now, self._quorum_activity = self.now, self._activity
            self._quorum_was = quorum.has_quorum(self.conf.voters, self._is_recent)
        return self._quorum_was

    @property
    def has_quorum(self) -> bool:
        """This member's honest view of whether it is connected to a working majority."""
        if self.role is Role.LEADER:
            return self.quorum_active()
        return (
            self.role is Role.FOLLOWER
            and self.lead != NONE
            and self.election_elapsed < self.cfg.election_tick
        )

    def soft_state(self) -> SoftState:
        return SoftState(self.lead, self.role, self.has_quorum)

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.log.committed)

    # -- sending ------------------------------------------------------------------------
    def _send(self, m: Message) -> None:
        m.frm = self.id
        if m.type not in (MT.VOTE, MT.VOTE_RESP, MT.PRE_VOTE, MT.PRE_VOTE_RESP):
            if m.type not in (MT.PROP, MT.READ_INDEX):
                m.term = self.term
        self.msgs.append(m)

    def _maybe_send_append(self, to: int, send_if_empty: bool) -> bool:
        pr = self.prs[to]
        if pr.is_paused:
            return False
        prev_term = self.log.term(pr.next - 1)
        try:
            ents = self.log.slice(pr.next, self.log.last_index() + 1, self.cfg.max_bytes_per_msg)
        except CompactedError:
            ents = None
        if ents is not None and prev_term is not None:
            if not ents and not send_if_empty:
                return False
            prev_index = pr.next - 1
            if ents:
                last = ents[-1].index
                if pr.state is ProgressState.REPLICATE:
                    pr.optimistic_update(last)
                    pr.inflights.add(last)
                elif pr.state is ProgressState.PROBE:
                    pr.probe_sent = True
            self._send(
                Message(
                    MT.APP,
                    to=to,
                    index=prev_index,
                    log_term=prev_term,
                    entries=tuple(ents),
                    commit=self.log.committed,
                )
            )
            return True
        # The follower needs entries we compacted: send the snapshot instead.
        if not self._is_recent(to):
            return False
        snap = self.log.snapshot
        pr.become_snapshot(snap.meta.index)
        self._send(Message(MT.SNAP, to=to, snapshot=snap))
        return True

    def _send_append(self, to: int) -> None:
        self._maybe_send_append(to, send_if_empty=True)

    def _bcast_append(self) -> None:
        for node in self.prs:
            if node != self.id:
                self._send_append(node)

    def _bcast_heartbeat(self, context: bytes = b"") -> None:
        for node, pr in self.prs.items():
            if node != self.id:
                commit = min(pr.match, self.log.committed)
                self._send(Message(MT.HEARTBEAT, to=node, commit=commit, context=context))

    # -- log ----------------------------------------------------------------------------
    def _append(self, entries: list[Entry]) -> int:
        last = self.log.last_index()
        stamped = [Entry(self.term, last + 1 + i, e.type, e.data) for i, e in enumerate(entries)]
        self.log.append(stamped)
        return last + 1

    def _maybe_commit(self) -> bool:
        index = quorum.committed_index(self.conf.voters, lambda n: self.prs[n].match)
        if self.log.maybe_commit(index, self.term):
            self._release_pending_reads()
            return True
        return False

    def commits_alone(self, last: Entry, applying: list[Entry]) -> bool:
        """Is `last`, an entry this member is about to persist, committed the moment it is
        durable? So for a leader that is its only voter, if `last` is of its term (what
        `_maybe_commit` will count once `on_persisted` says so) and nothing being applied
        meanwhile is a conf change (one that added a voter would make `on_persisted`
        count that voter too). The driver then persists the commit index with the
        entries, and the commit that follows is already durable: a one-member cluster's
        write is one transaction, not a synced one and then one for the commit index."""
        voters = self.conf.voters
        return (
            self.role is Role.LEADER
            and len(voters) == 1
            and self.id in voters
            and last.term == self.term
            and last.index > self.log.committed
            and not any(e.type is EntryType.CONF_CHANGE for e in applying)
        )

    def committed_in_current_term(self) -> bool:
        return self.log.term(self.log.committed) == self.term

    def on_persisted(self, index: int, term: int) -> None:
        """The driver made entries up to `index` durable; a leader now counts itself."""
        self.log.stable_to(index, term)
        if self.role is Role.LEADER and self.id in self.prs:
            self.prs[self.id].maybe_update(self.log.stable)
            if self._maybe_commit():
                self._bcast_append()

    # -- proposals (leader only; the server layer forwards client requests) -------------
    def propose(self, entries: list[Entry]) -> tuple[int, int]:
        """Append entries at the leader; returns (first index, term)."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.lead)
        if self.id not in self.prs:
            raise ProposalDroppedError("this member was removed from the cluster")
        if self.lead_transferee != NONE:
            raise ProposalDroppedError("leadership transfer in progress")
        if self._removing_self():
            raise ProposalDroppedError("this leader is being removed from the cluster")
        if any(e.type is EntryType.CONF_CHANGE for e in entries):
            if len(entries) != 1:
                raise ProposalDroppedError("a conf change must be proposed alone")
            self._check_conf_change(decode_conf_change(entries[0].data))
        first = self._append(entries)
        if any(e.type is EntryType.CONF_CHANGE for e in entries):
            self.pending_conf_index = self.log.last_index()
        self._bcast_append()
        return first, self.term

    def _removing_self(self) -> bool:
        """Is a change removing this leader in the log but not yet applied?

        Then nothing more may be appended after it. Once it is applied we step down, and the
        remaining voters may not have heard that it committed; one that has not still counts
        us as a voter and needs our vote, which we only give to a log at least as up to date
        as ours. With extra entries of our own after the removal (uncommitted, so possibly on
        nobody else's log) no remaining voter could ever win: a stuck cluster."""
        if self.pending_conf_index <= self.log.applied:
            return False  # any unapplied change is at or before pending_conf_index
        log = self.log
        for e in log.slice(max(log.applied + 1, log.first_index()), self.pending_conf_index + 1):
            if e.type is EntryType.CONF_CHANGE:
                cc = decode_conf_change(e.data)
                if cc.type is ConfChangeType.REMOVE_NODE and cc.node_id == self.id:
                    return True
        return False

    def _check_conf_change(self, cc: ConfChange) -> None:
        if self.pending_conf_index > self.log.applied:
            raise ProposalDroppedError("another membership change is still being applied")
        if not self.committed_in_current_term():
            raise ProposalDroppedError("new leader has not committed an entry of its term yet")
        try:
            apply_to(self.conf, cc)
        except ValueError as e:
            raise ProposalDroppedError(str(e)) from None

    def propose_conf_change(self, cc: ConfChange) -> tuple[int, int]:
        return self.propose([Entry(0, 0, EntryType.CONF_CHANGE, encode_conf_change(cc))])

    # -- the state machine --------------------------------------------------------------
    def step(self, m: Message) -> None:
        if m.term == 0:
            pass  # local message
        elif m.term > self.term:
            if m.type in (MT.VOTE, MT.PRE_VOTE):
                force = m.context == TRANSFER_CONTEXT
                # The lease protects the leader we hear from against a disruptive
                # candidate; when the candidate IS that leader (it stepped down, cut off,
                # and its links are back) there is nobody to protect, and making it wait
                # out our lease only keeps the cluster leaderless for an election timeout.
                in_lease = (
                    self.cfg.check_quorum
                    and self.lead != NONE
                    and self.lead != m.frm
                    and self.election_elapsed < self.cfg.election_tick
                )
                if in_lease and not force:
                    return  # we hear from a live leader: a disruptive candidate is ignored
            if m.type is MT.PRE_VOTE:
                pass  # a pre-vote never changes our term
            elif m.type is MT.PRE_VOTE_RESP and not m.reject:
                pass  # granted pre-votes carry the term the candidate will use
            elif m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
                self.become_follower(m.term, m.frm)
            else:
                self.become_follower(m.term, NONE)
        elif m.term < self.term:
            if (self.cfg.check_quorum or self.cfg.pre_vote) and m.type in (
                MT.HEARTBEAT,
                MT.APP,
            ):
                # A stale leader, maybe cut off and back: tell it our term so it steps down.
                self._send(Message(MT.APP_RESP, to=m.frm))
            elif m.type in (MT.PRE_VOTE, MT.VOTE):
                # Tell a candidate from an older term about ours. Without PreVote a member
                # that campaigns with a stale configuration keeps bumping its term while the
                # up-to-date members, which it does not know about, ask it for votes in lower
                # terms: if those were dropped silently nobody could ever win.
                resp = MT.PRE_VOTE_RESP if m.type is MT.PRE_VOTE else MT.VOTE_RESP
                self._send(Message(resp, to=m.frm, term=self.term, reject=True))
            return

        t = m.type
        if t is MT.HUP:
            self._hup(transfer=False)
        elif t in (MT.VOTE, MT.PRE_VOTE):
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self.role is Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    def _hup(self, transfer: bool) -> None:
        if self.role is Role.LEADER or not self.promotable:
            return
        if self._has_unapplied_conf_change():
            return  # the configuration we would campaign under is not final yet
        if self.cfg.pre_vote and not transfer:
            self._campaign(pre=True, transfer=False)
        else:
            self._campaign(pre=False, transfer=transfer)

    def _has_unapplied_conf_change(self) -> bool:
        lo = max(self.log.applied + 1, self.log.first_index())
        return any(
            e.type is EntryType.CONF_CHANGE for e in self.log.slice(lo, self.log.committed + 1)
        )

    def _campaign(self, pre: bool, transfer: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_type, term = MT.PRE_VOTE, self.term + 1
        else:
            self._become_candidate()
            vote_type, term = MT.VOTE, self.term
        self.votes[self.id] = True
        if self._poll() is quorum.VoteResult.WON:
            return
        for node in self.conf.voters:
            if node != self.id:
                self._ask_vote(node, vote_type, term, TRANSFER_CONTEXT if transfer else b"")

    def _ask_vote(self, to: int, vote_type: MT, term: int, context: bytes = b"") -> None:
        self._send(
            Message(
                vote_type,
                to=to,
                term=term,
                index=self.log.last_index(),
                log_term=self.log.last_term(),
                context=context,
            )
        )

    def _resend_pre_votes(self) -> None:
        """A pre-candidate asks again, at heartbeat cadence, every voter that has not
        granted its pre-vote: a cut-off member finds its quorum again within a heartbeat
        of the links coming back instead of a randomized election timeout later. A
        pre-vote changes nobody's term or vote, so asking again disrupts nothing."""
        for node in self.conf.voters:
            if node != self.id and not self.votes.get(node, False):
                self._ask_vote(node, MT.PRE_VOTE, self.term + 1)

    def _poll(self) -> quorum.VoteResult:
        result = quorum.vote_result(self.conf.voters, self.votes)
        if result is quorum.VoteResult.WON:
            if self.role is Role.PRE_CANDIDATE:
                self._campaign(pre=False, transfer=False)
            else:
                self._become_leader()
                self._bcast_append()
        elif result is quorum.VoteResult.LOST:
            self.become_follower(self.term, NONE)
        return result

    def _handle_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.frm
            or (self.vote == NONE and self.lead == NONE)
            or (m.type is MT.PRE_VOTE and m.term > self.term)
        )
        resp_type = MT.VOTE_RESP if m.type is MT.VOTE else MT.PRE_VOTE_RESP
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            self._send(Message(resp_type, to=m.frm, term=m.term))
            if m.type is MT.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
        else:
            self._send(Message(resp_type, to=m.frm, term=self.term, reject=True))

    # -- leader ---------------------------------------------------------------------------
    def _step_leader(self, m: Message) -> None:
        t = m.type
        if t is MT.BEAT:
            # Carry the newest pending read's context: if the heartbeats sent with it were
            # lost, this round can still confirm leadership for it (and, through `release`,
            # for every read queued before it). Otherwise a read would wait forever, though
            # this member keeps leading, until some later read happened to complete.
            self._bcast_heartbeat(self.read_queue.last_context() or b"")
            return
        if t is MT.READ_INDEX:
            self._leader_read_index(m)
            return
        if t is MT.TRANSFER_LEADER:
            self._start_transfer(m.index)
            return
        pr = self.prs.get(m.frm)
        if pr is None:
            return
        if t is MT.APP_RESP:
            self._handle_append_response(m, pr)
        elif t is MT.HEARTBEAT_RESP:
            self._active_now(pr)
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and pr.inflights.full:
                pr.inflights.free_first_one()
            if pr.match < self.log.last_index():
                self._send_append(m.frm)
            if m.context:
                self._ack_read(m.frm, m.context)
        elif t is MT.SNAP_STATUS:
            if pr.state is ProgressState.SNAPSHOT:
                if m.reject:
                    pr.pending_snapshot = 0
                pr.become_probe()
                pr.probe_sent = True  # wait for the follower's response before probing again
        elif t is MT.UNREACHABLE:
            # Messages to it were dropped; a lost snapshot must be sent again, not awaited.
            if pr.state is ProgressState.SNAPSHOT:
                pr.pending_snapshot = 0
            if pr.state is not ProgressState.PROBE:
                pr.become_probe()

    def _handle_append_response(self, m: Message, pr: Progress) -> None:
        self._active_now(pr)
        if m.reject:
            hint = m.reject_hint
            if m.log_term > 0:
                hint, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
            if pr.maybe_decrease_to(m.index, hint):
                if pr.state is ProgressState.REPLICATE:
                    pr.become_probe()
                self._send_append(m.frm)
            return
        was_paused = pr.is_paused
        if not pr.maybe_update(m.index):
            return
        if pr.state is ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
            pr.become_probe()
            pr.become_replicate()
        elif pr.state is ProgressState.REPLICATE:
            pr.inflights.free_le(m.index)
        if self._maybe_commit():
            self._bcast_append()
        elif was_paused:
            self._send_append(m.frm)
        while self._maybe_send_append(m.frm, send_if_empty=False):
            pass
        if m.frm == self.lead_transferee and pr.match == self.log.last_index():
            self._send(Message(MT.TIMEOUT_NOW, to=m.frm))

    def _start_transfer(self, target: int) -> None:
        pr = self.prs.get(target)
        if pr is None or pr.is_learner or target == self.id or target == self.lead_transferee:
            return
        self.election_elapsed = 0
        self.lead_transferee = target
        if pr.match == self.log.last_index():
            self._send(Message(MT.TIMEOUT_NOW, to=target))
        else:
            self._send_append(target)

    def immediate_read_index(self) -> int | None:
        """The index a linearizable read may be served at with no round: the commit
        index, when this node leads a cluster of one voter (no other member can lead or
        commit, so its commit index is the cluster's). None when a read needs a round."""
        if self.role is Role.LEADER and quorum.quorum_size(self.conf.voters) == 1:
            return self.log.committed
        return None

    def _leader_read_index(self, m: Message) -> None:
        if (index := self.immediate_read_index()) is not None:
            self._answer_read(m, index)
        elif not self.committed_in_current_term():
            self.pending_reads.append(m)  # our commit index is not known to be current yet
        else:
            self.read_queue.add(self.log.committed, m, self.id)
            self._bcast_heartbeat(m.context)

    def _release_pending_reads(self) -> None:
        if self.pending_reads and self.committed_in_current_term():
            pending, self.pending_reads = self.pending_reads, []
            for m in pending:
                self._leader_read_index(m)

    def _ack_read(self, node: int, context: bytes) -> None:
        acks = self.read_queue.ack(node, context)
        if acks is None or not quorum.has_quorum(self.conf.voters, acks.__contains__):
            return
        for pending in self.read_queue.release(context):
            self._answer_read(pending.request, pending.index)

    def _answer_read(self, request: Message, index: int) -> None:
        if request.frm in (NONE, self.id):
            self.read_states.append(ReadState(index, request.context))
        else:
            self._send(
                Message(MT.READ_INDEX_RESP, to=request.frm, index=index, context=request.context)
            )

    # -- candidate ------------------------------------------------------------------------
    def _step_candidate(self, m: Message) -> None:
        t = m.type
        if t is MT.APP:
            self.become_follower(m.term, m.frm)
            self._handle_append(m)
        elif t is MT.HEARTBEAT:
            self.become_follower(m.term, m.frm)
            self._handle_heartbeat(m)
        elif t is MT.SNAP:
            self.become_follower(m.term, m.frm)
            self._handle_snapshot(m)
        elif (t is MT.PRE_VOTE_RESP and self.role is Role.PRE_CANDIDATE) or (
            t is MT.VOTE_RESP and self.role is Role.CANDIDATE
        ):
            if self.role is Role.PRE_CANDIDATE and not m.reject:
                self.votes[m.frm] = True  # asked again (above): a later grant counts
            else:
                self.votes.setdefault(m.frm, not m.reject)
            self._poll()

    # -- follower -------------------------------------------------------------------------
    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t is MT.APP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_append(m)
        elif t is MT.HEARTBEAT:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_heartbeat(m)
        elif t is MT.SNAP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_snapshot(m)
        elif t is MT.TRANSFER_LEADER:
            if self.lead != NONE:
                self._send(Message(MT.TRANSFER_LEADER, to=self.lead, index=m.index))
        elif t is MT.TIMEOUT_NOW:
            self._hup(transfer=True)
        elif t is MT.READ_INDEX:
            if self.lead != NONE:
                self._send(Message(MT.READ_INDEX, to=self.lead, context=m.context))
        elif t is MT.READ_INDEX_RESP:
            self.read_states.append(ReadState(m.index, m.context))

    def _handle_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            self._send(Message(MT.APP_RESP, to=m.frm, index=self.log.committed))
            return
        committed = self.log.committed
        last_new, ok = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if ok:
            if m.entries or last_new != self.acked or self.log.committed == committed:
                self.acked = last_new
                self._send(Message(MT.APP_RESP, to=m.frm, index=last_new))
            # else: the leader's commit notice (no entries, after the index this member
            # already acknowledged in this term; it moved our commit). Its answer would
            # tell the leader nothing it does not know, and cost it a receive and a turn
            # per follower per write. Should our last answer have been lost, the leader's
            # next append, or the one it sends on a heartbeat's answer while our match
            # lags, moves no commit here and is answered.
            return
        hint_index, hint_term = self.log.find_conflict_by_term(
            min(m.index, self.log.last_index()), m.log_term
        )
        self._send(
            Message(
                MT.APP_RESP,
                to=m.frm,
                index=m.index,
                reject=True,
                reject_hint=hint_index,
                log_term=hint_term,
            )
        )

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(min(m.commit, self.log.last_index()))
        self._send(Message(MT.HEARTBEAT_RESP, to=m.frm, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        if snap is not None and self._restore(snap):
            self._send(Message(MT.APP_RESP, to=m.frm, index=self.log.last_index()))
        else:
            self._send(Message(MT.APP_RESP, to=m.frm, index=self.log.committed))

    def _restore(self, snap: Snapshot) -> bool:
        meta = snap.meta
        if meta.index <= self.log.committed:
            return False
        if self.log.match_term(meta.index, meta.term):
            self.log.commit_to(meta.index)  # we already have it: just fast-forward
            return False
        self.log.restore(snap)
        self._set_progress(meta.conf_state)
        for pr in self.prs.values():
            pr.match, pr.next = 0, self.log.last_index() + 1
        return True


def bootstrap_entries(voters: list[int], contexts: dict[int, bytes] | None = None) -> list[Entry]:
    """The first log of a new cluster: one committed ADD_VOTER per initial member, term 1.
    Every member writes the same entries, so the configuration lives in the log."""
    contexts = contexts or {}
    return [
        Entry(
            1,
            i + 1,
            EntryType.CONF_CHANGE,
            encode_conf_change(ConfChange(ConfChangeType.ADD_VOTER, v, contexts.get(v, b""))),
        )
        for i, v in enumerate(voters)
    ]
