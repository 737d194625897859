"""The cipher suites of gRPC's TLS stack: a process-wide setting that gRPC reads once,
as it loads, from `$GRPC_SSL_CIPHER_SUITES` (grpcio has no per-server setting). So
`coord serve` sets it from `--cipher-suites` before anything loads gRPC
(`preset_grpc_ciphers`, called by the command line first thing), and a member refuses to
start when its process's gRPC loaded another list (`check_grpc_ciphers`): a member in a
process that was not started that way (an in-process test member) cannot have them.

This module must not import gRPC.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from coord.tls.files import ServerTLS, TLSConfigError, openssl_ciphers

__all__ = ["GRPC_CIPHERS_ENV", "check_grpc_ciphers", "preset_grpc_ciphers"]

GRPC_CIPHERS_ENV = "GRPC_SSL_CIPHER_SUITES"


def preset_grpc_ciphers(argv: Sequence[str]) -> None:
    """Before gRPC is loaded: `--cipher-suites` of `argv` (a `coord serve` command line)
    into $GRPC_SSL_CIPHER_SUITES. A value already in the environment is left for
    `check_grpc_ciphers` to compare."""
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
    loaded = os.environ.get(GRPC_CIPHERS_ENV)
    if tls.cipher_suites and loaded != tls.cipher_suites:
        raise TLSConfigError(
            f"--cipher-suites: gRPC reads its cipher suites once per process, as it loads,"
            f" from ${GRPC_CIPHERS_ENV} (here {loaded!r}); start the member with"
            f" {GRPC_CIPHERS_ENV}={tls.cipher_suites} (`coord serve` sets it from"
            " --cipher-suites itself)")
