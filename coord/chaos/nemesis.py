"""Faults against real member processes (coord.testing.LocalCluster) on a schedule drawn
from the run's seed: one at a time, or (`overlap`) in pairs whose windows overlap — the
second fault starts while the first holds (a partition while a member is killed, a
pause during a membership change) — each fault recorded with its own window and healed
at its own end.

- kill: kill -9 a member (a fifth of the time a majority), restart after the fault's
  duration.
- pause: SIGSTOP a member (a GC pause, a stalled VM; a fifth of the time a majority),
  SIGCONT after the duration.
- slow: a member throttled (a slow disk or an overloaded VM; `tc netem` does not work
  here, so not a delayed link): SIGSTOP/SIGCONT in turns of 20-80 ms for the fault's
  duration, so its messages leave late and in bursts and its timers fire late.
- delay: every message to a member held 50-400 ms in its TCP gate (a slow link, in
  order; half the time the leader's, else a follower's). The gates carry peer traffic only when the
  cluster is not in network namespaces, so asking for it runs partitions on the gates.
- member: membership churn (a member replaced, as etcd's robustness suite does): a
  follower is removed, killed, wiped, added back as a learner and started; after the
  fault's duration it is promoted to a voter again.
- crash: a member restarted armed at a crash point drawn from the seed
  (coord.server.failpoints: inside a log write, after apply, in a snapshot, a membership
  change, a defrag): it kills itself (kill -9) when it gets there. At the fault's end it
  is started again unarmed, whether it got there (noted) or not.
- skew: every member's wall clock off at once, each by its own amount (up to 10 min
  either way), members run as coord.chaos.skewed_member --skew-file; put back at the
  end. A member restarted during the fault keeps its skew.
- partition, with network namespaces (coord.chaos.netns; root): one of a
  majority/minority split, the leader isolated, a bridge (one member sees both sides,
  which do not see each other) or a one-way cut (a's messages to b dropped, b's to a
  delivered). Without namespaces: a member cut off with its TCP gate
  (coord.testing.netfault): no peer's message reaches it while its own still go out;
  half the time the member cut off is the current leader, else a follower.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from coord.chaos.netns import Network
from coord.chaos.skew_file import write_skew
from coord.testing import LocalCluster
from coord.testing.local_cluster import CRASH_POINTS
from coord.testing.netfault import TcpGate

DEFAULT_NEMESES = ("kill", "pause", "partition", "member", "slow")
NEMESES = (*DEFAULT_NEMESES, "delay", "skew", "crash")
"""Every kind; a run without --nemesis takes the default ones, whose partitions run in
network namespaces where this machine allows (delay needs the gates instead; skew
members that run coord.chaos.skewed_member)."""
HEAL_S = 120.0
"""The most a fault's heal may take past its duration (restarting a majority, each
member given 30 s to serve; a promotion retried for 30 s)."""
SKEW_MS = 600_000
"""The most a skew fault moves a member's wall clock, either way."""
PARTITIONS = ("split", "isolate-leader", "bridge", "one-way")
PROCESS_FAULTS = ("kill", "pause", "slow", "member", "crash")
"""The kinds that stop, restart or re-add a member's process: one member takes one of
them at a time."""


@dataclass(eq=False)  # a fault is itself: two alike are still two
class Fault:
    kind: str
    member: str
    start_s: float  # seconds since the run started
    end_s: float | None = None
    note: str = ""
    error: str = ""
    start_ns: int = 0  # time.monotonic_ns(), the oplog's clock
    end_ns: int = 0

    def to_json(self) -> dict:
        return asdict(self)


class Planned(NamedTuple):
    """One fault of a schedule: planned `start_s` into the run (later by as much as the
    heals before it ran late), held `duration_s`; `pick` chooses its target."""

    start_s: float
    kind: str
    duration_s: float
    pick: float


@dataclass
class Schedule:
    """Drawn from the seed up front, each kind once per round of len(kinds) faults;
    `pick` chooses the target among the running members (the leader, for a leader
    partition, is whoever leads at that moment). One at a time: each fault 1-3 s after
    the last healed. `overlap`: the round's kinds in pairs, the second of a pair started
    20-60 % into the first's window (so both hold at once), the next pair 1-3 s after
    both healed."""

    steps: list[Planned] = field(default_factory=list)

    @classmethod
    def draw(cls, seed: int, kinds: list[str], seconds: float,
             interval: tuple[float, float] = (1.0, 3.0),
             duration: tuple[float, float] = (1.0, 4.0), overlap: bool = False) -> Schedule:
        if overlap and len(set(kinds)) < 2:
            raise ValueError("overlapping faults need two nemesis kinds or more")
        rng = random.Random(f"nemesis-{seed}")
        steps, t = [], 0.0
        order: list[str] = []
        while kinds and t < seconds:
            if len(order) < (2 if overlap else 1):  # every kind once per round
                order = rng.sample(kinds, len(kinds)) + order
            gap, dur = rng.uniform(*interval), rng.uniform(*duration)
            first = Planned(t + gap, order.pop(), dur, rng.random())
            steps.append(first)
            t = first.start_s + dur
            if overlap:
                kind = order.pop()
                if kind == first.kind:  # a round's last kind met the next round's first
                    order.insert(0, kind)
                    kind = order.pop()
                lag, dur = rng.uniform(0.2, 0.6) * first.duration_s, rng.uniform(*duration)
                steps.append(Planned(first.start_s + lag, kind, dur, rng.random()))
                t = max(t, first.start_s + lag + dur)
        return cls(steps)

    def groups(self) -> list[list[Planned]]:
        """The steps in runs whose windows overlap (one step each, one at a time)."""
        groups: list[list[Planned]] = []
        end = float("-inf")
        for step in self.steps:
            if not groups or step.start_s >= end:
                groups.append([])
                end = float("-inf")
            groups[-1].append(step)
            end = max(end, step.start_s + step.duration_s)
        return groups


class Nemesis:
    def __init__(self, cluster: LocalCluster, schedule: Schedule, t0: float,
                 network: Network | None = None, skew_dir: Path | None = None,
                 on_record: Callable[[Fault], None] | None = None) -> None:
        """`skew_dir`: where the members' skew files are (each member `n` runs as
        coord.chaos.skewed_member --skew-file skew_dir/n); None: no skew faults.
        `on_record`: told of each fault as it starts and as it ends (the run's fault
        log)."""
        self.cluster = cluster
        self.on_record = on_record
        self.network = network
        self.skew_dir = skew_dir
        self.schedule = schedule
        self.t0 = t0
        self.faults: list[Fault] = []
        self._active: list[Fault] = []  # started, not yet healed
        self._lock = threading.Lock()  # over _active: fault threads heal at their ends
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._throttle: tuple[str, threading.Thread, threading.Event] | None = None
        self._learners: set[str] = set()  # re-added by membership churn, not yet promoted
        self._armed: set[str] = set()  # running with a crash point armed

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop injecting, heal what is broken (always: even after an error)."""
        self._stop.set()
        self._thread.join(timeout)
        self.heal_all()

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _run(self) -> None:
        """Group by group (faults whose windows overlap), each fault started on time
        within its group and held by a thread of its own, which heals it at its end (so a
        heal that waits for a quorum another fault took does not hold up that fault's
        heal); the next group 1-3 s after the last one healed, however long that took."""
        planned_end = 0.0
        for group in self.schedule.groups():
            if self._stop.wait(max(0.0, group[0].start_s - planned_end)):
                return
            began = time.monotonic()
            holds = []
            for step in group:
                wait = began + step.start_s - group[0].start_s - time.monotonic()
                if self._stop.wait(max(0.0, wait)):
                    break
                fault = self._inject(step.kind, step.pick)
                if fault is not None:
                    hold = threading.Thread(target=self._hold, args=(fault, step.duration_s),
                                            name=f"nemesis-{step.kind}", daemon=True)
                    hold.start()
                    holds.append((hold, step.duration_s))
            for hold, duration in holds:
                hold.join(duration + HEAL_S)
            planned_end = max(step.start_s + step.duration_s for step in group)

    def _hold(self, fault: Fault, duration: float) -> None:
        """Hold `fault` for `duration` (less if the run stops), then heal it, unless a
        heal_all already did."""
        self._stop.wait(duration)
        with self._lock:
            held = fault in self._active
        if held:
            self._heal(fault)

    def _target(self, kind: str, pick: float) -> tuple[str, str]:
        throttled = self._throttle[0] if self._throttle else None
        running = [n for n, m in self.cluster.members.items()
                   if m.running and not m.paused and n != throttled]
        if kind in PROCESS_FAULTS:
            # a member another fault restarts (armed at a crash point) or re-added (a
            # learner) is that fault's: a kill beside it would race its heal's start
            running = [n for n in running if n not in self._armed | self._learners]
        if not running and kind != "skew":
            raise ValueError(f"no member is free for a {kind} fault")
        if kind == "skew":
            return ",".join(self.cluster.members), ""
        if kind == "member":
            leader = self._leader()
            running = [n for n in running if n != leader] or running
        if kind in ("partition", "delay"):
            # half the time the leader, else a follower: the two faults differ (a slow or
            # cut-off leader delays commits; a follower falls behind and serves old state)
            leader = self._leader()
            if leader and pick < 0.5:
                return leader, "the leader"
            running = [n for n in running if n != leader] or running
            pick = (pick - 0.5) * 2 if pick >= 0.5 else pick
        majority = len(self.cluster.members) // 2 + 1
        if kind in ("kill", "pause") and pick < 0.2 and len(running) >= majority:
            # a majority at once: no quorum until it heals (writes then have unknown
            # outcomes, reads fail, a paused majority leaves the rest read-only). With
            # fewer free (other faults hold the rest: down, paused, throttled, armed at
            # a crash point or re-added) it takes one free member, noted as no majority,
            # so the draw still injects a fault.
            rng = random.Random(pick)
            names = rng.sample(running, majority)
            return ",".join(sorted(names)), "a majority"
        return running[int(pick * len(running)) % len(running)], ""

    def _leader(self) -> str | None:
        return next((n for n, st in self.cluster.statuses().items() if st.role == "leader"), None)

    def _partition(self, pick: float) -> tuple[str, str]:
        """Cut links in the namespaces; returns (what was cut, which variant)."""
        assert self.network is not None
        rng = random.Random(pick)
        names = list(self.cluster.members)
        variant = PARTITIONS[int(pick * len(PARTITIONS)) % len(PARTITIONS)]
        rng.shuffle(names)
        if variant == "isolate-leader":
            leader = self._leader() or names[0]
            self.network.split([leader], [n for n in names if n != leader])
        elif variant == "split":
            minority = (len(names) - 1) // 2
            self.network.split(names[:minority], names[minority:])
        elif variant == "bridge":
            rest = names[1:]
            self.network.split(rest[:len(rest) // 2], rest[len(rest) // 2:])
        else:
            self.network.cut(names[0], names[1], one_way=True)
        return self.network.describe(), variant

    def _inject(self, kind: str, pick: float) -> Fault | None:
        """The fault started, or None if it could not be: then what may have started is
        undone (heal_all, which ends every fault it heals, those beside this one too) and
        it is recorded as ended there (not as never healed, which would stretch its
        window over the rest of the run)."""
        fault = self._start(kind, pick)
        with self._lock:
            self.faults.append(fault)
            if not fault.error:
                self._active.append(fault)
        if self.on_record is not None:
            self.on_record(fault)
        if not fault.error:
            return fault
        if fault.member or kind == "partition":  # it had a target: it may have started
            try:
                self.heal_all(why=f"healed early: a {kind} beside it could not start")
            except Exception as e:  # noqa: BLE001 - recorded; heal_all runs again at the end
                fault.error += f"; undoing it: {e!r}"
        self._end(fault)
        return None

    def _end(self, fault: Fault, why: str = "") -> None:
        fault.end_s = self._now()
        fault.end_ns = time.monotonic_ns()
        if why:
            fault.note = f"{fault.note}; {why}" if fault.note else why
        with self._lock:
            if fault in self._active:
                self._active.remove(fault)
        if self.on_record is not None:
            self.on_record(fault)

    def _start(self, kind: str, pick: float) -> Fault:
        if kind == "partition" and self.network is not None:
            fault = Fault(kind, "", self._now(), start_ns=time.monotonic_ns())
            try:
                fault.member, fault.note = self._partition(pick)
            except Exception as e:  # noqa: BLE001 - recorded
                fault.error = repr(e)
            return fault
        try:
            member, note = self._target(kind, pick)
        except (IndexError, ValueError) as e:  # too few members running for this fault
            return Fault(kind, "", self._now(), error=f"no target: {e!r}",
                         start_ns=time.monotonic_ns())
        fault = Fault(kind, member, self._now(), note=note, start_ns=time.monotonic_ns())
        try:
            if kind == "kill":
                for name in member.split(","):
                    self.cluster.kill(name)
            elif kind == "pause":
                for name in member.split(","):
                    self.cluster.pause(name)
            elif kind == "member":
                self._learners.add(member)
                self.cluster.rejoin_member(member)
            elif kind == "slow":
                self._start_throttle(member, pick)
            elif kind == "skew":
                fault.note = self._skew(pick)
            elif kind == "crash":
                fault.note = self._arm(member, pick)
            elif kind == "delay":
                delay = random.Random(pick).uniform(0.05, 0.4)
                self._gate(member).delay_s = delay
                fault.note = f"{fault.note + ', ' if fault.note else ''}{delay * 1000:.0f} ms"
            else:
                self.cluster.cut_off(member)
        except Exception as e:  # noqa: BLE001 - a fault that could not start is recorded
            fault.error = repr(e)
        return fault

    def _heal(self, fault: Fault) -> None:
        try:
            if fault.kind == "kill":
                for name in fault.member.split(","):
                    self.cluster.start_member(name, wait=False)
                for name in fault.member.split(","):
                    self.cluster.wait_serving(name, timeout=30)
            elif fault.kind == "pause":
                for name in fault.member.split(","):
                    self.cluster.resume(name)
            elif fault.kind == "member":
                self._promote(fault.member)
            elif fault.kind == "slow":
                self._stop_throttle()
            elif fault.kind == "skew":
                self._unskew()
            elif fault.kind == "crash":
                fault.note += self._disarm(fault.member)
            elif fault.kind == "delay":
                self._gate(fault.member).delay_s = 0.0
            elif self.network is not None:
                self.network.heal()
            else:
                self.cluster.heal(fault.member)
        except Exception as e:  # noqa: BLE001 - recorded; heal_all retries at the end
            fault.error = repr(e)
        self._end(fault)

    def _start_throttle(self, member: str, pick: float) -> None:
        done = threading.Event()
        rng = random.Random(pick)

        def throttle() -> None:
            while not done.is_set():
                self.cluster.pause(member)
                done.wait(rng.uniform(0.02, 0.08))
                self.cluster.resume(member)
                done.wait(rng.uniform(0.02, 0.08))

        t = threading.Thread(target=throttle, name=f"slow-{member}", daemon=True)
        self._throttle = (member, t, done)
        t.start()

    def _stop_throttle(self) -> None:
        if self._throttle is not None:
            _, t, done = self._throttle
            done.set()
            t.join(5)
            self._throttle = None

    def _gate(self, member: str) -> TcpGate:
        gate = self.cluster.members[member].gate
        if gate is None:
            raise ValueError("a delayed link needs the member's TCP gate (no namespaces)")
        return gate

    def _skew(self, pick: float) -> str:
        """Every member's wall clock off by its own amount; says by how much."""
        if self.skew_dir is None:
            raise ValueError("a skew needs members run as coord.chaos.skewed_member")
        rng = random.Random(pick)
        skews = {n: rng.randint(-SKEW_MS, SKEW_MS) for n in self.cluster.members}
        for name, ms in skews.items():
            write_skew(self.skew_dir / name, ms)
        return ", ".join(f"{n} {ms / 1000:+.1f} s" for n, ms in skews.items())

    def _unskew(self) -> None:
        if self.skew_dir is not None:
            for name in self.cluster.members:
                write_skew(self.skew_dir / name, 0)

    def _arm(self, member: str, pick: float) -> str:
        """Restart `member` armed at a crash point drawn from `pick`; says which."""
        points = sorted(CRASH_POINTS)
        point = points[int(pick * len(points)) % len(points)]
        self._armed.add(member)
        self.cluster.restart(member, failpoints=f"{point}=panic", wait=False)
        return f"armed at {point}"

    def _disarm(self, member: str) -> str:
        """Start `member` again unarmed (killing it first if it never reached its point);
        says whether it got there."""
        self._armed.discard(member)
        died = not self.cluster.members[member].running
        self.cluster.restart(member, timeout=30)
        return ", died there" if died else ", not reached"

    def _promote(self, member: str) -> None:
        self.cluster.promote(member)
        self._learners.discard(member)

    def heal_all(self, why: str = "") -> None:
        """Undo every fault, and end every fault still held there (noting `why`): a
        learner whose promotion failed is promoted here, once it runs again."""
        self._stop_throttle()
        self._unskew()
        if self.network is not None:
            self.network.heal()
        for name in sorted(self._armed):
            self._disarm(name)
        for name, m in self.cluster.members.items():
            if m.paused:
                self.cluster.resume(name)
            if m.gate is not None:
                m.gate.delay_s = 0.0
                if not m.gate.is_open:
                    self.cluster.heal(name)
            if not m.running:
                self.cluster.start_member(name, wait=True, timeout=30)
        for name in sorted(self._learners):
            self._promote(name)
        with self._lock:
            held = list(self._active)
        for fault in held:
            self._end(fault, why)
