"""The nemesis's bookkeeping over a stand-in cluster (no processes): what a fault that
could not be injected records, what heal_all puts right, and overlapping faults each
recorded with its own window and each healed."""

from __future__ import annotations

import errno
import io
import time
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from coord.chaos.nemesis import Fault, Nemesis, Planned, Schedule
from coord.chaos.recorder import FaultLog, latest_faults
from coord.chaos.skew_file import read_skew
from coord.check.oplog import read_jsonl
from coord.check.sessions import FAULT_AFTERMATH_NS, check_sessions, fault_windows
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

    def restart(self, name: str, failpoints: str = "", wait: bool = True,
                timeout: float = 30) -> None:
        self._call("restart", name)
        self.members[name].running = True

    def promote(self, name: str) -> None:
        self._call("promote", name)

    def wait_serving(self, name: str, timeout: float = 30) -> None:
        self._call("serving", name)

    def pause(self, name: str) -> None:
        self._call("pause", name)
        self.members[name].paused = True

    def resume(self, name: str) -> None:
        self._call("resume", name)
        self.members[name].paused = False

    def cut_off(self, name: str) -> None:
        self._call("cut", name)

    def heal(self, name: str) -> None:
        self._call("heal", name)


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


def test_a_member_armed_at_a_crash_point_or_re_added_takes_no_other_process_fault():
    """A kill drawn while another member is armed at a crash point (or re-added as a
    learner) targets someone else: killing the armed one raced the crash's restart, and
    the kill's heal then found it running again."""
    cluster = Cluster()
    nemesis = Nemesis(cluster, Schedule(), t0=0.0)
    crash = nemesis._inject("crash", 0.1)
    member = nemesis._inject("member", 0.9)
    assert crash is not None and member is not None and crash.member != member.member
    held = {crash.member, member.member}
    for kind in ("kill", "pause", "slow", "member", "crash"):
        for pick in (0.3, 0.5, 0.7, 0.9):
            name, _ = nemesis._target(kind, pick)
            assert name not in held, (kind, pick, name)
    assert nemesis._target("partition", 0.1)[0] == "n1"  # a link fault may still take any
    (free,) = set(cluster.members) - held
    cluster.members[free].paused = True  # nobody is left for a process fault: none starts
    kill = nemesis._inject("kill", 0.5)
    assert kill is None and "no member is free for a kill fault" in nemesis.faults[-1].error


def _run(nemesis: Nemesis) -> None:
    nemesis.start()
    nemesis._thread.join(30)
    assert not nemesis._thread.is_alive(), "the schedule did not finish in 30 s"


def test_an_overlapping_schedule_draws_pairs_whose_windows_overlap():
    kinds = ["kill", "pause", "partition", "member", "skew"]
    steps = Schedule.draw(4, kinds, 60, overlap=True).steps
    assert steps == Schedule.draw(4, kinds, 60, overlap=True).steps
    pairs = list(zip(steps[::2], steps[1::2], strict=True))
    assert len(pairs) >= 5
    for first, second in pairs:
        assert first.kind != second.kind
        assert first.start_s < second.start_s < first.start_s + first.duration_s
    for (a, b), (c, _) in zip(pairs, pairs[1:], strict=False):  # pairs take turns
        assert max(a.start_s + a.duration_s, b.start_s + b.duration_s) < c.start_s
    assert {s.kind for s in steps[:len(kinds) + 1]} == set(kinds)  # each kind per round
    assert Schedule(steps).groups() == [list(p) for p in pairs]
    one_at_a_time = Schedule.draw(4, kinds, 60)
    assert all(a.start_s + a.duration_s < b.start_s
               for a, b in zip(one_at_a_time.steps, one_at_a_time.steps[1:], strict=False))
    assert one_at_a_time.groups() == [[s] for s in one_at_a_time.steps]
    with pytest.raises(ValueError, match="two nemesis kinds"):
        Schedule.draw(4, ["kill"], 60, overlap=True)


def test_a_partition_while_a_member_is_killed_each_recorded_and_healed():
    """The kill holds 0-1.2 s, a partition 0.1-0.3 s inside it: two faults, two
    windows (the partition's inside the kill's), each healed at its own end."""
    cluster = Cluster()
    schedule = Schedule([Planned(0.0, "kill", 1.2, 0.9), Planned(0.1, "partition", 0.2, 0.9)])
    assert schedule.groups() == [schedule.steps]
    nemesis = Nemesis(cluster, schedule, t0=time.monotonic())
    _run(nemesis)
    kill, cut = nemesis.faults
    assert (kill.kind, kill.member, cut.kind, cut.member) == ("kill", "n3", "partition", "n2")
    assert not kill.error and not cut.error
    assert kill.start_ns < cut.start_ns < cut.end_ns < kill.end_ns
    assert cluster.calls == [("kill", "n3"), ("cut", "n2"), ("heal", "n2"),
                                          ("start", "n3"), ("serving", "n3")]
    assert fault_windows([kill.to_json(), cut.to_json()]) == [  # each its own window
        (kill.start_ns, kill.end_ns + FAULT_AFTERMATH_NS),
        (cut.start_ns, cut.end_ns + FAULT_AFTERMATH_NS)]
    assert nemesis._active == []


def test_a_pause_during_a_membership_change_and_skew_on_every_member(tmp_path):
    """Churn re-adds a follower as a learner, a pause starts while it is one, every
    member's clock is skewed across both; each is healed at its own end: the pause
    resumed, the learner promoted, every clock put back."""
    cluster = Cluster()
    skews_at_pause: dict[str, int] = {}
    pause = cluster.pause

    def pause_and_look(name: str) -> None:
        skews_at_pause.update({n: read_skew(tmp_path / n) for n in cluster.members})
        pause(name)

    cluster.pause = pause_and_look
    schedule = Schedule([Planned(0.0, "skew", 2.0, 0.3), Planned(0.05, "member", 1.2, 0.9),
                         Planned(0.1, "pause", 0.3, 0.9)])
    nemesis = Nemesis(cluster, schedule, t0=time.monotonic(), skew_dir=tmp_path)
    _run(nemesis)
    skew, churn, paused = nemesis.faults
    assert [f.kind for f in nemesis.faults] == ["skew", "member", "pause"]
    assert not any(f.error for f in nemesis.faults)
    assert skew.member == "n1,n2,n3" and all(n in skew.note for n in ("n1 ", "n2 ", "n3 "))
    assert skew.start_ns < churn.start_ns < paused.start_ns < paused.end_ns < churn.end_ns \
        < skew.end_ns
    assert all(v != 0 for v in skews_at_pause.values()), skews_at_pause
    assert all(read_skew(tmp_path / n) == 0 for n in cluster.members)
    assert cluster.calls.index(("rejoin", churn.member)) < cluster.calls.index(
        ("pause", paused.member)) < cluster.calls.index(("resume", paused.member)) < \
        cluster.calls.index(("promote", churn.member))
    assert not any(m.paused for m in cluster.members.values())


def test_a_fault_that_fails_beside_another_heals_and_ends_both():
    """A pause holds; a membership change beside it fails: heal_all undoes both and ends
    both there, the pause noting why, so neither window runs on past what was done."""
    cluster = Cluster(fail=("rejoin",))
    nemesis = Nemesis(cluster, Schedule(), t0=0.0)
    paused = nemesis._inject("pause", 0.9)
    assert paused is not None and cluster.members[paused.member].paused
    assert nemesis._inject("member", 0.1) is None
    churn = nemesis.faults[1]
    assert churn.error and churn.end_ns >= churn.start_ns > 0
    assert paused.end_ns > paused.start_ns and "a member beside it could not start" in \
        paused.note
    assert not any(m.paused for m in cluster.members.values())
    assert nemesis._active == []


def test_a_majority_fault_drawn_while_others_hold_a_majority_takes_one_member():
    """A majority pause drawn while a majority kill holds two of three members: it pauses
    the one left instead of failing to start ("Sample larger than population")."""
    cluster = Cluster()
    nemesis = Nemesis(cluster, Schedule(), t0=0.0)
    kill = nemesis._inject("kill", 0.1)  # pick < 0.2: a majority
    assert kill is not None and kill.note == "a majority"
    pause = nemesis._inject("pause", 0.1)
    (left,) = (n for n in cluster.members if n not in kill.member.split(","))
    assert pause is not None and not pause.error, nemesis.faults[-1].error
    assert pause.member == left and cluster.members[left].paused


def test_each_fault_is_in_the_fault_log_as_it_starts_and_as_it_ends(tmp_path):
    """A kill held 0-0.1 s, then a pause from 1.1 s: as each starts and as each ends
    its line is on disk (flushed), so a harness killed at any point keeps every fault it
    began, one still held as an open window (no end). At the close the file holds one
    line per fault, in start order, with their final records."""
    path = tmp_path / "faults.jsonl"
    log = FaultLog(path)
    seen: list[tuple[str, bool, list[dict]]] = []  # (fault, ended?, the file just after)

    def record(fault: Fault) -> None:
        log.record(fault)
        seen.append((fault.kind, bool(fault.end_ns), read_jsonl(path)))

    schedule = Schedule([Planned(0.0, "kill", 0.1, 0.9), Planned(1.1, "pause", 0.3, 0.9)])
    nemesis = Nemesis(Cluster(), schedule, t0=time.monotonic(), on_record=record)
    _run(nemesis)
    kill, pause = nemesis.faults
    assert [(kind, ended) for kind, ended, _ in seen] == [
        ("kill", False), ("kill", True), ("pause", False), ("pause", True)]
    killed_while_held = latest_faults(seen[0][2])
    assert [(f["kind"], f["end_ns"]) for f in killed_while_held] == [("kill", 0)]
    assert fault_windows(killed_while_held) == [(kill.start_ns, float("inf"))]
    assert latest_faults(seen[1][2]) == [kill.to_json()]
    assert [(f["kind"], f["end_ns"]) for f in latest_faults(seen[2][2])] == [
        ("kill", kill.end_ns), ("pause", 0)]
    assert latest_faults(seen[3][2]) == [kill.to_json(), pause.to_json()]
    assert all(f.end_ns > f.start_ns > 0 for f in (kill, pause))
    log.close(nemesis.faults)
    assert read_jsonl(path) == [kill.to_json(), pause.to_json()]


def test_a_fault_log_that_could_not_be_appended_says_so_at_the_end(tmp_path):
    """A full disk mid-run: the run goes on, `close` writes the file whole, and the
    warning the run's end prints names the file and the error (none if every write
    went through)."""
    path = tmp_path / "faults.jsonl"
    log = FaultLog(path)
    schedule = Schedule([Planned(0.0, "kill", 0.1, 0.9)])
    nemesis = Nemesis(Cluster(), schedule, t0=time.monotonic(), on_record=log.record)
    assert log.warning() is None

    class FullDisk(io.StringIO):
        def write(self, _text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    log._file.close()
    log._file = FullDisk()
    _run(nemesis)
    warning = log.warning()
    assert warning is not None and str(path) in warning and "No space left" in warning
    assert "not written whole" in warning  # not yet: the close comes next
    log.close(nemesis.faults)
    assert read_jsonl(path) == [f.to_json() for f in nemesis.faults]
    assert "it was written whole at the end" in log.warning()
