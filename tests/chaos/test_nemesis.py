"""The nemesis's bookkeeping over a stand-in cluster (no processes): what a fault that
could not be injected records, and what heal_all puts right."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from coord.chaos.nemesis import Nemesis, Schedule
from coord.check.sessions import check_sessions, fault_windows
from tests.check.oplogs import H


@dataclass
class Member:
    running: bool = True
    paused: bool = False
    gate: None = None


class Cluster:
    """Members n1-n3 (n1 leads); `fail` names calls that raise; `calls` records the rest."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.members = {n: Member() for n in ("n1", "n2", "n3")}
        self.fail = set(fail)
        self.calls: list[tuple[str, str]] = []

    def statuses(self) -> dict:
        return {n: SimpleNamespace(role="leader" if n == "n1" else "follower")
                for n, m in self.members.items() if m.running}

    def _call(self, what: str, name: str) -> None:
        if what in self.fail:
            self.fail.discard(what)
            raise RuntimeError(f"{what} {name} failed")
        self.calls.append((what, name))

    def kill(self, name: str) -> None:
        self._call("kill", name)
        self.members[name].running = False

    def start_member(self, name: str, wait: bool = True, timeout: float = 30) -> None:
        self._call("start", name)
        self.members[name].running = True

    def rejoin_member(self, name: str) -> None:
        self._call("rejoin", name)

    def promote(self, name: str) -> None:
        self._call("promote", name)


S = 1_000_000_000


def test_a_fault_that_failed_to_inject_ends_and_later_late_expiries_are_still_caught():
    """A majority kill that killed one member and then failed: the nemesis restarts what
    it did kill and ends the fault there, so its window does not run forever and a
    session alive long after its TTL, later on, is still a violation."""
    cluster = Cluster()
    killed: list[str] = []

    def kill_one_then_fail(name: str) -> None:
        if killed:
            raise RuntimeError(f"kill {name} failed")
        killed.append(name)
        cluster.members[name].running = False

    cluster.kill = kill_one_then_fail
    nemesis = Nemesis(cluster, Schedule(), t0=0.0)
    assert nemesis._inject("kill", 0.1) is None  # pick < 0.2: a majority
    (fault,) = nemesis.faults
    assert fault.error and fault.end_ns >= fault.start_ns > 0
    assert all(m.running for m in cluster.members.values())  # the one killed is back
    assert ("start", killed[0]) in cluster.calls
    (window,) = fault_windows([fault.to_json()])
    assert window[1] != float("inf")
    # a session opened after the failed fault, probed alive 9 s later with a 1 s TTL
    t = window[1]
    h = H(key=None)
    h.op(0, "open_session", t, t + S // 10, 1.0, session=8)
    h.op(0, "own", t + 9 * S, t + 9 * S + 1, None, session=8, generation=1, revision=3,
         group="g", resource="r")
    r = check_sessions(h.sorted(), faults=[window])
    assert r.count == 1 and "still alive" in r.violations[0]["message"]


def test_heal_all_promotes_a_learner_a_failed_member_heal_left():
    """Membership churn re-adds a member as a learner; promoting it at the fault's end
    fails (a refusal, a leader change): heal_all promotes it, once."""
    cluster = Cluster(fail=("promote",))
    nemesis = Nemesis(cluster, Schedule(), t0=0.0)
    fault = nemesis._inject("member", 0.9)
    assert fault is not None and fault.member != "n1"  # a follower
    nemesis._heal(fault)
    assert fault.error and ("promote", fault.member) not in cluster.calls
    nemesis.heal_all()
    assert cluster.calls.count(("promote", fault.member)) == 1
    nemesis.heal_all()
    assert cluster.calls.count(("promote", fault.member)) == 1
