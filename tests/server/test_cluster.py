"""Multi-member behaviour against real `coord serve` processes on 127.0.0.1:
kill -9, SIGSTOP/SIGCONT, full restarts."""

from __future__ import annotations

import json
import time

import grpc
import pytest

from coord.sm.commands import Put, encode_command
from coord.testing import LocalCluster
from coord.wire import ApiError
from tests.cut_off import wait_until

pytestmark = pytest.mark.cluster

TICK_S = 0.05
ELECTION_S = 12 * TICK_S  # the defaults: --tick-ms 50, --election-ticks 12


def put(key: bytes, value: bytes = b"v") -> bytes:
    return encode_command(Put(key, value))


def write(cluster: LocalCluster, names: list[str], data: bytes, deadline_s: float = 10.0):
    """Propose an encoded command through whichever member is leader (raw log access)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        for n in names:
            try:
                with cluster.client(n, timeout=1.0) as c:
                    return c.propose(data)
            except grpc.RpcError as e:
                last = e
        time.sleep(0.02)
    raise AssertionError(f"no write committed within {deadline_s}s: {last}")


def machine(status) -> dict:
    return json.loads(status.state_machine)


def test_kill_leader_new_leader_commits(cluster3: LocalCluster):
    leader = cluster3.wait_for_leader()
    before = write(cluster3, [leader], put(b"before"))
    cluster3.kill(leader)
    survivors = [n for n in cluster3.members if n != leader]
    new_leader = cluster3.wait_for_leader(among=survivors, timeout=10)
    assert new_leader != leader
    after = write(cluster3, survivors, put(b"after"))
    assert after.index > before.index
    # Both survivors applied both writes, in order, identically.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        sts = [cluster3.status(n) for n in survivors]
        if all(s.applied_index >= after.index for s in sts):
            break
        time.sleep(0.05)
    assert len({s.state_machine for s in sts}) == 1
    assert machine(sts[0])["keys"] == 2


def test_follower_rejects_write_naming_leader(cluster3: LocalCluster):
    leader = cluster3.wait_for_leader()
    follower = next(n for n in cluster3.members if n != leader)
    with cluster3.client(follower) as c, pytest.raises(grpc.RpcError) as err:
        c.propose(put(b"x"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ApiError.of_rpc_error(err.value).reason == "NOT_LEADER"
    assert leader in err.value.details()


def test_linearizable_read_on_follower_sees_write(cluster3: LocalCluster):
    leader = cluster3.wait_for_leader()
    follower = next(n for n in cluster3.members if n != leader)
    w = write(cluster3, [leader], put(b"v1"))
    with cluster3.client(follower) as c:
        index = c.read_index()
        assert index >= w.index
        assert c.status().applied_index >= w.index


def _watch_quorum(cluster: LocalCluster, name: str, seconds: float) -> list[bool]:
    samples = []
    end = time.monotonic() + seconds
    with cluster.client(name, timeout=10.0) as c:
        while time.monotonic() < end:
            samples.append(c.status().has_quorum)
            time.sleep(0.02)
    return samples


@pytest.mark.parametrize("survivor_role", ["leader", "follower"])
def test_quorum_loss_is_reported_and_never_flaps(cluster3: LocalCluster, survivor_role):
    """How soon it is reported is counted in ticks (tests/raft/scenarios/03_checkquorum.txt:
    within an election timeout) and the read-only switch it leads to is timed by `coord
    bench readonly`; here, on real processes: it is reported, and stays so for several
    election timeouts."""
    leader = cluster3.wait_for_leader()
    followers = [n for n in cluster3.members if n != leader]
    write(cluster3, [leader], put(b"warm"))
    survivor = leader if survivor_role == "leader" else followers[0]
    stopped = [n for n in cluster3.members if n != survivor]
    assert cluster3.status(survivor).has_quorum

    for n in stopped:
        cluster3.pause(n)
    wait_until("the survivor reports its quorum lost",
               lambda: not cluster3.status(survivor).has_quorum, 30.0)
    samples = _watch_quorum(cluster3, survivor, 5 * ELECTION_S)
    assert samples and not any(samples), "has_quorum flapped back while the majority was stopped"
    st = cluster3.status(survivor)
    assert st.role != "leader" and st.quorum_lost_ms > 0

    for n in stopped:
        cluster3.resume(n)
    wait_until("the survivor has its quorum back",
               lambda: cluster3.status(survivor).has_quorum, 30.0)
    write(cluster3, list(cluster3.members), put(b"healed"))


def test_kill_all_and_restart_keeps_state(tmp_path):
    # A small snapshot interval so the restart goes through snapshot + log replay.
    with LocalCluster(3, data_dir=tmp_path / "c", extra_args=["--snapshot-every", "40"]) as c:
        leader = c.wait_for_leader()
        last = None
        for i in range(100):
            last = write(c, [leader], put(f"k{i}".encode()))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            sts = {n: c.status(n) for n in c.members}
            if all(s.applied_index >= last.index for s in sts.values()):
                break
            time.sleep(0.05)
        before = {n: machine(s) for n, s in sts.items()}
        assert {m["keys"] for m in before.values()} == {100}
        assert len({json.dumps(m, sort_keys=True) for m in before.values()}) == 1
        assert max(s.snapshot_index for s in sts.values()) > 0

        c.restart_all()
        after = {n: machine(c.status(n)) for n in c.members}
        assert after == before  # replayed from disk before serving, on every member
        c.wait_for_leader(timeout=10)
        more = write(c, list(c.members), put(b"after-restart"))
        assert more.index > last.index


def test_leadership_transfer(cluster3: LocalCluster):
    leader = cluster3.wait_for_leader()
    target = next(n for n in cluster3.members if n != leader)
    with cluster3.client(leader) as c:
        c.transfer_leader(target)
    assert cluster3.wait_for_leader(timeout=5) == target
    write(cluster3, [target], put(b"after-transfer"))


def test_membership_learner_joins_catches_up_is_promoted_and_a_voter_leaves(
    cluster3: LocalCluster,
):
    leader = cluster3.wait_for_leader()
    for i in range(20):
        write(cluster3, [leader], put(f"pre{i}".encode()))
    cluster3.add_member("n4", learner=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st4, lead = cluster3.status("n4"), cluster3.status(leader)
        if st4.applied_index >= lead.commit_index and st4.leader_name == leader:
            break
        time.sleep(0.1)
    assert st4.applied_index >= lead.commit_index, "learner did not catch up"
    assert machine(st4)["keys"] == 20
    assert {m.name: m.learner for m in st4.members}["n4"] is True

    with cluster3.client(leader, timeout=15) as admin:
        promoted = admin.add_member("n4", cluster3.members["n4"].peer_listen, learner=False)
        assert {m.name: m.learner for m in promoted.members}["n4"] is False
        gone = next(n for n in ("n1", "n2", "n3") if n != leader)
        after = admin.remove_member(gone)
    assert sorted(m.name for m in after.members) == sorted({"n1", "n2", "n3", "n4"} - {gone})
    cluster3.kill(gone)
    survivors = [n for n in cluster3.members if n != gone]
    w = write(cluster3, survivors, put(b"after-change"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and cluster3.status("n4").applied_index < w.index:
        time.sleep(0.05)
    assert cluster3.status("n4").applied_index >= w.index


def test_promoting_a_learner_that_is_not_caught_up_is_refused(cluster3: LocalCluster):
    leader = cluster3.wait_for_leader()
    with cluster3.client(leader, timeout=15) as admin:
        admin.add_member("ghost", "127.0.0.1:1", learner=True)  # never started
        with pytest.raises(grpc.RpcError) as err:
            admin.add_member("ghost", "127.0.0.1:1", learner=False)
    assert ApiError.of_rpc_error(err.value).reason == "LEARNER_NOT_CAUGHT_UP"
    write(cluster3, [leader], put(b"still-fine"))
