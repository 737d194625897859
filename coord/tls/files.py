"""What TLS flags name, read and checked: the files of one end (`TLS` for a client,
`ServerTLS` for a member's port), private files written and checked for their
permissions, and cipher suite names.

A private key or the cluster secret that group or others can read is refused, not
warned about (`check_private`): a warning scrolls by in a log while the file stays
readable, and a key that has been readable is no longer known to be private (OpenSSH
refuses such a key, PostgreSQL such a server key). The error names the file and the
chmod that fixes it.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "ENV_CACERT",
    "ENV_CERT",
    "ENV_KEY",
    "TLS_VERSIONS",
    "ServerTLS",
    "TLS",
    "TLSConfigError",
    "check_private",
    "client_tls",
    "is_loopback",
    "openssl_ciphers",
    "read_file",
    "write_private",
]

ENV_CACERT, ENV_CERT, ENV_KEY = "COORD_CACERT", "COORD_CERT", "COORD_KEY"
TLS_VERSIONS = ("TLS1.2", "TLS1.3")

IANA_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
}
"""etcd's `--cipher-suites` names (Go's, the IANA names) of the TLS 1.2 suites gRPC's
TLS stack offers, and OpenSSL's names for them, which gRPC and Python's ssl take."""


class TLSConfigError(ValueError):
    """TLS flags that do not fit together, or a file they name that cannot be used."""


@dataclass(frozen=True, slots=True)
class TLS:
    """A TLS client's files (paths): `cacert`, the CA that signed the server's
    certificate (None: the system's CAs), and `cert` and `key`, this end's certificate
    and private key for a server that asks for one (both or neither).

    Plain strings, so the value pickles and travels as options (to a Spark executor, a
    subprocess). `from_env` reads $COORD_CACERT, $COORD_CERT and $COORD_KEY, as etcdctl
    reads $ETCDCTL_CACERT, $ETCDCTL_CERT and $ETCDCTL_KEY."""

    cacert: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if bool(self.cert) != bool(self.key):
            raise TLSConfigError("a client certificate needs its key, and a key its"
                                 " certificate: give both --cert and --key, or neither")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, cacert: str | None = None,
                 cert: str | None = None, key: str | None = None) -> TLS | None:
        """The files $COORD_CACERT, $COORD_CERT and $COORD_KEY name, each overridden by
        its argument when given (a command line's --cacert, --cert, --key); None if
        none is set."""
        values = [given or environ.get(name) or None for given, name in (
            (cacert, ENV_CACERT), (cert, ENV_CERT), (key, ENV_KEY))]
        return cls(*values) if any(values) else None

    def env(self) -> dict[str, str]:
        """The variables `from_env` reads this TLS back from, for a child process."""
        return {name: value for name, value in ((ENV_CACERT, self.cacert), (ENV_CERT, self.cert),
                                                (ENV_KEY, self.key)) if value}


def client_tls(tls: TLS | Literal[False] | None) -> TLS | None:
    """What a client's `tls=` argument means: a `TLS` as given; None, the environment's
    (`TLS.from_env`: none set, plaintext); False, plaintext whatever the environment
    says (for a rig's own probes of a cluster it started)."""
    if tls is None:
        return TLS.from_env()
    return tls or None


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """One of a member's ports with TLS: its certificate and key, the CA its clients'
    certificates must be signed by (`trusted_ca_file`; `client_cert_auth`: a client
    without one is refused), `cipher_suites` (an OpenSSL cipher list for TLS 1.2; None:
    the TLS stack's defaults) and the lowest TLS version accepted. On the peer port a
    member is a client too, of the same files: `as_client`."""

    cert_file: str
    key_file: str
    trusted_ca_file: str | None = None
    client_cert_auth: bool = False
    cipher_suites: str | None = None
    min_version: str = TLS_VERSIONS[0]

    @property
    def as_client(self) -> TLS:
        return TLS(self.trusted_ca_file, self.cert_file, self.key_file)


def write_private(path: str | Path, data: bytes, replace: bool = False) -> None:
    """Write `data` to a new file that only its owner can read or write (mode 0600 from
    its creation: never readable by others, not even for a moment). `replace`: an
    existing file is overwritten (and made 0600); otherwise FileExistsError."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(data)


def check_private(path: str | Path, flag: str) -> None:
    """Refuse (TLSConfigError) a private file that its group or others may read or write;
    see the module docstring for why refuse."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise TLSConfigError(
            f"{flag} {path} is open to its group or others (mode {mode:04o}); a private"
            f" key or secret must be readable by its owner only: chmod 600 {path}")


def read_file(path: str | Path, flag: str, private: bool = False) -> bytes:
    """The bytes of the file `flag` names (TLSConfigError naming the flag if it cannot be
    read); `private`: checked with `check_private` first."""
    try:
        if private:
            check_private(path, flag)
        return Path(path).read_bytes()
    except OSError as e:
        raise TLSConfigError(f"cannot read {flag} {path}: {e.strerror or e}") from None


def openssl_ciphers(names: str) -> str:
    """`--cipher-suites` (comma separated; etcd's IANA names or OpenSSL's) as an OpenSSL
    cipher list (colon separated)."""
    parts = [n.strip() for n in names.replace(":", ",").split(",") if n.strip()]
    if not parts:
        raise TLSConfigError("--cipher-suites names no cipher suite")
    return ":".join(IANA_CIPHERS.get(n, n) for n in parts)


def is_loopback(address: str) -> bool:
    """Whether HOST:PORT names a loopback address: one only this machine reaches, where
    plaintext is no exposure (an empty host or 0.0.0.0 is every interface: not)."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to
