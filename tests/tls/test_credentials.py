"""coord.tls.credentials: gRPC credentials and the peer port's ssl contexts from TLS files,
and the verified client certificate's common name, over real connections on 127.0.0.1."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

import grpc
import pytest

from coord.tls.credentials import (
    H2,
    channel_credentials,
    client_context,
    server_context,
    server_credentials,
    verified_common_name,
)
from coord.tls.files import TLS, ServerTLS, TLSConfigError


def _who(_request: bytes, context: grpc.ServicerContext) -> bytes:
    return (verified_common_name(context) or "-").encode()


@contextmanager
def serving(tls: ServerTLS | None) -> Iterator[str]:
    """A gRPC server whose one method answers the caller's verified common name."""
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "test.Who", {"Am": grpc.unary_unary_rpc_method_handler(_who)})])
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def ask(address: str, tls: TLS | None) -> bytes:
    creds = channel_credentials(tls) if tls is not None else None
    with (grpc.secure_channel(address, creds) if creds else grpc.insecure_channel(address)
          ) as channel:
        return channel.unary_unary("/test.Who/Am")(b"", timeout=5)


def test_the_verified_client_certificates_common_name_reaches_the_call(pki):
    with serving(pki.member()) as address:
        assert ask(address, pki.client("alice")) == b"alice"


def test_no_common_name_without_a_certificate_asked_for(pki):
    with serving(pki.member(client_cert_auth=False)) as address:
        assert ask(address, pki.client("alice")) == b"-"  # not asked for: not there
    with serving(None) as address:
        assert ask(address, None) == b"-"


def test_client_cert_auth_refuses_no_certificate_and_another_cas(pki):
    with serving(pki.member()) as address:
        for tls in (TLS(pki.client().cacert), pki.client("alice", ca=pki.other)):
            with pytest.raises(grpc.RpcError) as e:
                ask(address, tls)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_missing_file_names_its_flag(pki, tmp_path):
    with pytest.raises(TLSConfigError, match="--cacert"):
        channel_credentials(TLS(str(tmp_path / "nope.pem")))
    with pytest.raises(TLSConfigError, match="--key-file"):
        server_credentials(ServerTLS(pki.member().cert_file, str(tmp_path / "nope.key")))


def test_the_peer_ports_contexts_verify_both_ways_and_offer_h2(pki):
    tls = pki.member(min_version="TLS1.3")
    accepting, opening = server_context(tls), client_context(tls)
    assert accepting.verify_mode == ssl.CERT_REQUIRED
    assert opening.verify_mode == ssl.CERT_REQUIRED and opening.check_hostname
    assert accepting.minimum_version == opening.minimum_version == ssl.TLSVersion.TLSv1_3
    assert server_context(pki.member(client_cert_auth=False)).verify_mode == ssl.CERT_NONE
    assert H2 == "h2"


def test_cipher_suites_no_tls_stack_knows_are_refused(pki):
    with pytest.raises(TLSConfigError, match="--cipher-suites NOT-A-CIPHER"):
        server_context(pki.member(cipher_suites="NOT-A-CIPHER"))
