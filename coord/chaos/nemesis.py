"""Faults against real member processes (coord.testing.LocalCluster), one at a time, on
a schedule drawn from the run's seed.

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
- member: membership churn: a follower is removed, killed, wiped, added back as a
  learner and started; after the fault's duration it is promoted to a voter again.
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
from dataclasses import asdict, dataclass, field

from coord.chaos.netns import Network
from coord.testing import LocalCluster
from coord.testing.netfault import TcpGate

DEFAULT_NEMESES = ("kill", "pause", "partition", "member", "slow")
NEMESES = (*DEFAULT_NEMESES, "delay")
"""Every kind; a run without --nemesis takes the default ones, whose partitions run in
network namespaces where this machine allows (delay needs the gates instead)."""
PARTITIONS = ("split", "isolate-leader", "bridge", "one-way")


@dataclass
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


@dataclass
class Schedule:
    """Drawn from the seed up front: (pause before, kind, duration, pick) per fault,
    each kind once per round of len(kinds) faults;
    `pick` chooses the target among the running members (the leader, for a leader
    partition, is whoever leads at that moment)."""

    steps: list[tuple[float, str, float, float]] = field(default_factory=list)

    @classmethod
    def draw(cls, seed: int, kinds: list[str], seconds: float,
             interval: tuple[float, float] = (1.0, 3.0),
             duration: tuple[float, float] = (1.0, 4.0)) -> Schedule:
        rng = random.Random(f"nemesis-{seed}")
        steps, t = [], 0.0
        order: list[str] = []
        while kinds and t < seconds:
            if not order:  # every kind once per round, in a random order
                order = rng.sample(kinds, len(kinds))
            gap, dur = rng.uniform(*interval), rng.uniform(*duration)
            steps.append((gap, order.pop(), dur, rng.random()))
            t += gap + dur
        return cls(steps)


class Nemesis:
    def __init__(self, cluster: LocalCluster, schedule: Schedule, t0: float,
                 network: Network | None = None) -> None:
        self.cluster = cluster
        self.network = network
        self.schedule = schedule
        self.t0 = t0
        self.faults: list[Fault] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._throttle: tuple[threading.Thread, threading.Event] | None = None
        self._learners: set[str] = set()  # re-added by membership churn, not yet promoted

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
        for gap, kind, dur, pick in self.schedule.steps:
            if self._stop.wait(gap):
                return
            fault = self._inject(kind, pick)
            if fault is None:
                continue
            self._stop.wait(dur)
            self._heal(fault)

    def _target(self, kind: str, pick: float) -> tuple[str, str]:
        running = [n for n, m in self.cluster.members.items() if m.running and not m.paused]
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
        if kind in ("kill", "pause") and pick < 0.2:
            # a majority at once: no quorum until it heals (writes then have unknown
            # outcomes, reads fail, a paused majority leaves the rest read-only)
            rng = random.Random(pick)
            names = rng.sample(running, len(self.cluster.members) // 2 + 1)
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
        """The fault started, or None if it could not be: then what it did start is
        undone and it is recorded as ended there (not as never healed, which would
        stretch its window over the rest of the run)."""
        fault = self._start(kind, pick)
        self.faults.append(fault)
        if not fault.error:
            return fault
        try:
            self.heal_all()
        except Exception as e:  # noqa: BLE001 - recorded; heal_all runs again at the end
            fault.error += f"; undoing it: {e!r}"
        fault.end_s = self._now()
        fault.end_ns = time.monotonic_ns()
        return None

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
            elif fault.kind == "delay":
                self._gate(fault.member).delay_s = 0.0
            elif self.network is not None:
                self.network.heal()
            else:
                self.cluster.heal(fault.member)
        except Exception as e:  # noqa: BLE001 - recorded; heal_all retries at the end
            fault.error = repr(e)
        fault.end_s = self._now()
        fault.end_ns = time.monotonic_ns()

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
        self._throttle = (t, done)
        t.start()

    def _stop_throttle(self) -> None:
        if self._throttle is not None:
            t, done = self._throttle
            done.set()
            t.join(5)
            self._throttle = None

    def _gate(self, member: str) -> TcpGate:
        gate = self.cluster.members[member].gate
        if gate is None:
            raise ValueError("a delayed link needs the member's TCP gate (no namespaces)")
        return gate

    def _promote(self, member: str) -> None:
        self.cluster.promote(member)
        self._learners.discard(member)

    def heal_all(self) -> None:
        """Undo every fault: a learner whose promotion failed is promoted here, once it
        runs again."""
        self._stop_throttle()
        if self.network is not None:
            self.network.heal()
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
