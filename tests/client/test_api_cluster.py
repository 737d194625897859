"""The client API against real `coord serve` processes on 127.0.0.1, through the
client library: ownership failover, severing, WatchOwners replaying history, PID blocks
across leader kills, linearizable reads across members, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from coord.client import Client
from coord.client.errors import (
    CompactedError,
    CoordError,
    InvalidArgumentError,
    SessionGoneError,
)
from coord.testing import LocalCluster

pytestmark = pytest.mark.cluster

TTL_S = 2.0


def wait_free(client: Client, group: str, resource: str, limit_s: float) -> None:
    """Poll until nobody owns the resource; fail after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if client.get_owner(group, resource).session_id == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"{group}/{resource} still owned after {limit_s}s")


OWNER_SCRIPT = """
import sys, time
from coord.client import Client
c = Client(sys.argv[1].split(","))
s = c.session(name="doomed", ttl={ttl})
s.own("g", [("p0", 1)])
print(s.id, flush=True)
time.sleep(60)
"""


def test_owner_killed_another_claims_once_its_session_expires(cluster3: LocalCluster):
    """The dead owner's session expires (when, by its TTL, the leader's session tracker
    decides: tests/server/upkeep/test_session_tracker.py, on its own clock); then another
    claims at the next generation."""
    endpoints = ",".join(cluster3.endpoints)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT.format(ttl=TTL_S), endpoints],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        doomed = int(owner.stdout.readline())
        with Client(cluster3.endpoints) as c:
            assert c.get_owner("g", "p0").session_id == doomed
            owner.kill()  # kill -9: no close, keepalives just stop
            owner.wait()
            with c.session(name="heir", ttl=TTL_S) as heir:
                wait_free(c, "g", "p0", TTL_S + 30)
                heir.own("g", [("p0", 1)])
                got = c.get_owner("g", "p0")
                assert got.session_id == heir.id
                assert got.generation == 2  # last generation + 1: never repeats
    finally:
        owner.kill()


def test_graceful_close_frees_at_once(cluster3: LocalCluster):
    with Client(cluster3.endpoints) as c:
        first = c.session(name="first", ttl=30)
        first.own("g", [("a", 1), ("b", 1)])
        first.close()
        # Released by the close itself (a committed write), not by the TTL 30 s later:
        # the next linearizable read finds both free.
        assert [c.get_owner("g", r).session_id for r in ("a", "b")] == [0, 0]
        with c.session(name="second", ttl=30) as second:
            res = second.own("g", [("a", 1), ("b", 1)])
            assert {g.resource: g.generation for g in res.grants} == {"a": 2, "b": 2}


def test_close_sessions_ends_each_and_says_which_had_ended(cluster3: LocalCluster):
    """`close_sessions` ends every live session it is given (their resources free at
    once) and answers, per session in order, None or why not."""
    with Client(cluster3.endpoints) as c:
        ids = []
        for r in ("a", "b"):
            info = c.open_session(name=r, ttl=30)
            c.own(info.session_id, "many", [(r, 1)])
            ids.append(info.session_id)
        gone = c.open_session(name="gone", ttl=30).session_id
        c.close_session(gone)
        answers = c.close_sessions([ids[0], gone, ids[1]])
        assert answers[0] is None and answers[2] is None
        assert isinstance(answers[1], SessionGoneError)
        assert [c.get_owner("many", r).session_id for r in ("a", "b")] == [0, 0]


def test_takeover_severs_old_session_and_its_stream_says_so(cluster3: LocalCluster):
    severed = []
    with Client(cluster3.endpoints) as c:
        old = c.session(name="old", ttl=30, on_severed=severed.append)
        old.own("g", [("p7", 1)])
        with c.session(name="new", ttl=30) as new:
            res = new.own("g", [("p7", 1)])  # owner's generation 1 <= requested 1: sever
            assert res.grants[0].generation == 2
            assert old.id in res.severed
            assert old.fenced.wait(5.0), "old session was not fenced"
            events = [e for e in old.events(timeout=2.0)]
            sev = [e for e in events if e.type == "severed"]
            assert sev and sev[0].resource == "p7" and sev[0].generation == 2
            assert severed, "on_severed callback not called"
            assert c.get_owner("g", "p7").session_id == new.id
        old.close()


def test_pid_blocks_stay_disjoint_across_leader_kills(cluster3: LocalCluster):
    blocks = []
    with Client(cluster3.endpoints, timeout=5.0) as c:
        for round_ in range(3):
            for _ in range(30):
                b = c.allocate_pid_block("writer", 100)
                blocks.append((b.start, b.start + b.size))
            if round_ < 2:
                leader = cluster3.wait_for_leader()
                cluster3.kill(leader)
                for _ in range(10):  # these may land while there is no leader: retried
                    b = c.allocate_pid_block("writer", 100)
                    blocks.append((b.start, b.start + b.size))
                cluster3.start_member(leader)
    assert len(blocks) == 110
    for (s1, e1), (s2, _) in zip(blocks, blocks[1:], strict=False):
        assert e1 <= s2, f"blocks overlap or go backwards: [{s1},{e1}) then [{s2},...)"


def test_write_on_one_member_is_read_on_another_at_once(cluster3: LocalCluster):
    names = list(cluster3.members)
    writers = {n: Client([cluster3.members[n].listen]) for n in names}
    try:
        for i in range(30):
            w, r = names[i % 3], names[(i + 1) % 3]
            value = f"v{i}".encode()
            writers[w].put(b"shared", value)
            got = writers[r].get(b"shared")
            assert got is not None and got.value == value, f"{r} read stale after {w} wrote"
    finally:
        for c in writers.values():
            c.close()


def test_bad_input_is_refused_and_changes_nothing(cluster3: LocalCluster):
    with Client(cluster3.endpoints) as c:
        c.put(b"k", b"v")
        before = c.range(b"k").header.revision
        with pytest.raises(InvalidArgumentError):
            c.put(b"", b"v")
        with pytest.raises(InvalidArgumentError):
            c.put(b"k" * 5000, b"v")
        with pytest.raises(InvalidArgumentError):
            c.put(b"k", b"x" * ((1 << 20) + 1))  # over the value limit
        with pytest.raises(CoordError) as too_big:  # over gRPC's: --max-request-bytes + 512 KiB
            c.put(b"k", b"x" * (2 << 20))
        assert too_big.value.code.name == "RESOURCE_EXHAUSTED"
        with pytest.raises(CoordError):
            c.own(987654, "g", [("p", 1)])  # unknown session
        with pytest.raises(InvalidArgumentError):
            c.open_session("neg", ttl=-1)
        assert c.range(b"k").header.revision == before
        assert c.get(b"k").value == b"v"


def test_session_outlives_its_member_and_a_leader_failover(cluster3: LocalCluster):
    """The session's member is killed (and it is the leader): the client moves to
    another member, keeps the same session, and no live session expires."""
    leader = cluster3.wait_for_leader()
    others = [n for n in cluster3.members if n != leader]
    order = [cluster3.members[leader].listen] + [cluster3.members[n].listen for n in others]
    with Client(order, randomize_endpoints=False) as c, \
            Client([cluster3.members[others[0]].listen]) as watcher:
        with c.session(name="survivor", ttl=TTL_S) as s:
            s.own("g", [("keep", 1)])
            cluster3.kill(leader)
            # Several TTLs pass across the failover; the keepalive must keep it alive.
            end = time.monotonic() + 3 * TTL_S
            while time.monotonic() < end:
                assert not s.fenced.is_set(), "live session was lost across the failover"
                time.sleep(0.1)
            owner = watcher.get_owner("g", "keep")
            assert owner.session_id == s.id and owner.generation == 1


def take(stream: Any, n: int, limit_s: float) -> list:
    """The next `n` items of a sync stream, read in a thread so a missing item fails the
    test after `limit_s` (cancelling the stream) instead of hanging it."""
    got: list = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            for item in stream:
                got.append(item)
                if len(got) == n:
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            failure.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(limit_s)
    if reader.is_alive():
        stream.cancel()
        reader.join(5.0)
        raise AssertionError(f"got {len(got)} of {n} items within {limit_s}s: {got}")
    if failure:
        raise failure[0]
    return got


def changes(items: list) -> list[tuple]:
    return [(ch.owner.resource, ch.kind, ch.owner.session_id, ch.owner.generation,
             ch.owner.revision) for ch in items]


def test_watch_owners_from_a_past_revision_replays_every_change(cluster3: LocalCluster):
    """A router reconnecting with from_revision learns everything it missed — frees
    included — in order with the right generations, then follows live changes with no
    repeat; a compacted start is refused with the compact revision."""
    follower = next(n for n in cluster3.members if n != cluster3.wait_for_leader())
    with Client(cluster3.endpoints) as c, Client([cluster3.members[follower].listen]) as w:
        a = c.session(name="a", ttl=30)
        with c.session(name="b", ttl=30) as b:
            r1 = a.own("routes", [("p0", 1), ("p1", 1), ("p2", 1)]).header.revision
            r2 = a.release("routes", ["p0"]).header.revision
            r3 = b.own("routes", [("p0", 1)]).header.revision  # reclaim: generation 2
            r4 = b.own("routes", [("p1", 1)]).header.revision  # takes p1, severs a
            assert a.fenced.wait(5.0)
            expected = [
                ("p0", "grant", a.id, 1, r1), ("p1", "grant", a.id, 1, r1),
                ("p2", "grant", a.id, 1, r1),
                ("p0", "release", 0, 1, r2),
                ("p0", "grant", b.id, 2, r3),
                ("p2", "sever", 0, 1, r4), ("p1", "grant", b.id, 2, r4),
            ]
            stream = w.watch_owners("routes", from_revision=r1)
            try:
                replayed = take(stream, len(expected), 10.0)
                assert changes(replayed) == expected
                assert not any(ch.snapshot for ch in replayed)
                r5 = b.release("routes", ["p0"]).header.revision
                r6 = b.own("routes", [("p2", 1)]).header.revision
                assert changes(take(stream, 2, 10.0)) == [
                    ("p0", "release", 0, 2, r5), ("p2", "grant", b.id, 2, r6)]
            finally:
                stream.cancel()

            # The same replay through the CLI, from a later revision.
            out = subprocess.run(
                [sys.executable, "-m", "coord", "watch-owners", "routes", "--from-revision",
                 str(r3), "--limit", "3", "--json", "--endpoints", ",".join(cluster3.endpoints)],
                capture_output=True, text=True, timeout=30, check=True)
            lines = [json.loads(x) for x in out.stdout.splitlines()]
            assert [(x["owner"]["resource"], x["kind"], x["owner"]["revision"])
                    for x in lines] == [("p0", "grant", r3), ("p2", "sever", r4),
                                        ("p1", "grant", r4)]

            c.compact(r2)
            with pytest.raises(CompactedError) as err:
                take(w.watch_owners("routes", from_revision=r1), 1, 10.0)
            assert err.value.compact_revision == r2
            assert changes(take(w.watch_owners("routes", from_revision=r2 + 1), 1, 10.0)) == [
                ("p0", "grant", b.id, 2, r3)]
        a.close()
