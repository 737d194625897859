"""TLS files turned into what each end of a connection needs: gRPC credentials for the
client port and for a member's calls to its peers, `ssl.SSLContext`s for the peer port
(whose TLS the member terminates itself: `coord.server.transport.listener`), and the
verified client certificate's common name on a call.

The cipher suites of gRPC's TLS stack are a process-wide setting that gRPC reads once,
when it is imported: `$GRPC_SSL_CIPHER_SUITES` (`GRPC_CIPHERS_ENV`). `coord serve` sets
it from `--cipher-suites` before anything loads gRPC (`preset_grpc_ciphers`);
`check_grpc_ciphers` refuses a member whose process gRPC started with another list.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Sequence

import grpc

from coord.tls.files import TLS, ServerTLS, TLSConfigError, check_private, read_file

__all__ = [
    "GRPC_CIPHERS_ENV",
    "H2",
    "channel_credentials",
    "check_grpc_ciphers",
    "client_context",
    "preset_grpc_ciphers",
    "server_context",
    "server_credentials",
    "verified_common_name",
]

GRPC_CIPHERS_ENV = "GRPC_SSL_CIPHER_SUITES"
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


def preset_grpc_ciphers(argv: Sequence[str]) -> None:
    """Before gRPC is loaded: `--cipher-suites` of `argv` (a `coord serve` command line)
    into $GRPC_SSL_CIPHER_SUITES, which gRPC reads once, as it loads. A value already in
    the environment is left for `check_grpc_ciphers` to compare."""
    from coord.tls.files import openssl_ciphers

    value = None
    for i, arg in enumerate(argv):
        if arg == "--cipher-suites" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--cipher-suites="):
            value = arg.partition("=")[2]
    if value and "grpc" not in sys.modules and GRPC_CIPHERS_ENV not in os.environ:
        try:
            os.environ[GRPC_CIPHERS_ENV] = openssl_ciphers(value)
        except TLSConfigError:
            pass  # the flags' own check reports it


def check_grpc_ciphers(tls: ServerTLS) -> None:
    """Refuse (TLSConfigError) a client port whose `cipher_suites` this process's gRPC did
    not load (see the module docstring)."""
    if tls.cipher_suites and os.environ.get(GRPC_CIPHERS_ENV) != tls.cipher_suites:
        raise TLSConfigError(
            f"--cipher-suites: gRPC reads its cipher suites once per process, as it loads,"
            f" from ${GRPC_CIPHERS_ENV} (here {os.environ.get(GRPC_CIPHERS_ENV)!r}); start"
            f" the member with {GRPC_CIPHERS_ENV}={tls.cipher_suites} (`coord serve` sets it"
            " from --cipher-suites itself)")
