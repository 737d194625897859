"""coord.server.config: which addresses a member serves in plaintext beyond the loopback
(the start-up warning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coord.server.config import MemberConfig, plaintext_exposures
from coord.tls.files import ServerTLS, is_loopback


def config(listen: str, peer: str, etcd: str = "", client_tls=None, peer_tls=None):
    return MemberConfig("n1", Path("d"), listen, peer, [], b"s" * 16, etcd_listen=etcd,
                        client_tls=client_tls, peer_tls=peer_tls)


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1:1", True), ("127.3.4.5:1", True), ("[::1]:1", True), ("localhost:1", True),
    ("0.0.0.0:1", False), (":1", False), ("[::]:1", False), ("10.0.0.7:1", False),
    ("db1.example:1", False)])
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_each_plaintext_address_beyond_the_loopback_is_named_with_the_flags_to_fix_it():
    warnings = plaintext_exposures(config("0.0.0.0:2379", "10.0.0.7:2380", "10.0.0.7:2381"))
    assert [w.split(" is ")[0] for w in warnings] == [
        "n1: --listen 0.0.0.0:2379", "n1: --etcd-listen 10.0.0.7:2381",
        "n1: --peer-listen 10.0.0.7:2380"]
    assert "NOT encrypted" in warnings[0] and "--cert-file/--key-file" in warnings[0]
    assert "--peer-cert-file" in warnings[2]


def test_tls_or_the_loopback_says_nothing():
    tls = ServerTLS("c.pem", "c.key")
    assert plaintext_exposures(config("127.0.0.1:2379", "127.0.0.1:2380")) == []
    assert plaintext_exposures(config("0.0.0.0:2379", "10.0.0.7:2380", client_tls=tls,
                                      peer_tls=tls)) == []
