"""The peer port over TLS (coord.server.transport: listener, connection, peer): members
whose certificates the peer CA signed exchange Raft messages; one with a certificate from
another CA, without one, or speaking plaintext is refused, and the accepting member logs
why. Real connections on 127.0.0.1, in one event loop."""

from __future__ import annotations

import asyncio
import logging
import ssl

from coord.raft.types import Message, MessageType
from coord.server.transport.auth import PeerAuth
from coord.server.transport.frames import PREAMBLE
from coord.server.transport.listener import PeerPort
from coord.server.transport.peer import PeerTransport
from coord.tls.credentials import client_context, server_context
from coord.tls.files import ServerTLS
from tests.server.waits import wait_until

SECRET = b"s3cret-cluster-key"
LISTENER = "coord.server.transport.listener"


def heartbeat(frm: int, to: int) -> Message:
    return Message(MessageType.HEARTBEAT, to=to, frm=frm, term=1)


class Peer:
    """A transport and its TLS peer port; records what it receives."""

    def __init__(self, node_id: int, tls: ServerTLS, opens: ssl.SSLContext | None = None):
        self.received: list[Message] = []
        self.transport = PeerTransport(PeerAuth(node_id, SECRET, 7),
                                       tls=opens or client_context(tls))
        self.transport.receive_with(self.received.extend)
        self.port = PeerPort(self.transport, None, tls=server_context(tls))
        self.address = ""

    async def __aenter__(self) -> Peer:
        self.address = f"127.0.0.1:{await self.port.start('127.0.0.1:0')}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.transport.close()
        await self.port.close()

    def stats(self, peer: int) -> dict:
        return self.transport.stats()[peer]


async def sending(a: Peer, b: Peer, until) -> None:
    """a sends to b until `until()` holds (bounded by wait_until's timeout)."""
    a.transport.set_peer(2, b.address)

    def check() -> bool:
        a.transport.send([heartbeat(1, 2)])
        return until()

    await wait_until(check, "the connection's outcome")


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


def test_members_whose_certificates_the_peer_ca_signed_exchange_messages(pki):
    async def main() -> None:
        async with Peer(1, pki.member("n1")) as a, Peer(2, pki.member("n2")) as b:
            await sending(a, b, lambda: bool(b.received))
            assert a.stats(2)["connected"] and a.stats(2)["last_error"] is None

    run(main())


def test_a_peer_with_a_certificate_from_another_ca_is_refused_and_the_member_says_why(
        pki, caplog):
    async def main() -> None:
        stranger = pki.member("n1", ca=pki.other)
        async with Peer(1, stranger) as a, Peer(2, pki.member("n2")) as b:
            with caplog.at_level(logging.WARNING, logger=LISTENER):
                await sending(a, b, lambda: a.stats(2)["failures"] >= 2)
            assert b.received == [] and not a.stats(2)["connected"]
            assert a.stats(2)["auth_failures"] >= 2
            refusals = [r.getMessage() for r in caplog.records if r.name == LISTENER]
            assert refusals and all("refused a connection from 127.0.0.1:" in m
                                    and "certificate verify failed" in m for m in refusals)

    run(main())


def test_a_peer_without_a_certificate_is_refused(pki, caplog):
    async def main() -> None:
        bare = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        bare.load_verify_locations(pki.member().trusted_ca_file)  # trusts b, shows nothing
        bare.set_alpn_protocols(["h2"])
        async with Peer(1, pki.member("n1"), opens=bare) as a, Peer(2, pki.member("n2")) as b:
            with caplog.at_level(logging.WARNING, logger=LISTENER):
                await sending(a, b, lambda: a.stats(2)["failures"] >= 2)
            assert b.received == []
            assert any("peer did not return a certificate" in r.getMessage()
                       for r in caplog.records if r.name == LISTENER)

    run(main())


def test_the_opener_refuses_a_member_with_a_certificate_from_another_ca(pki):
    async def main() -> None:
        async with Peer(1, pki.member("n1")) as a, \
                Peer(2, pki.member("n2", ca=pki.other)) as b:
            await sending(a, b, lambda: a.stats(2)["failures"] >= 2)
            assert a.stats(2)["last_error"] == "TLS" and b.received == []

    run(main())


def test_plaintext_on_a_tls_peer_port_is_refused(pki, caplog):
    async def main() -> None:
        async with Peer(2, pki.member("n2")) as b:
            host, port = b.address.rsplit(":", 1)
            with caplog.at_level(logging.WARNING, logger=LISTENER):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(PREAMBLE + b"\x00" * 64)  # a Raft connection's first bytes
                assert await asyncio.wait_for(reader.read(), 10) == b""  # closed on us
                writer.close()
                await wait_until(lambda: any(r.name == LISTENER for r in caplog.records),
                                 "the refusal logged")
            [refusal] = [r.getMessage() for r in caplog.records if r.name == LISTENER]
            assert "refused a connection from 127.0.0.1:" in refusal

    run(main())
