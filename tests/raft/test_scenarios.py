"""Readable Raft scenarios, etcd style: each ``tests/raft/scenarios/*.txt`` is a script of
commands and expectations, run here against a scripted cluster of `RawNode`s.

The format is one command per line; ``#`` starts a comment. Node arguments are an id, a
comma list (``1,2``) or ``*`` (every running member). Messages travel in FIFO order and are
only delivered by ``stabilize``/``deliver``/``tick``, so a script controls every interleaving.

Cluster and time
    nodes 1 2 3 [prevote=false] [checkquorum=false] [election=10] [heartbeat=1]
          [inflight=256] [maxbytes=1048576] [seed=0]
                            bootstrap a new cluster of these voters (first Readys handled)
    tick <nodes> [n]        n times: tick those members once, then stabilize
    tick-quiet <nodes> [n]  tick n times without delivering anything
    stabilize               handle Readys and deliver messages until nothing is left
    process <nodes>         handle one Ready at each (persist, send, apply, advance)
    deliver [<nodes>]       deliver the queued messages addressed to them (default: all)
    reset-stats             zero the delivered-message counters
    status | trace on|off   print the members / every message (debugging aids; pytest -s)
    repeat <n> <cmd> [; <cmd>...]   run the commands n times (e.g. tick, then expect)
Faults
    isolate <node>          cut every link to and from it
    drop 1->2 | drop 1<->2  cut one link, one way or both
    heal                    restore every link
    crash <nodes>           lose everything not yet persisted (unhandled Readys included)
    crash <nodes> after-persist   write the pending Ready, then die before sending
    restart <node>          start again from what is on its disk
Requests
    campaign <node>         start an election now
    propose <node> <data>...  append payloads at that member (must be accepted)
    refused <command>       the proposal / membership change must be refused instead
    read-index <node> <ctx>
    transfer <node> <target>
    compact <node>          snapshot the state machine at its applied index
    add-learner <id> | add-voter <id> | remove <id>
                            propose the membership change at the leader (a brand-new id
                            starts with an empty disk)
Expectations (``expect <what> <nodes> <value...>``)
    role, term, vote, leader, commit, applied, last-index, first-index, has_quorum,
    voters, learners, payloads (every applied payload, in order; ``-`` for none),
    read-state <ctx> <index> | read-state <ctx> none, read-now <index> | read-now none
                            (the index a read is served at with no round),
    progress <leader> <peer> <probe|replicate|snapshot>,
    delivered <TYPE>[:REJECT] <op> <n>   (messages delivered since reset-stats, e.g.
                            ``expect delivered APP_RESP:REJECT <= 1``; op is == <= >= < >)
"""

from __future__ import annotations

import operator
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from coord.raft import (
    NONE,
    ConfChange,
    ConfChangeType,
    Config,
    EntryType,
    HardState,
    Message,
    MessageType,
    NotLeaderError,
    ProposalDroppedError,
    RawNode,
    Role,
    Snapshot,
    bootstrap_entries,
    conf_change_of,
)
from coord.raft.log import RaftLog
from coord.rafttest.member import Disk, StateMachine
from coord.rafttest.trace import fmt_message

SCENARIOS = Path(__file__).parent / "scenarios"


class ScenarioError(AssertionError):
    pass


class Refused(ScenarioError):
    """The core refused a proposal or a membership change."""


@dataclass
class Member:
    id: int
    disk: Disk
    raw: RawNode | None = None
    sm: StateMachine = field(default_factory=StateMachine)
    payloads: list[bytes] = field(default_factory=list)
    read_states: dict[bytes, int] = field(default_factory=dict)
    incarnation: int = 0


def restore(snap: Snapshot) -> tuple[StateMachine, list[bytes]]:
    """A scenario member's snapshot: the simulator's state machine, then its payloads."""
    sm = StateMachine.restore(snap)
    rest = snap.data[len(StateMachine().snapshot_data()) :]
    return sm, (rest.split(b"\0") if rest else [])


class Cluster:
    def __init__(self, voters: list[int], options: dict[str, str]) -> None:
        self.options = options
        self.members: dict[int, Member] = {}
        self.queue: list[Message] = []
        self.blocked: set[tuple[int, int]] = set()
        self.delivered: Counter[str] = Counter()
        self.tracing = False
        boot = bootstrap_entries(voters)
        for v in voters:
            disk = Disk(HardState(term=1, vote=NONE, commit=len(boot)), Snapshot(), boot)
            self.members[v] = Member(v, disk)
            self.start(v)
        self.stabilize()

    # -- members -----------------------------------------------------------------------------
    def config(self, m: Member) -> Config:
        o = self.options
        return Config(
            id=m.id,
            election_tick=int(o.get("election", 10)),
            heartbeat_tick=int(o.get("heartbeat", 1)),
            pre_vote=o.get("prevote", "true") == "true",
            check_quorum=o.get("checkquorum", "true") == "true",
            max_inflight_msgs=int(o.get("inflight", 256)),
            max_bytes_per_msg=int(o.get("maxbytes", 1 << 20)),
            seed=int(o.get("seed", 0)) + m.incarnation,
        )

    def start(self, node: int) -> None:
        m = self.members[node]
        m.incarnation += 1
        m.raw = RawNode(self.config(m), m.disk.hard_state, m.disk.snapshot, m.disk.entries)
        m.sm, m.payloads = restore(m.disk.snapshot)  # the rest is replayed from the log
        m.read_states = {}

    def raw(self, node: int) -> RawNode:
        m = self.members.get(node)
        if m is None or m.raw is None:
            raise ScenarioError(f"node {node} is not running")
        return m.raw

    def running(self) -> list[int]:
        return sorted(i for i, m in self.members.items() if m.raw is not None)

    def leader(self) -> int:
        leaders = [i for i in self.running() if self.raw(i).is_leader]
        if not leaders:
            raise ScenarioError("no leader")
        return max(leaders, key=lambda i: self.raw(i).raft.term)

    # -- the Ready loop and the network ----------------------------------------------------------
    def process(self, node: int) -> bool:
        m = self.members[node]
        if m.raw is None or not m.raw.has_ready():
            return False
        rd = m.raw.ready()
        m.disk.save(rd)
        self.queue.extend(rd.messages)
        if rd.snapshot is not None:
            m.sm, m.payloads = restore(rd.snapshot)
        for e in rd.committed_entries:
            m.sm.apply(e)
            if e.type is EntryType.CONF_CHANGE:
                m.raw.apply_conf_change(conf_change_of(e))
            elif e.data:
                m.payloads.append(e.data)
        for rs in rd.read_states:
            m.read_states[rs.context] = rs.index
        m.raw.advance(rd)
        return True

    def deliver(self, nodes: list[int] | None = None) -> bool:
        due = [msg for msg in self.queue if nodes is None or msg.to in nodes]
        if not due:
            return False
        self.queue = [msg for msg in self.queue if not (nodes is None or msg.to in nodes)]
        for msg in due:
            dst = self.members.get(msg.to)
            ok = dst is not None and dst.raw is not None and (msg.frm, msg.to) not in self.blocked
            if self.tracing:
                print(("    " if ok else "    DROP ") + fmt_message(msg))
            if ok:
                key = msg.type.name + (":REJECT" if msg.reject else "")
                self.delivered[key] += 1
                dst.raw.step(msg)  # type: ignore[union-attr]
            if msg.type is MessageType.SNAP:  # the sender's transport reports the outcome
                src = self.members[msg.frm]
                if src.raw is not None:
                    src.raw.report_snapshot(msg.to, ok)
        return True

    def stabilize(self) -> None:
        for _ in range(10_000):
            busy = False
            for node in self.running():
                for _ in range(100):
                    if not self.process(node):
                        break
                    busy = True
            if self.deliver():
                busy = True
            if not busy:
                return
        raise ScenarioError("the cluster did not quiesce; pending: "
                            + "; ".join(fmt_message(m) for m in self.queue[:10]))

    def crash(self, node: int) -> None:
        m = self.members[node]
        m.raw = None
        m.read_states = {}


# -- the interpreter -------------------------------------------------------------------------------

ROLES = {r.label: r for r in Role}
OPS = {"==": operator.eq, "<=": operator.le, ">=": operator.ge, "<": operator.lt,
       ">": operator.gt}


class Interpreter:
    def __init__(self) -> None:
        self.c: Cluster | None = None

    @property
    def cluster(self) -> Cluster:
        if self.c is None:
            raise ScenarioError("no cluster yet: start with `nodes ...`")
        return self.c

    def nodes(self, arg: str) -> list[int]:
        if arg in ("*", "all"):
            return self.cluster.running()
        return [int(x) for x in arg.split(",")]

    def run_line(self, words: list[str]) -> None:
        cmd, args = words[0], words[1:]
        handler = getattr(self, "cmd_" + cmd.replace("-", "_"), None)
        if handler is None:
            raise ScenarioError(f"unknown command {cmd!r}")
        handler(*args)

    # -- cluster and time -------------------------------------------------------------------------
    def cmd_nodes(self, *args: str) -> None:
        ids = [int(a) for a in args if "=" not in a]
        options = dict(a.split("=", 1) for a in args if "=" in a)
        self.c = Cluster(ids, options)

    def cmd_tick(self, nodes: str, n: str = "1") -> None:
        for _ in range(int(n)):
            for node in self.nodes(nodes):
                self.cluster.raw(node).tick()
            self.cluster.stabilize()

    def cmd_tick_quiet(self, nodes: str, n: str = "1") -> None:
        for _ in range(int(n)):
            for node in self.nodes(nodes):
                self.cluster.raw(node).tick()

    def cmd_repeat(self, n: str, *words: str) -> None:
        """``repeat N cmd args ; cmd args ; ...``: run the commands N times in a row."""
        commands: list[list[str]] = [[]]
        for w in words:
            if w == ";":
                commands.append([])
            else:
                commands[-1].append(w)
        for i in range(int(n)):
            for command in commands:
                try:
                    self.run_line(command)
                except ScenarioError as e:
                    raise ScenarioError(f"repetition {i + 1}: {e}") from None

    def cmd_stabilize(self) -> None:
        self.cluster.stabilize()

    def cmd_process(self, nodes: str) -> None:
        for node in self.nodes(nodes):
            self.cluster.process(node)

    def cmd_deliver(self, nodes: str = "*") -> None:
        self.cluster.deliver(None if nodes == "*" else self.nodes(nodes))

    def cmd_reset_stats(self) -> None:
        self.cluster.delivered.clear()

    # -- faults -----------------------------------------------------------------------------------
    def cmd_isolate(self, node: str) -> None:
        n = int(node)
        for other in self.cluster.members:
            if other != n:
                self.cluster.blocked |= {(n, other), (other, n)}

    def cmd_drop(self, link: str) -> None:
        if "<->" in link:
            a, b = (int(x) for x in link.split("<->"))
            self.cluster.blocked |= {(a, b), (b, a)}
        else:
            a, b = (int(x) for x in link.split("->"))
            self.cluster.blocked.add((a, b))

    def cmd_heal(self) -> None:
        self.cluster.blocked.clear()

    def cmd_crash(self, nodes: str, when: str = "") -> None:
        """``crash <nodes> [after-persist]``: the latter first writes the pending Ready to
        disk, then dies before sending its messages or applying anything."""
        for node in self.nodes(nodes):
            raw = self.cluster.raw(node)
            if when == "after-persist":
                if raw.has_ready():
                    self.cluster.members[node].disk.save(raw.ready())
            elif when:
                raise ScenarioError(f"crash {nodes} {when}: expected after-persist")
            self.cluster.crash(node)

    def cmd_restart(self, nodes: str) -> None:
        for node in self.nodes(nodes):
            self.cluster.start(node)

    # -- requests ---------------------------------------------------------------------------------
    def cmd_campaign(self, node: str) -> None:
        self.cluster.raw(int(node)).campaign()

    def cmd_propose(self, node: str, *data: str) -> None:
        raw = self.cluster.raw(int(node))
        try:
            raw.propose([d.encode() for d in data])
        except (NotLeaderError, ProposalDroppedError) as e:
            raise Refused(f"proposal refused: {e}") from None

    def cmd_refused(self, *words: str) -> None:
        """``refused <command...>``: the proposal or membership change must be refused."""
        try:
            self.run_line(list(words))
        except Refused:
            return
        raise ScenarioError(f"{' '.join(words)!r} was accepted")

    def cmd_read_index(self, node: str, ctx: str) -> None:
        self.cluster.raw(int(node)).read_index(ctx.encode())

    def cmd_transfer(self, node: str, target: str) -> None:
        self.cluster.raw(int(node)).transfer_leader(int(target))

    def cmd_compact(self, nodes: str) -> None:
        for node in self.nodes(nodes):
            m = self.cluster.members[node]
            raw = self.cluster.raw(node)
            data = m.sm.snapshot_data() + b"\0".join(m.payloads)
            m.disk.compact(raw.compact(raw.raft.log.applied, data))

    def _conf_change(self, kind: ConfChangeType, node: str) -> None:
        c = self.cluster
        n = int(node)
        try:
            c.raw(c.leader()).propose_conf_change(ConfChange(kind, n))
        except (NotLeaderError, ProposalDroppedError) as e:
            raise Refused(f"membership change refused: {e}") from None
        if n not in c.members:
            c.members[n] = Member(n, Disk())
            c.start(n)

    def cmd_add_learner(self, node: str) -> None:
        self._conf_change(ConfChangeType.ADD_LEARNER, node)

    def cmd_add_voter(self, node: str) -> None:
        self._conf_change(ConfChangeType.ADD_VOTER, node)

    def cmd_remove(self, node: str) -> None:
        self._conf_change(ConfChangeType.REMOVE_NODE, node)

    def cmd_trace(self, on: str) -> None:
        """Print every message delivered or dropped (for writing scripts: pytest -s)."""
        self.cluster.tracing = on == "on"

    def cmd_status(self) -> None:
        """Print every member (for writing scripts: run pytest with -s)."""
        for node, m in sorted(self.cluster.members.items()):
            if m.raw is None:
                print(f"  {node}: down")
                continue
            st = m.raw.status()
            print(
                f"  {node}: {st.role.label} term={st.term} vote={st.vote} lead={st.leader} "
                f"commit={st.commit} applied={st.applied} log={st.first_index}..{st.last_index} "
                f"quorum={st.has_quorum} voters={sorted(st.conf_state.voters)} "
                f"learners={sorted(st.conf_state.learners)} payloads={len(m.payloads)}"
            )

    # -- expectations ---------------------------------------------------------------------------
    def cmd_expect(self, what: str, *args: str) -> None:
        if what == "delivered":
            kind, op, n = args
            got = self.cluster.delivered[kind.upper().replace("-", "_")]
            if not OPS[op](got, int(n)):
                raise ScenarioError(f"delivered {kind}: {got}, expected {op} {n}")
            return
        if not args:
            raise ScenarioError(f"expect {what}: which nodes?")
        for node in self.nodes(args[0]):
            got, want = self.observe(what, node, list(args[1:]))
            if got != want:
                raise ScenarioError(f"node {node}: {what} is {got}, expected {want}")

    def observe(self, what: str, node: int, args: list[str]) -> tuple[object, object]:
        c = self.cluster
        m = c.members[node]
        if what == "payloads":
            want = [] if args == ["-"] else args
            return [p.decode() for p in m.payloads], want
        raw = c.raw(node)
        r = raw.raft
        st = raw.status()
        simple = {
            "term": st.term,
            "vote": st.vote,
            "leader": st.leader,
            "commit": st.commit,
            "applied": st.applied,
            "last-index": st.last_index,
            "first-index": st.first_index,
        }
        if what in simple:
            return simple[what], int(args[0])
        if what == "role":
            return st.role.label, ROLES[args[0]].label
        if what == "has_quorum":
            return str(st.has_quorum).lower(), args[0]
        if what == "voters":
            return sorted(st.conf_state.voters), sorted(int(a) for a in args if a != "-")
        if what == "learners":
            return sorted(st.conf_state.learners), sorted(int(a) for a in args if a != "-")
        if what == "read-now":  # the index a read is served at with no round, if any
            got = raw.immediate_read_index()
            return ("none" if got is None else got), (args[0] if args[0] == "none"
                                                      else int(args[0]))
        if what == "read-state":
            ctx, index = args
            got = m.read_states.get(ctx.encode())
            return ("none" if got is None else got), (index if index == "none" else int(index))
        if what == "progress":
            peer, state = args
            pr = st.progress.get(int(peer))
            return (pr.state if pr else None), state
        raise ScenarioError(f"unknown expectation {what!r} (role {r.role.label})")


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.txt"))


def run_scenario(path: Path) -> None:
    interp = Interpreter()
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            interp.run_line(shlex.split(text))
        except Exception as e:  # noqa: BLE001 - re-raised with the script position
            raise ScenarioError(f"{path.name}:{lineno}: {text}\n    {e}") from e


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    run_scenario(path)


def test_scenarios_exist() -> None:
    assert len(scenario_files()) >= 10


def test_interpreter_reports_a_wrong_expectation(tmp_path: Path) -> None:
    script = tmp_path / "wrong.txt"
    script.write_text("nodes 1 2 3\ncampaign 1\nstabilize\nexpect role 2 leader\n")
    with pytest.raises(ScenarioError, match=r"(?s)wrong.txt:4: .*node 2: role is follower"):
        run_scenario(script)


def test_figure8_scenario_catches_a_broken_commit_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit rule scenario fails if a leader may commit an old-term entry by counting."""

    def commit_by_counting(self: RaftLog, index: int, term: int) -> bool:
        if index > self.committed and self.term(index) is not None:
            self.committed = index
            return True
        return False

    monkeypatch.setattr(RaftLog, "maybe_commit", commit_by_counting)
    with pytest.raises(ScenarioError, match=r"expect commit 1 4"):
        run_scenario(SCENARIOS / "11_figure8_commit_rule.txt")


def test_has_ready_answers_as_building_the_states_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """`RawNode.has_ready` compares the hard and soft states field by field rather than
    build them: over every scenario it answers as building and comparing them would."""
    by_fields = RawNode.has_ready
    answers: list[bool] = []

    def checked(self: RawNode) -> bool:
        r, log = self.raft, self.raft.log
        built = bool(r.msgs or r.read_states or log.stable < log.last_index()
                     or log.pending_snapshot is not None or log.has_next_committed_entries()
                     or r.hard_state() != self._prev_hard
                     or r.soft_state() != self._prev_soft)
        answer = by_fields(self)
        assert answer == built, f"node {r.id}: has_ready {answer}, the states say {built}"
        answers.append(answer)
        return answer

    monkeypatch.setattr(RawNode, "has_ready", checked)
    for path in scenario_files():
        run_scenario(path)
    assert True in answers and False in answers
