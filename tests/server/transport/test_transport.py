"""coord.server.transport (raft_proto, frames, peer, listener), over real connections on
127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from coord.raft.confchange import decode_conf_change, encode_conf_change
from coord.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
)
from coord.server.snapshot_file import SnapshotFile, SnapshotWriter
from coord.server.transport import connection, raft_proto, snapshot_pieces
from coord.server.transport import peer as transport_mod
from coord.server.transport.auth import PeerAuth, auth_token
from coord.server.transport.frames import PREAMBLE, FrameReader, Kind, frame
from coord.server.transport.listener import PeerPort
from coord.server.transport.peer import PeerTransport
from coord.testing.ports import free_port
from coord.v1 import raft_pb2
from tests.server.waits import wait_until

SECRET = b"s3cret-cluster-key"
CLUSTER = 42
TEST_TIMEOUT = 60.0


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, TEST_TIMEOUT))


def app(frm: int, to: int, index: int) -> Message:
    return Message(
        MessageType.APP,
        to=to,
        frm=frm,
        term=3,
        log_term=3,
        index=index,
        entries=(Entry(3, index + 1, EntryType.NORMAL, f"{frm}->{to}#{index}".encode()),),
        commit=index,
    )


class Member:
    """One transport plus the peer port it serves; records what it receives."""

    def __init__(self, node_id: int, secret: bytes = SECRET, cluster: int = CLUSTER, **kw):
        self.node_id = node_id
        self.batches: list[list[Message]] = []
        self.unreachable: list[int] = []
        self.transport = PeerTransport(PeerAuth(node_id, secret, cluster), **kw)
        self.transport.receive_with(self.batches.append, self.unreachable.append)
        self.server: PeerPort | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def received(self) -> list[Message]:
        return [m for batch in self.batches for m in batch]

    def from_peer(self, frm: int) -> list[Message]:
        return [m for m in self.received if m.frm == frm]

    def stats(self, peer: int) -> dict:
        return self.transport.stats()[peer]

    async def start(self, port: int = 0) -> None:
        self.server = PeerPort(self.transport, None)
        self.port = await self.server.start(f"127.0.0.1:{port}")

    async def stop(self) -> None:
        await self.transport.close()
        await self.stop_listening()

    async def stop_listening(self) -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None


@asynccontextmanager
async def stopping(*members: Member) -> AsyncIterator[tuple[Member, ...]]:
    """`members`, each stopped (its transport and its listener) when the block ends."""
    try:
        yield members
    finally:
        for m in members:
            await m.stop()


@asynccontextmanager
async def connected_pair() -> AsyncIterator[tuple[Member, ...]]:
    """Members 1 and 2, started, 1's stream to 2 open; stopped when the block ends."""
    async with stopping(Member(1), Member(2)) as (a, b):
        await a.start()
        await b.start()
        a.transport.set_peer(2, b.address)
        await wait_until(lambda: a.stats(2)["connected"], "the stream to connect")
        yield a, b


async def raw_connection(address: str, hello: tuple[int, int, str] | None,
                         batch: raft_pb2.MessageBatch) -> tuple[str, str | None]:
    """Open one Raft connection by hand, send (from, cluster, auth) as its hello and then
    `batch`; return ("OK", None) if the listener accepted and did not refuse, else the
    refusal's (code, details)."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(PREAMBLE)
        if hello is not None:
            h = raft_pb2.PeerHello(cluster=hello[1], auth=hello[2])
            setattr(h, "from", hello[0])
            writer.write(frame(Kind.HELLO, h.SerializeToString()))
        writer.write(frame(Kind.BATCH, batch.SerializeToString()))
        writer.write(frame(Kind.PING))
        frames = FrameReader()
        seen: list[int] = []
        while Kind.PONG not in seen:  # the pong comes after whatever the batch caused
            data = await asyncio.wait_for(reader.read(65536), 10)
            if not data:
                break
            for kind, payload in frames.feed(data):
                if kind == Kind.REFUSE:
                    why = raft_pb2.PeerRefusal.FromString(payload)
                    return why.code, why.details
                seen.append(kind)
        assert seen == [Kind.ACCEPT, Kind.PONG], seen
        return "OK", None
    finally:
        writer.close()


# --- raft_proto ------------------------------------------------------------------------------


def test_raft_proto_round_trip() -> None:
    cc = ConfChange(ConfChangeType.ADD_LEARNER, 7, b'{"name": "n7", "peer": "127.0.0.7:7001"}')
    assert decode_conf_change(encode_conf_change(cc)) == cc
    cc0 = ConfChange(ConfChangeType.ADD_VOTER, 3)  # all-default enum value survives too
    assert decode_conf_change(encode_conf_change(cc0)) == cc0

    snap = Snapshot(
        meta=SnapshotMeta(
            index=120,
            term=4,
            conf_state=ConfState(voters=frozenset({1, 2, 3}), learners=frozenset({7})),
        ),
        data=b"\x00state machine\xff" * 10,
    )
    entries = (
        Entry(4, 121, EntryType.NORMAL, b"put a=1"),
        Entry(4, 122, EntryType.CONF_CHANGE, encode_conf_change(cc)),
        Entry(4, 123),  # empty entry, as a new leader appends
    )
    m = Message(
        MessageType.APP,
        to=2,
        frm=1,
        term=4,
        log_term=4,
        index=120,
        entries=entries,
        commit=121,
        snapshot=snap,
        reject=True,
        reject_hint=99,
        context=b"read-ctx-\x01",
    )
    wire = raft_proto.message_to_pb(m).SerializeToString()
    back = raft_proto.message_from_pb(raft_pb2.Message.FromString(wire))
    assert back == m
    assert isinstance(back.entries, tuple)
    assert type(back.type) is MessageType and back.entries[1].type is EntryType.CONF_CHANGE
    assert isinstance(back.snapshot.meta.conf_state.voters, frozenset)
    assert decode_conf_change(back.entries[1].data) == cc

    # Absent snapshot stays None; an empty-but-present one stays present.
    hb = Message(MessageType.HEARTBEAT, to=3, frm=1, term=4, commit=7)
    pb = raft_proto.message_to_pb(hb)
    assert not pb.HasField("snapshot")
    assert raft_proto.message_from_pb(raft_pb2.Message.FromString(pb.SerializeToString())) == hb
    empty = Message(MessageType.SNAP, to=3, frm=1, snapshot=Snapshot())
    assert raft_proto.message_from_pb(raft_proto.message_to_pb(empty)).snapshot == Snapshot()

    with pytest.raises(ValueError):
        raft_proto.message_from_pb(raft_pb2.Message(type=200, to=1))
    with pytest.raises(ValueError):
        raft_proto.message_from_pb(
            raft_pb2.Message(type=3, to=1, entries=[raft_pb2.Entry(term=1, index=1, type=9)])
        )


# --- transport -------------------------------------------------------------------------------


def test_three_transports_exchange_in_order() -> None:
    async def main() -> None:
        members = {i: Member(i) for i in (1, 2, 3)}
        async with stopping(*members.values()):
            for m in members.values():
                await m.start()
            for m in members.values():
                for peer in members.values():
                    m.transport.set_peer(peer.node_id, peer.address)  # own id is ignored
            assert sorted(members[1].transport.stats()) == [2, 3]
            await wait_until(
                lambda: all(
                    s["connected"] for m in members.values() for s in m.transport.stats().values()
                ),
                "all six streams to connect",
            )

            per_round, rounds = 25, 8
            for r in range(rounds):
                for m in members.values():
                    out = [
                        app(m.node_id, peer, r * per_round + k)
                        for peer in members
                        if peer != m.node_id
                        for k in range(per_round)
                    ]
                    m.transport.send(out)
                await asyncio.sleep(0)  # let the writers interleave with new sends

            total = per_round * rounds
            await wait_until(
                lambda: all(len(m.received) == 2 * total for m in members.values()),
                "every member to receive everything",
            )
            await wait_until(
                lambda: all(
                    s["sent"] == total
                    for m in members.values()
                    for s in m.transport.stats().values()
                ),
                "every write to complete",
            )
            for m in members.values():
                assert all(msg.to == m.node_id for msg in m.received)
                for sender in members:
                    if sender == m.node_id:
                        continue
                    got = m.from_peer(sender)
                    assert [msg.index for msg in got] == list(range(total))  # in order
                    assert got[5] == app(sender, m.node_id, 5)  # content intact
                    assert m.stats(sender)["received"] == total
                    s = members[sender].stats(m.node_id)
                    assert (s["sent"], s["dropped"], s["queued"]) == (total, 0, 0)
                assert m.unreachable == []

            # Batching: one send() to an idle stream is one write and one on_messages call.
            before = len(members[2].batches)
            writes_before = members[1].stats(2)["batches"]
            members[1].transport.send([app(1, 2, 1000 + k) for k in range(50)])
            await wait_until(lambda: len(members[2].from_peer(1)) == total + 50, "the batch")
            new = members[2].batches[before:]
            assert [len(b) for b in new if b[0].frm == 1] == [50]
            # The sender counts the write once it completes, which may be after delivery.
            await wait_until(lambda: members[1].stats(2)["sent"] == total + 50, "the write")
            assert members[1].stats(2)["batches"] == writes_before + 1

    run(main())


def test_wrong_secret_is_refused() -> None:
    async def main() -> None:
        async with stopping(Member(1, secret=b"not-the-secret"), Member(2)) as (a, b):
            await a.start()
            await b.start()
            a.transport.set_peer(2, b.address)
            loop = asyncio.get_running_loop()

            def refused() -> bool:
                a.transport.send([app(1, 2, 0)])
                return a.stats(2)["auth_failures"] >= 2  # refused, and again after retrying

            await wait_until(refused, "the sender to see its stream refused")
            s = a.stats(2)
            assert s["last_error"] == "UNAUTHENTICATED"
            assert not s["connected"] and s["sent"] == 0 and s["dropped"] > 0
            await wait_until(lambda: 2 in a.unreachable, "on_unreachable(2)")
            assert b.batches == []

            # The listening side, by hand: bad MAC, no hello, a MAC made for another
            # receiver, another cluster, and last a good one.
            batch = raft_pb2.MessageBatch(
                messages=[raft_proto.message_to_pb(app(1, 2, 0)),
                          raft_proto.message_to_pb(app(1, 3, 1))]
            )
            good = auth_token(SECRET, CLUSTER, 1, 2)
            code, _ = await raw_connection(b.address, (1, CLUSTER, "0" * 64), batch)
            assert code == "UNAUTHENTICATED"
            code, details = await raw_connection(b.address, None, batch)
            assert (code, details) == ("INVALID_ARGUMENT", "unexpected BATCH frame")
            other_to = auth_token(SECRET, CLUSTER, 1, 3)
            code, _ = await raw_connection(b.address, (1, CLUSTER, other_to), batch)
            assert code == "UNAUTHENTICATED"
            code, _ = await raw_connection(b.address, (0, CLUSTER, good), batch)
            assert code == "UNAUTHENTICATED"
            code, details = await raw_connection(b.address, (1, 7, good), batch)
            assert code == "PERMISSION_DENIED"
            assert details == f"message for cluster 7 received by cluster {CLUSTER}"
            assert b.batches == []  # nothing was ever delivered

            code, _ = await raw_connection(b.address, (1, CLUSTER, good), batch)
            assert code == "OK"
            # Only the message addressed to node 2 is delivered.
            assert [(m.to, m.index) for m in b.received] == [(2, 0)]
            assert b.transport.inbox.dropped == 1
            assert loop.is_running()

    run(main())


def test_peer_down_then_up() -> None:
    async def main() -> None:
        port = free_port()
        async with stopping(Member(1), Member(2)) as (a, b):
            await a.start()
            a.transport.set_peer(2, f"127.0.0.1:{port}")  # nobody listens there yet

            def failing() -> bool:
                a.transport.send([app(1, 2, 0)])
                return a.stats(2)["failures"] >= 2

            await wait_until(failing, "connection attempts to fail")
            s = a.stats(2)
            assert not s["connected"]
            assert s["dropped"] > 0 and s["sent"] == 0 and s["queued"] == 0
            assert s["last_error"] == "UNAVAILABLE"
            await wait_until(lambda: 2 in a.unreachable, "on_unreachable(2)")

            await b.start(port)
            i = 0

            def delivered() -> bool:
                nonlocal i
                i += 1
                a.transport.send([app(1, 2, i)])
                return bool(b.received)

            await wait_until(delivered, "messages to flow after the peer came up")
            s = a.stats(2)
            assert s["connected"] and s["connects"] == 1
            indexes = [m.index for m in b.received]
            assert indexes == sorted(indexes)

            # The peer goes away again: noticed, and reconnected once it is back.
            await b.stop_listening()
            await wait_until(lambda: not a.stats(2)["connected"], "the disconnect to be seen")
            await b.start(port)
            await wait_until(lambda: a.stats(2)["connected"], "a reconnect", timeout=15)
            n = len(b.received)
            a.transport.send([app(1, 2, 10_000)])
            await wait_until(lambda: len(b.received) == n + 1, "delivery after reconnect")
            assert a.stats(2)["connects"] == 2

    run(main())


def test_a_peer_that_calls_us_is_reconnected_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted peer opening its stream to us cuts our reconnect backoff short (here a
    minute), so a leader reaches a restarted follower before that follower gives up."""
    monkeypatch.setattr(transport_mod, "BACKOFF_MIN", 60.0)
    monkeypatch.setattr(transport_mod, "BACKOFF_MAX", 60.0)

    async def main() -> None:
        port = free_port()
        async with stopping(Member(1), Member(2)) as (a, b):
            await a.start()
            a.transport.set_peer(2, f"127.0.0.1:{port}")  # nobody listens there yet
            await wait_until(lambda: a.stats(2)["failures"] >= 1, "a failed attempt")
            await b.start(port)
            await asyncio.sleep(0.5)
            assert not a.stats(2)["connected"]  # still backing off: b has not called us
            b.transport.set_peer(1, a.address)
            await wait_until(lambda: a.stats(2)["connected"], "the reconnect", timeout=10)
            a.transport.send([app(1, 2, 7)])
            await wait_until(lambda: bool(b.received), "delivery after the reconnect")
            assert a.stats(2)["connects"] == 1

    run(main())


def test_queue_limit_drops_and_reports() -> None:
    async def main() -> None:
        async with stopping(Member(1, queue_limit=10), Member(2)) as (a, b):
            await a.start()
            await b.start()
            a.transport.set_peer(2, b.address)
            await wait_until(lambda: a.stats(2)["connected"], "the stream to connect")

            # send() queues all it is given before it writes, so only queue_limit
            # messages fit; at_once, it writes those as one batch before any await.
            a.transport.send([app(1, 2, i) for i in range(25)], at_once=True)
            s = a.stats(2)
            assert (s["queued"], s["sent"], s["batches"], s["dropped"]) == (0, 10, 1, 15)
            await wait_until(lambda: len(b.received) == 10, "the queued messages")
            assert [m.index for m in b.received] == list(range(10))
            await wait_until(lambda: a.stats(2)["sent"] == 10, "the writes to complete")
            assert a.stats(2)["queued"] == 0
            # Reported, and rate limited: 15 drops within 100 ms give one call.
            assert a.unreachable == [2]

            # Unknown destinations are dropped and reported too.
            a.transport.send([app(1, 9, 0)])
            await wait_until(lambda: 9 in a.unreachable, "on_unreachable(9)")
            assert a.transport.dropped_unknown == 1

            # Once drained, the queue takes messages again.
            a.transport.send([app(1, 2, 100 + i) for i in range(10)])
            await wait_until(lambda: len(b.received) == 20, "the second round")
            assert a.stats(2)["dropped"] == 15

    run(main())


def test_a_paused_connection_queues_and_its_pump_writes_in_order_once_drained(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """send(at_once=True) writes at once only to a connection that takes writes: while the peer
    reads nothing, our buffer passes its high mark, the connection pauses, and what is
    sent after waits in the queue. When the peer reads again the pump writes it, and
    the peer gets every message in the order sent."""
    monkeypatch.setattr(connection, "WRITE_BUFFER_HIGH", 64 * 1024)
    big = b"x" * (64 * 1024)

    def message(index: int) -> Message:
        return Message(MessageType.APP, to=2, frm=1, term=3, log_term=3, index=index,
                       entries=(Entry(3, index + 1, EntryType.NORMAL, big),), commit=index)

    async def main() -> None:
        async with connected_pair() as (a, b):
            assert b.server is not None
            for conn in b.server._connections:
                conn._tr.pause_reading()
            link = a.transport._peers[2].link
            assert link is not None
            sent = 0
            while not link.paused and sent < 1000:  # ~64 MB at most; pauses after a few
                a.transport.send([message(sent)], at_once=True)
                sent += 1
                await asyncio.sleep(0)
            assert link.paused, "the connection never paused"
            written = a.stats(2)["sent"]
            a.transport.send([message(sent + i) for i in range(3)], at_once=True)
            assert a.stats(2)["queued"] == 3 and a.stats(2)["sent"] == written
            for conn in b.server._connections:
                conn._tr.resume_reading()
            await wait_until(lambda: len(b.received) == sent + 3, "every message")
            assert [m.index for m in b.received] == list(range(sent + 3))

    run(main())


def test_large_queues_are_split_into_bounded_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport_mod, "BATCH_SOFT_BYTES", 2_000)
    monkeypatch.setattr(transport_mod, "MAX_MESSAGE_BYTES", 8_000)

    async def main() -> None:
        async with connected_pair() as (a, b):
            msgs = [app(1, 2, i) for i in range(60)]  # ~60 bytes each on the wire
            huge = Message(MessageType.SNAP, to=2, frm=1, snapshot=Snapshot(data=b"x" * 10_000))
            a.transport.send([*msgs[:30], huge, *msgs[30:]])
            await wait_until(lambda: len(b.received) == 60, "all but the oversized message")
            assert [m.index for m in b.received] == list(range(60))
            assert all(m.type is MessageType.APP for m in b.received)
            assert len(b.batches) > 1  # split by size...
            assert all(len(batch) < 60 for batch in b.batches)
            await wait_until(lambda: a.stats(2)["sent"] == 60, "the writes to complete")
            assert a.stats(2)["batches"] == len(b.batches)
            assert a.stats(2)["dropped"] == 1  # ...and the message that can never fit dropped
            await wait_until(lambda: 2 in a.unreachable, "the drop to be reported")

    run(main())


def test_set_peer_new_address_and_remove() -> None:
    async def main() -> None:
        async with stopping(Member(1), Member(2), Member(2)) as (a, b_old, b_new):
            await a.start()
            await b_old.start()
            await b_new.start()
            a.transport.set_peer(2, b_old.address)
            await wait_until(lambda: a.stats(2)["connected"], "the first stream")
            a.transport.send([app(1, 2, 0)])
            await wait_until(lambda: len(b_old.received) == 1, "delivery to the old address")

            a.transport.set_peer(2, b_new.address)
            await wait_until(lambda: a.stats(2)["connected"], "the stream to the new address")
            a.transport.send([app(1, 2, 1)])
            await wait_until(lambda: len(b_new.received) == 1, "delivery to the new address")
            assert len(b_old.received) == 1

            a.transport.remove_peer(2)
            assert 2 not in a.transport.stats()
            a.transport.send([app(1, 2, 2)])
            assert a.transport.dropped_unknown == 1
            await a.transport.close()
            assert a.transport._retired == set()  # every peer task has finished

    run(main())


class FreezableProxy:
    """A loopback TCP proxy that can stop forwarding while keeping the connections open,
    the way a hung or partitioned peer looks to the sender."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.frozen = False
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task] = set()
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if not self.frozen:
                writer.write(data)
                await writer.drain()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [writer, up_writer]
        for coro in (self._pipe(reader, up_writer), self._pipe(up_reader, writer)):
            task = asyncio.create_task(coro)
            self.tasks.add(task)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for w in self.writers:
            w.close()


def test_keepalive_notices_a_silent_peer() -> None:
    async def main() -> None:
        async with stopping(Member(1), Member(2)) as (a, b):
            await b.start()
            proxy = FreezableProxy(b.port)
            try:
                await proxy.start()
                a.transport.set_peer(2, f"127.0.0.1:{proxy.port}")
                await wait_until(lambda: a.stats(2)["connected"], "the stream to connect")
                a.transport.send([app(1, 2, 0)])
                await wait_until(lambda: len(b.received) == 1, "delivery through the proxy")

                proxy.frozen = True  # the TCP connection stays up; nothing gets through
                # Dropped once pings go unanswered for DEAD_AFTER (3 s); TCP alone never would.
                await wait_until(lambda: not a.stats(2)["connected"], "keepalive to fail",
                                 timeout=30)
                assert a.stats(2)["last_error"] == "UNAVAILABLE"
                await wait_until(lambda: 2 in a.unreachable, "on_unreachable(2)")
            finally:
                await proxy.close()

    run(main())


def test_a_big_snapshot_goes_in_pieces_and_arrives_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot message over CHUNK_BYTES crosses as pieces, one per batch, read from
    its file, with other messages before and after it in order; it arrives as the one
    message it was, its file's bytes intact — even when it is bigger than the largest
    message gRPC would carry."""
    monkeypatch.setattr(snapshot_pieces, "CHUNK_BYTES", 1_000)
    monkeypatch.setattr(transport_mod, "MAX_MESSAGE_BYTES", 8_000)

    async def main() -> None:
        async with connected_pair() as (a, b):
            data = bytes(range(256)) * 100  # 25,600 bytes: 26 pieces, 3x the message limit
            meta = SnapshotMeta(index=9, term=3, conf_state=ConfState(voters=frozenset({1, 2})))
            snap = Message(MessageType.SNAP, to=2, frm=1, term=3,
                           snapshot=Snapshot(meta=meta, data=snapshot_file(tmp_path, data)))
            a.transport.send([app(1, 2, 0), snap, app(1, 2, 1)])
            await wait_until(lambda: len(b.received) == 3, "the three messages")
            got = b.received
            assert [m.type for m in got] == [MessageType.APP, MessageType.SNAP, MessageType.APP]
            assert got[1].snapshot.meta == meta and bytes_of(got[1].snapshot.data) == data
            assert len(b.batches) == 3  # the pieces became one delivery
            assert a.stats(2)["batches"] == 2 + 26
            assert a.stats(2)["dropped"] == 0

    run(main())


def open_files_under(path: Path) -> int:
    """Files this process holds open under `path` (unlinked ones included)."""
    links = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
             if os.path.exists(f"/proc/self/fd/{fd}")]
    return sum(link.startswith(str(path)) for link in links)


def snapshot_file(directory: Path, data: bytes, index: int = 9) -> SnapshotFile:
    """`data` as the snapshot file at `index` in `directory`."""
    writer = SnapshotWriter(directory, index)
    writer.write(data)
    return writer.done()


def bytes_of(data: object) -> bytes:
    """A delivered snapshot's bytes, read from its file."""
    assert isinstance(data, SnapshotFile), f"a snapshot arrives as a file, not {data!r}"
    return data.path.read_bytes()


def snapshot_batches(data: bytes, index: int = 9, held: raft_pb2.SnapshotHeld | None = None
                     ) -> list[raft_pb2.MessageBatch]:
    """The batches a sender writes for a snapshot message of `data` to member 2 (cut
    at CHUNK_BYTES, read from a file of `data`), resumed from `held`."""
    meta = SnapshotMeta(index=index, term=3, conf_state=ConfState(voters=frozenset({1, 2})))
    out = []
    with tempfile.TemporaryDirectory() as directory:
        m = Message(MessageType.SNAP, to=2, frm=1, term=3, snapshot=Snapshot(
            meta=meta, data=snapshot_file(Path(directory), data, index)))
        for piece in snapshot_pieces.cut(m, held):
            out.append(raft_pb2.MessageBatch())
            snapshot_pieces.fill_piece(piece, out[-1])
    return out


def test_a_snapshot_missing_a_piece_is_dropped_not_delivered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiving side of a broken transfer: pieces out of order, or a last piece
    that does not complete the total, deliver nothing (the leader sends it again). The
    pieces wait in a file under the spool dir, not in memory, and the file goes with
    the transfer, delivered, dropped or forgotten with its sender."""
    monkeypatch.setattr(snapshot_pieces, "CHUNK_BYTES", 4)
    t = PeerTransport(PeerAuth(2, SECRET, CLUSTER), spool_dir=tmp_path)
    got: list = []
    t.receive_with(got.extend)
    first, last = snapshot_batches(b"12345678")
    t.inbox.deliver(1, last)  # the first piece never came
    assert got == [] and t.inbox.dropped == 1
    t.inbox.deliver(1, first)
    assert open_files_under(tmp_path) == 1 and t.inbox.receipts.held(1).offset == 4
    last.chunk.total = 9  # not the snapshot the first piece began
    t.inbox.deliver(1, last)
    assert got == [] and t.inbox.dropped == 2 and open_files_under(tmp_path) == 0
    last.chunk.total = 8
    t.inbox.deliver(1, first)
    t.inbox.deliver(1, last)
    assert [bytes_of(m.snapshot.data) for m in got] == [b"12345678"]
    assert open_files_under(tmp_path) == 0 and t.inbox.receipts.held(1) is None
    t.inbox.deliver(1, first)
    t.remove_peer(1)  # its sender left the cluster mid-transfer
    assert open_files_under(tmp_path) == 0 and t.inbox.receipts.held(1) is None


def test_a_complete_snapshot_whose_message_is_dropped_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pieces make a snapshot file as the last one arrives; if its message is then
    dropped (here: it is for another member) nothing will store or remove that file,
    so it goes at once."""
    monkeypatch.setattr(snapshot_pieces, "CHUNK_BYTES", 4)
    t = PeerTransport(PeerAuth(2, SECRET, CLUSTER), spool_dir=tmp_path)
    got: list = []
    t.receive_with(got.extend)
    first, last = snapshot_batches(b"12345678")
    last.chunk.message.to = 3
    t.inbox.deliver(1, first)
    t.inbox.deliver(1, last)
    assert got == [] and t.inbox.dropped == 1
    assert list(tmp_path.glob("*.snap")) == []
    last.chunk.message.to = 2  # for us: the file stays, for the node to store
    t.inbox.deliver(1, first)
    t.inbox.deliver(1, last)
    [m] = got
    assert list(tmp_path.glob("*.snap")) == [m.snapshot.data.path]


def test_a_silent_inbound_connection_is_closed_a_pinging_one_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The listening side closes a peer's connection that sends nothing for INBOUND_IDLE
    (its opener would ping every second), and keeps one that pings."""
    idle = 0.3
    monkeypatch.setattr(connection, "INBOUND_IDLE", idle)

    async def opened(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        h = raft_pb2.PeerHello(cluster=CLUSTER, auth=auth_token(SECRET, CLUSTER, 1, 2))
        setattr(h, "from", 1)
        writer.write(PREAMBLE + frame(Kind.HELLO, h.SerializeToString()))
        got = FrameReader().feed(await asyncio.wait_for(reader.read(65536), 10))
        assert [k for k, _ in got] == [Kind.ACCEPT]
        return reader, writer

    async def main() -> None:
        async with stopping(Member(2)) as (b,):
            await b.start()
            silent_r, silent_w = await opened(b.address)
            pinging_r, pinging_w = await opened(b.address)
            loop = asyncio.get_running_loop()
            pongs_at: list[float] = []

            async def ping() -> None:
                while True:
                    pinging_w.write(frame(Kind.PING))
                    data = await asyncio.wait_for(pinging_r.read(65536), 5)
                    assert data, "the pinging connection was closed"
                    pongs_at.extend(loop.time() for _ in FrameReader().feed(data))
                    await asyncio.sleep(0.1)

            pinger = asyncio.create_task(ping())
            try:
                assert await asyncio.wait_for(silent_r.read(65536), 30) == b""  # closed
                closed_at = loop.time()

                def kept_long_after() -> bool:
                    return loop.time() - closed_at > 4 * idle and any(
                        t > closed_at + 3 * idle for t in pongs_at)

                # Still answered, idle periods after the silent one was closed.
                await wait_until(lambda: pinger.done() or kept_long_after(),
                                 "pongs four idle periods after the close", timeout=30)
                assert not pinger.done(), pinger.exception()
            finally:
                pinger.cancel()
            silent_w.close()
            pinging_w.close()

    run(main())


def test_a_connect_cancelled_once_connected_stops_its_pings(monkeypatch):
    """uvloop closes a connection whose `create_connection` is cancelled after the
    protocol saw `connection_made`, without calling `connection_lost`: the link must end
    there, or its next ping writes to a closed handle (a RuntimeError in the loop)."""
    import uvloop

    monkeypatch.setattr(connection, "PING_INTERVAL", 0.02)
    opened: list[connection.Outbound] = []

    class CancelledOnConnect(connection.Outbound):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            connecting.cancel()

    async def main() -> list[BaseException | None]:
        nonlocal connecting
        loop = asyncio.get_running_loop()
        errors: list[BaseException | None] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx.get("exception")))
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        auth = PeerAuth(1, SECRET, CLUSTER)
        connecting = asyncio.ensure_future(CancelledOnConnect.open(
            auth, 2, f"127.0.0.1:{port}", asyncio.Event()))
        with pytest.raises(asyncio.CancelledError):
            await connecting
        await asyncio.sleep(0.2)  # ten ping intervals
        server.close()
        return errors

    connecting: asyncio.Future
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        errors = runner.run(main())
    (link,) = opened
    assert errors == [] and link.ended is not None
