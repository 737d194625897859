"""TLS files turned into what each end of a connection needs: gRPC credentials for the
client port and for a member's calls to its peers, `ssl.SSLContext`s for the peer port
(whose TLS the member terminates itself: `coord.server.transport.listener`), and the
verified client certificate's common name on a call.
(gRPC's cipher suites are set apart, in `grpc_ciphers`: before gRPC loads.)
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import grpc

from coord.tls.files import TLS, ServerTLS, TLSConfigError, check_private, read_file

__all__ = [
    "H2",
    "aio_channel",
    "channel",
    "channel_credentials",
    "client_context",
    "server_context",
    "server_credentials",
    "verified_common_name",
]

H2 = "h2"
"""The ALPN protocol id of HTTP/2: gRPC's TLS clients insist on it."""
_VERSIONS = {"TLS1.2": ssl.TLSVersion.TLSv1_2, "TLS1.3": ssl.TLSVersion.TLSv1_3}


def channel_credentials(tls: TLS) -> grpc.ChannelCredentials:
    """A gRPC channel's credentials: the server verified against `tls.cacert` (None: the
    system's CAs), and this end's certificate presented if `tls` has one."""
    ca = read_file(tls.cacert, "--cacert") if tls.cacert else None
    if tls.cert and tls.key:
        return grpc.ssl_channel_credentials(ca, read_file(tls.key, "--key", private=True),
                                            read_file(tls.cert, "--cert"))
    return grpc.ssl_channel_credentials(ca)


def channel(target: str, credentials: grpc.ChannelCredentials | None,
            options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A threaded gRPC channel to `target`: TLS with `credentials`, else plaintext."""
    if credentials is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, credentials, options=options)


def aio_channel(target: str, credentials: grpc.ChannelCredentials | None,
                options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """An asyncio gRPC channel to `target`: TLS with `credentials`, else plaintext."""
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, credentials, options=options)


def server_credentials(tls: ServerTLS) -> grpc.ServerCredentials:
    """A gRPC server's credentials for one port: with `client_cert_auth`, a client must
    present a certificate signed by `trusted_ca_file` (etcd's --client-cert-auth)."""
    key = read_file(tls.key_file, "--key-file", private=True)
    cert = read_file(tls.cert_file, "--cert-file")
    ca = read_file(tls.trusted_ca_file, "--trusted-ca-file") if tls.trusted_ca_file else None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=tls.client_cert_auth)


def server_context(tls: ServerTLS, alpn: Sequence[str] = (H2,)) -> ssl.SSLContext:
    """The accepting end of the peer port: our certificate; with `client_cert_auth`, the
    opener's certificate must be signed by `trusted_ca_file`."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(ctx, tls, alpn)
    if tls.client_cert_auth:
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(tls: ServerTLS, alpn: Sequence[str] = (H2,)) -> ssl.SSLContext:
    """The opening end of a peer-port connection: the peer's certificate verified against
    `trusted_ca_file` (None: the system's CAs) and for the address dialled; ours
    presented."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies and checks the host name
    _common(ctx, tls, alpn)
    if not tls.trusted_ca_file:
        ctx.load_default_certs()
    return ctx


def _common(ctx: ssl.SSLContext, tls: ServerTLS, alpn: Sequence[str]) -> None:
    ctx.minimum_version = _VERSIONS[tls.min_version]
    try:
        check_private(tls.key_file, "--peer-key-file")
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.trusted_ca_file:
            ctx.load_verify_locations(tls.trusted_ca_file)
    except ssl.SSLError as e:
        raise TLSConfigError(f"the peer port's certificate, key or CA cannot be used: {e}"
                             ) from None
    except OSError as e:
        raise TLSConfigError(f"cannot read the peer port's TLS files: {e}") from None
    if tls.cipher_suites:
        try:
            ctx.set_ciphers(tls.cipher_suites)
        except ssl.SSLError:
            raise TLSConfigError(f"--cipher-suites {tls.cipher_suites}: no cipher suite"
                                 " this TLS stack knows") from None
    ctx.set_alpn_protocols(list(alpn))


def verified_common_name(context: grpc.ServicerContext | grpc.aio.ServicerContext
                         ) -> str | None:
    """The common name of the certificate the caller presented and the client port
    verified (`--client-cert-auth`), or None: no TLS, or no certificate asked for. As in
    etcd, the user a call is made as when authentication is on."""
    names = context.auth_context().get("x509_common_name")
    return names[0].decode() if names else None
