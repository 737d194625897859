"""Member-local read-only sessions on real members: a client that starts while
its member is cut off from the majority gets a session there (ZooKeeper's local
sessions); it reads, watches and hears mode changes, nothing it does is replicated, and
when the member rejoins a majority the session is registered with the cluster under the
same id — or ends, saying why, when the cluster refuses it."""

from __future__ import annotations

import asyncio
import queue
import subprocess
import sys
import threading
import time

import grpc
import pytest

from coord.client import AsyncClient, Client, NoQuorumError, ReadOnlyError
from coord.etcdpb import rpc_pb2 as etcd_pb
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.sm import commands as c
from coord.sm.sessions import LOCAL_SESSION_IDS
from coord.testing import LocalCluster
from coord.v1 import coord_pb2 as pb
from coord.v1 import coord_pb2_grpc as pb_grpc
from tests.cut_off import (
    mode_of,
    next_event,
    next_matching,
    pump,
    resume_paused,
    split_off,
    wait_until,
)
from tests.server.waits import wait_until as wait_until_async

WAIT_S = 30.0  # catches a hang only: the waits are on what the session did


def _registered(events: queue.Queue, timeout: float = 15.0):
    return next_matching(events, "registered event", lambda e: e.type == "registered", timeout)


def test_a_session_opened_on_a_cut_off_member_reads_watches_and_is_registered_on_heal(
        cluster3):
    survivor, others = split_off(cluster3, "follower")
    on_survivor = cluster3.members[survivor].listen
    ro = Client([on_survivor], read_only_ok=True, timeout=2.0)
    plain = Client([on_survivor], timeout=1.0)
    etcd = grpc.insecure_channel(on_survivor)
    try:
        ro.put(b"k", b"v1")
        replicated = ro.session(ttl=2.0)
        assert not replicated.local and replicated.id not in LOCAL_SESSION_IDS

        for n in others:
            cluster3.pause(n)
        wait_until("survivor read-only", lambda: mode_of(cluster3, survivor) == "read-only")

        events: queue.Queue = queue.Queue()
        ended: list = []
        session = ro.session(ttl=3.0, on_event=events.put, on_severed=ended.append)
        assert session.local and session.id in LOCAL_SESSION_IDS
        ev = next_event(events, "mode_changed", "read-only")
        assert ev.member in (survivor, "")  # "": told first by a keepalive's answer
        # It reads (flagged stale) and watches, like any read-only client.
        res = ro.range(b"k")
        assert res.header.read_only and res.kvs[0].value == b"v1"
        watched: queue.Queue = queue.Queue()
        threading.Thread(target=pump, args=(ro.watch(b"w"), watched), daemon=True).start()
        # Writes through it are refused, saying why; nothing is replicated.
        with pytest.raises(ReadOnlyError) as refused:
            session.own("g", ["r"])
        assert "member-local" in refused.value.message
        with pytest.raises(ReadOnlyError):
            ro.put(b"k", b"during-partition")
        # Only sessions that accept read-only service get one.
        with pytest.raises(ReadOnlyError):
            ro.open_session(ttl=2.0, read_only_ok=False)
        with pytest.raises(NoQuorumError):
            plain.open_session(ttl=2.0)
        cli = subprocess.run(
            [sys.executable, "-m", "coord", "session", "open", "--read-only-ok", "--ttl", "5",
             "--endpoints", on_survivor], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert int(cli.stdout) in LOCAL_SESSION_IDS
        assert f"is member-local to {survivor}" in cli.stderr
        assert cluster3.status(survivor).local_sessions == 2  # the operator sees them
        # The member keeps it alive: past its TTL it is still there.
        deadline = time.monotonic() + 1.25 * session.ttl
        while time.monotonic() < deadline and session.ended is None:
            time.sleep(0.05)
        assert session.ended is None and session.local

        for n in others:
            cluster3.resume(n)
        next_event(events, "mode_changed", "read-write", timeout=15.0)
        registered = _registered(events)
        assert registered.session_id == session.id and registered.member == survivor
        assert "registered with the cluster (same id)" in registered.message
        assert not session.local and session.ended is None
        wait_until("no local sessions left", lambda: cluster3.status(survivor).local_sessions == 0)
        # A cluster session now, same id: it owns, and the cluster keeps it alive.
        assert [g.resource for g in session.own("g", ["r"]).grants] == ["r"]
        assert ro.get_owner("g", "r").session_id == session.id
        ro.put(b"w", b"after-heal")
        seen = next_matching(watched, "the watch's PUT", lambda e: getattr(e, "type", "") == "PUT")
        assert seen.kv.value == b"after-heal"

        # No collision: the allocator stays below the local range, and no etcd client may
        # ask for an id in it.
        later = ro.session(ttl=2.0)
        assert later.id not in LOCAL_SESSION_IDS and later.id != session.id
        with pytest.raises(grpc.RpcError) as asked:
            etcd_grpc.LeaseStub(etcd).LeaseGrant(
                etcd_pb.LeaseGrantRequest(TTL=5, ID=session.id + 1), timeout=5)
        assert asked.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "reserved" in asked.value.details()
        session.close()
        assert ro.get_owner("g", "r").session_id == 0
        assert ended == []  # closed by its client: not a loss
        for s in (replicated, later):
            s.close()
    finally:
        resume_paused(cluster3, others)
        etcd.close()
        ro.close()
        plain.close()


def test_a_local_session_stays_with_its_member_when_the_client_moves_to_the_majority(
        tmp_path):
    """The prober moves the client to a read-write member; the local session does not
    follow (that member does not know it) and is not lost: it stays alive on its own
    member until the heal registers it."""
    with LocalCluster(3, data_dir=tmp_path / "c", partitionable=True) as cluster:
        minority, others = split_off(cluster, "follower")
        endpoints = [cluster.members[n].listen for n in [minority, *others]]
        cluster.cut_off(minority)
        wait_until("minority read-only", lambda: mode_of(cluster, minority) == "read-only")

        async def run() -> None:
            async with AsyncClient(endpoints, read_only_ok=True, timeout=2.0,
                                   randomize_endpoints=False) as client:
                moves: asyncio.Queue = asyncio.Queue()
                client.add_mode_listener(moves.put_nowait)
                events: list = []
                session = await client.session(ttl=4.0, on_event=events.append)
                early = await client.session(ttl=4.0)
                assert session.local and session.home == endpoints[0] and early.local
                change = await asyncio.wait_for(moves.get(), 10)
                assert change.moved and change.member != minority
                assert not (await client.range(b"k")).header.read_only  # the client moved
                # Closing a local session goes to its member, whatever the current one.
                await early.close()
                told = await asyncio.to_thread(_first_event, endpoints[0], early.id)
                assert (told.type, told.reason) == (
                    "released", "closed by its client while member-local")
                with pytest.raises(ReadOnlyError):
                    await session.own("g", ["r"])  # not registered yet, whoever is current
                # Its streams break (the member stalls): they reconnect to its member, not
                # to the client's current one, which does not know the session.
                # (Stopped until a keepalive went unanswered and its stream was replaced.)
                stalled = session._ka_call
                cluster.pause(minority)
                await wait_until_async(lambda: session._ka_call is not stalled,
                                       "the keepalive stream to break", WAIT_S)
                cluster.resume(minority)
                resumed = time.monotonic()
                # A keepalive sent after the stop and acknowledged: the streams are back on
                # its member (acknowledged when: now less the time unanswered since).
                await wait_until_async(
                    lambda: session.ended is not None
                    or time.monotonic() - session.core.unanswered_for() >= resumed,
                    "a keepalive acknowledged after the stop", WAIT_S)
                assert session.ended is None and session.local, events
                # The member is still read-only: the session was not told otherwise.
                assert [e.mode for e in events if e.type == "mode_changed"] == ["read-only"]

                cluster.heal(minority)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and session.local:
                    await asyncio.sleep(0.05)
                assert [e.type for e in events if e.type == "registered"] == ["registered"]
                assert session.ended is None and not session.local
                await session.own("g", ["r"])
                assert (await client.get_owner("g", "r")).session_id == session.id
                await session.close()

        asyncio.run(asyncio.wait_for(run(), 60))


def _first_event(endpoint: str, session_id: int) -> pb.SessionEvent:
    """The first event a member's stream of `session_id` says (raw gRPC)."""
    with grpc.insecure_channel(endpoint) as channel:
        stream = pb_grpc.SessionsStub(channel).Events(
            pb.SessionEventsRequest(session_id=session_id), timeout=5)
        return next(stream)


def test_a_local_session_the_cluster_refuses_or_its_member_forgets_ends_saying_why(tmp_path):
    """A planted collision: while the member is cut off, the majority commits a session
    with the local session's id. At the heal the registration is refused
    (SESSION_EXISTS): the local session ends with `dropped` and the reason, and the
    cluster's session keeps its id alone. Then a member that restarts while cut off:
    its local session ends `gone`, named member-local."""
    with LocalCluster(3, data_dir=tmp_path / "c", partitionable=True,
                      in_process=True) as cluster:
        leader = cluster.wait_for_leader()
        minority = next(n for n in cluster.members if n != leader)
        on_minority = cluster.members[minority].listen
        cluster.cut_off(minority)
        wait_until("minority read-only", lambda: mode_of(cluster, minority) == "read-only")
        ro = Client([on_minority], read_only_ok=True, timeout=2.0)
        writer = Client([cluster.members[leader].listen], timeout=2.0)
        try:
            events: queue.Queue = queue.Queue()
            ended: queue.Queue = queue.Queue()
            session = ro.session(ttl=2.0, on_event=events.put, on_severed=ended.put)
            assert session.local
            embedded = cluster.members[leader].embedded
            planted = embedded.runtime.run(embedded.member.coordinator.write(
                c.OpenSession("planted", 60_000, False, "planted-collision", session.id)), 10)
            assert planted.session_id == session.id and not planted.error

            cluster.heal(minority)
            dropped = ended.get(timeout=15)
            assert dropped.type == "dropped" and dropped.session_id == session.id
            assert "SESSION_EXISTS" in dropped.message and minority in dropped.message
            assert session.fenced.is_set() and session.ended == dropped
            with pytest.raises(ReadOnlyError):  # local to the end: it never wrote
                session.own("g", ["r"])
            # The planted session still holds the id alone.
            grant = writer.own(planted.session_id, "g", ["r"])
            assert grant.grants and writer.get_owner("g", "r").session_id == session.id

            # A member that restarts forgets its local sessions: the client is told.
            cluster.cut_off(minority)
            wait_until("minority read-only", lambda: mode_of(cluster, minority) == "read-only")
            forgotten = ro.session(ttl=2.0, on_severed=ended.put)
            assert forgotten.local
            cluster.restart(minority)
            gone = ended.get(timeout=20)
            assert (gone.type, gone.session_id) == ("gone", forgotten.id)
            assert "member-local" in gone.message, gone
        finally:
            ro.close()
            writer.close()
